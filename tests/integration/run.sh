#!/usr/bin/env bash
# Black-box integration suite: starts the real labd (from $BUILD, default build)
# and drives it over HTTP.  Prints "N passed, N failed" as its last line.
set -uo pipefail

cd "$(dirname "$0")/../.."
export BUILD="${BUILD:-build}"
[ -n "${LABD_ASAN:-}" ] && export LABD_ASAN
export PYTHONDONTWRITEBYTECODE=1

# pytest comes from Debian's python3-pytest; the python3 first on PATH may be
# another interpreter without it.
py=""
for cand in python3 /usr/bin/python3; do
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import pytest' >/dev/null 2>&1; then
    py=$cand
    break
  fi
done
if [ -z "$py" ]; then
  echo "integration: pytest not found (apt-get install python3-pytest)" >&2
  echo "0 passed, 1 failed"
  exit 1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$py" -m pytest -q -p no:cacheprovider -rfE tests/integration "$@" 2>&1 | tee "$log"

summary=$(grep -E '[0-9]+ (passed|failed|errors?|skipped|deselected)' "$log" | tail -n 1)
count() { echo "$summary" | grep -Eo "[0-9]+ $1" | head -n 1 | grep -Eo '^[0-9]+' || echo 0; }
passed=$(count passed)
failed=$(count failed)
errors=$(count 'errors?')
failed=$((failed + errors))

echo "${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
