#!/usr/bin/env bash
# What a user gets from `cmake --install` and from the .debs, checked without root:
#  1. install the build tree into a scratch prefix; every installed header compiles on its own
#     (#include <loom/...> and nothing else on the command line but the prefix);
#  2. examples/consumer built against that prefix (find_package, shared and static; pkg-config)
#     and run under the installed loomrun (scripts/check-consumer.sh);
#  3. the .debs made by CPack, unpacked side by side, hold the install's files and serve the
#     pkg-config compile line and the OpenMP example (.ci/run installs them on the machine and
#     builds the consumer every way).
# Usage: check-install.sh BUILD_DIR   (ctest runs it as install.consumer in the release build)
set -euo pipefail
build=$(cd "${1:?usage: check-install.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/loom-install.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "== cmake --install into $work/prefix =="
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
headers=$(cd "$work/prefix/include" && find loom -name '*.hpp' | sort)
echo "== $(echo "$headers" | wc -l) installed headers, each compiled alone =="
check_header() {
  printf '#include <%s>\n' "$1" | g++ -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I"$2" -x c++ - \
    || { echo "FAILED: <$1> does not compile on its own"; return 1; }
}
export -f check_header
echo "$headers" | xargs -P "$(nproc)" -I{} bash -c 'check_header "$1" "$2"' _ {} "$work/prefix/include"
if find "$work/prefix/include" -name '*.hpp' -print0 | xargs -0 grep -lE '#include "(dsm|invoke|coherence|objects|mcts_shared_tree)/' ; then
  echo "FAILED: an installed header includes a layer without the loom/ prefix"; exit 1
fi
bash "$here/check-consumer.sh" "$work/prefix"

echo "== the .debs (cpack), unpacked into $work/deb =="
(cd "$build" && cpack -B "$work/packages" > "$work/cpack.log") || { cat "$work/cpack.log"; exit 1; }
for deb in "$work"/packages/*.deb; do
  echo "$(basename "$deb"): $(dpkg-deb -f "$deb" Depends)"
  dpkg-deb -x "$deb" "$work/deb"
done
for f in usr/bin/loomrun usr/include/loom/loom.hpp usr/lib/pkgconfig/loom.pc usr/lib/cmake/Loom/LoomConfig.cmake; do
  [ -e "$work/deb/$f" ] || { echo "FAILED: the .debs lack /$f"; exit 1; }
done
bash "$here/check-consumer.sh" --link-lines "$work/deb/usr"
echo "install: OK"
