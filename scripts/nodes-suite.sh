#!/usr/bin/env bash
# The multi-process suites across two nodes: 2 ranks on each of loom-node0 and loom-node1
# (scripts/vm/run --nodes 2), shared memory within a node and Soft-RoCE between them
# (LOOM_PROVIDER=auto). Runs on loom-node0; starts loom-node1's side with the harness's remote
# shell. Usage: nodes-suite.sh BUILD_DIR [smoke|quick|full]
#   smoke (CI): the launcher forms, the transports check, a few fabric, service and invoke tests,
#               coherence (locks, barriers, the randomized checker with 5 programs a policy),
#               objects (the basic operations), one MCTS game, NAS IS class S, the consumer
#               example: each layer across the link once, about 6 minutes on a 2-core host.
#   quick:      every case above in full, transmitter, the checker with 25 programs, region
#               atomics, objects' containers under the three fixed policies, MCTS (small
#               board), NAS class S (every kernel, floating home): about 30 minutes.
#   full:       every test of each suite: 400 checker programs, fabric on thread-domain QPs, auto
#               objects on a calibration of the job's fabric, NAS class S under every policy.
set -uo pipefail
build=$(cd "${1:?usage: nodes-suite.sh BUILD_DIR [quick|full]}" && pwd)
mode=${2:-smoke}
case $mode in smoke|quick|full) ;; *) echo "nodes-suite: mode $mode is not smoke, quick or full" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")/.." && pwd)
export LOOM_CHECK=${LOOM_CHECK:-on}
export LOOM_SUPERCHUNK_SIZE=${LOOM_SUPERCHUNK_SIZE:-64M}   # registration pins memory: 2 GiB guests
# pick SMOKE QUICK FULL: the word for this mode.
pick() { case $mode in smoke) echo "$1" ;; quick) echo "$2" ;; full) echo "$3" ;; esac; }
export LOOM_TEST_STRESS_POSTS=${LOOM_TEST_STRESS_POSTS:-$(pick 5000 5000 20000)}
export LOOM_TEST_DSM_PROGRAMS=${LOOM_TEST_DSM_PROGRAMS:-$(pick 5 25 100)}  # a policy; 4 policies
hosts="--hosts loom-node0:2,loom-node1:2 --rsh $here/scripts/vm/rsh"
passed=0
failed=0
logs=/tmp/nodes-suite
mkdir -p $logs

# One case, its log kept for the failure report (every loomrun has a --timeout, so none can hang).
source "$here/scripts/suite-case.sh"
run() { case_run nodes "$logs" "$@"; }
loomrun() { "$build/loomrun" $hosts --timeout "${LOOM_NODES_TIMEOUT:-600}" "$@"; }

# The rendezvous form: one loomrun per node, node 1's started over the remote shell.
rendezvous() {
  # Each node's launcher has its own environment: the job's settings are given to both.
  "$here/scripts/vm/rsh" loom-node1 "cd $here && env LOOM_CHECK=$LOOM_CHECK LOOM_SUPERCHUNK_SIZE=$LOOM_SUPERCHUNK_SIZE $build/loomrun --nodes 2 \
    --node-rank 1 --rendezvous 198.18.0.1:29400 -n 2 --timeout 120 $build/hello_fabric" &
  local other=$!
  "$build/loomrun" --nodes 2 --node-rank 0 --rendezvous 198.18.0.1:29400 -n 2 --timeout 120 "$build/hello_fabric"
  local mine=$?
  wait $other
  local theirs=$?
  [ $mine -eq 0 ] && [ $theirs -eq 0 ]
}

run launcher-hosts loomrun "$build/hello_fabric"
run launcher-rendezvous rendezvous
run transports loomrun "$build/tests/test_transports"

run fabric loomrun "$build/tests/test_fabric" --gtest_filter="$(pick 'Fabric.OneSidedNeedsNoTargetCpu:Fabric.FetchAddCountsExactly:Fabric.SendRecvInOrderPerQueuePair:Fabric.WritesOfEveryLengthLandExactly:Fabric.BadKeysAndBoundsAreErrors' '*' '*')"
[ "$mode" = full ] && run fabric-st env LOOM_TEST_QP_SINGLE_THREAD=1 "$build/loomrun" $hosts --timeout 600 "$build/tests/test_fabric"
run service env LOOM_EXPECT_BOOTSTRAP=rendezvous "$build/loomrun" $hosts --timeout 600 "$build/tests/test_service"
[ "$mode" != smoke ] && run transmitter loomrun "$build/tests/test_transmitter"
run invoke loomrun --threads 2 "$build/tests/test_invoke" --gtest_filter="$(pick 'Invoke.EveryCallFormMovesTheRightBytes:Invoke.BroadcastReachesEveryThreadOnce:Invoke.BadCallsAreReportedAndSurvived:Invoke.BarrierRunsEveryCallMadeBeforeItAndTheCallsTheyMake' '*' '*')"
run coherence loomrun "$build/tests/test_coherence" --gtest_filter="$(pick '*/CoherenceChecker.*:*/Coherence.*Lock*:*/Coherence.*Barrier*' '*/CoherenceChecker.*:*/Coherence.*Lock*:*/Coherence.*Barrier*:*/RegionAtomics.*' '*')"
# Auto objects read the cost model's components from a calibration of this job's fabric, as on a
# cluster (docs/performance-at-scale.md, "What to expect on your cluster"); without one every
# Context measures them itself, minutes each in the guests. 100 operations a component: the suite
# needs a calibration, not a precise one. The smoke and quick sets leave auto objects and the
# calibration (230 s in the guests) to the full one.
if [ "$mode" = full ]; then
  calibration="$build/nodes-calibration.txt"
  rm -f "$calibration"
  run calibrate loomrun "$build/loom-calibrate" --iters 100 --output "$calibration"
  LOOM_OBJECTS_CALIBRATION=$calibration run objects loomrun "$build/tests/test_objects"
else
  run objects loomrun "$build/tests/test_objects" --gtest_filter="$(pick 'Objects.*' '-*/auto' '*')"
fi
run mcts loomrun "$build/tests/test_mcts" --gtest_filter="$(pick '*ImmediateWin*' '*Scripted*:*ImmediateWin*:*ByTime*' '*')"
# Class W under emulation would take hours.
# (The smoke set's kernel is IS, a quarter of CG's time here: 125 s in the guests.)
run nas-S loomrun "$build/tests/test_nas" --gtest_filter="$(pick '*is_S_floating_ts' '*_S_floating_ts' '*_S_*')"
# examples/consumer built against an install of the build (scripts/nodes-test.sh builds it).
consumer=${LOOM_NODES_CONSUMER:-$build/nodes-consumer/consumer}
if [ -x "$consumer" ]; then
  run consumer loomrun "$consumer"
else
  failed=$((failed + 1))
  echo "FAIL nodes consumer: $consumer is not built (scripts/nodes-test.sh builds it)"
fi
echo "nodes: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
