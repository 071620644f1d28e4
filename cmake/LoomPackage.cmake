# Installing Loom: the exported targets and their CMake package (find_package(Loom)), loom.pc,
# the documents and examples; and the Debian packages made by CPack:
#   loom      shared libraries, loomrun and the tools, documents
#   loom-dev  headers (include/loom/), static libraries, CMake package, loom.pc, examples
# `cmake --build --preset release --target package` (or scripts/package.sh) writes both .debs
# into build/release/packages/.
include(CMakePackageConfigHelpers)
set(LOOM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Loom)

set(LOOM_PROVIDERS shm)
set(LOOM_PC_PRIVATE_MODULES "")
if(IBVERBS_FOUND)
  list(APPEND LOOM_PROVIDERS verbs)
  string(APPEND LOOM_PC_PRIVATE_MODULES " libibverbs")
endif()
if(PMIX_FOUND)
  string(APPEND LOOM_PC_PRIVATE_MODULES " pmix")
endif()

install(EXPORT LoomTargets NAMESPACE Loom:: DESTINATION ${LOOM_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(cmake/LoomConfig.cmake.in ${PROJECT_BINARY_DIR}/LoomConfig.cmake
                              INSTALL_DESTINATION ${LOOM_CMAKE_DIR} PATH_VARS CMAKE_INSTALL_BINDIR)
# 0.x: a minor version may change the interface.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/LoomConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/LoomConfig.cmake ${PROJECT_BINARY_DIR}/LoomConfigVersion.cmake
        DESTINATION ${LOOM_CMAKE_DIR} COMPONENT dev)

# loom.pc finds its prefix from its own place, so the installed tree may be moved.
set(pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH LOOM_PC_PREFIX_FROM_PCDIR /${pc_dir} /)
string(REGEX REPLACE "/$" "" LOOM_PC_PREFIX_FROM_PCDIR "${LOOM_PC_PREFIX_FROM_PCDIR}")
configure_file(cmake/loom.pc.in ${PROJECT_BINARY_DIR}/loom.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/loom.pc DESTINATION ${pc_dir} COMPONENT dev)
# loom-omp.pc: the OpenMP layer's link line (cc -fopenmp prog.c $(pkg-config --libs loom-omp)).
configure_file(cmake/loom-omp.pc.in ${PROJECT_BINARY_DIR}/loom-omp.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/loom-omp.pc DESTINATION ${pc_dir} COMPONENT dev)

install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
install(DIRECTORY examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT dev
        PATTERN CMakeLists.txt EXCLUDE PATTERN consumer EXCLUDE)
install(DIRECTORY examples/consumer/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/consumer COMPONENT dev)

# ---- CPack: two Debian packages ----------------------------------------------------------------
set(CPACK_PACKAGE_NAME loom)
set(CPACK_PACKAGE_VENDOR "Loom")
set(CPACK_PACKAGE_CONTACT "Loom developers <loom@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "RDMA runtime: release-consistent shared regions and remote invocation")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME loom)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
# dpkg-shlibdeps reads the shared libraries and tools: libhwloc15, libnuma1, libtbb12,
# libibverbs1, libpmix2 and the C++ runtime as the build found them.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "Loom runtime: shared libraries, loomrun and the tools
Loom runs one program as many processes on one host (shared memory) or across machines
joined by an RDMA network (rdma-core), sharing state through release-consistent shared
regions and one-sided remote invocation. This package holds the shared libraries, the
launcher loomrun, loom-info, loom-calibrate, loom-hex and the documents.")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME loom-dev)
# The headers include TBB's and Boost.Intrusive's; the static libraries need the rest.
set(loom_dev_depends "loom (= ${PROJECT_VERSION}), libtbb-dev, libboost-dev, libhwloc-dev, libnuma-dev, libzydis-dev, pkg-config")
if(IBVERBS_FOUND)
  string(APPEND loom_dev_depends ", libibverbs-dev")
endif()
if(PMIX_FOUND)
  string(APPEND loom_dev_depends ", libpmix-dev")
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${loom_dev_depends}")
set(CPACK_DEBIAN_DEV_DESCRIPTION "Loom development files: headers, static libraries, CMake package, loom.pc
Headers under include/loom/ (<loom/loom.hpp> and one per layer), static libraries,
find_package(Loom) with targets Loom::dsm, Loom::invoke, Loom::coherence, Loom::objects,
Loom::mcts, a pkg-config file, and the examples (one a CMake project of its own).")
include(CPack)
cpack_add_component(runtime DISPLAY_NAME "Loom runtime")
cpack_add_component(dev DISPLAY_NAME "Loom development files" DEPENDS runtime)
