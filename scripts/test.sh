#!/usr/bin/env bash
# Builds and runs the test suite in every configuration: Release, Debug+ASan+UBSan, TSan.
# LOOM_TEST_CONFIGS="release asan tsan" picks configurations; extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
configs=${LOOM_TEST_CONFIGS:-"release asan tsan"}
status=0
for c in $configs; do
  echo "== configuration: $c =="
  cmake --preset "$c" > /dev/null
  cmake --build --preset "$c"
  if ! ctest --preset "$c" "$@"; then
    status=1
    echo "== $c: FAILED =="
  fi
done
# Every job removes its segments; anything left here is a bug.
if ls -d /dev/shm/loom-* > /dev/null 2>&1; then
  echo "leftover shared-memory segments: $(ls -d /dev/shm/loom-*)"
  status=1
fi
exit $status
