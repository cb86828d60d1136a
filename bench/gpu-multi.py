"""A training job with two GPUs, on a machine that has two (a device check, not part of
`make test`): a labd with `[gpu] devices = auto` runs a job with `gpu_count: 2` whose
command is `torchrun --nproc_per_node=$SM_NUM_GPUS` (PyTorch's own launcher, run as
`python -m torch.distributed.run` of GPU_JOB_PYTHON) with the NCCL backend: each rank
takes the GPU of its LOCAL_RANK, all_reduces a 256 MiB tensor a few times and prints
its device, the sum and the bus bandwidth. Checked: the job Completes; both ranks
report the right sum on two different GPUs; `nvidia-smi -L` inside lists exactly two
GPUs; CUDA_VISIBLE_DEVICES is 0,1 and SM_NUM_GPUS 2; the job names its two host GPUs;
the ledger counts its seconds twice. Prints one line per check and
`gpu-multi: N passed, N failed`. Root only.

A machine with fewer than two GPUs prints `gpu-multi: skipped: ...` and exits 0.
GPU_MULTI_CPU=1 runs the same flow on two stand-in GPUs with the gloo backend on the
CPU (no nvidia-smi check), to try the script without GPUs. GPU_MULTI_GPUS=N asks for N
GPUs instead of two (1: torchrun and NCCL in a job sandbox on a one-GPU machine).

Env: GPU_JOB_PYTHON (a python whose torch has CUDA and NCCL, visible in a sandbox: this
script sets hidden_paths to /srv,/mnt,/media so /opt is seen), GPU_MULTI_QUOTA (more
[quota] lines, e.g. "network = none\n" on a host without pasta and nft)."""

import glob
import os
import re
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
import importlib.util  # noqa: E402

spec = importlib.util.spec_from_file_location("proxylib", os.path.join(HERE, "proxy-lib.py"))
L = importlib.util.module_from_spec(spec)
spec.loader.exec_module(L)

# one rank of the job: its GPU from LOCAL_RANK, as scripts for managed training do
RANK = r"""
import os, time, torch, torch.distributed as dist
cpu = os.environ.get("GPU_MULTI_CPU") == "1"
local = int(os.environ["LOCAL_RANK"])
if not cpu:
    torch.cuda.set_device(local)
dist.init_process_group("gloo" if cpu else "nccl")
rank, world = dist.get_rank(), dist.get_world_size()
dev = torch.device("cpu") if cpu else torch.device("cuda", local)
n = (1 << 20) if cpu else (64 << 20)  # floats: 4 MiB on the CPU, 256 MiB on a GPU
x = torch.full((n,), float(rank + 1), device=dev)
dist.all_reduce(x)
if not cpu:
    torch.cuda.synchronize()
t0, reps = time.perf_counter(), 5
for _ in range(reps):
    dist.all_reduce(x)
if not cpu:
    torch.cuda.synchronize()
secs = (time.perf_counter() - t0) / reps
# after 1 + reps all_reduces every element is (1 + ... + world) * world**reps
busbw = 2 * (world - 1) / world * n * 4 / secs / 1e9
name = "cpu" if cpu else torch.cuda.get_device_name(local)
bus = "cpu" if cpu else str(getattr(torch.cuda.get_device_properties(local), "uuid", local))
os.write(1, f"rank={rank} local_rank={local} world={world} device={name} "
            f"first={x[0].item():g} busbw_gbs={busbw:.1f} uuid={bus}\n".encode())
dist.destroy_process_group()
"""

results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail and not ok else ''}", flush=True)


def call(labd, method, path, body=None):
    st, _, raw = L.request(labd.port, method, path, body=body, headers=labd.auth(), timeout=30)
    return st, (L.jbody(raw) if raw[:1] in (b"{", b"[") else raw)


def job(labd, job_id):
    st, j = call(labd, "GET", f"/api/v1/jobs/{job_id}")
    return j if st == 200 else None


def gpus_here():
    """The GPUs of this machine: nvidia-smi's list, else the device nodes."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        if out.returncode == 0:
            return len([ln for ln in out.stdout.splitlines() if ln.startswith("GPU ")])
    except (OSError, subprocess.TimeoutExpired):
        pass
    return len(glob.glob("/dev/nvidia[0-9]*"))


def torchrun_flags(py):
    """PyTorch 1.x on Python 3.11 (Debian 12's) reads torchrun's default "--redirects 0
    --tee 0" as None and fails to launch; a mapping for a rank that does not exist means
    the same as "0" there. PyTorch 2 needs nothing."""
    v = subprocess.run([py, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                       text=True).stdout.strip()
    return "--redirects 9:1 --tee 9:1 " if v.startswith("1.") else ""


def main():
    cpu = os.environ.get("GPU_MULTI_CPU") == "1"
    want = int(os.environ.get("GPU_MULTI_GPUS", "2"))
    n = gpus_here()
    if not cpu and n < want:
        print(f"gpu-multi: skipped: this machine has {n} GPU{'' if n == 1 else 's'}; the {want}-GPU "
              f"case (torchrun with NCCL, one process per GPU) needs {want}", flush=True)
        return 0
    py = os.environ.get("GPU_JOB_PYTHON", "/usr/bin/python3")
    L.install_signal_exit()
    w = tempfile.mkdtemp(prefix="labd-gpu-multi.", dir="/var/tmp")
    os.chmod(w, 0o755)
    procs = L.Procs(os.path.join(w, "pids"))
    labd = L.Labd(procs, os.path.join(w, "labd"),
                  runtime={"gpu_limit": "1h", "home_size": "4G", "memory": "16G",
                           "hidden_paths": "/srv,/mnt,/media"})
    with open(labd.config, "a") as fh:
        fh.write("\n[gpu]\n" + (f"stand_in = {want}\n" if cpu else "devices = auto\n" + L.driver_lib_line())
                 + f"\n[quota]\ngpu_per_24h = 24h\ngpus_per_runtime = {want}\n"
                 + os.environ.get("GPU_MULTI_QUOTA", ""))
    try:
        labd.start()
        labd.setup_user("bench")
        shell = ("echo cvd=$CUDA_VISIBLE_DEVICES sm=$SM_NUM_GPUS; "
                 + ("" if cpu else "nvidia-smi -L | sed 's/^/smi: /'; ")
                 + 'printf %s "$RANK_PY" > /tmp/rank.py && '
                 + f'"{py}" -m torch.distributed.run {torchrun_flags(py)}--standalone --nnodes=1 '
                 + "--nproc_per_node=$SM_NUM_GPUS /tmp/rank.py")
        body = {"name": "gpu-multi", "type": "gpu", "gpu_count": want,
                "command": ["/bin/sh", "-c", shell],
                "environment": {"RANK_PY": RANK, "GPU_MULTI_CPU": "1" if cpu else "0",
                                "NCCL_DEBUG": "WARN"}}
        st, j = call(labd, "POST", "/api/v1/jobs", body)
        check(f"{want}-GPU job submitted", st == 201, f"{st} {j}")
        jid = j["id"]
        L.wait_until(lambda: (job(labd, jid) or {}).get("status") in ("Completed", "Failed", "Stopped"),
                     300, 0.5)
        j = job(labd, jid)
        st, log = call(labd, "GET", f"/api/v1/jobs/{jid}/logs")
        text = log.decode("utf-8", "replace") if isinstance(log, bytes) else str(log)
        print(text[-4000:], flush=True)
        check("job Completed", j["status"] == "Completed", f"{j.get('status')} {j.get('failure_reason')}")
        check(f"the job binds {want} host GPUs", len(j.get("gpus") or []) == want, str(j.get("gpus")))
        # stand-in GPUs have no device node, so no CUDA_VISIBLE_DEVICES either
        cvd = "" if cpu else ",".join(str(i) for i in range(want))
        check(f"CUDA_VISIBLE_DEVICES '{cvd}' and SM_NUM_GPUS {want}", f"cvd={cvd} sm={want}" in text,
              text[:300])
        if not cpu:
            smi = [ln for ln in text.splitlines() if ln.startswith("smi: GPU ")]
            check(f"nvidia-smi inside lists exactly {want} GPUs", len(smi) == want, str(smi))
        ranks = re.findall(r"rank=(\d) local_rank=(\d) world=(\d) device=(.*?) first=(\S+) "
                           r"busbw_gbs=(\S+) uuid=(.*)", text)
        # 1 + 5 all_reduces of 1 .. want over want ranks
        total = f"{want * (want + 1) // 2 * want ** 5:g}"
        check(f"{want} ranks, each on its LOCAL_RANK, the right sum",
              sorted((r[0], r[1], r[2], r[4]) for r in ranks) ==
              [(str(i), str(i), str(want), total) for i in range(want)], str(ranks))
        if not cpu:
            check("the ranks' GPUs differ", len({r[6] for r in ranks}) == want, str(ranks))
        for r in ranks:
            print(f"rank {r[0]}: {r[3]}, all_reduce bus bandwidth {r[5]} GB/s", flush=True)
        st, usage = call(labd, "GET", "/api/v1/me/usage")
        entry = [e for e in usage.get("entries", []) if e.get("job_id") == jid and e["source"] == "job"]
        check(f"the ledger counts its seconds {want} times",
              len(entry) == 1 and entry[0]["seconds_in_window"] == want * entry[0]["billable_s"],
              str(entry))
        for c, line in labd.log_problems()[:15]:
            print(f"log x{c}: {line}", flush=True)
    except Exception as e:  # the checks say what broke
        check("ran to the end", False, repr(e))
        print(labd.log_tail(40), flush=True)
    finally:
        try:
            labd.proc.send_signal(signal.SIGTERM)
            labd.proc.wait(30)
        except Exception:
            pass
    p = sum(results)
    print(f"gpu-multi: {p} passed, {len(results) - p} failed", flush=True)
    return 0 if p == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
