#!/usr/bin/env bash
# tests/lint/run.sh - tests/lint/check-words.sh must pass on the tree and fail on each
# kind of planted violation, naming it; and fail when a known violation is gone. Works on
# a copy (sources, the built objects, the known list). Then make analyze on planted
# bugs. Ends "N passed, N failed".
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
CHECK=$ROOT/tests/lint/check-words.sh
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
pass=0 fail=0

fresh() {
	rm -rf "$WORK/t"
	mkdir -p "$WORK/t/tests/lint" "$WORK/t/build"
	(cd "$ROOT" && cp -r common include sandbox server "$WORK/t/")
	cp "$ROOT/tests/lint/known-words.txt" "$WORK/t/tests/lint/"
	(cd "$ROOT/$BUILD" && find common sandbox server -name '*.o' -exec cp --parents {} "$WORK/t/build/" \;)
}

# expect NAME WANT(ok|fail) PATTERN: runs the check on the copy
expect() {
	local out rc
	out=$(bash "$CHECK" "$WORK/t" "$WORK/t/build" 2>&1)
	rc=$?
	if [ "$2" = ok ] && [ $rc -eq 0 ] && grep -q "words: ok" <<<"$out"; then
		pass=$((pass + 1)); echo "PASS $1"
	elif [ "$2" = fail ] && [ $rc -ne 0 ] && grep -qE "$3" <<<"$out"; then
		pass=$((pass + 1)); echo "PASS $1"
	else
		fail=$((fail + 1)); echo "FAIL $1 (rc $rc): $out"
	fi
}

object() { # object FOLDER NAME C-TEXT: a built object planted in the copy
	printf '%s\n' "$3" >"$WORK/src.c"
	mkdir -p "$WORK/t/build/$1"
	cc -c "$WORK/src.c" -o "$WORK/t/build/$1/$2.o"
	cp "$WORK/src.c" "$WORK/t/$1/$2.c" # an object without its source is no module
}

if ! find "$ROOT/$BUILD/server" -name '*.o' 2>/dev/null | grep -q .; then
	echo "FAIL no built objects in $BUILD (run make tests)"
	echo "0 passed, 1 failed, 0 skipped"
	exit 1
fi

fresh
expect "the tree itself passes" ok ""

fresh
printf '#ifndef LABD_CONFIG_H\n#define LABD_CONFIG_H\n#endif\n' >"$WORK/t/server/config/planted.h"
expect "an include guard used twice fails" fail \
	'include guard LABD_CONFIG_H used by server/config/config.h server/config/planted.h'

fresh
printf 'struct cidr {\n\tint x;\n};\n' >"$WORK/t/server/store/planted.h"
expect "a struct tag defined twice fails" fail \
	'tag cidr defined in server/config/cidr.h server/store/planted.h'

fresh
printf 'enum item_ctx { A };\n' >>"$WORK/t/server/auth/login.c"
expect "an enum reusing a struct's tag fails" fail \
	'tag item_ctx defined in server/auth/login.c server/config/kinds.c'

fresh
printf 'struct kind {\n\tint x;\n};\n' >"$WORK/t/server/store/planted.h"
expect "a tag first defined after qualifiers (static const struct kind) counts" fail \
	'tag kind defined in server/config/kinds.c server/store/planted.h'

fresh
printf 'struct planted {\n\tint x;\n};\n' | tee "$WORK/t/server/proxy/planted.h" >"$WORK/t/server/store/planted.h"
echo 'tag planted server/proxy/planted.h server/store/planted.h -- planted' >>"$WORK/t/tests/lint/known-words.txt"
expect "a known tag passes" ok ""
printf 'struct planted {\n\tint x;\n};\n' >"$WORK/t/server/api/planted.h"
expect "a known tag defined once more fails" fail \
	'tag planted defined in server/api/planted.h server/proxy/planted.h server/store/planted.h'

fresh
object server/proxy planted 'int users_planted(void) { return 0; }'
expect "a prefix of store/ exported by proxy/ fails" fail 'exported prefix users_ in server/proxy server/store'

fresh
object server/api job_observe 'int job_observe_planted(void) { return 0; }'
expect "an object's name is its prefix (job_observe_ in api/ and store/)" fail \
	'exported prefix job_observe_ in server/api server/store'

fresh
object server/api planted 'static int users_hidden(void) { return 0; } int planted_x(void) { return users_hidden(); }'
expect "a static function exports no prefix" ok ""

fresh
printf '#define SWEEP_INTERVAL 5\n' >>"$WORK/t/server/store/sessions.c"
expect "a period without its unit fails" fail \
	'period SWEEP_INTERVAL has no unit .* in server/store/sessions.c'

fresh
printf '#define LOGIN_TIMEOUT_LIMIT 5\n' >>"$WORK/t/include/labd/log.h"
expect "a timeout without its unit fails" fail \
	'period LOGIN_TIMEOUT_LIMIT has no unit .* in include/labd/log.h'

fresh
printf '#define SWEEP_EVERY_MS 5\n#define RETRY_TIMEOUT_S 5\n#define X_TICK_US 1\n' >>"$WORK/t/server/store/sessions.c"
expect "periods ending in their unit pass" ok ""

fresh
printf '#ifndef LABD_CONFIG_H\n#define LABD_CONFIG_H\n#endif\n' >"$WORK/t/server/config/planted.h"
echo 'guard LABD_CONFIG_H server/config/config.h server/config/planted.h -- planted' >>"$WORK/t/tests/lint/known-words.txt"
expect "a known guard passes" ok ""
sed -i 's/LABD_CONFIG_H/LABD_PLANTED_H/' "$WORK/t/server/config/planted.h"
expect "a known violation that is gone fails, naming its line" fail \
	'known-words.txt:[0-9]+: "guard LABD_CONFIG_H server/config/config.h server/config/planted.h" is gone'

fresh
echo 'tag nosuch server/nowhere.c -- planted' >>"$WORK/t/tests/lint/known-words.txt"
expect "a known line naming nothing fails" fail '"tag nosuch server/nowhere.c" is gone'

# make analyze (gcc -fanalyzer): a planted bug of each kind fails it, naming the check;
# a clean file passes. Each runs alone (ANALYZE_SRCS) into its own build folder.
analyze() { # analyze NAME WANT(ok|fail) PATTERN C-TEXT
	local out rc
	rm -rf "$WORK/an"
	mkdir -p "$WORK/an"
	printf '#include <stdlib.h>\n%s\n' "$4" >"$WORK/an/planted.c"
	out=$(make -s -C "$ROOT" BUILD="$WORK/an/b" ANALYZE_SRCS="$WORK/an/planted.c" analyze 2>&1)
	rc=$?
	if [ "$2" = ok ] && [ $rc -eq 0 ] && grep -q "analyze: 1 files, no finding" <<<"$out"; then
		pass=$((pass + 1)); echo "PASS $1"
	elif [ "$2" = fail ] && [ $rc -ne 0 ] && grep -qE "$3" <<<"$out"; then
		pass=$((pass + 1)); echo "PASS $1"
	else
		fail=$((fail + 1)); echo "FAIL $1 (rc $rc): $out"
	fi
}
analyze "analyze: a clean file passes" ok "" 'int planted(int x) { return x + 1; }'
analyze "analyze: a use after free fails" fail 'analyzer-use-after-free' \
	'int planted(void) { int *p = malloc(4); if (!p) return 0; *p = 1; free(p); return *p; }'
analyze "analyze: a leak fails" fail 'analyzer-malloc-leak' \
	'int planted(void) { char *p = malloc(8); if (!p) return 0; p[0] = 1; return p[0]; }'
analyze "analyze: an unchecked malloc fails" fail 'analyzer-possible-null-dereference' \
	'int planted(void) { int *p = malloc(4); *p = 1; int v = *p; free(p); return v; }'

echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
