"""Training jobs against a hostile user (docs/jobs.md "Retries", docs/security.md):

- a job that kills its own job agent (kill -9 -1, or the agent alone by its pid) ends
  Failed at once, on attempt 1 with one ledger entry, and says so: ending its own
  sandbox is the job's failure, never a loss labd retries (with a fresh max runtime
  and no quota check, that was a way past both);
- the same after a restart of labd, which takes the pool over from its keeper;
- a sandbox labd loses (its init killed from outside, as a lost machine) is retried,
  but a retry is a new start: refused when the user's quota window is used up, and
  it trains only what is left of max_runtime_s (training time counts across attempts);
- a staging failure whose reason cuts a multi-byte path mid-character still ends the
  job with its reason (the supervisor's job_exited stays valid UTF-8)."""

import os
import signal
import sqlite3
import time

import pytest

from jobs_lib import get_job, jobs_daemon, new_user, submit, wait_job
from labd_harness import SLOW, sandbox_records, user_id, wait_until

AGENT_KILLED = "killed its job agent"


@pytest.fixture(scope="module")
def hd(runtime_daemon_factory):
    return jobs_daemon(runtime_daemon_factory, "jobs-hostile",
                       runtime={"keep_on_shutdown": "true"},
                       quota={"concurrent_jobs": "10"})


def job_ledger(d, job_id):
    db = sqlite3.connect(f"file:{d.db_file}?mode=ro", uri=True, timeout=10)
    try:
        return db.execute("SELECT billable_s, end_reason FROM ledger"
                          " WHERE job_id = ? AND source = 'job'", (job_id,)).fetchall()
    finally:
        db.close()


def sandbox_init_pid(d, user):
    """The host pid of the init of user's pool sandbox (its state file's pid)."""
    recs = [kv for _, kv in sandbox_records(d.state_dir)
            if kv.get("user") == user and kv.get("pid")]
    assert recs, f"no sandbox of {user}: {sandbox_records(d.state_dir)}"
    return int(recs[-1]["pid"])


def training(c, job_id):
    return wait_job(c, job_id, statuses=("InProgress",), secondary="Training",
                    timeout=90 * SLOW)


def assert_failed_once(d, j):
    assert j["status"] == "Failed" and j["secondary_status"] == "Failed", j
    assert j["attempt"] == 1, j["transitions"]
    assert AGENT_KILLED in (j["failure_reason"] or ""), j
    assert not any("retry" in (t["message"] or "") for t in j["transitions"]), j["transitions"]
    assert len(job_ledger(d, j["id"])) == 1, job_ledger(d, j["id"])


def test_kill_minus_one_fails_the_job_once(hd):
    _, c = new_user(hd, "jhk")
    j = submit(c, ["/bin/sh", "-c", "echo up; sleep 1; kill -9 -1; sleep 60"], max_retries=3)
    j = wait_job(c, j["id"], timeout=90 * SLOW)
    assert_failed_once(hd, j)


def test_killing_just_the_agent_fails_the_job_once(hd):
    # the shell's parent is the agent: its own processes live on when it dies
    _, c = new_user(hd, "jha")
    j = submit(c, ["/bin/sh", "-c", "sleep 1; kill -SEGV $PPID; sleep 60"], max_retries=3)
    j = wait_job(c, j["id"], timeout=90 * SLOW)
    assert_failed_once(hd, j)
    assert "signal 11" in j["failure_reason"], j


def refused_retry(d, kind):
    """A job of kind whose sandbox labd loses once the user's 24 h window of that kind
    is used up: the retry is refused, naming the window."""
    limit = f"{kind}_s_per_24h"
    name, c = new_user(d, "jhq", overrides={limit: 3600})
    j = submit(c, ["/bin/sh", "-c", "sleep 120"], max_retries=3, type=kind)
    training(c, j["id"])
    # the rest of the window used by something else meanwhile (a closed entry)
    now = int(time.time())
    db = sqlite3.connect(d.db_file, timeout=10)
    try:
        db.execute(
            "INSERT INTO ledger (user_id, user_name, kind, plan, start_at, end_at, billable_s,"
            " end_reason, last_heartbeat) VALUES (?, ?, ?, 'default', ?, ?, 3600, 'seeded', ?)",
            (user_id(d, name), name, kind, now - 7200, now - 3600, now - 3600))
        db.commit()
    finally:
        db.close()
    os.kill(sandbox_init_pid(d, name), signal.SIGKILL)  # labd loses the sandbox
    j = wait_job(c, j["id"], timeout=90 * SLOW)
    assert j["status"] == "Failed" and j["secondary_status"] == "Interrupted", j
    assert "retry is refused" in j["failure_reason"], j
    assert limit in j["failure_reason"], j
    assert "Downloading" not in [t["status"] for t in j["transitions"][-3:]], j["transitions"]


def test_a_lost_sandbox_retry_is_refused_once_the_window_is_used_up(hd):
    refused_retry(hd, "cpu")


def test_a_lost_gpu_jobs_retry_is_refused_once_the_gpu_window_is_used_up(runtime_daemon_factory):
    gd = jobs_daemon(runtime_daemon_factory, "jobs-hostile-gpu", gpu={"stand_in": "1"},
                     quota={"concurrent_jobs": "10"})
    refused_retry(gd, "gpu")


def test_max_runtime_counts_across_attempts(hd):
    name, c = new_user(hd, "jhr")
    script = ("if [ -f /opt/ml/checkpoints/one ]; then echo resumed; exec sleep 60; fi; "
              "touch /opt/ml/checkpoints/one; exec sleep 60")
    j = submit(c, ["/bin/sh", "-c", script], max_retries=1, max_runtime_s=10)
    training(c, j["id"])
    time.sleep(6)
    os.kill(sandbox_init_pid(hd, name), signal.SIGKILL)  # labd loses the sandbox
    j = wait_job(c, j["id"], timeout=90 * SLOW)
    assert j["attempt"] == 2, j["transitions"]
    assert j["status"] == "Stopped" and j["secondary_status"] == "MaxRuntimeExceeded", j
    # 6 s, then what was left (about 4 s), not a fresh 10 s (16 s and more before);
    # sleep ends at SIGTERM; the slack is the events' delays on a loaded machine
    assert 6 <= j["training_s"] <= 10 + 4, (j["training_s"], j["transitions"])


def test_a_job_that_killed_its_agent_after_a_restart_is_not_retried(hd):
    """A restarted supervisor takes the pool over, with init's word on how the
    agent ended (its keeper holds that pipe too)."""
    _, c = new_user(hd, "jhs")
    j = submit(c, ["/bin/sh", "-c", "sleep 20; kill -9 -1; sleep 60"], max_retries=3)
    training(c, j["id"])
    assert hd.stop(15) == 0, hd.log_tail()
    hd.start(expect_admin_password=False)
    c.login(c.name, c.password)
    j = wait_job(c, j["id"], timeout=120 * SLOW)
    assert_failed_once(hd, j)


def test_a_path_cut_mid_character_keeps_the_jobs_end(hd):
    """'stage_failed: working dir %.80s' cuts a 3-byte character: the reason is
    still valid UTF-8, so the job ends at once with it, not a minute later as
    "labd lost the job's end"."""
    _, c = new_user(hd, "jhu")
    t0 = time.monotonic()
    j = submit(c, ["true"], working_dir="\u20ac" * 30)
    j = wait_job(c, j["id"], timeout=40 * SLOW)
    assert j["status"] == "Failed", j
    assert "working dir" in j["failure_reason"] and "\u20ac" * 20 in j["failure_reason"], j
    assert time.monotonic() - t0 < 30 * SLOW, j
    assert get_job(c, j["id"])["attempt"] == 1
