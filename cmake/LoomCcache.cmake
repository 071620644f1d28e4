# Compiles through ccache where it is installed (scripts/install-deps.sh installs it), so that a
# second tree of the same sources — a fresh clone in another folder, another configuration of
# the same flags — takes its objects from the cache instead of compiling them again.
#
# Keyed for another folder: paths under the source tree are made relative before hashing
# (base_dir), and the compiler's working directory is left out of the hash (hash_dir false).
# What that costs: a cached object's line tables (the sanitizer and fuzz builds' -g1) name the
# files relative to the folder that compiled them first; a debugger in another clone finds them
# with `set substitute-path` or `directory`. Release objects carry no line tables.
#
# LOOM_CCACHE=OFF compiles without it; LOOM_CCACHE_DIR moves the cache (default: ccache's own,
# ~/.cache/ccache). The cache holds at most LOOM_CCACHE_SIZE (the four presets of one commit
# take about 3 GB).
option(LOOM_CCACHE "Compile through ccache when it is installed" ON)
set(LOOM_CCACHE_SIZE "16G" CACHE STRING "Largest size of the compiler cache (ccache max_size)")
set(LOOM_CCACHE_DIR "" CACHE PATH "The compiler cache's folder (empty: ccache's default)")
if(NOT LOOM_CCACHE)
  return()
endif()
find_program(LOOM_CCACHE_PROGRAM ccache)
if(NOT LOOM_CCACHE_PROGRAM)
  message(STATUS "ccache not found: compiling without a compiler cache (apt-get install ccache)")
  return()
endif()
set(loom_ccache_env CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=${LOOM_CCACHE_SIZE})
if(LOOM_CCACHE_DIR)
  list(APPEND loom_ccache_env CCACHE_DIR=${LOOM_CCACHE_DIR})
endif()
foreach(lang C CXX)
  set(CMAKE_${lang}_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env ${loom_ccache_env} ${LOOM_CCACHE_PROGRAM})
endforeach()
message(STATUS "compiling through ${LOOM_CCACHE_PROGRAM} (base_dir ${PROJECT_SOURCE_DIR}, hash_dir false)")
