#!/usr/bin/python3
"""bench/tuning-bench.py - what a tuning job adds to each trial on warm pools, beyond the
trial's own work.

A tuning job of N trials (random search over one parameter, max_parallel 1) whose base job
is `bash -c 'echo start=$EPOCHREALTIME; echo loss=1; echo end=$EPOCHREALTIME'` with
keep_alive_s 600: after the first, every trial runs on the warm pool its predecessor left.
Each trial's own work is its command, from its first to its last line (the command's own
clock, read back from its log); the search's overhead per trial is the gap from one
trial's `end` to the next trial's `start`: labd seeing the job end (the exit, Uploading,
the log read to its end for the objective), the tuner's pass noticing it (every 50 ms),
the next trial's submit through the job submit, the dispatch onto the warm pool, staging
and the exec.  Prints p50, p90 and max of the N-1 gaps in ms, the trials that did not
reuse a pool, and the target (< 100 ms per trial).  Also: the whole search's wall time
against the sum of the trials' own work.

Usage: bench/tuning-bench.py [--trials 30] [--workdir DIR] [--summary FILE]
Root only (sandboxes).  Not part of `make test`.
"""

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True


def _load(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, file))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


L = _load("proxylib", "proxy-lib.py")

COMMAND = ["/bin/bash", "-c", "echo start=$EPOCHREALTIME; echo loss=1; echo end=$EPOCHREALTIME"]
TARGET_MS = 100
TIMEOUT_S = 600


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int((len(xs) - 1) * p / 100 + 0.5))]


class Api:
    def __init__(self, labd):
        self.labd = labd

    def call(self, method, path, body=None):
        st, _, raw = L.request(self.labd.port, method, path, body=body, headers=self.labd.auth())
        return st, (L.jbody(raw) if raw and raw[:1] in (b"{", b"[") else raw)


def clock(text, word):
    for line in text.split("\n"):
        if line.startswith(word + "="):
            return float(line.split("=", 1)[1])
    raise RuntimeError(f"no {word}= line in {text!r}")


def search(api, trials):
    body = {
        "name": "bench",
        "job": {"command": COMMAND, "keep_alive_s": 600,
                "metric_definitions": [{"name": "loss", "regex": "loss=([0-9.]+)"}]},
        "parameter_ranges": [{"name": "x", "type": "continuous", "min": 0, "max": 1}],
        "objective": {"metric": "loss", "type": "minimize"},
        "max_trials": trials, "max_parallel": 1, "seed": 1,
    }
    t0 = time.time()
    st, t = api.call("POST", "/api/v1/tuning-jobs", body)
    if st != 201:
        raise RuntimeError(f"POST /api/v1/tuning-jobs: {st} {t!r}")

    def ended():
        s, cur = api.call("GET", f"/api/v1/tuning-jobs/{t['id']}")
        return cur if s == 200 and cur["status"] not in ("InProgress", "Stopping") else None
    t = L.wait_until(ended, TIMEOUT_S, 0.05)
    wall = time.time() - t0
    if not t or t["status"] != "Completed":
        raise RuntimeError(f"the tuning job did not complete: {t!r}")
    runs = []
    for tr in t["trials"]:
        if tr["status"] != "Completed":
            raise RuntimeError(f"trial {tr['index']}: {tr['status']} {tr['reason']}")
        st, log = api.call("GET", f"/api/v1/jobs/{tr['job_id']}/logs")
        _, job = api.call("GET", f"/api/v1/jobs/{tr['job_id']}")
        text = log.decode() if isinstance(log, bytes) else str(log)
        runs.append((clock(text, "start"), clock(text, "end"), bool(job["warm_pool"]["reused"])))
    return wall, runs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=int(os.environ.get("BENCH_TUNING_TRIALS", 30)))
    ap.add_argument("--workdir")
    ap.add_argument("--summary")
    args = ap.parse_args()
    if os.getuid() != 0:
        sys.exit("tuning-bench: run as root (labd sandboxes)")
    L.install_signal_exit()
    w = args.workdir or tempfile.mkdtemp(prefix="labd-bench-tuning.", dir="/var/tmp")
    os.makedirs(w, exist_ok=True)
    os.chmod(w, 0o755)  # the web process (user labd) reaches the state dir below it
    procs = L.Procs(os.path.join(w, "pids"))
    labd = L.Labd(procs, os.path.join(w, "labd"), runtime={"cpu_limit": "24h"})
    with open(labd.config, "a") as fh:
        fh.write("\n[jobs]\nkeep_alive_max = 3600s\n\n[quota]\nconcurrent_jobs = 4\n")
    rc = 0
    try:
        labd.start()
        labd.setup_user("bench")
        api = Api(labd)
        wall, runs = search(api, args.trials)
        gaps = [(runs[i + 1][0] - runs[i][1]) * 1000 for i in range(len(runs) - 1)]
        own = sum(e - s for s, e, _ in runs)
        cold = sum(1 for _, _, reused in runs[1:] if not reused)
        p50, p90 = pct(gaps, 50), pct(gaps, 90)
        met = "yes" if p90 < TARGET_MS and not cold else "NO"
        print(f"tuning job of {len(runs)} trials, max_parallel 1, warm pools "
              f"(the commands' own clock)")
        print(f"overhead per trial (one trial's end to the next one's start): p50 {p50:.1f} ms, "
              f"p90 {p90:.1f} ms, max {max(gaps):.1f} ms; target p90 < {TARGET_MS} ms: {met}")
        print(f"whole search: {wall:.2f} s wall (create to Completed seen), trials' own work "
              f"{own * 1000:.1f} ms in all: {(wall - own) * 1000 / len(runs):.1f} ms per trial "
              f"beyond it, the first trial's cold start included")
        if cold:
            print(f"  {cold} trial(s) after the first did not reuse a warm pool")
            rc = 1
        L.summary(args.summary, "tuning trial overhead", "p90 ms", p90, "-", 0,
                  f"<{TARGET_MS}ms", met)
        if met != "yes":
            rc = 1
        for count, line in labd.log_problems()[:10]:
            print(f"  labd log ({count}x): {line}")
    except RuntimeError as e:
        print(f"tuning-bench: {e}\n{labd.log_tail()}", file=sys.stderr)
        rc = 1
    finally:
        if labd.token:
            try:
                st, _, raw = L.request(labd.port, "GET", "/api/v1/warm-pools", headers=labd.auth())
                for p in (L.jbody(raw) or {}).get("warm_pools", []) if st == 200 else []:
                    L.request(labd.port, "DELETE", f"/api/v1/warm-pools/{p['id']}", headers=labd.auth())
            except OSError:
                pass
        labd.stop()
        procs.stop_all()
        if not args.workdir:
            shutil.rmtree(w, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
