#!/usr/bin/env bash
# Runs every cmocka unit test binary under $BUILD/tests and prints, last,
# "N passed, N failed" counted from cmocka's own summaries.
set -u
build=${BUILD:-build}
passed=0 failed=0
shopt -s nullglob
bins=("$build"/tests/test_*)
if [ ${#bins[@]} -eq 0 ]; then
  echo "unit: no test binaries in $build/tests (run make tests)" >&2
  echo "0 passed, 1 failed"
  exit 1
fi
for bin in "${bins[@]}"; do
  out=$("$bin" 2>&1)
  rc=$?
  p=$(grep -oP '^\[  PASSED  \] \K[0-9]+' <<<"$out" | tail -1)
  f=$(grep -oP '^\[  FAILED  \] \K[0-9]+(?= test)' <<<"$out" | tail -1)
  p=${p:-0} f=${f:-0}
  # A binary that crashed before its summary still counts as a failure.
  if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  if [ "$f" -ne 0 ]; then
    echo "$out" | grep -E '^\[  (ERROR|FAILED|  LINE) |LINE|ERROR' | sed "s|^|  $(basename "$bin"): |"
  fi
  echo "unit $(basename "$bin"): $p passed, $f failed"
  passed=$((passed + p)) failed=$((failed + f))
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
