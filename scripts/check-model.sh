#!/usr/bin/env bash
# Model-checks the coherence protocol (coherence/model/protocol.pml, docs/coherence.md "The
# model") with spin: every configuration must verify with no error (no stale read, no lost
# write, no deadlock) over its whole state space, and every mutant must yield a counterexample.
# `scripts/check-model.sh` runs the CI set (2 processes: the timestamp policy with two critical
# sections each, the directory policy with each rank's first lock fixed and rank 1 running one
# section — the two side by side, about 2 minutes — and every mutant, with 2 and with 3
# processes); `--long` adds the directory policy with two sections each (about 7 minutes, 6 GiB),
# the 3-process verifications (one section each, about 7 minutes more), any first lock, blocks
# left alone, and 3 processes where rank 0 runs two sections (exhaustive where memory allows,
# and in bitstate mode, which covers most of the state space in 1 GiB). Logs and counterexample
# trails in build/model/.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v spin > /dev/null || { echo "check-model: spin is not installed (apt-get install spin)"; exit 2; }
work=build/model
mkdir -p "$work"
status=0

# check NAME pass|counterexample SPIN-DEFINES...   (PAN_MODE=bitstate: supertrace, 2^33 bits)
check() {
  local name=$1 expect=$2
  shift 2
  local store=(-DCOLLAPSE -DMEMLIM=16384) run=()
  if [ "${PAN_MODE:-}" = bitstate ]; then store=(-DBITSTATE); run=(-w33); fi
  local dir="$work/$name"
  rm -rf "$dir" && mkdir -p "$dir" && cp coherence/model/protocol.pml "$dir/"
  local start=$(date +%s) bound=${LOOM_MODEL_BOUND:-900} rc=0
  # Every search is bounded (LOOM_MODEL_BOUND seconds, default 900; --long: 3600).
  (cd "$dir" && spin "$@" -a protocol.pml > spin.log &&
     gcc -O2 -w -DSAFETY "${store[@]}" -o pan pan.c &&
     timeout -k 10 "$bound" ./pan "${run[@]}" -m2000000 > pan.log 2>&1) || rc=$?
  local log="$dir/pan.log" secs=$(( $(date +%s) - start ))
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "model: $name ($*): TIMED OUT: pan ran past its bound of $bound s (see $log)"; status=1; return
  fi
  local errors states
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$log" | tail -1)
  states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$log" | tail -1)
  # (pan also says "Search not completed" when it stops at the first error: a counterexample)
  if [ "${errors:-0}" = 0 ] && grep -qE "out of memory|max search depth too small|Search not completed" "$log"; then
    echo "model: $name ($*): search incomplete (see $log)"; status=1; return
  fi
  if [ "$expect" = pass ] && [ "$errors" = 0 ]; then
    echo "model: $name ($*): verified, $states states, ${secs} s"
  elif [ "$expect" = counterexample ] && [ -n "$errors" ] && [ "$errors" != 0 ]; then
    echo "model: $name ($*): counterexample found as it must be ($(grep -m1 -o 'assertion violated.*' "$log" | cut -c1-80)), ${secs} s"
  else
    echo "model: $name ($*): expected $expect, pan says errors: ${errors:-?} (see $log)"; status=1
  fi
}

# The two long verifications run side by side (one core each); `wait` collects their status.
(check timestamp pass -DNP=2; exit $status) &
ts=$!
(check directory pass -DDIR -DNP=2 -DFIRST_LOCK_FIXED -DNOPS_OTHERS=1; exit $status) &
dir=$!
wait $ts || status=1
wait $dir || status=1
check timestamp-mutant counterexample -DMUTANT -DNP=2
check directory-mutant counterexample -DDIR -DMUTANT -DNP=2
check unchanged-mutant counterexample -DMUTANT_UNCHANGED -DNP=2
# With one section each no process holds a copy from before its acquire, so these mutants need
# rank 0's second section (a copy from its first, a notice forwarded through a third process).
check timestamp-3-mutant counterexample -DMUTANT -DNP=3 -DNOPS=2 -DNOPS_OTHERS=1
check directory-3-mutant counterexample -DDIR -DMUTANT -DNP=3 -DNOPS=2 -DNOPS_OTHERS=1
if [ "${1:-}" = "--long" ]; then
  export LOOM_MODEL_BOUND=${LOOM_MODEL_BOUND:-3600}
  check directory-2x2 pass -DDIR -DNP=2 -DFIRST_LOCK_FIXED
  check timestamp-3x1 pass -DNP=3 -DNOPS=1
  check directory-3x1 pass -DDIR -DNP=3 -DNOPS=1
  check directory-any-first-lock pass -DDIR -DNP=2
  PAN_MODE=bitstate check timestamp-3-bitstate pass -DNP=3 -DNOPS=2 -DNOPS_OTHERS=1
  PAN_MODE=bitstate check directory-3-bitstate pass -DDIR -DNP=3 -DNOPS=2 -DNOPS_OTHERS=1
  check timestamp-untouched pass -DNP=2 -DUNTOUCHED
  check directory-untouched pass -DDIR -DNP=2 -DUNTOUCHED
fi
exit $status
