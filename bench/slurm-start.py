#!/usr/bin/python3
"""slurm-start.py - start to ready of a runtime on Slurm beside the local backend, on
one machine (docs/slurm.md): the same labd, the same JupyterLab, the same sizes.

- local: a labd with the local backend (the default).
- slurm: the tests' private cluster (tests/slurm/cluster.py: munged, slurmctld, two
  slurmd in network namespaces of their own) with a labd head ([backend] kind = slurm)
  and a `labd node` per Slurm node (tests/slurm/labd_slurm.py), shared home images.

"Ready" = t0 the start request (POST /api/v1/me/runtime), then GET /api/v1/me/runtime
says "running" (polled every 5 ms) and GET /user/<name>/api/status answers 200 through
labd's proxy (on Slurm: the node's data port). One warm-up start each (the first start
also makes the user's home image), then RUNS timed starts, each stopped before the next,
the sides taking turns. Prints one line per start, then a table (median, min, max per
side), the ratio slurm/local and the difference of the medians, against the target:
Slurm within 1 s of local on an idle cluster. The Slurm share is visible in the middle
column: submit to RUNNING as squeue saw it.

Runs only when the Slurm backend exists in the build (labd --help names `node`) and Slurm
is installed (deploy/install-deps.sh). Root.

Usage: BUILD=build /usr/bin/python3 bench/slurm-start.py [--runs 5] [--summary FILE]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(HERE, "..", "tests", "slurm"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

from cluster import Cluster, missing_programs  # noqa: E402
from labd_harness import RUNTIME_DEFAULTS, Daemon, STRONG, labd_binary  # noqa: E402
from labd_slurm import LabOnSlurm  # noqa: E402

TARGET_S = 1.0
LIMIT_S = 120


def poll(fn, timeout, interval):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            v = fn()
            if v:
                return v
        except OSError:
            pass
        time.sleep(interval)
    return None


def make_user(daemon, admin, name):
    r = admin.post("/api/v1/users", json={"name": name, "password": f"{STRONG}-{name}"})
    assert r.status == 201, r
    c = daemon.client()
    c.login(name, f"{STRONG}-{name}")
    return c


def timed_start(c, slurm_job=None):
    """(seconds to running, to the proxy's 200, to Slurm's RUNNING or None)."""
    t0 = time.monotonic()
    r = c.post("/api/v1/me/runtime", json={"type": "cpu"})
    if r.status != 202:
        raise RuntimeError(f"start refused: {r!r}")
    t_alloc, t_asked = None, 0.0

    def running():
        nonlocal t_alloc, t_asked
        # squeue at most every 50 ms: a tight loop of it would load slurmctld itself
        if slurm_job and t_alloc is None and time.monotonic() - t_asked >= 0.05:
            t_asked = time.monotonic()
            if slurm_job(r.json["runtime"]["id"]) == "RUNNING":
                t_alloc = time.monotonic()
        s = c.get("/api/v1/me/runtime").json["runtime"]
        if s["state"] == "failed":
            raise RuntimeError(f"start failed: {s['reason']}")
        return s["state"] == "running"

    if not poll(running, LIMIT_S, 0.005):
        raise RuntimeError("not running in time")
    t_run = time.monotonic()
    if not poll(lambda: c.get(f"/user/{c.user}/api/status").status == 200, LIMIT_S, 0.01):
        raise RuntimeError("the proxy never answered")
    t_ready = time.monotonic()
    c.delete("/api/v1/me/runtime")
    if not poll(lambda: c.get("/api/v1/me/runtime").json["runtime"]["state"]
                in ("stopped", "failed"), 60, 0.05):
        raise RuntimeError("did not stop")
    return t_run - t0, t_ready - t0, (t_alloc - t0) if t_alloc else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--summary")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("slurm-start: run as root")
    if missing_programs():
        print(f"slurm-start: skipped: Slurm is not installed ({', '.join(missing_programs())})")
        return 0
    helptext = subprocess.run([labd_binary(), "--help"], capture_output=True, text=True)
    if " node" not in helptext.stdout + helptext.stderr:
        print("slurm-start: skipped: this labd has no Slurm backend")
        return 0

    sections = {"runtime": dict(RUNTIME_DEFAULTS), "quota": {"network": "none"}}
    local = Daemon("bench-local", sections=sections)
    cluster = Cluster()
    lab = None
    times = {"local": [], "slurm": []}
    alloc = []
    try:
        local.start()
        lu = make_user(local, local.admin(), "benchlocal")
        cluster.start()
        lab = LabOnSlurm(cluster)
        lab.start()
        su = make_user(lab.head, lab.admin(), "benchslurm")

        def slurm_state(rid):
            j = lab.runtime_job(rid)
            return j and j[1]

        for i in range(args.runs + 1):
            for side, c, job in (("local", lu, None), ("slurm", su, slurm_state)):
                run, ready, a = timed_start(c, job)
                what = "warm-up" if i == 0 else str(i)
                extra = f", Slurm RUNNING after {a:.2f} s" if a is not None else ""
                print(f"{side} start {what}: running after {run:.2f} s, ready after "
                      f"{ready:.2f} s{extra}", flush=True)
                if i:
                    times[side].append(ready)
                    if a is not None:
                        alloc.append(a)
    finally:
        if lab:
            lab.close()
        cluster.close()
        local.stop()
        local.cleanup()

    med = {k: statistics.median(v) for k, v in times.items()}
    print()
    print(f"{'side':<8}{'median s':>10}{'min s':>8}{'max s':>8}  ({args.runs} starts)")
    for side in ("local", "slurm"):
        v = times[side]
        print(f"{side:<8}{med[side]:>10.2f}{min(v):>8.2f}{max(v):>8.2f}")
    ratio = med["slurm"] / med["local"]
    diff = med["slurm"] - med["local"]
    verdict = "met" if diff <= TARGET_S else "missed"
    line = (f"start to ready, Slurm / local: {ratio:.2f}x ({med['slurm']:.2f} s vs "
            f"{med['local']:.2f} s, +{diff:.2f} s; Slurm's submit-to-RUNNING median "
            f"{statistics.median(alloc):.2f} s): target within {TARGET_S:.0f} s: {verdict}")
    print(line)
    if args.summary:
        with open(args.summary, "a") as fh:
            fh.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
