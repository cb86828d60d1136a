#!/usr/bin/env bash
# Runs every cmocka unit test binary under $BUILD/tests and prints, last,
# "N passed, N failed, N skipped" counted per test case from cmocka's own output
# (skip() is a skip, checked against tests/expected-skips.txt; see tests/lib.sh).
set -u
. "$(dirname "$0")/../lib.sh"
build=${BUILD:-build}
CM_PASSED=0 CM_FAILED=0 CM_SKIPPED=0
shopt -s nullglob
bins=("$build"/tests/test_*)
if [ ${#bins[@]} -eq 0 ]; then
  echo "unit: no test binaries in $build/tests (run make tests)" >&2
  echo "0 passed, 1 failed, 0 skipped"
  exit 1
fi
for bin in "${bins[@]}"; do
  cmocka_run unit "$bin"
done
suite_result unit "$CM_PASSED" "$CM_FAILED" "$CM_SKIPPED"
