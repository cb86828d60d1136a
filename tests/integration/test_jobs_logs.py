"""A job's log and status over time: byte ranges, follow over Server-Sent Events
resumed by Last-Event-ID with no line lost or repeated, the status stream, a
killed web process (the supervisor restarts it) that loses neither the job nor a
line of its log, and a retry from the checkpoint after labd lost the sandbox."""

import json
import os
import signal

import pytest

from jobs_lib import (
    PY,
    SSE,
    get_job,
    jobs_daemon,
    log_text,
    new_user,
    put_files,
    script,
    submit,
    wait_job,
)
from labd_harness import (
    SLOW,
    assert_status,
    sandbox_records,
    wait_until,
    web_process,
)


def counter(n, every_s=0.05, prefix="line"):
    return ["/bin/sh", "-c", f"i=0; while [ $i -lt {n} ]; do i=$((i+1)); echo {prefix}=$i; "
                             f"sleep {every_s}; done"]


@pytest.fixture(scope="module")
def jd(runtime_daemon_factory):
    return jobs_daemon(runtime_daemon_factory, "jobs-logs", jobs={"log_max_bytes": "64K"})


@pytest.fixture(scope="module")
def owner(jd):
    _, c = new_user(jd, "jl", overrides={"concurrent_jobs": 4})
    put_files(c, {"code/resume.py": script("resume.py")})
    return c


def test_log_ranges(owner):
    j = wait_job(owner, submit(owner, counter(20, 0))["id"])
    whole = log_text(owner, j["id"])
    assert whole == "".join(f"line={i}\n" for i in range(1, 21)), whole
    r = owner.get(f"/api/v1/jobs/{j['id']}/logs?offset=7&limit=10")
    assert_status(r, 200)
    assert r.body == whole.encode()[7:17], r.body
    assert r.header("X-Log-Size") == str(len(whole)), r.headers
    assert r.header("X-Log-Next-Offset") == "17", r.headers
    r = owner.get(f"/api/v1/jobs/{j['id']}/logs?offset={len(whole)}")
    assert r.status == 200 and r.body == b"", r


def test_log_is_capped_with_one_line_saying_so(owner):
    cap = 64 << 10
    j = wait_job(owner, submit(owner, ["/bin/sh", "-c", "yes 0123456789abcdefghijklmnopqrstuvwxyz "
                                                        "| head -n 4000; echo after"])["id"])
    assert j["status"] == "Completed", j
    log = log_text(owner, j["id"])
    note = f"[labd: log capped at {cap} bytes]"
    assert log.rstrip("\n").endswith(note) and log.count(note) == 1, log[-200:]
    assert len(log.encode()) <= cap + len(note) + 2 and "after" not in log, len(log)
    assert j["log_bytes"] == len(log.encode()), j


def test_follow_resumes_by_last_event_id_without_loss_or_repeat(owner):
    n = 60
    j = submit(owner, counter(n))
    path = f"/api/v1/jobs/{j['id']}/logs?follow=1"
    got, last_id = [], None
    s = SSE(owner, path)
    try:
        assert s.status == 200 and s.headers["content-type"].startswith("text/event-stream"), s.headers
        while len(got) < 10:
            ev = s.event()
            assert ev["event"] == "log", ev
            got += ev["data"].split("\n")
            assert int(ev["id"]) == len("".join(x + "\n" for x in got).encode()), (ev, got)
            last_id = ev["id"]
    finally:
        s.close()
    ended = False
    s = SSE(owner, path, headers={"Last-Event-ID": last_id})
    try:
        assert s.status == 200, s.status
        while True:
            ev = s.event()
            if ev["event"] == "end":
                ended = True
                break
            assert ev["event"] == "log", ev
            got += ev["data"].split("\n")
            last_id = ev["id"]
    finally:
        s.close()
    assert ended
    assert got == [f"line={i}" for i in range(1, n + 1)], got
    j = get_job(owner, j["id"])
    assert j["status"] == "Completed" and int(last_id) == j["log_bytes"], (j, last_id)
    # `offset` does what Last-Event-ID does
    s = SSE(owner, path + f"&offset={len('line=1')+1}")
    try:
        assert s.event()["data"].split("\n")[0] == "line=2"
    finally:
        s.close()


def test_status_events_stream_each_transition_then_end(owner):
    j = submit(owner, counter(10, 0.1))
    s = SSE(owner, f"/api/v1/jobs/{j['id']}/events")
    seen = []
    try:
        while True:
            ev = s.event()
            if ev["event"] == "end":
                break
            assert ev["event"] == "status", ev
            obj = json.loads(ev["data"])
            assert obj["id"] == j["id"], obj
            seen.append(obj["secondary_status"])
    finally:
        s.close()
    assert seen[-1] == "Completed", seen
    assert "Training" in seen, seen
    order = ["Pending", "Starting", "Downloading", "Training", "Uploading", "Completed"]
    assert [order.index(x) for x in seen] == sorted(order.index(x) for x in seen), seen


def test_killed_web_process_loses_neither_job_nor_log(jd, owner):
    n = 40
    j = submit(owner, counter(n, 0.2, "tick"))
    wait_until(lambda: "tick=3" in log_text(owner, j["id"]), 60 * SLOW, "tick=3")
    old = web_process(jd)
    os.kill(old, signal.SIGKILL)
    wait_until(lambda: (lambda p: p != old and p)(web_process(jd)), 30 * SLOW,
               "the supervisor to start a new labd-web")
    wait_until(lambda: _ok(owner), 30 * SLOW, "the new labd-web to answer")
    j = wait_job(owner, j["id"], timeout=60 * SLOW)
    assert j["status"] == "Completed", j
    assert log_text(owner, j["id"]) == "".join(f"tick={i}\n" for i in range(1, n + 1))


def _ok(c):
    try:
        return c.get("/api/v1/jobs?limit=1").status == 200
    except OSError:
        return False


def pool_init_pid(d, user):
    """The host pid of the init of user's pool sandbox: killed from outside, the
    whole sandbox is lost, as with a lost machine (the agent killed alone is the
    job's own doing, not retried: test_jobs_hostile.py)."""
    recs = [kv for _, kv in sandbox_records(d.state_dir)
            if kv.get("user") == user and kv.get("pool_id", "0") not in ("", "0")]
    recs = recs or [kv for _, kv in sandbox_records(d.state_dir) if kv.get("user") == user]
    assert recs, f"no sandbox of {user}: {sandbox_records(d.state_dir)}"
    return int(recs[-1]["pid"])


def test_retry_after_infrastructure_failure_resumes_from_checkpoint(jd, owner):
    j = submit(owner, [PY, "code/resume.py"], name="resumer", max_retries=1,
               hyperparameters={"target": 16})
    wait_until(lambda: "count=4" in log_text(owner, j["id"]), 60 * SLOW, "count=4")
    first_attempt = get_job(owner, j["id"])["attempt"]
    os.kill(pool_init_pid(jd, owner.name), signal.SIGKILL)  # labd loses the sandbox
    j = wait_job(owner, j["id"], timeout=90 * SLOW)
    log = log_text(owner, j["id"])
    assert j["status"] == "Completed", f"{j}\n{log}"
    assert j["attempt"] == first_attempt + 1, j
    assert "fresh start" in log and "done at 16" in log, log
    resumed = [int(ln.split()[-1]) for ln in log.splitlines() if ln.startswith("resumed from")]
    assert len(resumed) == 1 and resumed[0] >= 4, log
    assert any(t["message"] and ("retry" in t["message"].lower() or "attempt" in t["message"].lower())
               for t in j["transitions"]), j["transitions"]


def test_infrastructure_failure_without_retries_is_interrupted(jd, owner):
    j = submit(owner, counter(200, 0.1, "tick"))
    wait_until(lambda: "tick=2" in log_text(owner, j["id"]), 60 * SLOW, "tick=2")
    os.kill(pool_init_pid(jd, owner.name), signal.SIGKILL)
    j = wait_job(owner, j["id"], timeout=60 * SLOW)
    assert j["status"] == "Failed" and j["secondary_status"] == "Interrupted", j
    assert "tick=2" in log_text(owner, j["id"])
