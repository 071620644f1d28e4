#!/usr/bin/env bash
# What a user gets from `cmake --install` and from the .debs, checked without root:
#  1. install the build tree into a prefix; every installed header compiles on its own
#     (#include <loom/...> and nothing else on the command line but the prefix);
#  2. examples/consumer built against that prefix (find_package, shared and static; pkg-config
#     and the OpenMP example) and run under the installed loomrun (scripts/check-consumer.sh);
#  3. the .debs made by CPack into BUILD_DIR/packages (where scripts/package.sh leaves them, so a
#     run makes them once), their contents checked.
# The prefix and the consumer's builds stay in BUILD_DIR/install-check: nodes.rxe runs them in
# the guests (a ctest fixture) instead of building them again. LOOM_CONSUMER_LINK_LINES=later
# leaves the pkg-config and OpenMP forms to the caller (.ci/run builds them once against the
# installed .debs).
# Usage: check-install.sh BUILD_DIR   (ctest runs it as install.consumer in the release build)
set -euo pipefail
build=$(cd "${1:?usage: check-install.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$build/install-check
rm -rf "$work"
mkdir -p "$work"

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
forms=()
[ "${LOOM_CONSUMER_LINK_LINES:-}" = later ] && forms=(--no-link-lines)
LOOM_CONSUMER_WORK=$work/consumer bash "$here/check-consumer.sh" "${forms[@]}" "$work/prefix"

echo "== the .debs (cpack) into $build/packages =="
rm -rf "$build/packages"
(cd "$build" && cpack > "$work/cpack.log") || { cat "$work/cpack.log"; exit 1; }
for deb in "$build"/packages/*.deb; do
  echo "$(basename "$deb"): $(dpkg-deb -f "$deb" Depends)"
  dpkg-deb -x "$deb" "$work/deb"
done
for f in usr/bin/loomrun usr/include/loom/loom.hpp usr/lib/pkgconfig/loom.pc usr/lib/pkgconfig/loom-omp.pc \
         usr/lib/cmake/Loom/LoomConfig.cmake; do
  [ -e "$work/deb/$f" ] || { echo "FAILED: the .debs lack /$f"; exit 1; }
done
rm -rf "$work/deb"
echo "install: OK"
