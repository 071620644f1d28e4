# Sourced by .ci/run, scripts/test.sh and scripts/preflight.sh: every step under a bound, timed.
#
#   step NAME SECONDS COMMAND [ARGS...]
# runs COMMAND under `timeout -k 30 SECONDS` (TERM at the bound, KILL 30 s later: mpirun and
# qemu may ignore TERM; timeout signals COMMAND's whole process group; LOOM_STEP_KILL_AFTER
# changes the 30). A step that overruns
# fails naming itself and its bound. Its status is COMMAND's (124 or 137 when the bound hit; a
# command that ends with 124 before the bound, its own inner limit, is reported as that status).
#   steps_report
# prints every step's seconds, bound and status so far (the run's table, .ci/README.md).
# The steps of one run, nested scripts included, go to one file: LOOM_STEPS_FILE.
if [ -z "${LOOM_STEPS_FILE:-}" ]; then
  LOOM_STEPS_FILE=$(mktemp /tmp/loom-steps.XXXXXX)
  export LOOM_STEPS_FILE
fi
LOOM_STEPS_T0=${LOOM_STEPS_T0:-$(date +%s)}
export LOOM_STEPS_T0

step() {
  local name=$1 bound=$2
  shift 2
  local t0 rc=0
  t0=$(date +%s)
  echo "== $name (bound $bound s) [$((t0 - LOOM_STEPS_T0)) s since the start] =="
  timeout -k "${LOOM_STEP_KILL_AFTER:-30}" "$bound" "$@" || rc=$?
  local took=$(($(date +%s) - t0)) hit=0
  { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && [ "$took" -ge "$bound" ] && hit=1
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$took" "$bound" "$rc" "$hit" >> "$LOOM_STEPS_FILE"
  if [ $hit = 1 ]; then
    echo "== STEP TIMED OUT: '$name' ran past its bound of $bound s and was stopped =="
  elif [ $rc -ne 0 ]; then
    echo "== step '$name' FAILED (status $rc, $took s) =="
  fi
  return $rc
}

steps_report() {
  echo "== steps: seconds, bound, status =="
  awk -F'\t' '{ printf "  %-60s %6d s  (bound %5d s)  %s\n", $1, $2, $3, ($4 == 0 ? "ok" : ($5 == 1 ? "TIMED OUT" : "status " $4)) }' \
    "$LOOM_STEPS_FILE"
}
