#!/usr/bin/env bash
# Builds and runs the test suite in every configuration: Release, Debug+ASan+UBSan, TSan.
# LOOM_TEST_CONFIGS="release asan tsan" picks configurations; extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
configs=${LOOM_TEST_CONFIGS:-"release asan tsan"}
status=0
# The suite must not sweep job directories (a leaked one would be removed by the next job and
# never reported); the launcher tests turn sweeping on in their own directories. Directories
# here before the run (another job, an earlier crash) are not the suite's.
export LOOM_SWEEP=0
before=$(ls -d /dev/shm/loom-* 2>/dev/null || true)
for c in $configs; do
  echo "== configuration: $c =="
  start=$SECONDS
  cmake --preset "$c" > /dev/null
  cmake --build --preset "$c"
  built=$SECONDS
  if ! ctest --preset "$c" "$@"; then
    status=1
    echo "== $c: FAILED =="
  fi
  echo "== $c: built in $((built - start)) s, tested in $((SECONDS - built)) s =="
done
# Every job removes its segments; anything the run left here is a bug.
left=$(comm -13 <(echo "$before" | sort) <(ls -d /dev/shm/loom-* 2>/dev/null | sort) | grep . || true)
if [ -n "$left" ]; then
  echo "leftover shared-memory segments: $left"
  status=1
fi
exit $status
