#!/usr/bin/env bash
# labd browser tests: start a throw-away daemon, drive it with headless Chromium
# (npm playwright-core + Debian's /usr/bin/chromium) through node's test runner.
#
#   BUILD=build bash tests/e2e/run.sh
#
# The last line of the output is "N passed, N failed, N skipped"; the exit status is
# non-zero when a test failed or none ran.  Each skipped test is named ("SKIP
# <file>/<test> -- <reason>") and checked against tests/expected-skips.txt
# (tests/lib.sh); a cancelled test counts as failed.
#
# All test files share one daemon, except a file with a same-named .ini beside it
# (login.test.mjs and login.ini): it gets a throw-away daemon of its own whose config
# adds that file's settings (a fast lockout, say, that must not throttle the others); if
# that daemon does not start, that file alone fails. Each file gets LABD_URL,
# LABD_ADMIN_PASSWORD and LABD_STATE_DIR (where its daemon keeps the database).
#
# The files of the shared daemon run one after the other; the files with a daemon of
# their own share nothing with them and run, one after the other too, beside them
# (E2E_LANES=1: every file in one row). Most of a file's time is spent waiting (a
# runtime starting, a page polling), so two rows take about half the time of one.
# Each file's TAP output is printed whole once it has ended.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
. "$repo/tests/lib.sh"
BUILD="${BUILD:-build}"
case "$BUILD" in /*) labd_bin="$BUILD/labd" ;; *) labd_bin="$repo/$BUILD/labd" ;; esac
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"

tmp=""
daemon_pid=""
file_daemon_pid=""
lane_pid=""

# stop_daemon PID: SIGTERM, then SIGKILL to its process group after 10 s.
stop_daemon() {
    local pid=$1
    [ -n "$pid" ] || return 0
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            echo "e2e: labd did not stop within 10 s of SIGTERM; killing it" >&2
            # The daemon runs in its own process group (setsid): take its children too.
            kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
        fi
    fi
    wait "$pid" 2>/dev/null
    forget_daemon "$pid"
}

# forget_daemon PID: its pid file goes (cleanup must never signal a pid reused since).
forget_daemon() {
    local pidfile
    [ -n "$tmp" ] || return 0
    for pidfile in "$tmp"/*/daemon.pid; do
        [ -f "$pidfile" ] && [ "$(cat "$pidfile")" = "$1" ] && rm -f "$pidfile"
    done
    return 0
}

show_logs() {
    local l
    for l in "$tmp"/*/labd.log; do
        [ -s "$l" ] || continue
        echo "----- labd log ($l) -----"
        cat "$l"
        echo "--------------------"
    done
}

cleanup() {
    local pidfile
    [ -n "$lane_pid" ] && kill "$lane_pid" 2>/dev/null && wait "$lane_pid" 2>/dev/null
    stop_daemon "$file_daemon_pid"
    # the other row's file daemon (start_daemon leaves each daemon's pid in its folder)
    if [ -n "$tmp" ]; then
        for pidfile in "$tmp"/*/daemon.pid; do
            [ -f "$pidfile" ] && stop_daemon "$(cat "$pidfile")"
        done
    fi
    stop_daemon "$daemon_pid"
    [ -n "$tmp" ] && rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A setup failure counts as one failed test, so the summary is never "0 failed" on error.
setup_failed() {
    echo "e2e: $*" >&2
    [ -n "$tmp" ] && show_logs
    stop_daemon "$file_daemon_pid"
    file_daemon_pid=""
    stop_daemon "$daemon_pid"
    daemon_pid=""
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
}

[ -x "$labd_bin" ] || setup_failed "no daemon binary at $labd_bin (run make first)"
command -v node >/dev/null || setup_failed "node is not installed (deploy/install-deps.sh)"
[ -x "$CHROMIUM" ] || setup_failed "no Chromium at $CHROMIUM (apt-get install chromium)"

if [ ! -d "$here/node_modules/playwright-core" ]; then
    echo "e2e: installing playwright-core (npm ci)"
    # playwright-core never downloads a browser; the variable makes sure of it.
    (cd "$here" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund) \
        || setup_failed "npm ci failed in tests/e2e"
fi

# uPlot for the console's and dashboard's charts (deploy/install-deps.sh does it too).
bash "$repo/deploy/vendor-web.sh" || setup_failed "deploy/vendor-web.sh failed (npm ci in web/vendor)"

tmp="$(mktemp -d /tmp/labd-e2e.XXXXXX)" || setup_failed "mktemp failed"
# The web process runs as the unprivileged labd user: it must reach state_dir below.
chmod 0755 "$tmp"

# daemon_failed NAME MESSAGE: the shared daemon failing ends the run; a test file's own
# daemon failing (say, a setting this build does not know) fails only that file.
daemon_failed() {
    [ "$1" = main ] && setup_failed "$2"
    echo "e2e: $2" >&2
    [ -s "$tmp/$1/labd.log" ] && { echo "----- labd log ($1) -----"; cat "$tmp/$1/labd.log"; }
    return 1
}

# start_daemon NAME [EXTRA_INI]: a throw-away labd in $tmp/NAME whose config is the base
# below plus EXTRA_INI's settings; sets DAEMON_PID, DAEMON_URL, DAEMON_PW and DAEMON_STATE;
# returns non-zero when a file's own daemon did not come up.
start_daemon() {
    local name=$1 extra=${2:-} dir="$tmp/$1" port code="" up="" st
    mkdir -p "$dir" && chmod 0755 "$dir"
    port="$(node -e '
const s = require("net").createServer();
s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });
')" || setup_failed "cannot find a free port"
    cat >"$dir/labd.ini" <<EOF
[server]
listen = 127.0.0.1:$port
state_dir = $dir/state
web_root = $repo/web
[auth]
scrypt_n = 1024
min_password_length = 10
[runtime]
; runtime.test.mjs: a small home and memory limit, no idle culling mid-test, and a CPU
; limit under the first warn_before lead time (30m) so the dashboard's warning shows
home_size = 1G
memory = 2G
idle_timeout = 0
cpu_limit = 20m
EOF
    # @REPO@ and @BUILD@ in a file's .ini and .env: this checkout and its build folder
    # (the stand-in NVML of gpu_devices.ini lives there)
    local build_abs
    case "$BUILD" in /*) build_abs=$BUILD ;; *) build_abs=$repo/$BUILD ;; esac
    if [ -n "$extra" ]; then
        { echo "; from $extra"; sed -e "s|@REPO@|$repo|g" -e "s|@BUILD@|$build_abs|g" "$extra"; } \
            >>"$dir/labd.ini"
    fi
    DAEMON_URL="http://127.0.0.1:$port"
    # A test file's NAME.env (KEY=VALUE lines, e.g. a LABD_FAULT_* injection) goes into
    # its daemon's environment.
    local envs=()
    if [ -n "$extra" ] && [ -f "${extra%.ini}.env" ]; then
        mapfile -t envs < <(grep -E '^[A-Z_][A-Z0-9_]*=' "${extra%.ini}.env" |
            sed -e "s|@REPO@|$repo|g" -e "s|@BUILD@|$build_abs|g")
    fi
    # Own session and process group, so a stuck daemon can be killed with its children.
    env "${envs[@]}" setsid "$labd_bin" --config "$dir/labd.ini" >"$dir/labd.log" 2>&1 </dev/null &
    DAEMON_PID=$!
    echo "$DAEMON_PID" >"$dir/daemon.pid"
    for _ in $(seq 1 100); do
        if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
            wait "$DAEMON_PID" 2>/dev/null
            st=$?
            forget_daemon "$DAEMON_PID"
            daemon_failed "$name" "labd ($name) exited during start-up (status $st)"
            return 1
        fi
        code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$DAEMON_URL/api/v1/health" 2>/dev/null)"
        if [ "$code" = "200" ]; then up=1; break; fi
        sleep 0.1
    done
    if [ -z "$up" ]; then
        daemon_failed "$name" "GET $DAEMON_URL/api/v1/health ($name) did not answer 200 within 10 s (last: ${code:-none})"
        stop_daemon "$DAEMON_PID"
        return 1
    fi
    DAEMON_PW=""
    for _ in $(seq 1 20); do
        DAEMON_PW="$(sed -nE 's/.*admin password[^:]*: ([^[:space:]]+).*/\1/p' "$dir/labd.log" | head -n 1)"
        [ -n "$DAEMON_PW" ] && break
        sleep 0.1
    done
    if [ -z "$DAEMON_PW" ]; then
        daemon_failed "$name" "no 'admin password ...: <password>' line in $dir/labd.log"
        stop_daemon "$DAEMON_PID"
        return 1
    fi
    # Tests that seed the real database before they look (console.test.mjs) find it here.
    DAEMON_STATE="$dir/state"
}

start_daemon main
daemon_pid=$DAEMON_PID url=$DAEMON_URL admin_pw=$DAEMON_PW state=$DAEMON_STATE

# The test files share the daemon and its admin, so they run one after the other, in
# name order, except runtime.test.mjs (slow: it starts and stops real runtimes), which runs
# last so the other files see an admin without a runtime. E2E_TESTS="a.test.mjs ..." runs
# only those files, in that order.
if [ -n "${E2E_TESTS:-}" ]; then
    read -r -a files <<<"$E2E_TESTS"
else
    files=()
    while IFS= read -r f; do
        [ "$f" = "runtime.test.mjs" ] || files+=("$f")
    done < <(cd "$here" && ls -1 -- *.test.mjs 2>/dev/null | LC_ALL=C sort)
    [ -f "$here/runtime.test.mjs" ] && files+=("runtime.test.mjs")
fi
[ "${#files[@]}" -gt 0 ] || setup_failed "no *.test.mjs files in $here"

echo "e2e: labd is up at $url (pid $daemon_pid); running the browser tests: ${files[*]}"

# run_file FILE: runs one test file (with its own daemon when it has an .ini) and
# leaves "PASSED FAILED SKIPPED" in $tmp/counts.FILE and its TAP output in
# $tmp/node-test.FILE.out, printed whole when it ends (a lock keeps the two rows'
# outputs apart).
run_file() {
    local f=$1 out="$tmp/node-test.$1.out" f_url=$url f_pw=$admin_pw f_state=$state
    local ini="$here/${1%.test.mjs}.ini" p n c s=0 node_rc title reason
    if [ -f "$ini" ]; then
        if ! start_daemon "${f%.test.mjs}" "$ini" >"$out" 2>&1; then
            echo "e2e: $f not run: its own labd did not start" >>"$out"
            echo "0 1 0" >"$tmp/counts.$f"
            flock "$tmp/print.lock" cat "$out"
            return
        fi
        file_daemon_pid=$DAEMON_PID f_url=$DAEMON_URL f_pw=$DAEMON_PW f_state=$DAEMON_STATE
        echo "e2e: $f gets its own labd at $f_url (pid $file_daemon_pid, settings from $(basename "$ini"))" >"$out"
    else
        : >"$out"
    fi
    (cd "$repo" && LABD_URL="$f_url" LABD_ADMIN_PASSWORD="$f_pw" LABD_STATE_DIR="$f_state" CHROMIUM="$CHROMIUM" \
        timeout "${E2E_TIMEOUT:-1500}" node --test --test-reporter=tap "tests/e2e/$f") >>"$out" 2>&1
    node_rc=$?
    if [ -n "$file_daemon_pid" ]; then
        stop_daemon "$file_daemon_pid" >>"$out" 2>&1
        file_daemon_pid=""
    fi
    p="$(sed -nE 's/^# pass ([0-9]+)$/\1/p' "$out" | tail -n 1)"
    n="$(sed -nE 's/^# fail ([0-9]+)$/\1/p' "$out" | tail -n 1)"
    c="$(sed -nE 's/^# cancelled ([0-9]+)$/\1/p' "$out" | tail -n 1)"
    p="${p:-0}"
    n=$((${n:-0} + ${c:-0}))
    # A crashed or timed-out runner with no failure counted is still a failure.
    if [ "$node_rc" -ne 0 ] && [ "$n" -eq 0 ]; then
        echo "e2e: node --test $f exited with status $node_rc" >>"$out"
        n=1
    fi
    # Skipped tests, by name: "ok N - <title> # SKIP <reason>"
    while IFS=$'\t' read -r title reason; do
        [ -n "$title" ] || continue
        if skip_verdict e2e "$f/$title" "${reason:-no reason given}" >>"$out" 2>&1; then
            s=$((s + 1))
        else
            n=$((n + 1))
        fi
    done < <(sed -nE 's/^ *ok [0-9]+ - (.*) # SKIP ?(.*)$/\1\t\2/p' "$out")
    echo "$p $n $s" >"$tmp/counts.$f"
    flock "$tmp/print.lock" cat "$out"
}

# A file that adds or removes network interfaces on the machine (a line
# "// e2e: alone" in it) runs after both rows: Chromium aborts the requests it has
# in flight (ERR_NETWORK_CHANGED) when the machine's interfaces change.
shared=() own=() alone=()
for f in "${files[@]}"; do
    if [ "${E2E_LANES:-2}" -gt 1 ] && grep -q '^// e2e: alone' "$here/$f"; then alone+=("$f")
    elif [ -f "$here/${f%.test.mjs}.ini" ] && [ "${E2E_LANES:-2}" -gt 1 ]; then own+=("$f")
    else shared+=("$f"); fi
done
if [ "${#own[@]}" -gt 0 ]; then
    (for f in "${own[@]}"; do run_file "$f"; done) &
    lane_pid=$!
fi
for f in "${shared[@]}"; do run_file "$f"; done
[ -n "$lane_pid" ] && wait "$lane_pid"
lane_pid=""
for f in "${alone[@]}"; do run_file "$f"; done

passed=0
failed=0
skipped=0
for f in "${files[@]}"; do
    if read -r p n s 2>/dev/null <"$tmp/counts.$f"; then
        passed=$((passed + p)) failed=$((failed + n)) skipped=$((skipped + s))
    else
        echo "e2e: $f left no result" >&2
        failed=$((failed + 1))
    fi
done

stop_daemon "$daemon_pid"
daemon_pid=""

if [ "$failed" -gt 0 ] || [ "$passed" -eq 0 ]; then
    show_logs
fi

suite_result e2e "$passed" "$failed" "$skipped"
