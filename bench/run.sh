#!/usr/bin/env bash
# bench/run.sh - every labd benchmark in one invocation (what `make bench` runs):
#   1. proxy-bench.py  HTTP req/s + p50/p99 and WebSocket round trips through
#                      labd vs direct vs configurable-http-proxy vs nginx
#   2. start-ready.py  start-to-ready, labd (full sandbox) vs JupyterHub, JupyterLab 4 both
#   3. sandbox-start   sandbox start latency vs bwrap and unshare
#   4. egress-bench.py throughput out of an egress sandbox (pasta + nft) vs the host,
#                      to a test host in a network namespace (198.18.0.0/15); also the
#                      candidate paths of BENCH_EGRESS_ARMS
#   5. job-start       training job submit-to-command-start, cold and warm, p50/p90,
#                      beside the published managed-training figures
#   6. disk-bench.py   sequential and random read/write (fio) in a runtime's home vs the
#                      host's disk (the file system the homes' images live on)
# then a summary table of ratios measured in this run.  The peers (JupyterHub from
# PyPI, configurable-http-proxy from npm) come from bench/setup.sh, run first; the
# runtime's JupyterLab environment from deploy/install-deps.sh.  Root only (sandboxes,
# a throwaway system user for JupyterHub).  Loopback and test hosts of our own
# network namespaces only; every step has a
# time limit; everything started is stopped and every temp dir removed on exit.
# Not part of `make test`.  See bench/README.md.
#
# Env: BUILD (build), BENCH_NO_INSTALL=1 (never apt-get), and the tunables of
# proxy-bench.py / start-ready.py (BENCH_DURATION, BENCH_ROUNDS, ...).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
export BUILD=${BUILD:-build}
PY=/usr/bin/python3
export PYTHONDONTWRITEBYTECODE=1

say() { printf '%s\n' "$*" >&2; }

[ "$(id -u)" -eq 0 ] || { say "bench: run as root (labd runtimes need it; so does the JupyterHub user)"; exit 1; }

# --- dependencies: command -> Debian package
declare -A PKG=(
	[wrk]=wrk
	[nginx]=nginx
	[npm]=npm
	[bwrap]=bubblewrap
	[unshare]=util-linux
	[pasta]=passt
	[nft]=nftables
	[useradd]=passwd
	[fio]=fio
)
missing=()
for cmd in "${!PKG[@]}"; do
	command -v "$cmd" >/dev/null 2>&1 || PATH=/usr/sbin:/sbin:$PATH command -v "$cmd" >/dev/null 2>&1 ||
		missing+=("${PKG[$cmd]}")
done
[ -x "$PY" ] || missing+=(python3)
"$PY" -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
	mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
	if [ -z "${BENCH_NO_INSTALL:-}" ] && command -v apt-get >/dev/null; then
		say "bench: installing ${missing[*]}"
		DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y --no-install-recommends \
			"${missing[@]}" >&2 || { say "bench: apt-get install ${missing[*]} failed"; exit 1; }
	else
		say "bench: missing packages: ${missing[*]} (apt-get install ${missing[*]})"
		exit 1
	fi
fi
JUPYTER_ENV=${BENCH_JUPYTER_ENV:-/opt/labd/jupyter}
[ -x "$JUPYTER_ENV/bin/jupyter-lab" ] ||
	{ say "bench: no JupyterLab at $JUPYTER_ENV (deploy/install-deps.sh makes it)"; exit 1; }
if [ -z "${BENCH_NO_INSTALL:-}" ]; then
	bash bench/setup.sh || { say "bench: bench/setup.sh failed"; exit 1; }
fi
HUB_ENV=${BENCH_DIR:-/opt/labd/bench}/hub
CHP=${BENCH_DIR:-/opt/labd/bench}/chp/node_modules/.bin/configurable-http-proxy
[ -x "$HUB_ENV/bin/jupyterhub" ] && [ -x "$CHP" ] ||
	{ say "bench: JupyterHub or configurable-http-proxy missing (bash bench/setup.sh)"; exit 1; }
if [ ! -x "$BUILD/labd" ] || [ ! -x "$BUILD/labbox" ]; then
	say "bench: build labd first (make)"
	exit 1
fi

W=$(mktemp -d /var/tmp/labd-bench.XXXXXX)
chmod 755 "$W"
SUMMARY=$W/summary
: >"$SUMMARY"
CHILD=

# Kills what is left of the processes this run started: each script's own
# cleanup runs first; then anything whose cwd is still inside $W (kernels,
# single-user servers, proxies), found by pid.
cleanup() {
	set +e
	trap - EXIT INT TERM HUP
	if [ -n "$CHILD" ] && kill -0 "$CHILD" 2>/dev/null; then
		kill -TERM "$CHILD" 2>/dev/null
		for _ in $(seq 120); do kill -0 "$CHILD" 2>/dev/null || break; sleep 0.5; done
		kill -KILL "$CHILD" 2>/dev/null
	fi
	for sig in TERM KILL; do
		for p in /proc/[0-9]*; do
			case "$(readlink "$p/cwd" 2>/dev/null)" in
			"$W" | "$W"/*) kill -"$sig" "${p#/proc/}" 2>/dev/null ;;
			esac
		done
		[ "$sig" = TERM ] && sleep 1
	done
	for st in "$W"/*/labd/state "$W"/*/state; do
		[ -d "$st" ] && "$BUILD/labbox" gc --all --state-dir "$st" >/dev/null 2>&1
	done
	# egress-bench's veth arm: its host table (its veth pairs end with their sandboxes)
	nft delete table ip labd_bench_veth 2>/dev/null
	if [ -f "$W/start/hub-user-created" ]; then
		userdel "$(cat "$W/start/hub-user-created")" 2>/dev/null
	fi
	if findmnt -rn -o TARGET | grep -q "^$W"; then
		say "bench: mounts left under $W; not removing it:"
		findmnt -rn -o TARGET | grep "^$W" >&2
	else
		rm -rf "$W"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# run LIMIT CMD...: one benchmark in the background (so a signal reaches the
# trap at once), killed after LIMIT seconds.
run() {
	local limit=$1
	shift
	timeout -k 30 "$limit" "$@" &
	CHILD=$!
	wait "$CHILD"
	local rc=$?
	CHILD=
	[ "$rc" -eq 124 ] && say "bench: $* hit its ${limit}s limit"
	return "$rc"
}

t0=$(date +%s)
echo "labd benchmarks: $(date -u +%FT%TZ), $(nproc) cpus, $(uname -r), labd $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo +changes)"
pyver() { "$1/bin/python" -c "import $2; print($2.__version__)" 2>/dev/null; }
echo "peers: nginx $(nginx -v 2>&1 | sed 's/.*\///'), configurable-http-proxy $("$CHP" --version 2>/dev/null), jupyterhub $(pyver "$HUB_ENV" jupyterhub), jupyterlab $(pyver "$JUPYTER_ENV" jupyterlab), jupyter_server $(pyver "$JUPYTER_ENV" jupyter_server), wrk $(dpkg-query -W -f='${Version}' wrk 2>/dev/null)"
rc=0
echo
echo "## 1. Proxy: HTTP and WebSocket"
run 480 "$PY" bench/proxy-bench.py --workdir "$W/proxy" --summary "$SUMMARY" || rc=1
echo
echo "## 2. Start to ready"
run 420 "$PY" bench/start-ready.py --workdir "$W/start" --summary "$SUMMARY" || rc=1
echo
echo "## 3. Sandbox start (bench/sandbox-start)"
run 180 bash bench/sandbox-start "${BENCH_SANDBOX_RUNS:-100}" >"$W/sandbox.txt" || rc=1
cat "$W/sandbox.txt"
awk -v f="$SUMMARY" '
	$1 == "bwrap" { bw = $2 }
	$1 == "labbox-home-mounted" { lb = $2 }
	END { if (bw > 0 && lb > 0) printf "sandbox start\tp50 ms\t%.2f\tbwrap\t%.2f\t%.2fx\t-\t-\n", lb, bw, lb / bw >> f }' "$W/sandbox.txt"

echo
echo "## 4. Egress throughput (bench/egress-bench.py)"
run 600 "$PY" bench/egress-bench.py --workdir "$W/egress" --summary "$SUMMARY" \
	--mbytes "${BENCH_EGRESS_MBYTES:-200}" --runs "${BENCH_EGRESS_RUNS:-3}" \
	--arms "${BENCH_EGRESS_ARMS:-pasta,pasta-m9000,veth}" || rc=1

echo
echo "## 5. Training job start (bench/job-start)"
run 600 "$PY" bench/job-start --workdir "$W/jobs" --summary "$SUMMARY" \
	--runs "${BENCH_JOB_RUNS:-50}" || rc=1

echo
echo "## 6. Disk: a runtime's home vs the host (bench/disk-bench.py)"
run 600 "$PY" bench/disk-bench.py --workdir "$W/disk" --summary "$SUMMARY" \
	--runs "${BENCH_DISK_RUNS:-3}" --size-mb "${BENCH_DISK_MB:-1024}" || rc=1

echo
echo "## Summary: labd against its peers, all measured in this run ($(($(date +%s) - t0)) s)"
echo "(ratio = labd / peer; req/s and replies/s: higher is better for labd; ms, s and cpu: lower is)"
awk -F'\t' '
	BEGIN { printf "%-22s %-11s %10s  %-11s %10s %8s  %-7s %s\n", "benchmark", "metric", "labd", "peer", "peer", "ratio", "target", "met" }
	{ printf "%-22s %-11s %10s  %-11s %10s %8s  %-7s %s\n", $1, $2, $3, $4, $5, $6, $7, $8 }' "$SUMMARY"
[ -s "$SUMMARY" ] || { echo "(no results)"; rc=1; }
echo "http synthetic: backend F, nginx serving Jupyter's two responses as static files (proxy capacity);"
echo "http jupyter: labd, nginx-uds and chp-uds reach the runtime's JupyterLab (A) over its Unix socket,"
echo "  chp the same JupyterLab outside labd on TCP (B); nginx-uds/chp-uds = nginx/CHP on labd's socket."
echo "targets: req/s >=3x chp and within 1.25x of nginx (>=0.8x) (issue 4); start to ready <=0.8x JupyterHub (issue 10);"
echo "  job start p90 <300 ms cold, <50 ms warm (issue 11; the managed-training peer figures are published, not measured);"
echo "  egress >=0.5x the host both ways, a home >=0.9x the host's disk"
exit "$rc"
