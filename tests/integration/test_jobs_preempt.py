"""Preemptible jobs (docs/jobs.md "Preemptible capacity"), on one daemon with one
stand-in GPU and a 3 s stop grace:

- `capacity` is checked (400 naming the field) and shown;
- a GPU runtime asked for while a preemptible job holds the GPU leaves the queue
  within the grace (the job ignores SIGTERM, so the kill at the grace is what frees
  the GPU); the job goes back to Pending with the reason Preempted (no retry used),
  resumes when the runtime ends and completes from its checkpoint (its counter goes
  on); its interruption says when and what waited; its ledger entries bill the
  plan's preemptible_rate, and the resumed attempt's Starting and Downloading are
  not billed;
- an on-demand GPU job preempts it too; a preemptible job never preempts anything
  (not another preemptible job, not an on-demand job);
- a restart of labd in the middle of a preemption: the job is put back in the queue
  once its end comes, and resumes."""

import time

import pytest

from jobs_lib import (
    PY,
    at,
    get_job,
    jobs_daemon,
    log_text,
    new_user,
    script,
    submit,
    usage_entries,
    wait_job,
)
from labd_harness import SLOW, assert_status, wait_until

GRACE_S = 3
RATE = 0.5


@pytest.fixture(scope="module")
def pd(runtime_daemon_factory):
    return jobs_daemon(runtime_daemon_factory, "jobs-preempt", gpu={"stand_in": "1"},
                       jobs={"grace": f"{GRACE_S}s"}, runtime={"keep_on_shutdown": "true"},
                       quota={"concurrent_jobs": "10"})


@pytest.fixture(scope="module")
def plan(pd):
    """A plan that bills preemptible seconds at RATE."""
    a = pd.admin()
    bad = a.post("/api/v1/plans", json={"name": "spotbad", "limits": {}, "preemptible_rate": 1.5})
    assert bad.status == 400 and "preemptible_rate" in bad.json["error"]["message"], bad
    r = a.post("/api/v1/plans", json={"name": "spot", "limits": {}, "preemptible_rate": RATE})
    assert_status(r, 201)
    assert r.json["plan"]["preemptible_rate"] == RATE, r.json
    return "spot"


def counting(target, ignore_term=True):
    """resume.py (a counter saved in /opt/ml/checkpoints) as a command; with
    ignore_term the shell ignores SIGTERM for it, so only the kill at the grace
    stops it."""
    trap = "trap '' TERM; " if ignore_term else ""
    return dict(command=["/bin/sh", "-c", trap + f'exec {PY} -c "$RESUME"'],
                environment={"RESUME": script("resume.py")}, hyperparameters={"target": target})


def submit_counting(c, target, ignore_term=True, **fields):
    spec = counting(target, ignore_term)
    return submit(c, spec.pop("command"), **spec, **fields)


def counted(c, job_id, n):
    wait_until(lambda: f"count={n}\n" in log_text(c, job_id), 60 * SLOW,
               lambda: f"count={n}: {get_job(c, job_id)}")


def preempted(c, job_id):
    """Waits until the job is back in the queue after a preemption; returns it."""
    return wait_until(lambda: (j := get_job(c, job_id))["status_reason"] == "Preempted" and j,
                      30 * SLOW, lambda: f"job {job_id} preempted: {get_job(c, job_id)}")


def runtime(c):
    return c.get("/api/v1/me/runtime").json["runtime"]


def stop_runtime(c):
    assert c.delete("/api/v1/me/runtime").status in (200, 202)
    wait_until(lambda: runtime(c)["state"] in ("stopped", "failed"), 30 * SLOW, "runtime stopped")


def resumed_and_done(c, job_id, target, at_least):
    j = wait_job(c, job_id, timeout=90 * SLOW)
    log = log_text(c, job_id)
    assert j["status"] == "Completed", f"{j}\n{log}"
    resumed = [int(ln.split()[-1]) for ln in log.splitlines() if ln.startswith("resumed from")]
    assert resumed and resumed[0] >= at_least, log  # it went on from its checkpoint
    assert f"done at {target}" in log, log
    assert j["attempt"] == 1 and j["preemptions"] >= 1, j  # no retry used
    return j


def test_capacity_is_checked_and_shown(pd):
    _, c = new_user(pd, "pc")
    r = submit(c, ["true"], capacity="spot", expect=None)
    assert r.status == 400 and r.json["error"]["field"] == "capacity", r
    r = submit(c, ["true"], capacity="preemptible", keep_alive_s=60, expect=None)
    assert r.status == 400 and r.json["error"]["field"] == "keep_alive_s", r
    j = submit(c, ["true"])
    assert j["capacity"] == "on-demand" and j["preemptions"] == 0, j
    j = submit(c, ["true"], capacity="preemptible")
    assert j["capacity"] == "preemptible" and j["status_reason"] is None, j
    wait_job(c, j["id"])


def test_a_gpu_runtime_preempts_within_the_grace_and_the_job_resumes(pd, plan):
    _, a = new_user(pd, "pa", plan=plan)
    _, b = new_user(pd, "pb")
    j = submit_counting(a, 40, type="gpu", capacity="preemptible")
    counted(a, j["id"], 6)
    asked = time.time()
    r = b.post("/api/v1/me/runtime", json={"type": "gpu"})
    assert r.status == 202 and r.json["runtime"]["state"] == "queued", r
    wait_until(lambda: runtime(b)["state"] != "queued", (GRACE_S + 4) * SLOW,
               lambda: f"runtime still queued: {runtime(b)} {get_job(a, j['id'])}")
    # the grace, then the sandbox's teardown and the GPU queue's next look (1 s):
    # measured 4.0 s with a 3 s grace
    waited = time.time() - asked
    assert waited <= GRACE_S + 2 * SLOW, waited
    q = preempted(a, j["id"])
    assert q["secondary_status"] == "Pending" and q["attempt"] == 1, q
    x = q["interruptions"]
    assert len(x) == 1 and x[0]["reason"] == "Preempted" and b.name in x[0]["waiting"], x
    assert "GPU runtime" in x[0]["waiting"] and x[0]["requeued_at"] and not x[0]["resumed_at"], x
    assert at(x[0]["requeued_at"]) - at(x[0]["at"]) >= GRACE_S - 0.5, x  # SIGTERM ignored
    saved = int(log_text(a, j["id"]).split("count=")[-1].split()[0])
    time.sleep(1)
    assert get_job(a, j["id"])["secondary_status"] == "Pending"  # the GPU is the runtime's
    stop_runtime(b)
    done = resumed_and_done(a, j["id"], 40, saved)
    assert done["interruptions"][0]["resumed_at"], done["interruptions"]

    # billing: two attempts' entries at the plan's rate; the resumed one opens at Training
    entries = [e for e in usage_entries(a) if e["source"] == "job" and e["job_id"] == j["id"]]
    assert len(entries) == 2, entries
    for e in entries:
        assert e["capacity"] == "preemptible" and e["rate"] == RATE, e
        assert e["charged_s"] == int(e["billable_s"] * RATE + 0.5), e
    trainings = [t for t in done["transitions"] if t["status"] == "Training"]
    assert len(trainings) == 2, done["transitions"]
    assert abs(entries[1]["start_s"] - at(trainings[1]["start_at"])) <= 1, (entries, trainings)
    assert entries[0]["end_reason"] == "preempted", entries
    assert abs(done["charged_s"] - sum(e["charged_s"] for e in entries)) <= 1, done
    assert done["billable_s"] == sum(e["billable_s"] for e in entries), done


def test_an_on_demand_job_preempts_and_a_preemptible_one_never_does(pd):
    _, a = new_user(pd, "pd")
    _, c = new_user(pd, "pe")
    j = submit_counting(a, 24, False, type="gpu", capacity="preemptible")
    counted(a, j["id"], 4)
    # another preemptible GPU job waits: it preempts nothing
    other = submit(c, ["/bin/sh", "-c", "echo other"], type="gpu", capacity="preemptible")
    time.sleep(2)
    assert get_job(a, j["id"])["preemptions"] == 0 and get_job(a, j["id"])["preempting"] is None
    assert get_job(c, other["id"])["secondary_status"] == "Pending"
    # an on-demand GPU job does
    od = submit(c, ["/bin/sh", "-c", "sleep 2; echo on-demand"], type="gpu")
    q = preempted(a, j["id"])
    assert f"on-demand job {od['id']}" in q["interruptions"][0]["waiting"], q
    saved = int(log_text(a, j["id"]).split("count=")[-1].split()[0])
    odj = wait_job(c, od["id"], timeout=60 * SLOW)
    assert odj["status"] == "Completed" and odj["preemptions"] == 0, odj
    # both preemptible jobs run again once it is done; neither preempts the other
    resumed_and_done(a, j["id"], 24, saved)
    oj = wait_job(c, other["id"], timeout=60 * SLOW)
    assert oj["status"] == "Completed" and oj["preemptions"] == 0, oj

    # an on-demand job holding the GPU is never preempted by a preemptible one
    held = submit(c, ["/bin/sh", "-c", "sleep 3; echo held"], type="gpu")
    wait_job(c, held["id"], statuses=("InProgress",), secondary="Training")
    late = submit(a, ["/bin/sh", "-c", "echo late"], type="gpu", capacity="preemptible")
    hj = wait_job(c, held["id"], timeout=60 * SLOW)
    assert hj["status"] == "Completed" and hj["preemptions"] == 0 and not hj["interruptions"], hj
    assert wait_job(a, late["id"], timeout=60 * SLOW)["status"] == "Completed"


def test_a_restart_mid_preemption_requeues_and_resumes(pd):
    _, a = new_user(pd, "pr")
    _, b = new_user(pd, "ps")
    j = submit_counting(a, 40, type="gpu", capacity="preemptible")
    counted(a, j["id"], 6)
    assert b.post("/api/v1/me/runtime", json={"type": "gpu"}).status == 202
    wait_until(lambda: get_job(a, j["id"])["preempting"], 10 * SLOW, "preemption begun")
    assert pd.stop(15) == 0, pd.log_tail()  # within the grace: SIGTERM is ignored by the job
    pd.start(expect_admin_password=False)
    a.login(a.name, a.password)
    b.login(b.name, b.password)
    q = preempted(a, j["id"])
    assert q["attempt"] == 1 and len(q["interruptions"]) == 1, q
    wait_until(lambda: runtime(b)["state"] in ("starting", "running"), 30 * SLOW,
               lambda: f"runtime after the restart: {runtime(b)}")
    saved = int(log_text(a, j["id"]).split("count=")[-1].split()[0])
    stop_runtime(b)
    resumed_and_done(a, j["id"], 40, saved)


def test_its_own_users_gpu_runtime_preempts_it_past_the_gpu_cap(pd):
    """[quota] gpus_held is 1: a user's GPU runtime start is not refused for their own
    preemptible GPU job, which gives way to it."""
    _, a = new_user(pd, "pu")
    j = submit_counting(a, 200, False, type="gpu", capacity="preemptible")
    counted(a, j["id"], 2)
    r = a.post("/api/v1/me/runtime", json={"type": "gpu"})
    assert r.status == 202, r  # queued, not 429 gpus_held
    q = preempted(a, j["id"])
    assert a.name in q["interruptions"][0]["waiting"], q
    wait_until(lambda: runtime(a)["state"] in ("starting", "running"), 20 * SLOW,
               lambda: f"runtime: {runtime(a)}")
    stop_runtime(a)
    assert_status(a.post(f"/api/v1/jobs/{j['id']}/stop", json={"grace_s": 1}), 202)
    assert wait_job(a, j["id"])["status"] == "Stopped"
