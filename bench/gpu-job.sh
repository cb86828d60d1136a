#!/usr/bin/env bash
# bench/gpu-job.sh - the same PyTorch training loop (bench/gpu-train.py: a ResNet-like
# CNN, batch 256, mixed precision) directly on the host and as a labd GPU job
# inside its sandbox; prints samples/s of both, the ratio job/host (issue 11 target
# >= 0.98) and what `nvidia-smi` shows inside the sandbox (only its GPU).  One run
# takes at most 8 minutes (GPU_JOB_SECONDS of training after GPU_JOB_WARMUP of warm-up,
# each side).  Root only.  Not part of `make test` (no GPU there); docs/gpu.md says
# what ran where.
#
# Without an NVIDIA GPU it prints "no NVIDIA GPU: nothing measured" and exits 0.
# Env: BUILD (build), GPU_JOB_PYTHON (a python whose torch has CUDA, default
# /usr/bin/python3; the job's labd leaves /opt visible in its sandboxes, so a venv
# under /opt works), GPU_JOB_SECONDS (60), GPU_JOB_WARMUP (15), GPU_JOB_QUOTA (more
# [quota] lines, e.g. "network = none" on a host without pasta or nft).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
export BUILD=${BUILD:-build}
PY=${GPU_JOB_PYTHON:-/usr/bin/python3}
SECS=${GPU_JOB_SECONDS:-60}
WARM=${GPU_JOB_WARMUP:-15}

if ! ls /dev/nvidia[0-9]* >/dev/null 2>&1 || ! command -v nvidia-smi >/dev/null 2>&1; then
	echo "gpu-job: no NVIDIA GPU: nothing measured"
	exit 0
fi
[ "$(id -u)" -eq 0 ] || { echo "gpu-job: run as root (labd sandboxes)" >&2; exit 1; }
[ -x "$BUILD/labd" ] || { echo "gpu-job: build labd first (make)" >&2; exit 1; }
if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	echo "gpu-job: $PY has no PyTorch with CUDA (Debian's python3-torch is CPU only);" \
		"set GPU_JOB_PYTHON to one that has, outside /opt and the other hidden paths" >&2
	exit 1
fi
echo "gpu-job: $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -n 1), labd $(git rev-parse --short HEAD 2>/dev/null)"
echo "## host: $PY bench/gpu-train.py $SECS $WARM"
host=$(timeout 200 "$PY" bench/gpu-train.py "$SECS" "$WARM" | tee /dev/stderr | sed -n 's/^samples_per_s=\([0-9.]*\).*/\1/p')
echo "## labd GPU job"
timeout 280 /usr/bin/python3 bench/gpu-job.py --python "$PY" --seconds "$SECS" --warmup "$WARM" \
	--out "${GPU_JOB_OUT:-/dev/stdout}" | tee /tmp/gpu-job.$$ >&2
job=$(sed -n 's/^samples_per_s=\([0-9.]*\).*/\1/p' /tmp/gpu-job.$$ | tail -n 1)
rm -f /tmp/gpu-job.$$
if [ -z "$host" ] || [ -z "$job" ]; then
	echo "gpu-job: a side did not report samples/s (host '${host}', job '${job}')"
	exit 1
fi
awk -v h="$host" -v j="$job" 'BEGIN {
	r = j / h
	printf "samples/s: host %.1f, labd job %.1f, ratio %.3f (target >= 0.98: %s)\n", h, j, r, (r >= 0.98 ? "met" : "NOT met")
}'
