#!/usr/bin/env bash
# tests/layers/run.sh - make check-layers must pass on the tree and fail on
# each kind of planted violation. Works on a copy; ends "N passed, N failed".
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
CHECK=$ROOT/tests/layers/check-layers.sh
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
pass=0 fail=0

fresh() {
	rm -rf "$WORK/t"
	mkdir -p "$WORK/t"
	(cd "$ROOT" && cp -r common include sandbox server "$WORK/t/")
	mkdir -p "$WORK/t/build"
}

# expect NAME WANT(ok|fail) PATTERN: runs the check on the copy
expect() {
	local out rc
	out=$(bash "$CHECK" "$WORK/t" "$WORK/t/build" 2>&1)
	rc=$?
	if [ "$2" = ok ] && [ $rc -eq 0 ] && grep -q "layers: ok" <<<"$out"; then
		pass=$((pass + 1)); echo "PASS $1"
	elif [ "$2" = fail ] && [ $rc -ne 0 ] && grep -qE "$3" <<<"$out"; then
		pass=$((pass + 1)); echo "PASS $1"
	else
		fail=$((fail + 1)); echo "FAIL $1 (rc $rc): $out"
	fi
}

plant() { # plant FILE LINE: inserts an include after the file's first include
	sed -i "0,/^#include/s||$2\n#include|" "$WORK/t/$1"
}

fresh
expect "the tree itself passes" ok ""

fresh
plant server/supervisor/supervisor.c '#include "store/db.h"'
expect "root-side code including the store fails" fail \
	'supervisor/supervisor.c:[0-9]+: root-side supervisor includes "store/db.h" from store'

fresh
plant server/store/users.c '#include "web/web.h"'
expect "a folder including one above it fails" fail 'store/users.c:[0-9]+: store \(layer 2\) includes "web/web.h" from web'

fresh
plant server/proxy/proxy.c '#include "api/api.h"'
expect "siblings of one layer including each other fails" fail 'proxy/proxy.c:[0-9]+: proxy \(layer 9\) includes "api/api.h" from api \(layer 9\)'

fresh
plant include/labd/log.h '#include "http/http.h"'
expect "a common contract including the HTTP layer fails" fail 'include/labd/log.h:[0-9]+: root-side common includes "http/http.h"'

fresh
mkdir -p "$WORK/t/server/gizmo"
echo '#include "labd/log.h"' >"$WORK/t/server/gizmo/gizmo.c"
expect "a folder outside the documented order fails" fail 'server/gizmo/gizmo.c: folder not in the layer order'

# root-side objects naming store or HTTP symbols, without any include
fresh
mkdir -p "$WORK/t/build/server/supervisor" "$WORK/t/build/sandbox"
printf 'int sqlite3_open(const char *, void **);\nint f(void **db) { return sqlite3_open("x", db); }\n' >"$WORK/src1.c"
cc -c "$WORK/src1.c" -o "$WORK/t/build/server/supervisor/planted.o"
expect "a supervisor object calling sqlite3 fails" fail 'server/supervisor/planted.o: root-side code references sqlite3_open'
rm -f "$WORK/t/build/server/supervisor/planted.o"
printf 'void http_reply_error(void);\nvoid g(void) { http_reply_error(); }\n' >"$WORK/src2.c"
cc -c "$WORK/src2.c" -o "$WORK/t/build/sandbox/planted.o"
expect "a sandbox object calling the HTTP layer fails" fail 'sandbox/planted.o: root-side code references http_reply_error'

# the real objects, when built, are clean
if [ -d "$ROOT/$BUILD/server/supervisor" ]; then
	out=$(bash "$CHECK" "$ROOT" "$ROOT/$BUILD" 2>&1)
	if [ $? -eq 0 ]; then pass=$((pass + 1)); echo "PASS the built objects of $BUILD pass"; else fail=$((fail + 1)); echo "FAIL built objects: $out"; fi
else
	fail=$((fail + 1)); echo "FAIL no built objects in $BUILD (run make tests)"
fi

echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
