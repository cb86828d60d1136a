"""The capacity caps (docs/operations.md "Capacity"), on one daemon with two stand-in
GPUs and [runtime] max_sandboxes = 2:

- [quota] gpus_held (default 1): a user's GPU job beside their GPU runtime waits in
  Pending saying why, and runs once the runtime ends; a GPU runtime beside the user's
  warm GPU pool is refused (429 gpus_held) until the pool is released;
- the host cap: with two sandboxes live a third runtime start is refused (503
  host_full) and a job waits in Pending saying so, and runs once one ends;
- preemptible jobs filling the host cap: a GPU runtime start is queued, not refused,
  one of them is preempted for it (the other runs on), and the runtime starts; a CPU
  runtime start (it has no queue) is still refused."""

import glob
import os

import pytest

from labd_harness import make_user, start_runtime, stop_runtime, wait_until

JOB_TIMEOUT = 90


@pytest.fixture(scope="module")
def cd(runtime_daemon_factory):
    return runtime_daemon_factory("capacity", gpu={"stand_in": "2"},
                                  runtime={"max_sandboxes": "2"}, sections={
        "jobs": {"keep_alive_max": "600"},
        "quota": {"concurrent_jobs": "10"}})


def job(c, job_id):
    r = c.get(f"/api/v1/jobs/{job_id}")
    assert r.status == 200, r
    return r.json


def submit(c, **spec):
    body = {"name": "cap", "command": ["/bin/sh", "-c", "echo ok"], **spec}
    r = c.post("/api/v1/jobs", json=body)
    assert r.status == 201, r
    return r.json["id"]


def waits_saying(c, job_id, words):
    """Waits until the Pending job's message has words; returns the job."""
    def said():
        j = job(c, job_id)
        assert j["secondary_status"] == "Pending", j
        return words in j["transitions"][-1]["message"] and j
    return wait_until(said, timeout=JOB_TIMEOUT, what=lambda: f"{words!r}: {job(c, job_id)}")


def ends(c, job_id, d):
    wait_until(lambda: job(c, job_id)["status"] in ("Completed", "Failed", "Stopped"),
               timeout=JOB_TIMEOUT, what=lambda: f"job {job_id}: {job(c, job_id)}\n{d.log_tail()}")
    return job(c, job_id)


def test_a_gpu_job_waits_beside_the_users_gpu_runtime(cd):
    c = make_user(cd, prefix="capg")
    start_runtime(c, "gpu")
    j = submit(c, type="gpu")
    waits_saying(c, j, "[quota] gpus_held")
    # the other GPU is free: the cap, not the GPUs, keeps it waiting
    assert any(g["state"] == "free" for g in cd.admin().get("/api/v1/gpus").json["gpus"])
    stop_runtime(c)
    assert ends(c, j, cd)["status"] == "Completed"


def test_a_gpu_runtime_is_refused_beside_the_users_warm_gpu_pool(cd):
    c = make_user(cd, prefix="capw")
    j = submit(c, type="gpu", keep_alive_s=300)
    done = ends(c, j, cd)
    assert done["status"] == "Completed" and done["warm_pool"]["status"] == "Available", done
    r = c.post("/api/v1/me/runtime", json={"type": "gpu"})
    assert r.status == 429 and r.json["error"]["code"] == "gpus_held", r
    assert "gpus_held" in r.json["error"]["message"] and "warm" in r.json["error"]["message"]
    assert c.post("/api/v1/me/runtime", json={"type": "cpu"}).status == 202  # CPU is fine
    stop_runtime(c)
    assert c.delete(f"/api/v1/warm-pools/{done['warm_pool']['id']}").status == 204
    wait_until(lambda: c.post("/api/v1/me/runtime", json={"type": "gpu"}).status == 202,
               timeout=JOB_TIMEOUT, what="a GPU runtime once the warm pool is released")
    stop_runtime(c)


def test_the_host_cap_refuses_a_runtime_and_holds_a_job(cd):
    # the earlier tests' sandboxes count until their teardown ends, a moment after
    # their runtime reads stopped and their pool is released
    wait_until(lambda: not glob.glob(os.path.join(cd.state_dir, "sandboxes", "*.state")),
               30, what="the earlier tests' sandboxes to be torn down")
    a, b, late = (make_user(cd, prefix=p) for p in ("capa", "capb", "capl"))
    start_runtime(a)
    start_runtime(b)
    r = late.post("/api/v1/me/runtime", json={"type": "cpu"})
    assert r.status == 503 and r.json["error"]["code"] == "host_full", r
    assert "max_sandboxes" in r.json["error"]["message"]
    j = submit(late)
    waits_saying(late, j, "cap of 2 sandboxes")
    stop_runtime(a)
    assert ends(late, j, cd)["status"] == "Completed"
    stop_runtime(b)


def test_a_gpu_runtime_preempts_a_preemptible_job_that_fills_the_host_cap(cd):
    wait_until(lambda: not glob.glob(os.path.join(cd.state_dir, "sandboxes", "*.state")),
               30, what="the earlier tests' sandboxes to be torn down")
    a, b, r = (make_user(cd, prefix=p) for p in ("cappa", "cappb", "cappr"))
    hold = ["/bin/sh", "-c", "exec sleep 120"]  # sleep ends at SIGTERM: no grace waited
    ids = {c: submit(c, command=hold, capacity="preemptible") for c in (a, b)}
    for c, j in ids.items():
        wait_until(lambda c=c, j=j: job(c, j)["secondary_status"] == "Training",
                   JOB_TIMEOUT, what=lambda c=c, j=j: f"training: {job(c, j)}")
    cpu = r.post("/api/v1/me/runtime", json={"type": "cpu"})
    assert cpu.status == 503 and cpu.json["error"]["code"] == "host_full", cpu
    q = r.post("/api/v1/me/runtime", json={"type": "gpu"})
    assert q.status == 202 and q.json["runtime"]["state"] == "queued", q
    wait_until(lambda: r.get("/api/v1/me/runtime").json["runtime"]["state"] != "queued",
               JOB_TIMEOUT, what=lambda: f"{r.get('/api/v1/me/runtime').json} {cd.log_tail()}")
    def requeued():
        jobs = [job(c, j) for c, j in ids.items()]
        return [x["status_reason"] for x in jobs].count("Preempted") == 1 and jobs
    jobs = wait_until(requeued, JOB_TIMEOUT, what=lambda: [job(c, j) for c, j in ids.items()])
    [hit] = [x for x in jobs if x["preemptions"]]
    assert "max_sandboxes" in hit["interruptions"][0]["waiting"], hit
    assert hit["secondary_status"] == "Pending", hit  # the host's room is the runtime's
    assert [x["secondary_status"] for x in jobs if not x["preemptions"]] == ["Training"]
    stop_runtime(r)
    for c, j in ids.items():
        assert c.post(f"/api/v1/jobs/{j}/stop", json={"grace_s": 1}).status == 202
        ends(c, j, cd)
