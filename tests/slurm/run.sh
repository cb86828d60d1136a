#!/usr/bin/env bash
# The Slurm suite: a private Slurm cluster (cluster.py: munged, slurmctld, two slurmd
# in network namespaces of their own) and labd on it. Run by `make test-slurm` (and
# CI after `make test`); prints "N passed, N failed, N skipped" as its last line.
# Arguments go to pytest: run.sh tests/slurm/test_x.py runs one file.
#
# The files run one after another: each starts its own cluster, and the node-failure
# cases wait for Slurm's SlurmdTimeout, which a loaded machine stretches.
set -uo pipefail

cd "$(dirname "$0")/../.."
. tests/lib.sh
export BUILD="${BUILD:-build}"
export PYTHONDONTWRITEBYTECODE=1

py=""
for cand in /usr/bin/python3 python3; do
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import pytest' >/dev/null 2>&1; then
    py=$cand
    break
  fi
done
if [ -z "$py" ]; then
  echo "slurm: pytest not found (apt-get install python3-pytest)" >&2
  echo "0 passed, 1 failed, 0 skipped"
  exit 1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
[ $# -gt 0 ] || set -- tests/slurm
"$py" -m pytest -q -p no:cacheprovider -rfEs --durations=10 "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

summary=$(grep -E '^=*\s*[0-9]+ (passed|failed|errors?|skipped|deselected|xfailed|xpassed)' "$log" | tail -n 1)
count() { echo "$summary" | grep -Eo "[0-9]+ $1" | head -n 1 | grep -Eo '^[0-9]+' || echo 0; }
passed=$(($(count passed) + $(count xpassed)))
failed=$(($(count failed) + $(count 'errors?')))
skipped=0
# A skip here is a failure: nothing in this suite may be left out quietly.
failed=$((failed + $(count skipped) + $(count xfailed)))

case $rc in
  0 | 1) ;;
  5) echo "FAIL slurm: pytest collected no test (exit status 5)"; failed=$((failed + 1)) ;;
  *) if [ "$failed" -eq 0 ]; then echo "FAIL slurm: pytest exit status $rc"; failed=1; fi ;;
esac
if [ "$rc" -eq 1 ] && [ "$failed" -eq 0 ]; then
  echo "FAIL slurm: pytest exit status 1 with no failure counted"
  failed=1
fi

suite_result slurm "$passed" "$failed" "$skipped"
