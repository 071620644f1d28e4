#!/usr/bin/env bash
# Across nodes for real, on this host: two qemu guests with Soft-RoCE (scripts/vm), 2 ranks on
# each. Builds examples/consumer against an install of BUILD_DIR (inside the source tree, which
# the guests see), runs scripts/nodes-suite.sh in the guests, then scripts/nodes-failures.sh.
# ctest runs it as nodes.rxe (smoke); `scripts/nodes-test.sh build/release quick|full` runs more.
# Usage: nodes-test.sh BUILD_DIR [smoke|quick|full]
set -uo pipefail
build=$(cd "${1:?usage: nodes-test.sh BUILD_DIR [smoke|quick|full]}" && pwd)
mode=${2:-smoke}
here=$(cd "$(dirname "$0")/.." && pwd)
# The consumer install.consumer built against its prefix (BUILD_DIR/install-check, the ctest
# fixture before nodes.rxe) runs as it is; without it (the script run alone) it is built here.
consumer=$build/install-check/consumer/shared/consumer
if [ -x "$consumer" ]; then
  echo "== the consumer example built by install.consumer: $consumer =="
else
  prefix=$build/nodes-prefix
  echo "== the consumer example against $prefix =="
  cmake --install "$build" --prefix "$prefix" > "$build/nodes-install.log" || { cat "$build/nodes-install.log"; exit 1; }
  { cmake -S "$here/examples/consumer" -B "$build/nodes-consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" &&
    cmake --build "$build/nodes-consumer"; } > "$build/nodes-consumer.log" 2>&1 || { cat "$build/nodes-consumer.log"; exit 1; }
  consumer=$build/nodes-consumer/consumer
fi
export LOOM_NODES_CONSUMER=$consumer
status=0
echo "== the suites across two guests ($mode) =="
LOOM_VM_ENV="${LOOM_VM_ENV:-} LOOM_NODES_CONSUMER" LOOM_VM_TIMEOUT=${LOOM_VM_TIMEOUT:-3000} "$here/scripts/vm/run" --nodes 2 "$here" -- \
  "$here/scripts/nodes-suite.sh" "$build" "$mode" || status=1
echo "== failures across two guests =="
bash "$here/scripts/nodes-failures.sh" "$build" || status=1
exit $status
