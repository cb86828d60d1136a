#!/usr/bin/env bash
# `make check-tsan`: the unit tests and the integration files that drive labd-web's
# threads (HTTP workers, the runtime reconciler, the jobs runner and its observers,
# the GPU refresh, the supervisor channel's reader, the event hubs) against the
# ThreadSanitizer build in $BUILD (default build-tsan).
#
# Every process of the run (test binaries, labd's supervisor, its labd-web, the
# forked workers) writes its reports to $LABD_TSAN_LOGS/tsan.<pid> (TSAN_OPTIONS
# log_path): the daemons are started by the tests, so their reports cannot reach this
# script's exit status; the files can. The run fails when any file appears there,
# whatever the suites counted. Prints "N passed, N failed, N skipped" last.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
export BUILD=${BUILD:-build-tsan}

# The files whose daemons run the threads above (tests/tsan/README.md says which drives
# which); LABD_TSAN_FILES replaces the list.
files=${LABD_TSAN_FILES:-"tests/integration/test_jobs_run.py tests/integration/test_job_observe_run.py
  tests/integration/test_gpu_queue.py tests/integration/test_runtime_api.py
  tests/integration/test_idle.py tests/integration/test_runtime_events.py
  tests/integration/test_runtime_stream.py tests/integration/test_supervisor_channel.py"}

logs=${LABD_TSAN_LOGS:-$(mktemp -d /tmp/labd-tsan.XXXXXX)}
mkdir -p "$logs"
rm -f "$logs"/tsan.*
# labd-web runs as the unprivileged labd user and opens its report file only when it
# has one to write.
chmod 1777 "$logs"
export TSAN_OPTIONS="log_path=$logs/tsan suppressions=$PWD/tests/tsan/suppressions.txt second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
# the integration harness stretches its waits for a sanitizer build
export LABD_TSAN=1

passed=0 failed=0 skipped=0
tally() {
	local last
	last=$(grep -E '^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' "$1" | tail -1)
	if [[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed(,\ ([0-9]+)\ skipped)?$ ]]; then
		passed=$((passed + BASH_REMATCH[1])) failed=$((failed + BASH_REMATCH[2]))
		skipped=$((skipped + ${BASH_REMATCH[4]:-0}))
	else
		echo "FAIL tsan: $2 printed no \"N passed, N failed\" line"
		failed=$((failed + 1))
	fi
}

out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "=== unit (ThreadSanitizer, $BUILD)"
bash tests/unit/run.sh 2>&1 | tee "$out"
tally "$out" unit
echo "=== integration (ThreadSanitizer, $BUILD)"
# Two tests measure the process rather than its threads, and under TSan they would
# measure TSan: test_idle_web_process_sleeps counts labd-web's wakeups (TSan's own
# background thread wakes it ~20 times a second), and the stalled-streams test bounds
# labd-web's growth to 4 MiB (TSan's allocator and shadow add ~10 MiB).
# shellcheck disable=SC2086 # one word per file
bash tests/integration/run.sh $files \
	--deselect tests/integration/test_idle.py::test_idle_web_process_sleeps \
	--deselect tests/integration/test_runtime_events.py::test_stalled_clients_are_cut_off_without_memory_growth \
	2>&1 | tee "$out"
tally "$out" integration

reports=("$logs"/tsan.*)
if [ -e "${reports[0]}" ]; then
	n=$(cat "${reports[@]}" | grep -c '^WARNING: ThreadSanitizer:')
	echo "FAIL tsan: $n report(s) in ${#reports[@]} process(es), kept in $logs:"
	cat "${reports[@]}"
	failed=$((failed + 1))
else
	echo "tsan: no report ($logs)"
	rmdir "$logs" 2>/dev/null
fi
suite_result tsan "$passed" "$failed" "$skipped"
