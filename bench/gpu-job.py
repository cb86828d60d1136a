"""The labd side of bench/gpu-job.sh: a labd daemon with `[gpu] devices = auto`,
a user, bench/gpu-train.py put into the user's home by a CPU job (the text in
environment variables, as the tests do), then one GPU job (type gpu, 1 GPU) that
runs `nvidia-smi` and the training loop.  Prints the job's log (samples_per_s=
is its last line), its phases and billable seconds.  Root only."""

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
spec = importlib.util.spec_from_file_location("proxylib", os.path.join(HERE, "proxy-lib.py"))
L = importlib.util.module_from_spec(spec)
spec.loader.exec_module(L)


def call(labd, method, path, body=None):
    st, _, raw = L.request(labd.port, method, path, body=body, headers=labd.auth(), timeout=30)
    return st, raw


def run_job(labd, body, timeout_s):
    st, raw = call(labd, "POST", "/api/v1/jobs", body)
    if st != 201:
        raise RuntimeError(f"POST /api/v1/jobs {body['name']}: {st} {raw[:300]!r}")
    job_id = L.jbody(raw)["id"]

    def ended():
        st, raw = call(labd, "GET", f"/api/v1/jobs/{job_id}")
        j = L.jbody(raw) if st == 200 else None
        return j if j and j["status"] in ("Completed", "Failed", "Stopped") else None
    j = L.wait_until(ended, timeout_s, 0.2)
    if not j:
        raise RuntimeError(f"job {body['name']} did not end within {timeout_s} s")
    _, log = call(labd, "GET", f"/api/v1/jobs/{job_id}/logs")
    return j, log.decode("utf-8", "replace")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--seconds", default="60")
    ap.add_argument("--warmup", default="15")
    ap.add_argument("--out", default="/dev/stdout")
    args = ap.parse_args()
    L.install_signal_exit()
    w = tempfile.mkdtemp(prefix="labd-bench-gpu.", dir="/var/tmp")
    os.chmod(w, 0o755)  # the web process (user labd) reaches the state dir below it
    procs = L.Procs(os.path.join(w, "pids"))
    # /opt stays visible in the sandboxes (where GPU hosts keep CUDA, conda and torch):
    # labd makes its own mount points there whatever the host has (docs/sandbox.md)
    labd = L.Labd(procs, os.path.join(w, "labd"), runtime={"gpu_limit": "1h", "home_size": "4G",
                                                           "memory": "16G",
                                                           "hidden_paths": "/srv,/mnt,/media"})
    with open(labd.config, "a") as fh:
        # GPU_JOB_QUOTA: more [quota] lines ("network = none\n" on a host without pasta or nft)
        fh.write("\n[gpu]\ndevices = auto\n" + L.driver_lib_line() + "\n[quota]\ngpu_per_24h = 24h\n"
                 + os.environ.get("GPU_JOB_QUOTA", ""))
    rc = 1
    try:
        labd.start()
        labd.setup_user("bench")
        with open(os.path.join(HERE, "gpu-train.py")) as fh:
            text = fh.read()
        chunks = [text[i:i + 4000] for i in range(0, len(text), 4000)]
        env = {f"GPU_TRAIN_{i}": c for i, c in enumerate(chunks)}
        put = "printf %s " + " ".join(f'"$GPU_TRAIN_{i}"' for i in range(len(chunks))) + " > gpu-train.py"
        j, log = run_job(labd, {"name": "put-script", "command": ["/bin/sh", "-c", put],
                                "environment": env}, 120)
        if j["status"] != "Completed":
            raise RuntimeError(f"putting the script in the home: {j['status']} {j.get('failure_reason')}\n{log}")
        cmd = (f"echo '## nvidia-smi inside the sandbox'; nvidia-smi; nvidia-smi -L; "
               f"exec {args.python} gpu-train.py {args.seconds} {args.warmup}")
        j, log = run_job(labd, {"name": "gpu-train", "type": "gpu", "gpu_count": 1,
                                "command": ["/bin/sh", "-c", cmd]},
                         int(float(args.seconds) + float(args.warmup)) + 150)
        with open(args.out, "w") as out:
            out.write(log)
            out.write(f"job: {j['status']} {j.get('failure_reason') or ''} billable_s={j['billable_s']} "
                      f"phases={[t['status'] for t in j['transitions']]}\n")
        rc = 0 if j["status"] == "Completed" else 1
    except RuntimeError as e:
        print(f"gpu-job: {e}\n{labd.log_tail()}", file=sys.stderr)
    finally:
        labd.stop()
        procs.stop_all()
        shutil.rmtree(w, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
