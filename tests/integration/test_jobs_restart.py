"""Restarts of labd while jobs run (docs/jobs.md "Restarts").

With [runtime] keep_on_shutdown = true (the default) job pools are kept like
runtimes: each pool's keeper drains the job's output into its log and holds the
agent's pipes, and the next supervisor takes the pool over.  A job running across
a restart of the whole daemon (SIGTERM, or the supervisor SIGKILLed) ends in its
first attempt; its log holds every line exactly once and a follower resuming by
Last-Event-ID gets the rest exactly once; its metric has points from before and
after the restart; its ledger entry matches its phases.  A warm pool stays warm
with its available_until and the next matching job reuses it.  Killing the web
process alone changes nothing.  With keep_on_shutdown = false the pools end with
labd and a job with a retry left resumes from its checkpoint (attempt 2)."""

import os
import signal
import sqlite3
import time

import pytest

from jobs_lib import (
    PY,
    SSE,
    at,
    get_job,
    jobs_daemon,
    log_text,
    metric_values,
    new_user,
    put_files,
    script,
    submit,
    usage_entries,
    wait_job,
)
from labd_harness import SLOW, assert_status, sandbox_records, wait_until, web_process

N = 60  # lines the counting job prints, one every 0.2 s: 12 s, across the restart
STEP = [{"name": "step", "regex": r"step=([0-9]+)"}]


@pytest.fixture(scope="module")
def rd(runtime_daemon_factory):
    return jobs_daemon(runtime_daemon_factory, "jobs-restart", runtime={"keep_on_shutdown": "true"})


def counter(n=N, every_s=0.2):
    return ["/bin/sh", "-c", f"i=0; while [ $i -lt {n} ]; do i=$((i+1)); echo step=$i; "
                             f"sleep {every_s}; done"]


def follow_until(c, job_id, want, last_id=None):
    """Follows the job's log (from last_id) until `want` lines came or it ended;
    (lines, last event id, whether the end came)."""
    headers = {"Last-Event-ID": last_id} if last_id else None
    s = SSE(c, f"/api/v1/jobs/{job_id}/logs?follow=1", headers=headers, timeout=60 * SLOW)
    got, ended = [], False
    try:
        assert s.status == 200, s.status
        while want is None or len(got) < want:
            ev = s.event()
            if ev["event"] == "end":
                ended = True
                break
            assert ev["event"] == "log", ev
            got += ev["data"].split("\n")
            last_id = ev["id"]
    finally:
        s.close()
    return got, last_id, ended


def restart(rd, how):
    if how == "sigterm":
        assert rd.stop(15) == 0, rd.log_tail()
    else:  # the supervisor and its web process die at once: no clean stop
        os.killpg(rd.proc.pid, signal.SIGKILL)
        rd.proc.wait(10)
    rd.start(expect_admin_password=False)


def check_ledger(c, j):
    phases = {t["status"]: t for t in j["transitions"]}
    start = at(phases["Starting"]["start_at"])
    end = at(phases["Uploading"]["end_at"])
    jobs = [e for e in usage_entries(c) if e["source"] == "job" and e["job_id"] == j["id"]]
    assert len(jobs) == 1, jobs
    assert abs(jobs[0]["billable_s"] - (end - start)) <= 2, (jobs[0], start, end)
    assert abs(j["billable_s"] - (end - start)) <= 2, (j["billable_s"], start, end)


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_job_runs_on_across_a_daemon_restart(rd, how):
    _, c = new_user(rd, "jr" + how[3])
    j = submit(c, counter(), max_retries=0, metric_definitions=STEP)
    first, last_id, _ = follow_until(c, j["id"], 5)
    assert first[:5] == ["step=1", "step=2", "step=3", "step=4", "step=5"], first
    wait_until(lambda: "step=10\n" in log_text(c, j["id"]), 60 * SLOW, "step=10")
    before = metric_values(c, j["id"], "step")
    assert before, "no metric point before the restart"
    restart(rd, how)
    c.login(c.name, c.password)
    rest, last_id, ended = follow_until(c, j["id"], None, last_id)
    assert ended and first + rest == [f"step={i}" for i in range(1, N + 1)], (first, rest)
    j = wait_job(c, j["id"], timeout=60 * SLOW)
    log = log_text(c, j["id"])
    assert j["status"] == "Completed" and j["attempt"] == 1, f"{j}\n" + rd.log_tail()
    assert log == "".join(f"step={i}\n" for i in range(1, N + 1)), log
    assert int(last_id) == j["log_bytes"] == len(log.encode()), (last_id, j["log_bytes"])
    points = metric_values(c, j["id"], "step")
    assert points == list(range(1, N + 1)), points  # each line read once, across the restart
    assert max(before) < N and min(points) == 1, (before, points)
    assert [t["status"] for t in j["transitions"]].count("Training") == 1, j["transitions"]
    check_ledger(c, j)


def test_warm_pool_stays_warm_across_a_restart(rd):
    name, c = new_user(rd, "jw")
    stamp = ["/bin/sh", "-c", "echo warm"]
    first = wait_job(c, submit(c, stamp, keep_alive_s=300)["id"])
    assert first["status"] == "Completed", first
    wp = first["warm_pool"]
    assert wp["status"] == "Available", wp
    restart(rd, "sigterm")
    c.login(c.name, c.password)
    after = get_job(c, first["id"])["warm_pool"]
    assert after["status"] == "Available" and after["available_until"] == wp["available_until"], \
        (wp, after)
    second = wait_job(c, submit(c, stamp, keep_alive_s=300)["id"])
    assert second["status"] == "Completed", second
    assert second["warm_pool"]["reused"] is True and second["warm_pool"]["id"] == wp["id"], second
    assert "Starting" not in [t["status"] for t in second["transitions"]], second["transitions"]
    assert_status(c.delete(f"/api/v1/warm-pools/{wp['id']}"), 204)
    wait_until(lambda: not [kv for _, kv in sandbox_records(rd.state_dir) if kv.get("user") == name],
               20 * SLOW, "the released pool's sandbox to go")


def test_web_process_alone_killed_changes_nothing(rd):
    _, c = new_user(rd, "jk")
    j = submit(c, counter(40, 0.2), max_retries=0)
    wait_until(lambda: "step=5\n" in log_text(c, j["id"]), 60 * SLOW, "step=5")
    old = web_process(rd)
    os.kill(old, signal.SIGKILL)
    wait_until(lambda: (lambda p: p != old and p)(web_process(rd)), 30 * SLOW,
               "the supervisor to start a new labd-web")
    j = wait_job(c, j["id"], timeout=60 * SLOW)
    assert j["status"] == "Completed" and j["attempt"] == 1, j
    assert log_text(c, j["id"]) == "".join(f"step={i}\n" for i in range(1, 41))


@pytest.fixture(scope="module")
def ed(runtime_daemon_factory):
    return jobs_daemon(runtime_daemon_factory, "jobs-restart-end",
                       runtime={"keep_on_shutdown": "false"})


def test_without_keep_on_shutdown_pools_end_and_jobs_retry(ed):
    _, c = new_user(ed, "je")
    put_files(c, {"code/resume.py": script("resume.py")})
    j = submit(c, [PY, "code/resume.py"], name="across", max_retries=1,
               hyperparameters={"target": 16})
    wait_until(lambda: "count=3" in log_text(c, j["id"]), 60 * SLOW, "count=3")
    assert ed.stop(30) == 0, ed.log_tail()
    ed.start(expect_admin_password=False)
    c.login(c.name, c.password)
    j = wait_job(c, j["id"], timeout=90 * SLOW)
    log = log_text(c, j["id"])
    assert j["status"] == "Completed", f"{j}\n{log}\n" + ed.log_tail()
    lines = log.splitlines()
    assert lines[:4] == ["fresh start", "count=1", "count=2", "count=3"], log
    resumed = [int(ln.split()[-1]) for ln in lines if ln.startswith("resumed from")]
    assert len(resumed) == 1 and resumed[0] >= 3, log
    counts = [int(ln.split("=")[1]) for ln in lines if ln.startswith("count=")]
    assert counts == sorted(set(counts)) and counts[-1] == 16, log  # none repeated
    assert j["attempt"] == 2, j
    assert "done at 16" in log
    # the retry's pool (keep_alive_s 0) goes: nothing is left for labd's next stop to keep
    wait_until(lambda: not sandbox_records(ed.state_dir), 20 * SLOW,
               lambda: f"the job's pool to end: {sandbox_records(ed.state_dir)}")


def test_a_job_starting_when_labd_stops_moves_on_after_the_restart(ed):
    """A job whose pool was still being built when labd stopped (keep_on_shutdown =
    false ends the pool unfinished) leaves Starting at the restart's first
    reconciliation, not at the next full one a minute later: the pool was asked for
    by the web process before this one, so the list lacking it means its start is
    gone. The build is held (LABD_FAULT_SLOW_START) so that the stop finds it
    unfinished, and the pool's time is moved on a few seconds, as when labd comes
    back within the second the pool was asked for (or the clock stepped back): the
    reconciliation once took that for a start of the new process's own."""
    name, c = new_user(ed, "js")
    ed.env["LABD_FAULT_SLOW_START"] = f"{name}:3000"
    assert ed.stop(30) == 0, ed.log_tail()
    ed.start(expect_admin_password=False)
    c.login(c.name, c.password)
    j = submit(c, ["/bin/true"], max_retries=1)
    wait_until(lambda: get_job(c, j["id"])["secondary_status"] == "Starting", 20 * SLOW,
               "the job in Starting")
    assert ed.stop(30) == 0, ed.log_tail()
    # the pool ended with labd, also when its start came in while labd was stopping
    assert not sandbox_records(ed.state_dir), ed.log_tail()
    del ed.env["LABD_FAULT_SLOW_START"]
    db = sqlite3.connect(ed.db_file)
    with db:
        db.execute("UPDATE pools SET created_at = created_at + 5 WHERE job_id = ?", (j["id"],))
    db.close()
    ed.start(expect_admin_password=False)
    t0 = time.monotonic()
    c.login(c.name, c.password)
    wait_until(lambda: get_job(c, j["id"])["attempt"] == 2, 60 * SLOW, "the retry")
    took = time.monotonic() - t0
    assert took < 30, f"the lost start was seen after {took:.1f} s\n{ed.log_tail()}"
    j = wait_job(c, j["id"])
    assert j["status"] == "Completed" and j["attempt"] == 2, j
    assert "labd lost the job's sandbox" in ed.log(), ed.log_tail()


def test_a_runtime_starting_when_labd_stops_ends_at_the_restart(ed):
    """The same for a runtime: its sandbox still being built when labd stopped
    (keep_on_shutdown = false ends it unfinished), and its row's time moved on a few
    seconds as when labd comes back within the second the start was asked for. The
    new process's first reconciliation ends it (the start was asked for before this
    process's first runtime, told by id); it once took it for a start of its own and
    left it in Starting until the start timeout."""
    name, c = new_user(ed, "jr")
    ed.env["LABD_FAULT_SLOW_START"] = f"{name}:3000"
    assert ed.stop(30) == 0, ed.log_tail()
    ed.start(expect_admin_password=False)
    c.login(c.name, c.password)
    assert_status(c.post("/api/v1/me/runtime", json={"type": "cpu"}), 202)
    assert c.get("/api/v1/me/runtime").json["runtime"]["state"] == "starting"
    assert ed.stop(30) == 0, ed.log_tail()
    assert not sandbox_records(ed.state_dir), ed.log_tail()
    del ed.env["LABD_FAULT_SLOW_START"]
    db = sqlite3.connect(ed.db_file)
    with db:
        db.execute("UPDATE runtimes SET created_at = created_at + 5 WHERE state = 'starting'")
    db.close()
    ed.start(expect_admin_password=False)
    t0 = time.monotonic()
    c.login(c.name, c.password)
    rt = wait_until(lambda: (lambda r: r if r and r["state"] in ("stopped", "failed") else None)(
        c.get("/api/v1/me/runtime").json["runtime"]), 60 * SLOW, "the lost start to end")
    took = time.monotonic() - t0
    assert took < 30, f"the lost start was seen after {took:.1f} s\n{ed.log_tail()}"
    assert rt["state"] == "failed" and "sandbox is gone" in rt["reason"], rt
    # the user starts again at once
    assert_status(c.post("/api/v1/me/runtime", json={"type": "cpu"}), 202)
    c.delete("/api/v1/me/runtime")
