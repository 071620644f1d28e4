#!/usr/bin/env bash
# Runs the multi-process suites against the verbs provider. Meant for the Soft-RoCE guest
# (scripts/vm/run), where it is started by `ctest -L verbs`; works on any host with an active
# RDMA port. Usage: verbs-suite.sh BUILD_DIR [NPROCS...]
set -uo pipefail
build=${1:?usage: verbs-suite.sh BUILD_DIR [NPROCS...]}
shift
nprocs=${*:-"2 4"}
export LOOM_PROVIDER=verbs
# Checking mode, as in the rest of the suite (LOOM_CHECK).
export LOOM_CHECK=${LOOM_CHECK:-on}
# Registration pins memory: small superchunks keep 4 processes inside the guest's 2 GiB.
export LOOM_SUPERCHUNK_SIZE=${LOOM_SUPERCHUNK_SIZE:-64M}
# Software RDMA under emulation is ~1000x slower than shm: the stress test posts less.
export LOOM_TEST_STRESS_POSTS=${LOOM_TEST_STRESS_POSTS:-20000}
# ... and the coherence checker runs fewer random programs (per policy; 200 outran the guest's
# 300 s at 4 processes).
export LOOM_TEST_DSM_PROGRAMS=${LOOM_TEST_DSM_PROGRAMS:-50}
[ -n "${RXE_GID_INDEX:-}" ] && export LOOM_VERBS_GID_INDEX=$RXE_GID_INDEX
passed=0
failed=0
# A sanitizer build (run by hand: CI's sanitizer configurations leave the guests out) runs the
# provider's own suites at the first process count: under emulation each suite takes 3-5 times
# the Release build's time, and the layers above the provider run on shm in that configuration.
sanitized=0
grep -qE '^LOOM_SANITIZE:[A-Z]+=.+' "$build/CMakeCache.txt" 2>/dev/null && sanitized=1
# The layers above the Transmitter (coherence, objects, NAS) cross verbs in scripts/nodes-suite.sh
# (CI's nodes.rxe, between two guests); here with VERBS_FULL=1 or when named in VERBS_SUITES.
default_suites="fabric fabric-st service transmitter transmitter-offload invoke rpipe"
[ "${VERBS_FULL:-0}" = 1 ] && default_suites="$default_suites coherence objects nas omp"
if [ $sanitized = 1 ]; then
  default_suites="fabric service transmitter invoke rpipe"
  nprocs=${nprocs%% *}
fi
# The suites above the provider, fabric-st and invoke at the first process count only:
# scripts/nodes-suite.sh runs them at 4 ranks across two guests. VERBS_FULL=1: every suite at
# every count, auto objects too.
heavy=" fabric-st transmitter-offload invoke coherence objects nas "
[ "${VERBS_FULL:-0}" = 1 ] && heavy=""
source "$(dirname "$0")/suite-case.sh"
mkdir -p /tmp/verbs-suite
run() { case_run verbs /tmp/verbs-suite "$@"; }
# VERBS_SUITES picks suites (default: all of them).
for t in ${VERBS_SUITES:-$default_suites}; do
  # omp: the OpenMP programs as ctest runs them (2 processes of 2 threads, the default policy,
  # class S): each program's own test command, on verbs.
  if [ "$t" = omp ]; then
    run "omp -n 2" ctest --test-dir "$build" -L omp -R '[.]np2$' -E 'floating-dir|fixed-ts|fixed-dir|[.]W[.]' --timeout 900 \
      --output-on-failure
    continue
  fi
  threads=1
  bin=$t
  filter=()
  # nas: one kernel (CG at class S) under every policy (45 s at 2 processes in the emulated
  # guest, 135 s at 4).
  [ "$t" = nas ] && filter=(--gtest_filter='*cg_S_*')
  # objects: auto objects measure the cost model's components themselves, minutes in the guest.
  [ "$t" = objects ] && [ "${VERBS_FULL:-0}" != 1 ] && filter=(--gtest_filter='-*/auto')
  # coherence: not the address-space placement tests (regions in place, the reserve's common
  # range), which do not touch the provider; with them the suite outran its 300 s at 4 processes.
  [ "$t" = coherence ] && filter=(--gtest_filter='-*CoherenceInPlace*:CoherenceReserve.*')
  # fabric-st: the fabric suite on thread-domain QPs (QpCaps::single_thread).
  if [ "$t" = fabric-st ]; then bin=fabric; export LOOM_TEST_QP_SINGLE_THREAD=1; else unset LOOM_TEST_QP_SINGLE_THREAD; fi
  # transmitter-offload: the Transmitter's suite with an executor and a completer posting and
  # polling (LOOM_OFFLOAD=dynamic), over the device: batched posts as one linked list.
  if [ "$t" = transmitter-offload ]; then bin=transmitter; export LOOM_OFFLOAD=dynamic; else unset LOOM_OFFLOAD; fi
  [ "$t" = invoke ] && threads=2  # every thread is a call destination
  for np in $nprocs; do
    [[ "$heavy" == *" $t "* ]] && [ "$np" != "${nprocs%% *}" ] && continue
    run "$t -n $np" "$build/loomrun" -n "$np" --threads "$threads" --timeout 300 "$build/tests/test_$bin" "${filter[@]}"
  done
done
echo "verbs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
