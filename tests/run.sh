#!/usr/bin/env bash
# The whole test suite: unit (cmocka), the fuzz harnesses (a few seconds each, their
# own clang build in build-fuzz), sandbox escape/isolation suite,
# integration (pytest against the real daemon) and e2e (Chromium). Each suite
# ends with "N passed, N failed, N skipped"; this runner adds them up and ends
# the same way (the line CI reads).
#
# A suite counts as failed when it: ends without that line; exits non-zero while
# reporting 0 failed; executed no test (0 passed and 0 failed, whatever it skipped);
# or, with CI=true, skipped a case that tests/expected-skips.txt does not list.
# The suites check their own skips (tests/lib.sh); this runner checks again every
# "SKIP <case> -- <reason>" line they print, and that every counted skip has such a line.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
export BUILD=${BUILD:-build}
total_passed=0 total_failed=0 total_skipped=0
summary=()

run_suite() {
  local name=$1 script=$2 log last p f s rc named bad why
  if [ ! -f "$script" ]; then
    summary+=("$name: missing ($script)")
    total_failed=$((total_failed + 1))
    return
  fi
  echo "=== $name ($script)"
  log=$(mktemp)
  bash "$script" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  last=$(grep -E '^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' "$log" | tail -1)
  p=0 f=0 s=0
  if [[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed(,\ ([0-9]+)\ skipped)?$ ]]; then
    p=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]} s=${BASH_REMATCH[4]:-0}
  else
    echo "FAIL $name: no \"N passed, N failed, N skipped\" line"
    f=1
  fi
  # A suite that failed without saying how many counts as one failure.
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL $name: exit status $rc while reporting 0 failed"
    f=1
  fi
  if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL $name: no test was executed ($s skipped)"
    f=1
  fi
  # Every skip must be named, and under CI named in the allow-list.
  named=0 bad=0
  while IFS= read -r case_name; do
    named=$((named + 1))
    if ! why=$(expected_skip "$name" "$case_name") && [ "${CI:-}" = true ]; then
      echo "FAIL $name: unexpected skip \"$case_name\" (not in tests/expected-skips.txt, CI=true)"
      bad=$((bad + 1))
    fi
  done < <(awk '/^SKIP / { sub(/^SKIP /, ""); i = index($0, " -- "); if (i) print substr($0, 1, i - 1) }' "$log")
  if [ "$s" -gt "$named" ] && [ "${CI:-}" = true ]; then
    echo "FAIL $name: $((s - named)) skip(s) without a \"SKIP <case> -- <reason>\" line (CI=true)"
    bad=$((bad + s - named))
  fi
  s=$((s - bad < 0 ? 0 : s - bad)) f=$((f + bad))
  rm -f "$log"
  summary+=("$name: $p passed, $f failed, $s skipped")
  total_passed=$((total_passed + p)) total_failed=$((total_failed + f)) total_skipped=$((total_skipped + s))
}

suites=${LABD_SUITES:-"unit layers lint fuzz sandbox integration e2e"}
for s in $suites; do
  case $s in
    unit) run_suite unit tests/unit/run.sh ;;
    layers) run_suite layers tests/layers/run.sh ;;
    lint) run_suite lint tests/lint/run.sh ;;
    fuzz) run_suite fuzz tests/fuzz/run.sh ;;
    sandbox) run_suite sandbox tests/security/run.sh ;;
    integration) run_suite integration tests/integration/run.sh ;;
    e2e) run_suite e2e tests/e2e/run.sh ;;
    *) echo "unknown suite $s" >&2; total_failed=$((total_failed + 1)) ;;
  esac
done

echo "=== summary"
printf '%s\n' "${summary[@]}"
echo "$total_passed passed, $total_failed failed, $total_skipped skipped"
[ "$total_failed" -eq 0 ]
