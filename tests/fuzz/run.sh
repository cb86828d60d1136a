#!/usr/bin/env bash
# tests/fuzz/run.sh [short|long] - builds the libFuzzer harnesses (tests/fuzz/fuzz_*.c)
# in $FUZZ_BUILD (default build-fuzz, clang with -fsanitize=fuzzer,address,undefined)
# and runs each of them:
#   replay <name>  every input of corpus/<name>/ and regressions/<name>/ once;
#   fuzz <name>    libFuzzer from those inputs for FUZZ_SECONDS: 2 in short mode (the
#                  fuzz suite of `make test`), 60 in long mode (`make fuzz`); with dict/<name>.dict
#                  when there is one.
# A crash, leak, sanitizer report or broken promise fails the case; libFuzzer's input
# is left in $FUZZ_BUILD/findings/<name>/ (README.md says what to do with it). Long
# mode keeps what each harness learnt in $FUZZ_BUILD/corpus/<name>/ for the next run,
# and prints each harness's executions per second and coverage.
# Ends with "N passed, N failed, N skipped" like every suite (tests/lib.sh).
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
mode=${1:-short}
out=${FUZZ_BUILD:-build-fuzz}
case $mode in
short) seconds=${FUZZ_SECONDS:-2} ;;
long) seconds=${FUZZ_SECONDS:-60} ;;
*) echo "usage: $0 [short|long]" >&2; exit 2 ;;
esac
passed=0 failed=0 skipped=0

pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1${2:+ -- $2}"; failed=$((failed + 1)); }

if ! command -v clang >/dev/null 2>&1; then
	fail "build" "clang is missing (make deps installs it)"
	suite_result fuzz "$passed" "$failed" "$skipped"
	exit 1
fi
# -j2: the machine is shared (docs: build with at most two jobs)
mkdir -p "$out"
# a make of its own: none of the calling make's settings (CC, BUILD, SAN) apply here
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -j2 BUILD="$out" CC=clang FUZZ=1 fuzz-bins >"$out/build.log" 2>&1; then
	tail -20 "$out/build.log"
	fail "build" "make BUILD=$out CC=clang FUZZ=1 fuzz-bins failed (log: $out/build.log)"
	suite_result fuzz "$passed" "$failed" "$skipped"
	exit 1
fi
pass "build"

# The last statistics line of a libFuzzer log: "name: N exec/s, cov C, ft F".
stats() {
	local line
	line=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$2" | tail -1)
	[[ $line =~ cov:\ ([0-9]+)\ ft:\ ([0-9]+).*exec/s:\ ([0-9]+) ]] &&
		echo "  $1: ${BASH_REMATCH[3]} exec/s, cov ${BASH_REMATCH[1]}, ft ${BASH_REMATCH[2]}"
}

shopt -s nullglob
names=()
for src in tests/fuzz/fuzz_*.c; do
	n=${src#tests/fuzz/fuzz_}
	names+=("${n%.c}")
done
for d in tests/fuzz/corpus/*/ tests/fuzz/regressions/*/; do
	n=$(basename "$d")
	[ -f "tests/fuzz/fuzz_$n.c" ] || fail "corpus $n" "$d has no harness tests/fuzz/fuzz_$n.c"
done

summary=()
for n in "${names[@]}"; do
	bin=$out/tests/fuzz/fuzz_$n
	seeds=(tests/fuzz/corpus/"$n" tests/fuzz/regressions/"$n")
	[ -d "${seeds[1]}" ] || seeds=("${seeds[0]}")
	if [ ! -d "${seeds[0]}" ] || [ -z "$(ls -A "${seeds[0]}")" ]; then
		fail "replay $n" "no seed corpus in tests/fuzz/corpus/$n/"
		continue
	fi
	mkdir -p "$out/findings/$n"
	log=$out/findings/$n.log
	# -runs=0: each input once, no mutation
	if "$bin" -runs=0 -timeout=10 -artifact_prefix="$out/findings/$n/" "${seeds[@]}" >"$log" 2>&1; then
		pass "replay $n"
	else
		grep -E 'ERROR|broken promise|SUMMARY' "$log" | head -5
		fail "replay $n" "an input of ${seeds[*]} fails (log: $log)"
		continue
	fi
	if [ "$mode" = long ]; then
		work=$out/corpus/$n
		mkdir -p "$work"
	else
		work=$(mktemp -d)
	fi
	dict=()
	[ -f "tests/fuzz/dict/$n.dict" ] && dict=(-dict="tests/fuzz/dict/$n.dict")
	if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		"${dict[@]}" -artifact_prefix="$out/findings/$n/" "$work" "${seeds[@]}" >"$log" 2>&1; then
		pass "fuzz $n (${seconds}s)"
	else
		grep -E 'ERROR|broken promise|SUMMARY|Test unit written' "$log" | head -5
		fail "fuzz $n (${seconds}s)" "a finding (log: $log; input in $out/findings/$n/)"
	fi
	[ "$mode" = long ] || rm -rf "$work"
	s=$(stats "$n" "$log") && summary+=("$s")
done

if [ "${#summary[@]}" -gt 0 ]; then
	echo "fuzz: executions per second and coverage (libFuzzer's cov and ft) per harness:"
	printf '%s\n' "${summary[@]}"
fi
suite_result fuzz "$passed" "$failed" "$skipped"
