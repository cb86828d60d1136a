"""What a GPU machine's MIG set-up gives labd (a device check, not part of `make test`).

Reads, never changes: MIG mode and instances are the machine owner's (docs/gpu.md);
this script runs no `nvidia-smi mig` command that creates or destroys anything and
never turns MIG on or off. It prints:

1. each card's MIG mode and the MIG devices the driver lists (`nvidia-smi -L`);
2. the devices a labd with `[gpu] devices = auto` hands out (`GET /api/v1/gpus`: kind,
   profile, uuid, fraction of a card);
3. where a card has MIG instances: a job on a plan of the first instance's profile.
   Checked: it Completes; CUDA_VISIBLE_DEVICES is that instance's `MIG-` uuid; inside,
   /dev/nvidia-caps holds exactly the instance's two capability nodes; `nvidia-smi -L`
   lists exactly one MIG device and PyTorch sees one CUDA device, and a matmul runs on
   it (its TFLOP/s printed); the ledger charges the job at the instance's fraction.

A machine whose cards all have MIG off prints that and exits 0 after step 2.
GPU_MIG_STANDIN=1 runs steps 2 and 3 on stand-ins (device and capability nodes made
here with mknod, the stand-in NVML of tests/standin/ built by `make tests`; no CUDA
checks) to try the script on a machine without GPUs.

Env: GPU_JOB_PYTHON (a python whose torch has CUDA, visible in a sandbox: /opt is made
visible), GPU_MIG_QUOTA (more [quota] lines, e.g. "network = none\\n"), BUILD (build).
Prints one line per check and `gpu-mig: N passed, N failed`. Root only."""

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
import importlib.util  # noqa: E402

spec = importlib.util.spec_from_file_location("proxylib", os.path.join(HERE, "proxy-lib.py"))
L = importlib.util.module_from_spec(spec)
spec.loader.exec_module(L)

results = []

# the job's own check of its device: one CUDA device, a matmul's speed on it
PROBE = r"""
import time, torch
n = torch.cuda.device_count()
a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
torch.cuda.synchronize()
t0, reps = time.perf_counter(), 50
for _ in range(reps):
    a @ b
torch.cuda.synchronize()
tf = 2 * 4096 ** 3 * reps / (time.perf_counter() - t0) / 1e12
print(f"torch devices={n} name={torch.cuda.get_device_name(0)} tflops={tf:.1f}", flush=True)
"""


def check(name, ok, detail=""):
    results.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail and not ok else ''}", flush=True)


def run(argv):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        return out.returncode, out.stdout + out.stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        return -1, str(e)


def host_report():
    print("## 1. MIG on this machine (read only)", flush=True)
    rc, out = run(["nvidia-smi", "--query-gpu=index,name,mig.mode.current,memory.total",
                   "--format=csv,noheader"])
    print(out.strip(), flush=True)
    rc, out = run(["nvidia-smi", "-L"])
    print(out.strip(), flush=True)


def standin_host(base):
    """One card with MIG on and two 1g.18gb instances, as tests/integration/
    test_gpu_kinds.py makes it: (dev_prefix, caps_dir, cards.json)."""
    nodes, caps = os.path.join(base, "dev"), os.path.join(base, "caps")
    os.makedirs(os.path.join(nodes, "nvidia-caps"))
    for name, major, minor in (("nvidia0", 195, 0), ("nvidiactl", 195, 255),
                               ("nvidia-uvm", 235, 0)):
        os.mknod(os.path.join(nodes, name), 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    for gi, (gi_minor, ci_minor) in ((1, (21, 22)), (2, (30, 31))):
        d = os.path.join(caps, "gpu0", "mig", f"gi{gi}")
        os.makedirs(os.path.join(d, "ci0"))
        for path, minor in ((os.path.join(d, "access"), gi_minor),
                            (os.path.join(d, "ci0", "access"), ci_minor)):
            with open(path, "w") as fh:
                fh.write(f"DeviceFileMinor: {minor}\nDeviceFileMode: 292\n")
            os.mknod(os.path.join(nodes, "nvidia-caps", f"nvidia-cap{minor}"),
                     0o444 | stat.S_IFCHR, os.makedev(511, minor))
    mig = [{"gi": gi, "ci": 0, "profile": "1g.18gb", "memory_total": 19327352832,
            "memory_used": 0, "uuid": f"MIG-00000000-0000-0000-0000-0000000000{gi:02d}"}
           for gi in (1, 2)]
    cards = os.path.join(base, "cards.json")
    with open(cards, "w") as fh:
        json.dump({"cards": [{"minor": 0, "name": "stand-in H200", "memory_total": 150754820096,
                              "memory_used": 0, "utilization": 0, "temperature": 30,
                              "mig": True, "mig_devices": mig}]}, fh)
    os.chmod(cards, 0o644)
    return nodes, caps, cards


def call(labd, method, path, body=None, headers=None):
    st, _, raw = L.request(labd.port, method, path, body=body, headers=headers or labd.auth(),
                           timeout=30)
    return st, (L.jbody(raw) if raw[:1] in (b"{", b"[") else raw)


def gpu_section(standin, base):
    if not standin:
        return "devices = auto\n" + L.driver_lib_line()
    nodes, caps, cards = standin_host(base)
    os.environ["LABD_NVML_STANDIN"] = cards
    lib = os.path.join(L.REPO, os.environ.get("BUILD", "build"), "tests", "standin",
                       "libnvml-standin.so")
    return f"devices = 0\ndev_prefix = {nodes}\ncaps_dir = {caps}\nnvml_library = {lib}\n"


def mig_job(labd, admin, dev, standin):
    """Step 3: a job on a plan of dev's profile."""
    print(f"## 3. a job on {dev['device']} ({dev['profile']})", flush=True)
    st, j = call(labd, "POST", "/api/v1/plans", {"name": "migcheck", "gpu": dev["profile"]}, admin)
    check("a plan of the instance's profile", st == 201, f"{st} {j}")
    st, j = call(labd, "PUT", f"/api/v1/users/{labd.user}/quota", {"plan": "migcheck"}, admin)
    check("the user on that plan", st == 200, f"{st} {j}")
    py = os.environ.get("GPU_JOB_PYTHON", "/usr/bin/python3")
    shell = ("echo cvd=$CUDA_VISIBLE_DEVICES; ls /dev/nvidia-caps | sed 's/^/cap: /'; "
             + ("" if standin else
                f"nvidia-smi -L | sed 's/^/smi: /'; printf %s \"$PROBE\" > /tmp/p.py && \"{py}\" /tmp/p.py"))
    st, j = call(labd, "POST", "/api/v1/jobs", {"name": "mig-check", "type": "gpu",
                                                "command": ["/bin/sh", "-c", shell],
                                                "environment": {"PROBE": PROBE}})
    check("job submitted", st == 201, f"{st} {j}")
    if st != 201:
        return
    jid = j["id"]
    L.wait_until(lambda: call(labd, "GET", f"/api/v1/jobs/{jid}")[1].get("status")
                 in ("Completed", "Failed", "Stopped"), 300, 0.5)
    job = call(labd, "GET", f"/api/v1/jobs/{jid}")[1]
    text = call(labd, "GET", f"/api/v1/jobs/{jid}/logs")[1]
    text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
    print(text[-3000:], flush=True)
    check("job Completed", job.get("status") == "Completed",
          f"{job.get('status')} {job.get('failure_reason')}")
    check(f"CUDA_VISIBLE_DEVICES is {dev['uuid']}", f"cvd={dev['uuid']}\n" in text, text[:200])
    caps = [ln for ln in text.splitlines() if ln.startswith("cap: ")]
    check("exactly the instance's two capability nodes inside", len(caps) == 2, str(caps))
    if not standin:
        smi = [ln for ln in text.splitlines() if ln.startswith("smi: ") and "MIG" in ln]
        check("nvidia-smi inside lists one MIG device", len(smi) == 1, str(smi))
        check("PyTorch sees one CUDA device and runs on it", "torch devices=1 " in text, text[-300:])
    st, usage = call(labd, "GET", "/api/v1/me/usage")
    entry = [e for e in usage.get("entries", []) if e.get("job_id") == jid]
    want = round(dev["fraction"] * 1000) if isinstance(dev.get("fraction"), float) else None
    check("the ledger charges the instance's fraction",
          len(entry) == 1 and entry[0].get("gpu_fraction_milli", 1000) < 1000
          and (want is None or abs(entry[0]["gpu_fraction_milli"] - want) <= 1), str(entry))


def main():
    standin = os.environ.get("GPU_MIG_STANDIN") == "1"
    if not standin:
        if not any(n.startswith("nvidia") and n[6:].isdigit() for n in os.listdir("/dev")):
            print("gpu-mig: no NVIDIA GPU: nothing to check", flush=True)
            return 0
        host_report()
    L.install_signal_exit()
    w = tempfile.mkdtemp(prefix="labd-gpu-mig.", dir="/var/tmp")
    os.chmod(w, 0o755)
    procs = L.Procs(os.path.join(w, "pids"))
    labd = L.Labd(procs, os.path.join(w, "labd"),
                  runtime={"gpu_limit": "1h", "home_size": "2G", "memory": "16G",
                           "hidden_paths": "/srv,/mnt,/media"})
    try:
        with open(labd.config, "a") as fh:
            fh.write("\n[gpu]\n" + gpu_section(standin, w) + "\n[quota]\ngpu_per_24h = 24h\n"
                     + os.environ.get("GPU_MIG_QUOTA", ""))
        labd.start()
        labd.setup_user("bench")
        admin = labd._login("admin", labd.admin_password)
        print("## 2. the devices labd hands out", flush=True)
        st, g = call(labd, "GET", "/api/v1/gpus", headers=admin)
        devs = g.get("gpus", []) if isinstance(g, dict) else []
        check("GET /api/v1/gpus", st == 200 and bool(devs), f"{st} {g}")
        for d in devs:
            print(f"  {d.get('device')}: {d.get('kind')} {d.get('profile')} {d.get('uuid')} "
                  f"fraction {d.get('fraction')} memory {d.get('memory_bytes')}", flush=True)
        mig = [d for d in devs if d.get("kind") == "mig"]
        if not mig:
            print("gpu-mig: MIG is off on every card (labd never turns it on; docs/gpu.md says "
                  "how an admin does): nothing more to check", flush=True)
        else:
            mig_job(labd, admin, mig[0], standin)
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
        shutil.rmtree(w, ignore_errors=True)
    p = sum(results)
    print(f"gpu-mig: {p} passed, {len(results) - p} failed", flush=True)
    return 0 if p == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
