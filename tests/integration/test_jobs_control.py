"""Jobs that end badly or are ended: max runtime, out of memory said plainly, a
user failure that does not retry, stop with a grace period that lets a script save
its checkpoint, a script that ignores SIGTERM killed at the grace, the
concurrent_jobs quota, and another user's job out of sight."""

import sqlite3
import time

import pytest

from jobs_lib import (
    PY,
    get_job,
    home_run,
    jobs_daemon,
    log_text,
    new_user,
    put_files,
    script,
    secondaries,
    submit,
    wait_job,
)
from labd_harness import SLOW, assert_error, assert_status, user_id, wait_until


@pytest.fixture(scope="module")
def jd(runtime_daemon_factory):
    return jobs_daemon(runtime_daemon_factory, "jobs-control")


@pytest.fixture(scope="module")
def owner(jd):
    _, c = new_user(jd, "jc")
    put_files(c, {"code/sigterm_save.py": script("sigterm_save.py"),
                  "code/oom.py": script("oom.py")})
    return c


def test_max_runtime_exceeded(owner):
    j = submit(owner, ["/bin/sh", "-c", "echo started; exec sleep 60"], max_runtime_s=2)
    assert j["max_runtime_s"] == 2, j
    t0 = time.monotonic()
    j = wait_job(owner, j["id"], timeout=30 * SLOW)
    assert time.monotonic() - t0 < 20 * SLOW, j
    assert j["status"] in ("Stopped", "Failed") and j["secondary_status"] == "MaxRuntimeExceeded", j
    assert "MaxRuntimeExceeded" in secondaries(j), j["transitions"]
    assert "max" in (j["failure_reason"] or "").lower() or \
        "MaxRuntimeExceeded" == j["transitions"][-1]["status"], j
    assert j["training_s"] <= 2 + 6, j  # runtime, then at most the grace (5 s)
    assert "started" in log_text(owner, j["id"])


def test_out_of_memory_is_said_plainly(owner):
    j = submit(owner, [PY, "code/oom.py"], memory_bytes=128 << 20)
    j = wait_job(owner, j["id"])
    log = log_text(owner, j["id"])
    assert j["status"] == "Failed" and j["secondary_status"] == "Failed", f"{j}\n{log}"
    assert "out of memory" in j["failure_reason"].lower(), j
    assert "held=" in log, log
    # a user failure is not retried
    assert j["attempt"] <= 1 and j["max_retries"] == 0, j


def test_exit_code_and_failure_file(owner):
    j = submit(owner, ["/bin/sh", "-c",
                       "echo 'bad hyperparameter: lr' > /opt/ml/output/failure; exit 3"],
               max_retries=2)
    j = wait_job(owner, j["id"])
    assert j["status"] == "Failed" and j["exit_code"] == 3, j
    assert "bad hyperparameter: lr" in j["failure_reason"], j
    assert j["attempt"] <= 1, f"a user failure was retried: {j}"


def test_stop_with_grace_keeps_the_checkpoint(owner):
    j = submit(owner, [PY, "code/sigterm_save.py"], name="saver")
    wait_until(lambda: "tick=3" in log_text(owner, j["id"]), 60 * SLOW, "three ticks")
    r = owner.post(f"/api/v1/jobs/{j['id']}/stop", json={"grace_s": 20})
    assert_status(r, 202)
    assert r.json["status"] in ("Stopping", "Stopped"), r.json
    j = wait_job(owner, j["id"], timeout=40 * SLOW)
    log = log_text(owner, j["id"])
    assert (j["status"], j["secondary_status"]) == ("Stopped", "Stopped"), f"{j}\n{log}"
    saved = [ln for ln in log.splitlines() if ln.startswith("saved tick=")]
    assert saved and "signal=15" in saved[0], log
    tick = saved[0].split()[1].split("=")[1]
    _, out = home_run(owner, "cat jobs/saver/checkpoints/state")
    assert out.strip() == tick, (out, log)


def test_stop_kills_at_the_grace_when_sigterm_is_ignored(owner):
    j = submit(owner, ["/bin/sh", "-c", "trap '' TERM; echo ignoring; while :; do sleep 0.1; done"])
    wait_until(lambda: "ignoring" in log_text(owner, j["id"]), 60 * SLOW, "the script to start")
    t0 = time.monotonic()
    assert_status(owner.post(f"/api/v1/jobs/{j['id']}/stop", json={"grace_s": 1}), 202)
    j = wait_job(owner, j["id"], timeout=30 * SLOW)
    waited = time.monotonic() - t0
    assert j["status"] == "Stopped", j
    assert 1 <= waited < 10 * SLOW, waited
    # stopping a job that is over changes nothing
    r = owner.post(f"/api/v1/jobs/{j['id']}/stop")
    assert r.status in (202, 409), r
    assert get_job(owner, j["id"])["status"] == "Stopped"


def test_concurrent_jobs_quota_refuses_and_creates_nothing(jd):
    name, c = new_user(jd, "jq", overrides={"concurrent_jobs": 1})
    first = submit(c, ["/bin/sh", "-c", "exec sleep 60"])
    total = c.get("/api/v1/jobs").json["total"]
    r = c.post("/api/v1/jobs", json={"name": "second", "command": ["true"]})
    assert r.status == 429 and set(r.json) == {"error"}, r
    e = r.json["error"]
    assert e["code"] == "quota_exceeded" and e["limit"] == "concurrent_jobs", e
    assert "concurrent_jobs" in e["message"], e
    assert c.get("/api/v1/jobs").json["total"] == total
    assert_status(c.post(f"/api/v1/jobs/{first['id']}/stop", json={"grace_s": 1}), 202)
    wait_job(c, first["id"])
    j = submit(c, ["true"], name="second")
    assert wait_job(c, j["id"])["status"] == "Completed"


def test_other_users_jobs_are_out_of_sight(jd, owner):
    _, other = new_user(jd, "jo")
    mine = owner.get("/api/v1/jobs?limit=1").json["jobs"][0]
    assert_error(other.get(f"/api/v1/jobs/{mine['id']}"), 404)
    assert_error(other.post(f"/api/v1/jobs/{mine['id']}/stop"), 404)
    assert_error(other.get(f"/api/v1/jobs/{mine['id']}/logs"), 404)
    assert other.get("/api/v1/jobs").json["total"] == 0
    # an admin sees them with ?user=
    r = jd.admin().get(f"/api/v1/jobs?user={owner.name}")
    assert_status(r, 200)
    assert mine["id"] in [j["id"] for j in r.json["jobs"]], r.json


def test_jobs_scope_is_needed_for_a_token(jd, owner):
    def token(scopes):
        r = owner.post("/api/v1/me/tokens", json={"name": f"t-{'-'.join(scopes)}",
                                                  "password": owner.password, "scopes": scopes})
        assert_status(r, 201)
        c = jd.client()
        c.bearer = r.json["token"]
        return c

    usage_only = token(["read:usage"])
    assert_error(usage_only.get("/api/v1/jobs"), 403, "insufficient_scope")
    assert_error(usage_only.post("/api/v1/jobs", json={"name": "nope", "command": ["true"]}),
                 403, "insufficient_scope")
    jobs = token(["jobs"])
    assert_status(jobs.get("/api/v1/jobs"), 200)
    j = submit(jobs, ["true"], name="by-token")
    assert wait_job(jobs, j["id"])["status"] == "Completed"


def test_used_up_cpu_window_refuses_a_job(jd):
    """The job quota is the runtimes' quota: with the 24 h CPU window used up (a
    closed ledger entry seeded as test_quota_enforce does), a submit is a 429
    naming the window, and nothing is created."""
    name, c = new_user(jd, "jw", overrides={"cpu_s_per_24h": 3600})
    now = int(time.time())
    db = sqlite3.connect(jd.db_file, timeout=10)
    try:
        db.execute(
            "INSERT INTO ledger (user_id, user_name, kind, plan, start_at, end_at, billable_s,"
            " end_reason, last_heartbeat) VALUES (?, ?, 'cpu', 'default', ?, ?, 3600, 'seeded', ?)",
            (user_id(jd, name), name, now - 7200, now - 3600, now - 3600))
        db.commit()
    finally:
        db.close()
    r = c.post("/api/v1/jobs", json={"name": "over", "command": ["true"]})
    assert r.status == 429 and r.json["error"]["code"] == "quota_exceeded", r
    assert r.json["error"]["limit"] == "cpu_s_per_24h", r.json
    assert c.get("/api/v1/jobs").json["total"] == 0
