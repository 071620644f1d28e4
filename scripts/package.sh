#!/usr/bin/env bash
# Builds the Release tree and the two Debian packages (loom, loom-dev) with CPack; prints their
# paths. Install them with: sudo apt-get install ./build/release/packages/*.deb
# The .debs that install.consumer made (scripts/check-install.sh) are kept when nothing in the
# build is newer than them: a CI run packs once.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh > /dev/null
cmake --preset release > /dev/null
cmake --build --preset release > /dev/null
debs=(build/release/packages/*.deb)
oldest=$(ls -tr build/release/packages/*.deb 2>/dev/null | head -1 || true)
if [ -z "$oldest" ] || [ ${#debs[@]} -lt 2 ] ||
   [ -n "$(find build/release -maxdepth 3 \( -name '*.so*' -o -name '*.a' -o -name loomrun -o -name '*.pc' \) -newer "$oldest" -print -quit)" ]; then
  rm -rf build/release/packages
  (cd build/release && cpack > /dev/null)
fi
ls "$PWD"/build/release/packages/*.deb
