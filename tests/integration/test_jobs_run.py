"""Training jobs run for real (docs/jobs.md): the web side's lifecycle over the
supervisor's pools and the agent, end to end through the API.

- a shell job walks Pending -> Starting -> Downloading -> Training -> Uploading ->
  Completed with exit code 0, billable seconds and a 'job' ledger entry;
- a failing job says why (exit code) and does not retry;
- with keep_alive_s the pool stays warm; the next matching job reuses it (Starting skipped,
  recorded on both jobs), a non-matching one does not, and the keep-alive expiry or a
  DELETE releases it with a 'warm' ledger entry;
- stop: a long job goes Stopping, then Stopped.

The full behaviour suite (PyTorch, OOM, restart, retry...) is engineer D's."""

import sqlite3
import time

import pytest

from labd_harness import make_user, wait_until

JOB_TIMEOUT = 60


@pytest.fixture(scope="module")
def rd(runtime_daemon_factory):
    return runtime_daemon_factory("jobs-run", sections={"jobs": {"keep_alive_max": "600"},
                                                        "quota": {"concurrent_jobs": "10"}})


def ok(r, status):
    assert r.status == status, f"{r.method} {r.path}: expected {status}, got {r.status}: {r.body[:400]!r}"
    return r.json


def wait_job(c, job_id, until=("Completed", "Failed", "Stopped"), timeout=JOB_TIMEOUT, d=None):
    seen = {}

    def done():
        seen["j"] = c.get(f"/api/v1/jobs/{job_id}").json
        return seen["j"]["status"] in until

    wait_until(done, timeout=timeout,
               what=lambda: f"job {job_id} to reach {until}: {seen.get('j')}" +
               (f"\n{d.log_tail()}" if d else ""))
    return seen["j"]


def ledger(d, job_id=None, pool_id=None):
    db = sqlite3.connect(f"file:{d.db_file}?mode=ro", uri=True, timeout=10)
    try:
        if job_id is not None:
            q, arg = "SELECT source, billable_s, end_at FROM ledger WHERE job_id = ? AND source = 'job'", job_id
        else:
            q, arg = "SELECT source, billable_s, end_at FROM ledger WHERE pool_id = ? AND source = 'warm'", pool_id
        return db.execute(q, (arg,)).fetchall()
    finally:
        db.close()


def test_a_job_walks_every_phase(rd):
    c = make_user(rd, prefix="jr")
    j = ok(c.post("/api/v1/jobs", json={"name": "echo", "command": [
        "/bin/sh", "-c", "echo loss=1; echo loss=0.5"]}), 201)
    done = wait_job(c, j["id"])
    assert done["status"] == "Completed", done
    assert done["secondary_status"] == "Completed" and done["exit_code"] == 0
    assert done["failure_tail"] is None
    phases = [t["status"] for t in done["transitions"]]
    assert phases == ["Pending", "Starting", "Downloading", "Training", "Uploading",
                      "Completed"], phases
    assert all(t["end_at"] for t in done["transitions"][:-1])
    assert done["warm_pool"]["reused"] is False and done["warm_pool"]["status"] == "Terminated"
    assert done["started_at"] and done["ended_at"]
    rows = ledger(rd, job_id=j["id"])
    assert len(rows) == 1 and rows[0][2] is not None, rows
    assert done["billable_s"] == rows[0][1]


def test_a_failing_job_says_why_and_does_not_retry(rd):
    c = make_user(rd, prefix="jf")
    j = ok(c.post("/api/v1/jobs", json={"name": "fails", "max_retries": 3, "command": [
        "/bin/sh", "-c", "for i in $(seq 1 40); do echo step $i; done; "
        "printf 'ValueError: bad \\377 shape\\n' >&2; exit 3"]}), 201)
    done = wait_job(c, j["id"])
    assert done["status"] == "Failed" and done["secondary_status"] == "Failed", done
    assert done["exit_code"] == 3 and done["failure_reason"] == "exit code 3"
    assert done["attempt"] == 1
    # the summary's last lines: stderr's reason, bounded to the last 20, invalid UTF-8 made '?'
    tail = done["failure_tail"]
    assert tail and "ValueError: bad ? shape" in tail, tail
    assert "step 40" in tail and "step 5\n" not in tail and len(tail.splitlines()) <= 20, tail


SCRIPT = """#!/usr/bin/env python3
# pasted as is: several lines, an indented block, quotes of both kinds
import os
for i in range(3):
    print(f"loss={1 / (i + 1)} \u00e9")
print('saved at', os.path.abspath(__file__))
"""


def test_a_script_job_runs_its_script(rd):
    """script instead of command: saved as /opt/ml/output/script in the home and run by its
    #! line's interpreter, else by /bin/sh; a script past 32 KiB or empty is refused."""
    c = make_user(rd, prefix="js")
    j = ok(c.post("/api/v1/jobs", json={"name": "py", "script": SCRIPT}), 201)
    assert j["script"] == SCRIPT and j["command"][0] == "/bin/sh", j
    done = wait_job(c, j["id"], d=rd)
    log = c.get(f"/api/v1/jobs/{j['id']}/logs").text
    assert done["status"] == "Completed", (done, log)
    assert "loss=0.5 \u00e9" in log and "saved at /opt/ml/output/script" in log, log
    # the same folder in the home holds it
    ls = ok(c.post("/api/v1/jobs", json={"name": "sh", "script": (
        "set -e\nhead -c 2 jobs/py/output/script\n"
        "# no #! line: /bin/sh runs it\nexit 4\n")}), 201)
    failed = wait_job(c, ls["id"], d=rd)
    assert failed["exit_code"] == 4 and "#!" in (failed["failure_tail"] or ""), failed
    r = c.post("/api/v1/jobs", json={"name": "big", "script": "x" * (32 * 1024 + 1)})
    assert r.status == 400 and r.json["error"]["field"] == "script", r
    r = c.post("/api/v1/jobs", json={"name": "empty", "script": ""})
    assert r.status == 400 and r.json["error"]["field"] == "script", r


def test_warm_pool_reuse_and_release(rd):
    c = make_user(rd, prefix="jw")
    first = ok(c.post("/api/v1/jobs", json={"name": "warm-1", "keep_alive_s": 120,
                                            "command": ["/bin/true"]}), 201)
    first = wait_job(c, first["id"])
    assert first["status"] == "Completed", first
    assert first["warm_pool"]["status"] == "Available" and first["warm_pool"]["available_until"]
    pools = ok(c.get("/api/v1/warm-pools"), 200)["warm_pools"]
    assert [p["id"] for p in pools] == [first["warm_pool"]["id"]]
    assert pools[0]["status"] == "Available" and pools[0]["job_id"] == first["id"]

    t0 = time.monotonic()
    second = ok(c.post("/api/v1/jobs", json={"name": "warm-2", "keep_alive_s": 120,
                                             "command": ["/bin/true"]}), 201)
    second = wait_job(c, second["id"])
    warm_run_s = time.monotonic() - t0
    assert second["status"] == "Completed", second
    assert second["warm_pool"]["reused"] is True
    assert second["warm_pool"]["id"] == first["warm_pool"]["id"]
    assert "Starting" not in [t["status"] for t in second["transitions"]]
    again = ok(c.get(f"/api/v1/jobs/{first['id']}"), 200)
    assert again["warm_pool"]["status"] == "Reused"
    assert again["warm_pool"]["reused_by"] == second["id"]
    assert again["warm_pool"]["warm_s"] >= 0

    # a job of another shape does not reuse it, and releases it
    third = ok(c.post("/api/v1/jobs", json={"name": "other-shape", "memory_bytes": 128 << 20,
                                            "command": ["/bin/true"]}), 201)
    third = wait_job(c, third["id"])
    assert third["warm_pool"]["reused"] is False
    assert third["warm_pool"]["id"] != first["warm_pool"]["id"]
    after = ok(c.get(f"/api/v1/jobs/{second['id']}"), 200)
    assert after["warm_pool"]["status"] == "Terminated", after["warm_pool"]
    assert "did not match" in after["warm_pool"]["reason"]
    warm = ledger(rd, pool_id=first["warm_pool"]["id"])
    assert len(warm) == 2 and all(r[2] is not None for r in warm), warm
    usage = ok(c.get(f"/api/v1/me/usage?to={int(time.time()) + 5}"), 200)["entries"]
    assert {(e["source"], e["job_id"]) for e in usage if e["source"] == "job"} == \
        {("job", first["id"]), ("job", second["id"]), ("job", third["id"])}, usage
    assert [e["pool_id"] for e in usage if e["source"] == "warm"] == \
        [first["warm_pool"]["id"]] * 2, usage
    assert all(e["runtime_id"] is None for e in usage), usage
    print(f"warm job submit->Completed {warm_run_s:.2f} s")


def test_release_by_delete(rd):
    c = make_user(rd, prefix="jd")
    j = ok(c.post("/api/v1/jobs", json={"name": "keep", "keep_alive_s": 300,
                                        "command": ["/bin/true"]}), 201)
    j = wait_job(c, j["id"])
    pool_id = j["warm_pool"]["id"]
    other = make_user(rd, prefix="jo")
    assert other.delete(f"/api/v1/warm-pools/{pool_id}").status == 404
    assert c.delete(f"/api/v1/warm-pools/{pool_id}").status == 204
    got = ok(c.get(f"/api/v1/jobs/{j['id']}"), 200)
    assert got["warm_pool"]["status"] == "Terminated"
    assert got["warm_pool"]["reason"] == "released by the user"
    assert ok(c.get("/api/v1/warm-pools"), 200)["warm_pools"] == []


def test_stop_a_running_job(rd):
    c = make_user(rd, prefix="jst")
    j = ok(c.post("/api/v1/jobs", json={"name": "sleeps", "command": ["/bin/sleep", "300"]}), 201)
    wait_job(c, j["id"], until=("InProgress",), timeout=5)
    wait_until(lambda: c.get(f"/api/v1/jobs/{j['id']}").json["secondary_status"] == "Training",
               timeout=JOB_TIMEOUT, what="the job to train")
    s = ok(c.post(f"/api/v1/jobs/{j['id']}/stop", json={"grace_s": 2}), 202)
    assert s["status"] == "Stopping", s
    done = wait_job(c, j["id"], until=("Stopped", "Failed", "Completed"))
    assert done["status"] == "Stopped" and done["secondary_status"] == "Stopped", done


def test_a_job_survives_a_restart_of_the_web_process(rd):
    """labd-web dies mid-job; the supervisor restarts it; the job keeps running and its
    end is recorded by the new process (rows are the truth; pools reconciled)."""
    import os
    import signal

    from labd_harness import web_process

    c = make_user(rd, prefix="jrs")
    j = ok(c.post("/api/v1/jobs", json={"name": "outlives", "command": [
        "/bin/sh", "-c", "sleep 3; echo done"]}), 201)
    wait_until(lambda: c.get(f"/api/v1/jobs/{j['id']}").json["secondary_status"] == "Training",
               timeout=JOB_TIMEOUT, what="the job to train")
    old = web_process(rd)
    os.kill(old, signal.SIGKILL)
    wait_until(lambda: web_process(rd) != old, timeout=30, what="a new labd-web")
    c.login(c.user, c.password)
    done = wait_job(c, j["id"])
    assert done["status"] == "Completed", done
    assert [t["status"] for t in done["transitions"]][-3:] == ["Training", "Uploading",
                                                              "Completed"]


def test_gpu_jobs_hold_their_gpu_and_wait_in_turn(runtime_daemon_factory):
    """[gpu] stand_in = 1: a GPU job holds the GPU exclusively (GET /api/v1/gpus names its
    job sandbox); a second GPU job and a GPU runtime asked for meanwhile wait in one fair
    order (less GPU time in 24 h first: the runtime's user, who used none, goes before the
    job's user, whose first job was billed); the job starts once the runtime ends."""
    gd = runtime_daemon_factory("jobs-gpu", gpu={"stand_in": "1"},
                                sections={"quota": {"concurrent_jobs": "10"}})
    c = make_user(gd, prefix="jg")
    first = ok(c.post("/api/v1/jobs", json={"name": "gpu-1", "type": "gpu", "command": [
        "/bin/sh", "-c", "sleep 3"]}), 201)
    wait_until(lambda: c.get(f"/api/v1/jobs/{first['id']}").json["secondary_status"] == "Training",
               timeout=JOB_TIMEOUT, what="the first GPU job to train")
    running = c.get(f"/api/v1/jobs/{first['id']}").json
    gpus = ok(gd.admin().get("/api/v1/gpus"), 200)
    assert gpus["gpus"][0]["state"] == "busy", gpus
    assert gpus["gpus"][0]["holder"]["job_pool_id"] == running["warm_pool"]["id"], gpus
    second = ok(c.post("/api/v1/jobs", json={"name": "gpu-2", "type": "gpu",
                                             "command": ["/bin/true"]}), 201)
    other = make_user(gd, prefix="jgr")
    rt = other.post("/api/v1/me/runtime", json={"type": "gpu"})
    assert rt.status == 202 and rt.json["runtime"]["state"] == "queued", rt
    assert wait_job(c, first["id"])["status"] == "Completed"
    # the runtime's user used no GPU time: the runtime goes first
    wait_until(lambda: other.get("/api/v1/me/runtime").json["runtime"]["state"] != "queued",
               timeout=JOB_TIMEOUT, what="the queued runtime to take the GPU")
    assert c.get(f"/api/v1/jobs/{second['id']}").json["secondary_status"] == "Pending"
    assert other.delete("/api/v1/me/runtime").status == 202
    done = wait_job(c, second["id"], d=gd)
    assert done["status"] == "Completed", (done["failure_reason"], done["transitions"],
                                           gd.log_tail())


def test_a_new_users_first_jobs_start_at_once(rd):
    """A user's first sandboxes make their home image; four jobs submitted at once
    start four pools together, and each must find the image whole (before the fix
    the later ones mounted an image another start was still formatting: "step
    home: ... not ext4")."""
    c = make_user(rd, prefix="jfirst")
    ids = [ok(c.post("/api/v1/jobs", json={"name": f"first-{i}", "command": ["/bin/true"]}),
              201)["id"] for i in range(4)]
    for i in ids:
        done = wait_job(c, i, d=rd)
        assert done["status"] == "Completed", (done["failure_reason"], done["transitions"])


def test_disabling_an_account_stops_its_jobs(rd):
    c = make_user(rd, prefix="jdis")
    j = ok(c.post("/api/v1/jobs", json={"name": "runs-on", "command": ["/bin/sleep", "300"]}), 201)
    wait_until(lambda: c.get(f"/api/v1/jobs/{j['id']}").json["secondary_status"] == "Training",
               timeout=JOB_TIMEOUT, what="the job to train")
    admin = rd.admin()
    ok(admin.patch(f"/api/v1/users/{c.user}", json={"disabled": True}), 200)
    done = wait_job(admin, j["id"], until=("Stopped", "Failed", "Completed"), d=rd)
    assert done["status"] == "Stopped", done


def test_max_runtime_ends_a_job_as_exceeded(rd):
    c = make_user(rd, prefix="jmr")
    j = ok(c.post("/api/v1/jobs", json={"name": "too-long", "max_runtime_s": 1,
                                        "command": ["/bin/sleep", "60"]}), 201)
    done = wait_job(c, j["id"], timeout=30, d=rd)
    assert done["status"] == "Stopped", done
    assert done["secondary_status"] == "MaxRuntimeExceeded", done
    assert done["transitions"][-1]["message"] == "ran past its max_runtime_s of 1 s", done


def job_agents(user):
    """The job agents of user's pools: children of the sandbox's init, whose comm is
    "lsbx-<user>" cut to 15 bytes (sandboxes are reparented to pid 1)."""
    import glob

    from labd_harness import proc_children

    inits = []
    for f in glob.glob("/proc/[0-9]*/comm"):
        try:
            with open(f) as fh:
                if fh.read().strip() == f"lsbx-{user}"[:15]:
                    inits.append(int(f.split("/")[2]))
        except (OSError, ValueError):
            pass
    agents = []
    for i in inits:
        for k in proc_children(i):
            try:
                with open(f"/proc/{k}/comm") as fh:
                    if fh.read().strip() == "labd-jobagent":
                        agents.append(k)
            except OSError:
                pass
    return agents


def proc_parent(pid):
    with open(f"/proc/{pid}/status") as fh:
        return next(int(ln.split()[1]) for ln in fh if ln.startswith("PPid:"))


def test_infrastructure_failure_retries_from_the_checkpoint(rd):
    """The job's sandbox dies under it (its init is killed from outside, as a lost
    machine would be): the job goes back to Starting on a new pool (attempt 2) and its
    script finds the checkpoint the first attempt wrote. (An agent killed alone is the
    job's own doing: test_jobs_hostile.py.)"""
    import os
    import signal

    c = make_user(rd, prefix="jrt")
    script = ("if [ -f /opt/ml/checkpoints/step ]; then echo resumed; exit 0; fi; "
              "echo 1 > /opt/ml/checkpoints/step; sleep 60")
    j = ok(c.post("/api/v1/jobs", json={"name": "resumes", "max_retries": 1,
                                        "command": ["/bin/sh", "-c", script]}), 201)
    wait_until(lambda: c.get(f"/api/v1/jobs/{j['id']}").json["secondary_status"] == "Training",
               timeout=JOB_TIMEOUT, what="the job to train")
    first_pool = c.get(f"/api/v1/jobs/{j['id']}").json["warm_pool"]["id"]
    time.sleep(0.5)  # the checkpoint written
    agents = wait_until(lambda: job_agents(c.user), timeout=10, what="the job's agent")
    for a in agents:
        os.kill(proc_parent(a), signal.SIGKILL)  # the agent's parent: the sandbox's init
    done = wait_job(c, j["id"], d=rd)
    assert done["status"] == "Completed", (done["failure_reason"], done["transitions"])
    assert done["attempt"] == 2
    assert done["warm_pool"]["id"] != first_pool
    statuses = [t["status"] for t in done["transitions"]]
    assert statuses.count("Starting") == 2, statuses
    retry = [t for t in done["transitions"] if t["message"].startswith("labd lost")]
    assert retry and "retry 1 of 1" in retry[0]["message"], done["transitions"]
    rows = ledger(rd, job_id=j["id"])
    assert len(rows) == 2, rows  # one entry per attempt


def test_a_whole_daemon_restart_retries_the_lost_job(runtime_daemon_factory):
    """labd stops and starts again while a job trains ([runtime] keep_on_shutdown = false:
    pools end with labd; with true they are kept, test_jobs_restart.py): the job is lost
    (stopped by labd's shutdown, not by the user), and the web process retries it on a new
    pool, where the script resumes from its checkpoint."""
    d = runtime_daemon_factory("jobs-restart", runtime={"keep_on_shutdown": "false"},
                               sections={"quota": {"concurrent_jobs": "10"}})
    c = make_user(d, prefix="jwr")
    script = ("if [ -f /opt/ml/checkpoints/step ]; then echo resumed; exit 0; fi; "
              "echo 1 > /opt/ml/checkpoints/step; sleep 60")
    j = ok(c.post("/api/v1/jobs", json={"name": "survives", "max_retries": 2,
                                        "command": ["/bin/sh", "-c", script]}), 201)
    wait_until(lambda: c.get(f"/api/v1/jobs/{j['id']}").json["secondary_status"] == "Training",
               timeout=JOB_TIMEOUT, what="the job to train")
    time.sleep(0.5)
    d.stop()
    d.start(expect_admin_password=False)
    c.login(c.user, c.password)
    done = wait_job(c, j["id"], d=d)
    assert done["status"] == "Completed", (done["failure_reason"], done["transitions"])
    assert done["attempt"] == 2, done["transitions"]
    # lost with the supervisor's restart, or stopped by labd's shutdown (not by the user)
    assert any(t["message"].startswith("labd lost the job's sandbox")
               for t in done["transitions"]), done["transitions"]
    # not kept warm: its pool is torn down before labd stops (which would keep it)
    import glob
    import os

    wait_until(lambda: not glob.glob(os.path.join(d.state_dir, "sandboxes", f"{c.user}-*")),
               timeout=30, what="the pool's sandbox to be torn down")
