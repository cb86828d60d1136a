#!/usr/bin/env bash
# Black-box integration suite: starts the real labd (from $BUILD, default build)
# and drives it over HTTP.  Prints "N passed, N failed, N skipped" as its last line.
#
# pytest's exit status counts: 5 (no test collected) and any other non-zero status
# with no failure counted are one failure.  Each skip is named (conftest.py writes
# them to LABD_SKIP_LOG) and checked against tests/expected-skips.txt (tests/lib.sh).
# Arguments go to pytest: run.sh tests/integration/test_x.py runs one file.
set -uo pipefail

cd "$(dirname "$0")/../.."
. tests/lib.sh
export BUILD="${BUILD:-build}"
[ -n "${LABD_ASAN:-}" ] && export LABD_ASAN
export PYTHONDONTWRITEBYTECODE=1

# pytest (and pytest-xdist, which runs the test files side by side) come from
# Debian's python3-pytest and python3-pytest-xdist; the python3 first on PATH may be
# another interpreter, with or without them. Most of the suite's time is spent
# waiting for runtimes to start and stop, so files run LABD_TEST_JOBS at a time
# (default 3; 1 runs them one after another). Each file's tests stay together and in
# order (--dist loadfile): a module's daemon is the module's own.
py="" jobs=${LABD_TEST_JOBS:-3}
for cand in /usr/bin/python3 python3; do
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import pytest, xdist' >/dev/null 2>&1; then
    py=$cand
    break
  fi
done
if [ -z "$py" ]; then
  jobs=1
  for cand in python3 /usr/bin/python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import pytest' >/dev/null 2>&1; then
      py=$cand
      break
    fi
  done
fi
if [ -z "$py" ]; then
  echo "integration: pytest not found (apt-get install python3-pytest)" >&2
  echo "0 passed, 1 failed, 0 skipped"
  exit 1
fi
parallel=()
[ "$jobs" -gt 1 ] && parallel=(-n "$jobs" --dist loadfile)

log=$(mktemp)
skiplog=$(mktemp)
trap 'rm -f "$log" "$skiplog"' EXIT
[ $# -gt 0 ] || set -- tests/integration
LABD_SKIP_LOG=$skiplog "$py" -m pytest -q -p no:cacheprovider -rfEs "${parallel[@]}" --durations=15 "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

summary=$(grep -E '^=*\s*[0-9]+ (passed|failed|errors?|skipped|deselected|xfailed|xpassed)' "$log" | tail -n 1)
count() { echo "$summary" | grep -Eo "[0-9]+ $1" | head -n 1 | grep -Eo '^[0-9]+' || echo 0; }
passed=$(($(count passed) + $(count xpassed)))
failed=$(($(count failed) + $(count 'errors?')))
counted_skips=$(($(count skipped) + $(count xfailed)))

case $rc in
  0 | 1) ;;
  5) echo "FAIL integration: pytest collected no test (exit status 5)"; failed=$((failed + 1)) ;;
  *) if [ "$failed" -eq 0 ]; then echo "FAIL integration: pytest exit status $rc"; failed=1; fi ;;
esac
if [ "$rc" -eq 1 ] && [ "$failed" -eq 0 ]; then
  echo "FAIL integration: pytest exit status 1 with no failure counted"
  failed=1
fi

skipped=0 named=0
while IFS=$'\t' read -r nodeid reason; do
  [ -n "$nodeid" ] || continue
  named=$((named + 1))
  if skip_verdict integration "$nodeid" "$reason"; then skipped=$((skipped + 1)); else failed=$((failed + 1)); fi
done <"$skiplog"
if [ "$counted_skips" -gt "$named" ]; then
  # skips pytest counted that the hook did not name cannot be checked
  for _ in $(seq $((counted_skips - named))); do
    if skip_verdict integration "(unnamed)" "pytest counted a skip conftest.py did not name"; then
      skipped=$((skipped + 1))
    else
      failed=$((failed + 1))
    fi
  done
fi

suite_result integration "$passed" "$failed" "$skipped"
