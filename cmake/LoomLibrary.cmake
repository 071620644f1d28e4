# loom_library(<layer> SOURCES ... [LAYERS ...] [PUBLIC ...] [PRIVATE ...])
#
# One layer of Loom as the library `loom_<layer>` (static: what the tree's programs, tests and
# benchmarks link) and, with LOOM_SHARED_LIBS, `loom_<layer>_shared` (the same sources as
# libloom_<layer>.so, for installed programs). LAYERS are the Loom layers it builds on (the
# static library links their static libraries, the shared one their shared ones); PUBLIC and
# PRIVATE are other dependencies; PRIVATE_PKG names pkg-config modules found with IMPORTED_TARGET.
# Both are installed and exported: Loom::<layer> is the shared
# library (or the static one where no shared one is built), Loom::<layer>-static the static one.
# Headers are included as <loom/<layer>/...> from the tree (include/loom/ links to the layers'
# folders) and from the installed package alike.
function(loom_library layer)
  cmake_parse_arguments(L "" "" "SOURCES;LAYERS;PUBLIC;PRIVATE;PRIVATE_PKG" ${ARGN})
  set(variants loom_${layer})
  if(LOOM_SHARED_LIBS)
    list(APPEND variants loom_${layer}_shared)
  endif()
  foreach(target IN LISTS variants)
    if(target MATCHES "_shared$")
      add_library(${target} SHARED ${L_SOURCES})
      set_target_properties(${target} PROPERTIES OUTPUT_NAME loom_${layer} EXPORT_NAME ${layer}
                            VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
      list(TRANSFORM L_LAYERS APPEND _shared OUTPUT_VARIABLE layer_targets)
    else()
      add_library(${target} STATIC ${L_SOURCES})
      # Position-independent, so that a shared library of the tree may hold them (the OpenMP
      # layer's libloom-omp.so carries every layer); no interposition assumed, as in a program.
      set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
      target_compile_options(${target} PRIVATE -fno-semantic-interposition)
      set(export_name ${layer}-static)
      if(NOT LOOM_SHARED_LIBS)
        set(export_name ${layer})
      endif()
      set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
      set(layer_targets ${L_LAYERS})
    endif()
    list(TRANSFORM layer_targets PREPEND loom_)
    target_include_directories(${target} PUBLIC
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
      $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    target_link_libraries(${target} PUBLIC ${layer_targets} ${L_PUBLIC} PRIVATE ${L_PRIVATE})
    foreach(pkg IN LISTS L_PRIVATE_PKG)
      loom_link_private_pkg(${target} ${pkg})
    endforeach()
    install(TARGETS ${target} EXPORT LoomTargets
            ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
            LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)
  endforeach()
endfunction()

# loom_headers(<folder>): installs the folder's headers under include/loom/<folder>/ (the
# folder's own CMakeLists.txt calls it; EXCLUDE names subfolders that stay private).
function(loom_headers folder)
  cmake_parse_arguments(H "" "" "EXCLUDE" ${ARGN})
  set(excludes)
  foreach(e IN LISTS H_EXCLUDE)
    list(APPEND excludes PATTERN ${e} EXCLUDE)
  endforeach()
  install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/loom/${folder}
          COMPONENT dev FILES_MATCHING PATTERN "*.hpp" ${excludes})
endfunction()

# loom_link_private_pkg(<target> <PREFIX>): a private dependency found by
# pkg_check_modules(<PREFIX> IMPORTED_TARGET ...). In the tree it is the imported target; a static
# library's installed interface names the library files themselves, so a program linking it
# needs no pkg-config module of its own.
function(loom_link_private_pkg target prefix)
  target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:PkgConfig::${prefix}>)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "STATIC_LIBRARY")
    foreach(lib IN LISTS ${prefix}_LINK_LIBRARIES)
      target_link_libraries(${target} INTERFACE $<INSTALL_INTERFACE:${lib}>)
    endforeach()
  endif()
endfunction()
