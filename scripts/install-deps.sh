#!/usr/bin/env bash
# Installs Loom's build and test dependencies from Debian's archive (Debian 12).
# Skips apt entirely when everything is already installed.
set -euo pipefail
PKGS=(cmake ninja-build g++ pkg-config dpkg-dev file
      libibverbs-dev libnuma-dev libhwloc-dev libboost-dev libboost-context-dev libgtest-dev libtbb-dev libbenchmark-dev
      libucx-dev libpmix-dev openmpi-bin libopenmpi-dev clang-16 libclang-rt-16-dev spin python3-matplotlib gfortran
      libzydis-dev ccache)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
