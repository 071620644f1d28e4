#!/usr/bin/env bash
# Builds the Release tree and the two Debian packages (loom, loom-dev) with CPack; prints their
# paths. Install them with: sudo apt-get install ./build/release/packages/*.deb
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh > /dev/null
cmake --preset release > /dev/null
cmake --build --preset release > /dev/null
rm -rf build/release/packages
(cd build/release && cpack > /dev/null)
ls "$PWD"/build/release/packages/*.deb
