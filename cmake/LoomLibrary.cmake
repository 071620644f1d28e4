# loom_library(<layer> SOURCES ... [LAYERS ...] [PUBLIC ...] [PRIVATE ...] [PRIVATE_PKG ...]
#              [DEFINITIONS ...] [INCLUDES ...])
#
# One layer of Loom as the library `loom_<layer>` (static: what the tree's programs, tests and
# benchmarks link) and, with LOOM_SHARED_LIBS, `loom_<layer>_shared` (libloom_<layer>.so, for
# installed programs). Both are made of one set of objects, `loom_<layer>_objects`, compiled
# once: position-independent (a shared library of the tree may hold the static one: the OpenMP
# layer's libloom-omp.so carries every layer) and without semantic interposition (a program
# cannot replace a Loom function inside Loom's own libraries, as in a program). LAYERS are the
# Loom layers it builds on (the static library links their static libraries, the shared one
# their shared ones); PUBLIC and PRIVATE are other dependencies; PRIVATE_PKG names pkg-config
# modules found with IMPORTED_TARGET; DEFINITIONS are compile definitions the layer and the
# tree's code using it see (not installed); INCLUDES are private include directories.
# Both are installed and exported: Loom::<layer> is the shared library (or the static one where
# no shared one is built), Loom::<layer>-static the static one. Headers are included as
# <loom/<layer>/...> from the tree (include/loom/ links to the layers' folders) and from the
# installed package alike.
function(loom_library layer)
  cmake_parse_arguments(L "" "" "SOURCES;LAYERS;PUBLIC;PRIVATE;PRIVATE_PKG;DEFINITIONS;INCLUDES" ${ARGN})
  set(objects loom_${layer}_objects)
  add_library(${objects} OBJECT ${L_SOURCES})
  set_target_properties(${objects} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_compile_options(${objects} PRIVATE -fno-semantic-interposition)
  target_include_directories(${objects} PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/include ${L_INCLUDES})
  target_compile_definitions(${objects} PRIVATE ${L_DEFINITIONS})
  # The objects see what the static library's users see (layers, dependencies, pkg-config modules).
  list(TRANSFORM L_LAYERS PREPEND loom_ OUTPUT_VARIABLE static_layers)
  target_link_libraries(${objects} PRIVATE ${static_layers} ${L_PUBLIC} ${L_PRIVATE})
  foreach(pkg IN LISTS L_PRIVATE_PKG)
    target_link_libraries(${objects} PRIVATE PkgConfig::${pkg})
  endforeach()
  set(variants loom_${layer})
  if(LOOM_SHARED_LIBS)
    list(APPEND variants loom_${layer}_shared)
  endif()
  foreach(target IN LISTS variants)
    if(target MATCHES "_shared$")
      add_library(${target} SHARED $<TARGET_OBJECTS:${objects}>)
      set_target_properties(${target} PROPERTIES OUTPUT_NAME loom_${layer} EXPORT_NAME ${layer}
                            VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
      list(TRANSFORM L_LAYERS APPEND _shared OUTPUT_VARIABLE layer_targets)
    else()
      add_library(${target} STATIC $<TARGET_OBJECTS:${objects}>)
      set(export_name ${layer}-static)
      if(NOT LOOM_SHARED_LIBS)
        set(export_name ${layer})
      endif()
      set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
      set(layer_targets ${L_LAYERS})
    endif()
    set_target_properties(${target} PROPERTIES LINKER_LANGUAGE CXX)
    list(TRANSFORM layer_targets PREPEND loom_)
    target_include_directories(${target} PUBLIC
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
      $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    foreach(d IN LISTS L_DEFINITIONS)
      target_compile_definitions(${target} PUBLIC $<BUILD_INTERFACE:${d}>)
    endforeach()
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
