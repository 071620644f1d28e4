#!/usr/bin/env bash
# Builds the fuzz preset (clang, libFuzzer, ASan + UBSan) and runs every fuzz target from its
# seed corpus (tests/fuzz/corpus/<target>): `scripts/fuzz.sh [SECONDS]` runs each for SECONDS
# (default 20; .ci/run), `scripts/fuzz.sh --runs N` for N inputs each (the long run). New inputs
# go to build/fuzz/corpus/<target>, crashes to build/fuzz/artifacts/. Exit status 1 if any
# target found a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
# bound: each target's whole run, its start included
if [ "${1:-}" = "--runs" ]; then
  limit=(-runs="${2:?--runs needs a count}")
  bound=${LOOM_FUZZ_BOUND:-7200}
else
  limit=(-max_total_time="${1:-20}")
  bound=$(( ${1:-20} + 120 ))
fi
# --fresh: a cache from another compiler (the preset moved from clang 14 to 16) is replaced.
cmake --preset fuzz --fresh > /dev/null
cmake --build --preset fuzz --target fuzz_all
mkdir -p build/fuzz/artifacts
failed=0
for dir in tests/fuzz/corpus/*/; do
  t=$(basename "$dir")
  new="build/fuzz/corpus/$t"
  mkdir -p "$new"
  log="build/fuzz/$t.log"
  start=$(date +%s)
  # -timeout: one input running past 30 s is a failure (a hang), reported with its input.
  if timeout -k 10 "$bound" "build/fuzz/tests/fuzz/$t" "${limit[@]}" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
       -artifact_prefix="build/fuzz/artifacts/$t-" "$new" "$dir" > "$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz: $t: $runs inputs in $(( $(date +%s) - start )) s, no failure"
  else
    failed=1
    echo "fuzz: $t FAILED (log: $log; the input: build/fuzz/artifacts/$t-*)"
    grep -E "ERROR|SUMMARY|runtime error" "$log" | head -5 || true
  fi
done
exit $failed
