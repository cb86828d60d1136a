"""A GPU job across a restart of labd, on a real GPU host (a device check, not part
of `make test`): a labd with `[gpu] devices = auto` and keep_on_shutdown runs a GPU
job (PyTorch, a matmul per step, numbered lines), labd is stopped with SIGTERM
mid-job and started again on the same state, and the job must end Completed in its
first attempt with every line once; its pool's keeper must sit in the pool's
cgroups; the next matching job must reuse the warm pool.  Prints one line per
check and `gpu-restart: N passed, N failed`.  Root only.

Env: GPU_RESTART_QUOTA (more [quota] lines, e.g. "network = none\n" on a host
without pasta and nft), GPU_JOB_PYTHON (a python whose torch has CUDA; it must be visible in a
sandbox: this script sets hidden_paths to /srv,/mnt,/media so /opt is seen)."""

import os
import re
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
import importlib.util  # noqa: E402

spec = importlib.util.spec_from_file_location("proxylib", os.path.join(HERE, "proxy-lib.py"))
L = importlib.util.module_from_spec(spec)
spec.loader.exec_module(L)

STEPS = 40
TRAIN = f"""
import time, torch
x = torch.randn(4096, 4096, device='cuda')
for i in range(1, {STEPS} + 1):
    y = (x @ x).sum().item()
    print(f'step {{i}} loss={{1.0 / i:.4f}} dev={{torch.cuda.get_device_name(0)}}', flush=True)
    time.sleep(0.5)
"""
CPU_TRAIN = f"""
import time
for i in range({STEPS}):
    print(f'step {{i + 1}} loss={{1.0 / (i + 1):.4f}} dev=NVIDIA H200 (a stand-in run)', flush=True)
    time.sleep(0.5)
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


def keepers_in_cgroup_of(pid, any_comm=False):
    """Processes (labd-keeper ones, or any with any_comm) whose cgroups are pid's."""
    def cg(p):
        try:
            with open(f"/proc/{p}/cgroup") as fh:
                return fh.read()
        except OSError:
            return None
    want, found = cg(pid), []
    for p in os.listdir("/proc"):
        if p.isdigit() and (any_comm or L.comm(int(p)) == "labd-keeper") and cg(p) == want:
            found.append(int(p))
    return found


def main():
    py = os.environ.get("GPU_JOB_PYTHON", "/usr/bin/python3")
    L.install_signal_exit()
    w = tempfile.mkdtemp(prefix="labd-gpu-restart.", dir="/var/tmp")
    os.chmod(w, 0o755)
    procs = L.Procs(os.path.join(w, "pids"))
    labd = L.Labd(procs, os.path.join(w, "labd"),
                  runtime={"gpu_limit": "1h", "home_size": "4G", "memory": "16G",
                           "keep_on_shutdown": "true", "hidden_paths": "/srv,/mnt,/media"})
    with open(labd.config, "a") as fh:
        fh.write("\n[gpu]\ndevices = auto\n" + L.driver_lib_line() + "\n[quota]\ngpu_per_24h = 24h\n"
                 + os.environ.get("GPU_RESTART_QUOTA", ""))
    try:
        labd.start()
        labd.setup_user("bench")
        # GPU_RESTART_CPU=1: the same flow as a CPU job, to try the script without a GPU
        cpu = bool(os.environ.get("GPU_RESTART_CPU"))
        body = {"name": "gpu-restart", "keep_alive_s": 300,
                **({} if cpu else {"type": "gpu", "gpu_count": 1}),
                "command": [py, "-c", CPU_TRAIN if cpu else TRAIN],
                "metric_definitions": [{"name": "loss", "regex": "loss=([0-9.]+)"}]}
        st, j = call(labd, "POST", "/api/v1/jobs", body)
        check("GPU job submitted", st == 201, f"{st} {j}")
        jid = j["id"]
        L.wait_until(lambda: (job(labd, jid) or {}).get("log_bytes", 0) > 200, 120, 0.3)
        j = job(labd, jid)
        check("job training before the restart", j["secondary_status"] == "Training", str(j))
        # SIGTERM mid-job, as systemctl restart does, then start again on the same state
        t0 = time.monotonic()
        labd.proc.send_signal(signal.SIGTERM)
        labd.proc.wait(30)
        down = [p for p in os.listdir("/proc") if p.isdigit() and L.comm(int(p)) == "labd-keeper"]
        check("a keeper runs while labd is down", len(down) >= 1, str(down))
        time.sleep(3)
        labd.start()
        print(f"restart took {time.monotonic() - t0:.1f} s", flush=True)
        L.wait_until(lambda: (job(labd, jid) or {}).get("status") in ("Completed", "Failed", "Stopped"), 180, 0.5)
        j = job(labd, jid)
        check("job Completed after the restart", j["status"] == "Completed", f"{j.get('status')} {j.get('failure_reason')}")
        check("first attempt", j.get("attempt") == 1, str(j.get("attempt")))
        st, log = call(labd, "GET", f"/api/v1/jobs/{jid}/logs")
        text = log.decode("utf-8", "replace") if isinstance(log, bytes) else str(log)
        steps = [int(m) for m in re.findall(r"^step (\d+) ", text, re.M)]
        check("every line once", steps == list(range(1, STEPS + 1)), f"{steps[:5]}..{steps[-5:]} ({len(steps)})")
        check("on the H200", "H200" in text, text[:300])
        st, m = call(labd, "GET", f"/api/v1/jobs/{jid}/metrics")
        print("metrics:", str(m)[:300], flush=True)
        # the warm pool kept across the restart takes the next job
        body2 = dict(body, name="gpu-restart-2", command=[py, "-c", "print('again')" if cpu else
                                "import torch; print('again', torch.cuda.is_available())"])
        st, j2 = call(labd, "POST", "/api/v1/jobs", body2)
        L.wait_until(lambda: (job(labd, j2["id"]) or {}).get("status") in ("Completed", "Failed", "Stopped"), 120, 0.3)
        j2 = job(labd, j2["id"])
        check("the next job reuses the warm pool", j2.get("status") == "Completed" and bool((j2.get("warm_pool") or {}).get("reused")), f"{j2.get('status')} warm_pool={j2.get('warm_pool')} {j2.get('failure_reason')}")
        # each keeper sits in its sandbox's cgroups (pure cgroup v2 here): some process
        # that is no keeper shares them
        ks = [int(p) for p in os.listdir("/proc") if p.isdigit() and L.comm(int(p)) == "labd-keeper"]
        shared = {k: [q for q in keepers_in_cgroup_of(k, any_comm=True) if q != k] for k in ks}
        print(f"keepers and the processes in their cgroups: {shared}", flush=True)
        check("each keeper is in its sandbox's cgroups", ks != [] and all(shared.values()), str(shared))
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
    print(f"gpu-restart: {p} passed, {len(results) - p} failed", flush=True)
    return 0 if p == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
