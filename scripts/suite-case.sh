# Sourced by scripts/verbs-suite.sh and scripts/nodes-suite.sh: one case of a suite.
# case_run KIND LOGDIR NAME COMMAND...: runs COMMAND with its output in LOGDIR/NAME.log (spaces
# left out of the file name), prints "PASS KIND NAME (N s)" or "FAIL ..." with the log's tail,
# and counts it in the caller's `passed` and `failed`.
case_run() {
  local kind=$1 dir=$2 name=$3 start
  shift 3
  local log="$dir/${name// /}.log"
  start=$(date +%s)
  if "$@" > "$log" 2>&1; then
    passed=$((passed + 1))
    echo "PASS $kind $name ($(( $(date +%s) - start )) s)"
  else
    failed=$((failed + 1))
    echo "FAIL $kind $name ($(( $(date +%s) - start )) s):"
    tail -40 "$log"
  fi
}
