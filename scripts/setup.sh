#!/usr/bin/env bash
# One command for a newcomer: install dependencies, build (Release), run the demo on 4 processes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release
cmake --build --preset release
echo
echo "== demo: loomrun -n 4 hello_fabric =="
./build/release/loomrun -n 4 --timeout 120 ./build/release/hello_fabric
