#!/usr/bin/env bash
# Pre-flight: before a commit (or a push), the tests of the folders a change touches, in the
# Release configuration and then under ASan+UBSan and TSan — minutes, where `.ci/run` takes
# most of an hour (CONTRIBUTING.md says when each is worth running).
#
# Usage: scripts/preflight.sh [--since REV] [--configs "release asan tsan"] [--all] [--dry-run]
#   The change: the working tree against HEAD (staged, unstaged and untracked files); with
#   nothing there, the last commit; --since REV: everything since REV.
#   Each configuration's tree is configured if it is not yet, and only the programs the chosen
#   tests run are built (ninja: what changed). Every configuration runs the set the sanitizer
#   presets run (no `long` or `repeat` label: the 4- and 8-process repeats and per-policy runs,
#   .ci/README.md); --all adds them in Release, as CI runs it. The guest suites (label verbs: a
#   Soft-RoCE qemu guest, minutes) run, in Release, only when the change touches the verbs
#   provider, the launcher, the guest harness or their scripts. Every step is bounded
#   (scripts/steps.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/steps.sh
since=""
configs="release asan tsan"
all=0
dry=0
while [ $# -gt 0 ]; do
  case "$1" in
    --since) since=${2:?--since needs a revision}; shift 2 ;;
    --configs) configs=${2:?--configs needs a list}; shift 2 ;;
    --all) all=1; shift ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n "2,15p" "$0"; exit 0 ;;
    *) echo "preflight: unknown argument '$1' (--help)"; exit 2 ;;
  esac
done

# The change's files.
if [ -n "$since" ]; then
  changed=$(git diff --name-only "$since" --; git ls-files --others --exclude-standard)
else
  changed=$(git diff --name-only HEAD --; git ls-files --others --exclude-standard)
  [ -n "$changed" ] || changed=$(git diff --name-only HEAD~1 HEAD --)
fi
changed=$(echo "$changed" | sort -u | grep . || true)
if [ -z "$changed" ]; then
  echo "preflight: no change to check"
  exit 0
fi

# The labels of the tests a file's folder owns (tests/CMakeLists.txt labels every test with its
# layer; fabric: dsm/). `all`: the whole suite (what every suite shares).
labels_of() {
  case "$1" in
    dsm/*) echo fabric ;;
    invoke/*) echo invoke ;;
    rpipe/*) echo rpipe ;;
    coherence/*) echo coherence ;;
    objects/*) echo objects ;;
    omp/*|tests/omp/*) echo omp ;;
    mcts_shared_tree/*) echo mcts ;;
    bench/nas/*) echo nas ;;
    bench/*) echo bench ;;
    tools/*) echo "tools mcts" ;;
    include/*|cmake/*|examples/*|CMakeLists.txt|CMakePresets.json|scripts/check-install.sh|scripts/check-consumer.sh|scripts/package.sh)
      echo install ;;
    .ci/*|scripts/steps.sh|scripts/test.sh|scripts/preflight.sh|scripts/test-times.py) echo ci ;;
    docs/*|*.md) echo docs ;;
    tests/mp_main.cpp|tests/mp_test.hpp|tests/CMakeLists.txt|tests/test_settings_table.hpp) echo all ;;
    tests/test_coherence*|tests/test_dir_word*|tests/test_diff*|tests/test_notices*) echo coherence ;;
    tests/test_objects*|tests/test_hash_map*|tests/test_queue*|tests/test_cached_nodes*|tests/test_router*|tests/test_global_ptr*|tests/test_cost_model*)
      echo objects ;;
    tests/test_invoke*|tests/test_bells*|tests/test_wire.cpp) echo invoke ;;
    tests/test_rpipe*) echo rpipe ;;
    tests/test_omp*) echo omp ;;
    tests/test_nas*) echo nas ;;
    tests/test_mcts*|tests/test_hex*|tests/test_uct*|tests/test_rave*|tests/test_rollout*|tests/test_search*) echo mcts ;;
    tests/fuzz/*) echo fuzz ;;
    tests/test_layers*) echo layers ;;
    tests/*) echo fabric ;;
    *) echo "" ;;
  esac
}
guests=0
labels="layers"
for f in $changed; do
  labels="$labels $(labels_of "$f")"
  case "$f" in
    scripts/vm/*|scripts/verbs-suite.sh|scripts/nodes-*.sh|scripts/suite-case.sh|dsm/fabric/verbs*|dsm/fabric/hybrid*|dsm/runtime/launch*|dsm/runtime/bootstrap*|tests/local-rsh)
      guests=1 ;;
  esac
done
labels=$(echo "$labels" | tr ' ' '\n' | grep . | sort -u | tr '\n' ' ')
echo "preflight: $(echo "$changed" | wc -l) changed file(s); test labels: $labels$([ $guests = 1 ] && echo '+ the guest suites')"
if [[ " $labels " == *" all "* ]]; then
  select=()
else
  select=(-L "^($(echo $labels | tr ' ' '|'))\$")
fi
fuzz=0
[[ " $labels " == *" fuzz "* ]] && fuzz=1

# Builds the programs the selected tests run (their paths inside the build tree), then runs them.
run_config() {
  local c=$1 tree=build/$1
  shift
  local extra=("$@")
  if [ ! -f "$tree/build.ninja" ]; then
    step "$c: configure" 300 cmake --preset "$c" --log-level=WARNING || return 1
  fi
  local targets
  targets=$(ctest --preset "$c" "${select[@]}" "${extra[@]}" --show-only=json-v1 2> /dev/null | /usr/bin/python3 -c '
import json, os, re, sys
tree = os.path.abspath(sys.argv[1])
outs = set()
for t in json.load(sys.stdin).get("tests", []):
    cmd = t.get("command") or []
    # ctest gives no command for a program it cannot find yet (a tree never built): build all.
    if not cmd or not os.path.isabs(cmd[0]):
        outs.add("all")
    for a in cmd:
        for part in re.split(r"[\s=]", a):
            if part.startswith(tree + "/"):
                outs.add(os.path.relpath(part, tree))
print(" ".join(sorted(outs)))' "$tree")
  # What ninja knows how to make (scripts and folders among the paths are not targets).
  local known=() t
  for t in $targets; do
    ninja -C "$tree" -t query "$t" > /dev/null 2>&1 && known+=("$t")
  done
  [[ " $targets " == *" all "* ]] && known=(all)
  if [ $dry = 1 ]; then
    echo "preflight: $c: would build ${known[*]:-(nothing)}"
    ctest --preset "$c" "${select[@]}" "${extra[@]}" -N 2> /dev/null | grep -E '^ +Test +#|^Total Tests' 
    return 0
  fi
  if [[ " ${select[*]} " == *"install"* ]] || [ ${#select[@]} -eq 0 ]; then known=(all); fi
  [ ${#known[@]} -gt 0 ] && { step "$c: build (${#known[@]} targets)" 1500 ninja -C "$tree" "${known[@]}" || return 1; }
  step "$c: tests ($labels)" 1800 ctest --preset "$c" "${select[@]}" "${extra[@]}" --output-junit "$PWD/$tree/preflight-junit.xml"
}

status=0
junits=()
for c in $configs; do
  extra=()
  if [ "$c" = release ]; then
    excl="verbs"
    [ $guests = 1 ] && excl=""
    [ $all = 1 ] || excl="${excl:+$excl|}long|repeat"
    [ -n "$excl" ] && extra=(-LE "^($excl)\$")
  fi
  run_config "$c" "${extra[@]}" || status=1
  junits+=("$c=build/$c/preflight-junit.xml")
done
if [ $fuzz = 1 ] && [ $dry = 0 ]; then
  step "fuzz targets, 10 s each" 1500 bash scripts/fuzz.sh 10 || status=1
fi
[ $dry = 1 ] && exit 0
/usr/bin/python3 scripts/test-times.py --top 10 "${junits[@]}" 2> /dev/null || true
steps_report
[ $status = 0 ] && echo "preflight: passed" || echo "preflight: FAILED"
exit $status
