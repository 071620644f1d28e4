#!/usr/bin/env bash
# Builds a public OpenMP NPB — the C++ port GMAP NPB-CPP (github.com/GMAP/NPB-CPP, its NPB-OMP
# folder) — unmodified against Loom's OpenMP layer and runs each benchmark under loomrun
# (docs/openmp.md, "A public NPB"). Nothing is fetched: the user gives the sources' path.
#   scripts/npb-omp.sh NPB_DIR BUILD_DIR [CLASS [NP [BENCHMARKS]]]
# NPB_DIR: an NPB-CPP checkout or its NPB-OMP folder; BUILD_DIR: Loom's build tree (its loomrun
# and omp/libloom-omp.so); CLASS S by default; NP 2; BENCHMARKS "bt cg ep ft is lu mg sp".
# The sources are copied to BUILD_DIR/npb-omp and built there with NPB-CPP's own flags (its
# config/make.def: -O3 -fopenmp -mcmodel=medium) and the layer's link line. NPB_STATIC_ARRAYS=1
# adds NPB-CPP's own DO_NOT_ALLOCATE_ARRAYS_WITH_DYNAMIC_MEMORY_AND_AS_SINGLE_DIMENSION (its
# arrays static globals rather than blocks its global constructors malloc, which the layer's
# heap serves either way). Runs in checking mode (LOOM_CHECK=on unless set), which reports data
# races. Prints one line a benchmark; exits 1 if any did not verify.
set -euo pipefail
usage="usage: npb-omp.sh NPB_DIR BUILD_DIR [CLASS [NP [BENCHMARKS]]]"
src=${1:?$usage}
build=$(cd "${2:?$usage}" && pwd)
class=${3:-S}
np=${4:-2}
benchmarks=${5:-"bt cg ep ft is lu mg sp"}
[ -d "$src/NPB-OMP" ] && src="$src/NPB-OMP"
[ -f "$src/config/make.def" ] && [ -d "$src/common" ] || { echo "npb-omp: $src is not NPB-CPP's NPB-OMP folder"; exit 2; }
[[ $class =~ ^[SWABC]$ ]] || { echo "npb-omp: no class '$class' (S, W, A, B or C)"; exit 2; }
[[ $np =~ ^[1-9][0-9]*$ ]] || { echo "npb-omp: NP must be a process count, not '$np'"; exit 2; }
lib="$build/omp"
[ -f "$lib/libloom-omp.so" ] && [ -x "$build/loomrun" ] || { echo "npb-omp: no loomrun and omp/libloom-omp.so in $build"; exit 2; }

work="$build/npb-omp"
rm -rf "$work" && mkdir -p "$work" && cp -r "$src"/. "$work"/
flags="-O3 -fopenmp -mcmodel=medium"
case "${NPB_STATIC_ARRAYS:-0}" in
  0) ;;
  1) flags+=" -DDO_NOT_ALLOCATE_ARRAYS_WITH_DYNAMIC_MEMORY_AND_AS_SINGLE_DIMENSION" ;;
  *) echo "npb-omp: NPB_STATIC_ARRAYS must be 0 or 1, not '$NPB_STATIC_ARRAYS'"; exit 2 ;;
esac
link="-lm -L$lib -Wl,-rpath,$lib -lloom-omp -Wl,-z,now -Wl,--as-needed"
status=0
for b in $benchmarks; do
  if ! make -C "$work" "$b" CLASS="$class" CFLAGS="$flags" CLINKFLAGS="-O3 -fopenmp" C_LIB="$link" > "$work/$b.build.log" 2>&1; then
    echo "npb-omp: $b.$class: build FAILED (see $work/$b.build.log)"; status=1; continue
  fi
  log="$work/$b.$class.np$np.log"
  start=$SECONDS
  LOOM_CHECK=${LOOM_CHECK:-on} "$build/loomrun" -n "$np" --timeout 600 "$work/bin/$b.$class" > "$log" 2>&1 || true
  secs=$(sed -n 's/.*Time in seconds = *\([0-9.]*\).*/\1/p' "$log" | head -1)
  races=$(grep -c "data race" "$log" || true)
  if grep -qE "Verification += +SUCCESSFUL|VERIFICATION SUCCESSFUL" "$log"; then
    echo "npb-omp: $b.$class np $np: verified, ${secs:-?} s timed, $((SECONDS - start)) s in all, $races race report(s)"
  else
    echo "npb-omp: $b.$class np $np: NOT verified ($(grep -m1 -E "loomrun:|loom-omp:|Verification" "$log" | cut -c1-100)) (see $log)"
    status=1
  fi
done
exit $status
