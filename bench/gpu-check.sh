#!/usr/bin/env bash
# bench/gpu-check.sh - what an NVIDIA GPU host shows to labd, in one prepared run (for
# a machine with a GPU; not part of `make test`).  Prints, each under its own heading:
#   1. the host: GPU, driver, kernel, cgroup mode, and where the driver's libraries
#      are found (the loader's cache, or only LD_LIBRARY_PATH: then set
#      [gpu] driver_lib_dir);
#   2. `labd doctor` with [gpu] devices = auto (its OK/WARN/FAIL lines and remedies);
#   3. a short GPU job (bench/gpu-job.sh: the same training loop on the host and as a
#      labd job, /opt visible inside, samples/s and the ratio);
#   4. whether a GPU runtime can start: labd's JupyterLab environment ([runtime]
#      jupyter_env, made by deploy/install-deps.sh) is there, or why not;
#   5. a GPU job through a restart of labd (bench/gpu-restart.py);
#   6. a job with two GPUs: torchrun with NCCL, one process per GPU (bench/gpu-multi.py),
#      where the machine has two or more GPUs (otherwise one line says it was skipped);
#   7. MIG, read only: each card's MIG mode and instances, the devices labd hands out,
#      and where the owner enabled MIG a job on an instance (bench/gpu-mig.py; never
#      changes MIG settings).
# Root only.  Exits 1 when a step that could run failed.
# Env: BUILD (build), GPU_JOB_PYTHON (a python whose torch has CUDA), GPU_CHECK_QUOTA
# (more [quota] lines for every labd here, e.g. "network = none" on a host without
# pasta or nft), GPU_JOB_SECONDS (20), GPU_JOB_WARMUP (5), GPU_CHECK_ONLY=host (steps
# 1 and 2 only), GPU_CHECK_ONLY=multi (step 6 only), GPU_CHECK_ONLY=mig (step 7 only).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
export BUILD=${BUILD:-build}
export GPU_JOB_SECONDS=${GPU_JOB_SECONDS:-20} GPU_JOB_WARMUP=${GPU_JOB_WARMUP:-5}
export GPU_JOB_QUOTA=${GPU_CHECK_QUOTA:-} GPU_RESTART_QUOTA=${GPU_CHECK_QUOTA:-}
export GPU_MULTI_QUOTA=${GPU_CHECK_QUOTA:-}
JUPYTER_ENV=${GPU_CHECK_JUPYTER_ENV:-/opt/labd/jupyter}
failed=0

if ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
	echo "gpu-check: no NVIDIA GPU: nothing to check"
	exit 0
fi
[ "$(id -u)" -eq 0 ] || { echo "gpu-check: run as root" >&2; exit 1; }
[ -x "$BUILD/labd" ] || { echo "gpu-check: build labd first (make)" >&2; exit 1; }
id labd >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin labd

# step 6: two GPUs in one job (bench/gpu-multi.py says when the machine has fewer)
multi() {
	echo "## 6. a job with two GPUs"
	/usr/bin/python3 bench/gpu-multi.py || failed=1
}
if [ "${GPU_CHECK_ONLY:-}" = multi ]; then
	multi
	exit $failed
fi
# step 7: MIG instances (read only)
mig() {
	echo "## 7. MIG (read only)"
	GPU_MIG_QUOTA=${GPU_CHECK_QUOTA:-} /usr/bin/python3 bench/gpu-mig.py || failed=1
}
if [ "${GPU_CHECK_ONLY:-}" = mig ]; then
	mig
	exit $failed
fi

echo "## 1. host"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>&1
echo "kernel $(uname -r); cgroup: $(stat -fc %T /sys/fs/cgroup) at /sys/fs/cgroup" \
	"($( [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] && echo 'pure v2' || echo 'v1 or hybrid'))"
if ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so\.1'; then
	echo "driver libraries: in the loader's cache ($(ldconfig -p | sed -n 's/.*libnvidia-ml\.so\.1 .*=> //p' | head -n 1))"
else
	echo "driver libraries: not in the loader's cache; LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} (set [gpu] driver_lib_dir)"
	path=${GPU_HOST_LD_PATH:-${LD_LIBRARY_PATH:-}}
	for d in ${path//:/ }; do
		if [ -e "$d/libcuda.so.1" ]; then
			export GPU_DRIVER_LIB_DIR=$d
			echo "the labd daemons here get [gpu] driver_lib_dir = $d"
			break
		fi
	done
fi

echo "## 2. labd doctor"
w=$(mktemp -d /var/tmp/labd-gpu-check.XXXXXX)
chmod 755 "$w"
printf '[server]\nstate_dir = %s/state\n\n[gpu]\ndevices = auto\n%s' "$w" \
	"${GPU_DRIVER_LIB_DIR:+driver_lib_dir = $GPU_DRIVER_LIB_DIR
}" > "$w/labd.ini"
"$BUILD/labd" --config "$w/labd.ini" doctor
echo "(doctor exit status $?)"
rm -rf "$w"

[ "${GPU_CHECK_ONLY:-}" = host ] && exit 0

echo "## 3. a GPU job"
# through a pipe: gpu-job.sh tees to /dev/stderr, which, were it this script's log
# file, would be opened anew and cut to nothing
bash bench/gpu-job.sh 2>&1 | cat
[ "${PIPESTATUS[0]}" -eq 0 ] || failed=1

echo "## 4. a GPU runtime"
if [ -x "$JUPYTER_ENV/bin/jupyter-lab" ]; then
	echo "JupyterLab environment at $JUPYTER_ENV: a GPU runtime can start here; start one" \
		"from the dashboard and run nvidia-smi in its terminal"
else
	echo "skipped: no JupyterLab environment at $JUPYTER_ENV (deploy/install-deps.sh makes it; this host reaches no package registry)"
fi

echo "## 5. a GPU job through a restart of labd"
/usr/bin/python3 bench/gpu-restart.py || failed=1

multi
mig

echo "gpu-check: $([ $failed -eq 0 ] && echo 'every step that could run passed' || echo 'a step FAILED')"
exit $failed
