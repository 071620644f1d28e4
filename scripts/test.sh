#!/usr/bin/env bash
# Builds and runs the test suite in every configuration: Release, Debug+ASan+UBSan, TSan.
# LOOM_TEST_CONFIGS="release asan tsan" picks configurations; extra arguments go to ctest.
# Every step runs under a bound (scripts/steps.sh; the table of bounds is in .ci/README.md);
# ctest writes each configuration's times to build/<config>/ctest-junit.xml, and the end of
# the run prints the slowest tests (scripts/test-times.py).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/steps.sh
step "dependencies (apt)" 900 bash scripts/install-deps.sh
configs=${LOOM_TEST_CONFIGS:-"release asan tsan"}
status=0
# The suite must not sweep job directories (a leaked one would be removed by the next job and
# never reported); the launcher tests turn sweeping on in their own directories. Directories
# here before the run (another job, an earlier crash) are not the suite's.
export LOOM_SWEEP=0
before=$(ls -d /dev/shm/loom-* 2>/dev/null || true)
# Bounds in seconds: a cold build, and the whole of a configuration's tests (each test has its
# own smaller timeout in the presets and its loomrun --timeout smaller still).
declare -A build_bound=([release]=1500 [asan]=1500 [tsan]=1500)
declare -A test_bound=([release]=2700 [asan]=1500 [tsan]=1800)
junits=()
for c in $configs; do
  echo "== configuration: $c =="
  start=$SECONDS
  step "$c: configure" 300 cmake --preset "$c" --log-level=WARNING || { status=1; continue; }
  if ! step "$c: build" "${build_bound[$c]:-1500}" cmake --build --preset "$c"; then
    status=1
    continue
  fi
  built=$SECONDS
  if ! step "$c: tests" "${test_bound[$c]:-1800}" ctest --preset "$c" --output-junit "$PWD/build/$c/ctest-junit.xml" "$@"; then
    status=1
    echo "== $c: FAILED =="
  fi
  junits+=("$c=build/$c/ctest-junit.xml")
  echo "== $c: built in $((built - start)) s, tested in $((SECONDS - built)) s =="
done
# Every job removes its segments; anything the run left here is a bug.
left=$(comm -13 <(echo "$before" | sort) <(ls -d /dev/shm/loom-* 2>/dev/null | sort) | grep . || true)
if [ -n "$left" ]; then
  echo "leftover shared-memory segments: $left"
  status=1
fi
if [ ${#junits[@]} -gt 0 ]; then
  /usr/bin/python3 scripts/test-times.py --csv build/test-times.csv "${junits[@]}" || true
fi
exit $status
