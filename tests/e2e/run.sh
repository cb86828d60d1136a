#!/usr/bin/env bash
# labd browser tests: start a throw-away daemon, drive it with headless Chromium
# (npm playwright-core + Debian's /usr/bin/chromium) through node's test runner.
#
#   BUILD=build bash tests/e2e/run.sh
#
# The last line of the output is "N passed, N failed"; the exit status is non-zero
# when a test failed or none ran.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
BUILD="${BUILD:-build}"
case "$BUILD" in /*) labd_bin="$BUILD/labd" ;; *) labd_bin="$repo/$BUILD/labd" ;; esac
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"

tmp=""
daemon_pid=""

stop_daemon() {
    [ -n "$daemon_pid" ] || return 0
    if kill -0 "$daemon_pid" 2>/dev/null; then
        kill -TERM "$daemon_pid" 2>/dev/null
        for _ in $(seq 1 100); do
            kill -0 "$daemon_pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$daemon_pid" 2>/dev/null; then
            echo "e2e: labd did not stop within 10 s of SIGTERM; killing it" >&2
            # The daemon runs in its own process group (setsid): take its children too.
            kill -KILL -- "-$daemon_pid" 2>/dev/null || kill -KILL "$daemon_pid" 2>/dev/null
        fi
    fi
    wait "$daemon_pid" 2>/dev/null
    daemon_pid=""
}

cleanup() {
    stop_daemon
    [ -n "$tmp" ] && rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A setup failure counts as one failed test, so the summary is never "0 failed" on error.
setup_failed() {
    echo "e2e: $*" >&2
    if [ -n "$tmp" ] && [ -s "$tmp/labd.log" ]; then
        echo "----- labd log -----"
        cat "$tmp/labd.log"
        echo "--------------------"
    fi
    stop_daemon
    echo "0 passed, 1 failed"
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

tmp="$(mktemp -d /tmp/labd-e2e.XXXXXX)" || setup_failed "mktemp failed"
# The web process runs as the unprivileged labd user: it must reach state_dir below.
chmod 0755 "$tmp"

port="$(node -e '
const s = require("net").createServer();
s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });
')" || setup_failed "cannot find a free port"

cat >"$tmp/labd.ini" <<EOF
[server]
listen = 127.0.0.1:$port
state_dir = $tmp/state
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

url="http://127.0.0.1:$port"
# Own session and process group, so a stuck daemon can be killed with its children.
setsid "$labd_bin" --config "$tmp/labd.ini" >"$tmp/labd.log" 2>&1 </dev/null &
daemon_pid=$!

up=""
for _ in $(seq 1 100); do
    if ! kill -0 "$daemon_pid" 2>/dev/null; then
        wait "$daemon_pid" 2>/dev/null
        rc=$?
        daemon_pid=""
        setup_failed "labd exited during start-up (status $rc)"
    fi
    code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$url/api/v1/health" 2>/dev/null)"
    if [ "$code" = "200" ]; then up=1; break; fi
    sleep 0.1
done
[ -n "$up" ] || setup_failed "GET $url/api/v1/health did not answer 200 within 10 s (last: ${code:-none})"

admin_pw=""
for _ in $(seq 1 20); do
    admin_pw="$(sed -nE 's/.*admin password[^:]*: ([^[:space:]]+).*/\1/p' "$tmp/labd.log" | head -n 1)"
    [ -n "$admin_pw" ] && break
    sleep 0.1
done
[ -n "$admin_pw" ] || setup_failed "no 'admin password ...: <password>' line in the labd log"

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
passed=0
failed=0
for f in "${files[@]}"; do
    out="$tmp/node-test.$f.out"
    # Feed the tests through tee so the TAP stream is shown as it comes and kept for the summary.
    (cd "$repo" && LABD_URL="$url" LABD_ADMIN_PASSWORD="$admin_pw" CHROMIUM="$CHROMIUM" \
        timeout "${E2E_TIMEOUT:-1500}" node --test --test-reporter=tap "tests/e2e/$f") 2>&1 | tee "$out"
    node_rc=${PIPESTATUS[0]}
    p="$(sed -nE 's/^# pass ([0-9]+)$/\1/p' "$out" | tail -n 1)"
    n="$(sed -nE 's/^# fail ([0-9]+)$/\1/p' "$out" | tail -n 1)"
    p="${p:-0}"
    n="${n:-0}"
    # A crashed or timed-out runner with no failure counted is still a failure.
    if [ "$node_rc" -ne 0 ] && [ "$n" -eq 0 ]; then
        echo "e2e: node --test $f exited with status $node_rc" >&2
        n=1
    fi
    passed=$((passed + p))
    failed=$((failed + n))
done

stop_daemon

if [ "$failed" -gt 0 ] || [ "$passed" -eq 0 ]; then
    echo "----- labd log -----"
    cat "$tmp/labd.log"
    echo "--------------------"
fi

echo "$passed passed, $failed failed"
if [ "$failed" -gt 0 ] || [ "$passed" -eq 0 ]; then
    exit 1
fi
exit 0
