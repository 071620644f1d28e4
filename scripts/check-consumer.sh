#!/usr/bin/env bash
# Builds examples/consumer against an installed Loom three ways — find_package(Loom) with the
# shared libraries, with the static ones, and a pkg-config compile line — and runs each under
# the installed loomrun with 2 processes; then the OpenMP example (histogram.c) with nothing but
# -fopenmp and the loom-omp link line, at 2 processes of 2 threads.
# Usage: check-consumer.sh [--link-lines | --no-link-lines] [PREFIX]   (no PREFIX: Loom installed
# in the system, e.g. the .debs; --link-lines: the pkg-config compile line and the OpenMP example
# only; --no-link-lines: the find_package forms only). LOOM_CONSUMER_WORK: where the builds go and
# stay (default: a temporary folder, removed at the end).
set -euo pipefail
src=$(cd "$(dirname "$0")/../examples/consumer" && pwd)
kinds="shared static"
link_lines=1
if [ "${1:-}" = --link-lines ]; then kinds=""; shift; fi
if [ "${1:-}" = --no-link-lines ]; then link_lines=0; shift; fi
prefix=${1:-}
if [ -n "${LOOM_CONSUMER_WORK:-}" ]; then
  work=$LOOM_CONSUMER_WORK
  mkdir -p "$work"
else
  work=$(mktemp -d /tmp/loom-consumer.XXXXXX)
  trap 'rm -rf "$work"' EXIT
fi
cmake_args=(-G Ninja)
loomrun=loomrun
if [ -n "$prefix" ]; then
  cmake_args+=(-DCMAKE_PREFIX_PATH="$prefix")
  loomrun=$prefix/bin/loomrun
  export PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name loom.pc -print -quit)")
fi
for kind in $kinds; do
  static=OFF; [ $kind = static ] && static=ON
  cmake -S "$src" -B "$work/$kind" "${cmake_args[@]}" -DCONSUMER_STATIC=$static > "$work/$kind.log"
  cmake --build "$work/$kind" >> "$work/$kind.log"
  echo "== consumer ($kind libraries, find_package(Loom)): $loomrun -n 2 =="
  "$loomrun" -n 2 --timeout 120 "$work/$kind/consumer"
done
[ $link_lines = 1 ] || exit 0
echo "== consumer (pkg-config): g++ -std=c++20 consumer.cpp \$(pkg-config --cflags --libs loom) =="
libdir=$(pkg-config --variable=libdir loom)
# shellcheck disable=SC2046
g++ -std=c++20 -O2 "$src/consumer.cpp" $(pkg-config --cflags --libs loom) -Wl,-rpath,"$libdir" -o "$work/consumer-pc"
"$loomrun" -n 2 --timeout 120 "$work/consumer-pc"
echo "== an OpenMP program: gcc -fopenmp histogram.c \$(pkg-config --libs loom-omp) =="
# shellcheck disable=SC2046
gcc -O2 -fopenmp "$src/histogram.c" $(pkg-config --libs loom-omp) -o "$work/histogram"
if readelf -d "$work/histogram" | grep -q 'libgomp'; then
  echo "FAILED: the OpenMP example links libgomp"
  exit 1
fi
"$loomrun" -n 2 --threads 2 --timeout 120 "$work/histogram"
