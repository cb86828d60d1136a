#!/usr/bin/env bash
# The whole test suite: unit (cmocka), sandbox escape/isolation suite,
# integration (pytest against the real daemon) and e2e (Chromium). Each suite
# ends with "N passed, N failed"; this runner adds them up and ends the same way.
set -u
cd "$(dirname "$0")/.."
export BUILD=${BUILD:-build}
total_passed=0 total_failed=0
summary=()

run_suite() {
  local name=$1 script=$2 log last p f rc
  if [ ! -f "$script" ]; then
    summary+=("$name: missing ($script)")
    total_failed=$((total_failed + 1))
    return
  fi
  echo "=== $name ($script)"
  log=$(mktemp)
  bash "$script" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
  rm -f "$log"
  p=$(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$last")
  f=$(sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/' <<<"$last")
  p=${p:-0} f=${f:-0}
  # A suite that failed without saying how many counts as one failure.
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  if [ -z "$last" ] && [ "$rc" -eq 0 ]; then f=1; fi
  summary+=("$name: $p passed, $f failed")
  total_passed=$((total_passed + p)) total_failed=$((total_failed + f))
}

suites=${LABD_SUITES:-"unit sandbox integration e2e"}
for s in $suites; do
  case $s in
    unit) run_suite unit tests/unit/run.sh ;;
    sandbox) run_suite sandbox tests/security/run.sh ;;
    integration) run_suite integration tests/integration/run.sh ;;
    e2e) run_suite e2e tests/e2e/run.sh ;;
    *) echo "unknown suite $s" >&2; total_failed=$((total_failed + 1)) ;;
  esac
done

echo "=== summary"
printf '%s\n' "${summary[@]}"
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
