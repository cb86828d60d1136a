# tests/lib.sh - sourced (never run) by tests/run.sh and every suite runner.
#
# What a green run means: every suite ran at least one test, nothing failed, and every
# skip is listed, with its reason, in tests/expected-skips.txt.  Each suite ends with
# exactly one line "N passed, N failed, N skipped" (what CI reads) and names each
# skip on a line "SKIP <case> -- <reason>" (case names may hold ": ", test titles do).
#
# Helpers: skip_verdict (a skip checked against the allow-list), suite_result (the last
# line), cmocka_run (one cmocka binary, its skips counted as skips) and wait_until
# (polling with a deadline instead of a fixed sleep).

LABD_TESTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
EXPECTED_SKIPS=${LABD_EXPECTED_SKIPS:-$LABD_TESTS_DIR/expected-skips.txt}

# expected_skip SUITE CASE: when tests/expected-skips.txt lists SUITE and CASE with a
# reason, prints the reason and returns 0; otherwise returns 1.  A line without a
# "# reason" allows nothing.
expected_skip() {
	local suite=$1 name=$2 line s rest c why
	[ -r "$EXPECTED_SKIPS" ] || return 1
	while IFS= read -r line || [ -n "$line" ]; do
		case $line in '' | '#'*) continue ;; esac
		s=${line%%[[:space:]]*}
		rest=${line#"$s"}
		case $rest in *' # '*) ;; *) continue ;; esac
		c=${rest%% # *}
		why=${rest#* # }
		c=${c#"${c%%[![:space:]]*}"}
		c=${c%"${c##*[![:space:]]}"}
		why=${why#"${why%%[![:space:]]*}"}
		if [ "$s" = "$suite" ] && [ "$c" = "$name" ] && [ -n "$why" ]; then
			echo "$why"
			return 0
		fi
	done <"$EXPECTED_SKIPS"
	return 1
}

# skip_verdict SUITE CASE REASON: prints the skip's line.  Returns 0 when it counts as
# a skip: listed in the allow-list, or not listed outside CI (then reported loudly).
# Returns 1 when it counts as a failure: not listed while CI=true.
skip_verdict() {
	local suite=$1 name=$2 reason=$3 why
	if why=$(expected_skip "$suite" "$name"); then
		echo "SKIP $name -- $reason (allowed: $why)"
		return 0
	fi
	if [ "${CI:-}" = true ]; then
		echo "FAIL $name -- unexpected skip ($reason): not in tests/expected-skips.txt for suite $suite (CI=true)"
		return 1
	fi
	echo "SKIP $name -- $reason"
	echo "!!! UNEXPECTED SKIP in suite $suite: \"$name\" is not in tests/expected-skips.txt (CI=true would fail)"
	return 0
}

# suite_result SUITE PASSED FAILED SKIPPED: prints the suite's last line and returns
# non-zero when it failed.  A suite that executed no test (only skips, or nothing)
# has proved nothing and counts one failure.
suite_result() {
	local suite=$1 p=$2 f=$3 s=$4
	if [ $((p + f)) -eq 0 ]; then
		echo "FAIL $suite: no test was executed"
		f=1
	fi
	echo "$p passed, $f failed, $s skipped"
	[ "$f" -eq 0 ]
}

# cmocka_run SUITE BIN: runs one cmocka test binary and adds its cases to CM_PASSED,
# CM_FAILED and CM_SKIPPED (callers set them to 0 first).  skip() shows in cmocka's
# output as "[  SKIPPED ] name" and is counted as a skip (through skip_verdict, case
# "<binary>/<test>"), never as a pass.  A binary that exits non-zero with no failure
# counted, or whose counts do not add up to the tests it ran, counts one failure.
cmocka_run() {
	local suite=$1 bin=$2 name out rc total p f s=0 sf=0 t
	name=$(basename "$bin")
	out=$(CMOCKA_MESSAGE_OUTPUT=STDOUT "$bin" 2>&1)
	rc=$?
	sum() { grep -oP "$1" <<<"$out" | awk '{ n += $1 } END { print n + 0 }'; }
	total=$(sum '^\[==========\] \K[0-9]+(?= test\(s\) run)')
	p=$(sum '^\[  PASSED  \] \K[0-9]+(?= test)')
	f=$(sum '^\[  FAILED  \] \K[0-9]+(?= test)')
	while IFS= read -r t; do
		[ -n "$t" ] || continue
		if skip_verdict "$suite" "$name/$t" "cmocka skip()"; then s=$((s + 1)); else sf=$((sf + 1)); fi
	done < <(grep -oP '^\[  SKIPPED \] \K(?![0-9]+ test\(s\)).*' <<<"$out" | sort -u)
	if [ "$f" -ne 0 ] || [ "$rc" -ne 0 ] || [ $((p + f + s + sf)) -ne "$total" ] || [ "$total" -eq 0 ]; then
		grep -E '^\[  (ERROR|FAILED|  LINE) ' <<<"$out" | sed "s|^|  $name: |"
		if [ "$f" -eq 0 ]; then
			echo "  $name: exit status $rc, $total test(s) run, $p passed, $s skipped: counted as a failure"
			f=1
		fi
	fi
	f=$((f + sf))
	echo "unit $name: $p passed, $f failed, $s skipped"
	CM_PASSED=$((CM_PASSED + p)) CM_FAILED=$((CM_FAILED + f)) CM_SKIPPED=$((CM_SKIPPED + s))
}

# wait_until TIMEOUT_S WHAT CMD [ARGS...]: runs CMD every 50 ms until it succeeds and
# returns 0; sets WAITED_MS to the time it took.  After TIMEOUT_S seconds (decimals
# allowed) it prints "timed out after TIMEOUT_S s waiting for WHAT" and returns 1.
wait_until() {
	local timeout=$1 what=$2 start now limit_us
	shift 2
	limit_us=$(awk -v t="$timeout" 'BEGIN { printf "%d", t * 1000000 }')
	start=${EPOCHREALTIME//[!0-9]/}
	until "$@"; do
		now=${EPOCHREALTIME//[!0-9]/}
		if [ $((now - start)) -ge "$limit_us" ]; then
			WAITED_MS=$(((now - start) / 1000))
			echo "wait_until: timed out after ${timeout} s waiting for $what" >&2
			return 1
		fi
		sleep 0.05
	done
	now=${EPOCHREALTIME//[!0-9]/}
	WAITED_MS=$(((now - start) / 1000))
	return 0
}
