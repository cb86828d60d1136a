"""The Slurm backend against a real Slurm (the private cluster of cluster.py), head side:
labd with [backend] kind = slurm submits each runtime as a Slurm job named
labd-rt-<id> with the plan's sizes, shows Slurm's pending reason on the runtime,
cancels the job when the runtime is stopped, and finds a submit whose answer was lost
(the controller away) by its name instead of submitting twice.

These cases need no node-side labd: they stop each runtime before its node's start
would be due. The runtime reaching JupyterLab on a node is test_slurm_runtime.py's."""

import os
import subprocess
import time

import pytest

from cluster import wait_until
from labd_harness import Daemon, free_port, make_user


def squeue(cluster, name):
    """(job id, state, comment) of every job named name, any state."""
    r = subprocess.run(["squeue", "-h", "-t", "all", "-n", name, "-o", "%i|%T|%k"],
                       env=cluster.env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return [tuple(line.split("|")) for line in r.stdout.split()]


def runtime(c):
    r = c.get("/api/v1/me/runtime")
    assert r.status == 200, r
    return r.json["runtime"]


@pytest.fixture(scope="module")
def head(cluster):
    d = Daemon("slurmhead", sections={
        "backend": {"kind": "slurm"},
        "slurm": {"listen": f"{cluster.head_addr}:{free_port()}",
                  "secret_file": os.path.join(cluster.dir, "labd.secret"),
                  "poll_interval": "200ms", "time_grace": "1m", "timeout": "3s"},
        # short: a start that waits in Slurm's queue must not count against it
        "runtime": {"memory": "256M", "cpus": "1", "start_timeout": "4s"},
    }, env={"SLURM_CONF": cluster.conf})
    secret = d.sections["slurm"]["secret_file"]
    with open(secret, "wb") as fh:
        fh.write(os.urandom(32))
    # root reads it before the web process starts; readable by labd's group as well
    subprocess.run(["chgrp", "labd", secret], check=True)
    os.chmod(secret, 0o640)
    os.chmod(cluster.dir, 0o755)
    d.start()
    try:
        yield d
    finally:
        d.stop()
        d.cleanup()


def test_runtime_is_a_slurm_job_and_stop_cancels_it(cluster, head):
    c = make_user(head)
    r = c.post("/api/v1/me/runtime", json={"type": "cpu"})
    assert r.status == 202, r
    rid = r.json["runtime"]["id"]
    name = f"labd-rt-{rid}"
    jobs = wait_until(lambda: squeue(cluster, name), 15, f"{name} in squeue")
    assert len(jobs) == 1, jobs
    job_id, _, comment = jobs[0]
    assert comment == c.get("/api/v1/me").json["name"], jobs
    job = cluster.wait_state(job_id, "RUNNING")
    # the plan's sizes, Slurm's backstop beyond labd's deadline, never requeued
    assert job["MinMemoryNode"] == "256M", job
    assert job["NumCPUs"] == "1", job
    assert job["Requeue"] == "0", job
    assert runtime(c)["state"] == "starting"
    assert c.delete("/api/v1/me/runtime").status == 202
    wait_until(lambda: cluster.job(job_id).get("JobState") in ("CANCELLED", "COMPLETED"),
               15, f"job {job_id} to be cancelled")
    wait_until(lambda: runtime(c)["state"] not in ("starting", "stopping"), 15,
               "the runtime to end")


def test_pending_reason_reaches_the_runtime(cluster, head):
    # both nodes' memory taken: labd's job waits for resources
    blockers = [cluster.sbatch(f"--mem={cluster.memory_mb}M", f"--nodelist={n.name}",
                               "--wrap", "sleep 120") for n in cluster.nodes]
    try:
        for b in blockers:
            cluster.wait_state(b, "RUNNING")
        c = make_user(head)
        r = c.post("/api/v1/me/runtime", json={"type": "cpu"})
        assert r.status == 202, r
        rid = r.json["runtime"]["id"]
        # "being submitted to Slurm" first, then Slurm's own reason
        rt = wait_until(lambda: (x := runtime(c)).get("slurm", {}).get("reason") ==
                        "waiting in Slurm for free resources" and x, 15,
                        lambda: f"Slurm's reason on the runtime: {runtime(c)}")
        assert rt["state"] == "starting"
        jobs = squeue(cluster, f"labd-rt-{rid}")
        assert [j[1] for j in jobs] == ["PENDING"], jobs
        # longer than [runtime] start_timeout in Slurm's queue: still starting
        time.sleep(6)
        rt = runtime(c)
        assert rt["state"] == "starting" and rt["slurm"], rt
        c.delete("/api/v1/me/runtime")
        wait_until(lambda: squeue(cluster, f"labd-rt-{rid}")[0][1] == "CANCELLED", 15,
                   "the pending job cancelled")
    finally:
        for b in blockers:
            cluster.scancel(b)


def test_submit_while_the_controller_is_away_is_found_by_name(cluster, head):
    c = make_user(head)
    cluster._stop(cluster.slurmctld)
    try:
        r = c.post("/api/v1/me/runtime", json={"type": "cpu"})
        assert r.status == 202, r  # taken at once: no Slurm call on the request path
        rid = r.json["runtime"]["id"]
        time.sleep(4)  # sbatch times out ([slurm] timeout = 3s): the submit is lost
        assert runtime(c)["state"] == "starting"
    finally:
        cluster._start_slurmctld()
    name = f"labd-rt-{rid}"
    jobs = wait_until(lambda: squeue(cluster, name), 30, f"{name} after the controller")
    time.sleep(2)  # a few more passes: still exactly one job of that name
    jobs = squeue(cluster, name)
    assert len(jobs) == 1, jobs
    rt = runtime(c)
    assert rt["state"] == "starting", f"{rt}\n{head.log_tail()}"
    assert c.delete("/api/v1/me/runtime").status == 202
    wait_until(lambda: squeue(cluster, name)[0][1] in ("CANCELLED", "COMPLETED"), 15,
               lambda: f"the job cancelled: {squeue(cluster, name)}\n{head.log_tail()}")

