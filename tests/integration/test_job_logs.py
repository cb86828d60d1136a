"""A training job's log, metrics, samples and status events over the API
(docs/jobs.md "Logs", "Metrics", "Profiling rules").

The jobs here are rows written into the store and logs written into
<state_dir>/joblogs the way the supervisor writes them (root:labd 0640 in a
root:labd 0750 folder, appended): this file checks the web side's reading
- range reads, follow over SSE with exact resume by byte offset, the end of
a finished job's stream, access - without a sandbox. Real jobs running end
to end are test_jobs_*.py's."""

import grp
import json
import os
import sqlite3
import time

import pytest

from labd_harness import (
    HTTP_TIMEOUT,
    assert_error,
    assert_status,
    make_user,
    unique_name,
)
from test_runtime_events import EventStream


@pytest.fixture(scope="module")
def d(daemon_factory):
    return daemon_factory("joblogs")


def db(d):
    return sqlite3.connect(d.db_file, timeout=10, isolation_level=None)


def user_id(d, name):
    with db(d) as c:
        return c.execute("SELECT id FROM users WHERE name = ?", (name,)).fetchone()[0]


def add_job(d, owner, status="InProgress", secondary="Training"):
    """A job row of owner's, as the jobs lifecycle leaves one."""
    uid = user_id(d, owner)
    with db(d) as c:
        cur = c.execute(
            "INSERT INTO jobs (user_id, name, status, secondary, spec, kind, max_runtime_s,"
            " max_wait_s, grace_s, created_at) VALUES (?, ?, ?, ?, '{}', 'cpu', 3600, 3600,"
            " 120, strftime('%s', 'now'))", (uid, unique_name("job"), status, secondary))
        return cur.lastrowid


def set_status(d, job_id, status, secondary):
    with db(d) as c:
        c.execute("UPDATE jobs SET status = ?, secondary = ? WHERE id = ?",
                  (status, secondary, job_id))


def log_path(d, job_id):
    return os.path.join(d.state_dir, "joblogs", f"{job_id}.log")


def append(d, job_id, data):
    """Appends to the job's log as the supervisor does (root:labd 0640)."""
    folder = os.path.dirname(log_path(d, job_id))
    labd_gid = grp.getgrnam("labd").gr_gid
    if not os.path.isdir(folder):
        os.mkdir(folder, 0o750)
        os.chown(folder, 0, labd_gid)
    fd = os.open(log_path(d, job_id), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
    os.fchown(fd, 0, labd_gid)
    os.write(fd, data)
    os.close(fd)


def log_event(s, timeout=HTTP_TIMEOUT):
    ev = s.next_event(timeout)
    return ev["event"], int(ev["id"]) if ev["id"] else None, ev["data"]


@pytest.fixture(scope="module")
def owner(d):
    c = make_user(d)
    c.username = c.get("/api/v1/me").json["name"]
    return c


def auth_headers(c):
    """The request headers that carry c's login, for the raw SSE client."""
    r = c.get("/api/v1/me")
    assert_status(r, 200)
    return {"Cookie": "; ".join(f"{k}={v}" for k, v in c.cookies.items())}


def stream(d, c, job_id, last=None, query=""):
    h = auth_headers(c)
    if last is not None:
        h["Last-Event-ID"] = str(last)
    return EventStream(d.port, headers=h, path=f"/api/v1/jobs/{job_id}/logs?follow=1{query}")


def test_range_reads(d, owner):
    job = add_job(d, owner.username)
    append(d, job, b"line one\nline two\npart")
    r = owner.get(f"/api/v1/jobs/{job}/logs")
    assert_status(r, 200)
    assert r.body == b"line one\nline two\npart"
    assert r.header("Content-Type").startswith("text/plain")
    assert r.header("X-Log-Size") == "22" and r.header("X-Log-Next-Offset") == "22"
    r = owner.get(f"/api/v1/jobs/{job}/logs?offset=9&limit=9")
    assert r.body == b"line two\n" and r.header("X-Log-Next-Offset") == "18"
    # past the end: nothing, and the next offset is the end
    r = owner.get(f"/api/v1/jobs/{job}/logs?offset=1000")
    assert r.body == b"" and r.header("X-Log-Next-Offset") == "22"
    # a job whose log was not written yet has an empty one
    r = owner.get(f"/api/v1/jobs/{add_job(d, owner.username)}/logs")
    assert_status(r, 200)
    assert r.body == b"" and r.header("X-Log-Size") == "0"


def test_bad_queries_name_the_field(d, owner):
    job = add_job(d, owner.username)
    for query, field in (("offset=x", "offset"), ("offset=-1", "offset"), ("limit=0", "limit"),
                         ("limit=99999999999", "limit"), ("follow=maybe", "follow")):
        assert_error(owner.get(f"/api/v1/jobs/{job}/logs?{query}"), 400, "bad_field",
                     field=field)


def test_other_users_jobs_are_not_found(d, owner):
    job = add_job(d, owner.username)
    other = make_user(d)
    for what in ("logs", "metrics", "samples", "events"):
        assert_error(other.get(f"/api/v1/jobs/{job}/{what}"), 404, "not_found")
        assert_error(owner.get(f"/api/v1/jobs/0/{what}"), 404, "not_found")
        assert_error(owner.get(f"/api/v1/jobs/x{job}/{what}"), 404, "not_found")
    # an administrator sees every job
    assert_status(d.admin().get(f"/api/v1/jobs/{job}/logs"), 200)


def test_follow_resumes_exactly_and_ends(d, owner):
    job = add_job(d, owner.username)
    append(d, job, b"l1\nl2\n")
    s = stream(d, owner, job)
    assert s.status == 200 and s.header("Content-Type") == "text/event-stream"
    assert log_event(s) == ("log", 6, "l1\nl2")
    # a partial line waits for its newline
    append(d, job, b"l3\npar")
    assert log_event(s) == ("log", 9, "l3")
    with pytest.raises(AssertionError):
        s.next_event(timeout=0.8)
    append(d, job, b"tial\r\n")
    assert log_event(s) == ("log", 18, "partial")
    s.sock.close()
    # a reconnecting client resumes after the last id it got: nothing lost or repeated
    append(d, job, b"l5\n")
    s = stream(d, owner, job, last=9)
    assert log_event(s) == ("log", 21, "partial\nl5")
    s.sock.close()
    # ?offset does the same for a first connection
    s = stream(d, owner, job, query="&offset=18")
    assert log_event(s) == ("log", 21, "l5")
    # the job ends: a last line without newline is sent, then "end", then the stream ends
    append(d, job, b"bye")
    set_status(d, job, "Completed", "Completed")
    assert log_event(s, timeout=6) == ("log", 24, "bye")
    ev, eid, _ = log_event(s, timeout=6)
    assert (ev, eid) == ("end", 24)
    with pytest.raises(EOFError):
        s.next_event(timeout=3)
    # following a finished job: the whole log, then end at once
    s = stream(d, owner, job)
    got = []
    while True:
        ev, eid, data = log_event(s, timeout=6)
        if ev == "end":
            break
        got.append(data)
    assert "\n".join(got) == "l1\nl2\nl3\npartial\nl5\nbye" and eid == 24


def test_followers_of_one_job_each_get_every_line(d, owner):
    job = add_job(d, owner.username)
    streams = [stream(d, owner, job) for _ in range(3)]
    lines = [f"step {i} loss={1 / (i + 1):.4f}".encode() for i in range(200)]
    for i in range(0, 200, 20):
        append(d, job, b"\n".join(lines[i:i + 20]) + b"\n")
        time.sleep(0.05)
    want = b"\n".join(lines).decode()
    for s in streams:
        got = []
        while len("\n".join(got)) < len(want):
            got.append(log_event(s)[2])
        assert "\n".join(got) == want
    set_status(d, job, "Stopped", "Stopped")
    for s in streams:
        assert log_event(s, timeout=6)[0] == "end"


def test_big_backlog_and_long_lines(d, owner):
    """A resumed follower far behind catches up in bounded events; a line
    longer than 16 KiB arrives cut, and the bytes add up exactly."""
    job = add_job(d, owner.username)
    blob = b"".join(b"%06d " % i + b"x" * 90 + b"\n" for i in range(20000))  # ~2 MiB
    blob += b"y" * 40000 + b"\n"
    append(d, job, blob)
    set_status(d, job, "Completed", "Completed")
    s = stream(d, owner, job)
    total, last = [], 0
    while True:
        ev, eid, data = log_event(s, timeout=10)
        if ev == "end":
            break
        assert eid > last
        total.append((last, eid, data))
        last = eid
    assert last == len(blob)
    # each event is the log's bytes between the ids, its last newline dropped
    for start, end, data in total:
        raw = blob[start:end]
        assert data == raw[:-1].decode() if raw.endswith(b"\n") else raw.decode()


def test_metrics_and_samples_shapes(d, owner):
    job = add_job(d, owner.username)
    r = owner.get(f"/api/v1/jobs/{job}/metrics")
    assert_status(r, 200)
    assert r.json == {"metrics": {}, "final": [], "metrics_complete": False, "dropped_metrics": []}
    with db(d) as c:
        for i, v in enumerate((1.0, 0.5, 0.25)):
            c.execute("INSERT INTO job_metrics (job_id, name, at_ms, value) VALUES (?, 'loss', ?, ?)",
                      (job, 1767225600000 + i * 1000, v))
        c.execute("INSERT INTO job_samples (job_id, at_ms, cpu_usage_us, cpu_percent,"
                  " memory_bytes, memory_limit_bytes, io_wait_us, log_bytes) VALUES"
                  " (?, 1767225600000, 5, 42.5, 1000, 2000, 0, 10)", (job,))
    r = owner.get(f"/api/v1/jobs/{job}/metrics")
    assert [p["value"] for p in r.json["metrics"]["loss"]] == [1.0, 0.5, 0.25]
    assert r.json["final"] == [{"name": "loss", "value": 0.25, "at": "2026-01-01T00:00:02.000Z"}]
    r = owner.get(f"/api/v1/jobs/{job}/samples")
    assert_status(r, 200)
    assert r.json["samples"][0]["cpu_percent"] == 42.5
    assert r.json["samples"][0]["gpu_percent"] is None


def test_events_of_a_finished_job_end_at_once(d, owner):
    job = add_job(d, owner.username, status="Failed", secondary="Failed")
    h = auth_headers(owner)
    s = EventStream(d.port, headers=h, path=f"/api/v1/jobs/{job}/events")
    ev = s.next_event()
    assert ev["event"] == "status" and ev["id"] == "1"
    obj = json.loads(ev["data"])
    assert obj["id"] == job and obj["status"] == "Failed"
    assert {"final_metrics", "findings", "log_bytes"} <= set(obj)
    assert s.next_event()["event"] == "end"
    with pytest.raises(EOFError):
        s.next_event(timeout=3)


def test_events_follow_a_submitted_job_to_its_end(d):
    """A real submit: status events from Pending on, each transition once,
    then end after the final status."""
    owner = make_user(d)  # the rows above count against concurrent_jobs
    r = owner.post("/api/v1/jobs", json={"name": unique_name("ev"),
                                         "command": ["/bin/sh", "-c", "echo loss=1"]})
    assert_status(r, 201)
    job = r.json["id"]
    s = EventStream(d.port, headers=auth_headers(owner), path=f"/api/v1/jobs/{job}/events")
    seen, last_id = [], 0
    while True:
        ev = s.next_event(timeout=60)
        if ev["event"] == "end":
            break
        assert ev["event"] == "status" and int(ev["id"]) == last_id + 1
        last_id = int(ev["id"])
        obj = json.loads(ev["data"])
        assert obj["id"] == job
        seen.append((obj["status"], obj["secondary_status"]))
    assert len(seen) == len(set(seen)), seen
    final = owner.get(f"/api/v1/jobs/{job}").json
    assert seen[-1] == (final["status"], final["secondary_status"])
    assert final["status"] in ("Completed", "Failed", "Stopped"), final


def test_followers_per_user_are_capped(d):
    c = make_user(d)
    c.username = c.get("/api/v1/me").json["name"]
    job = add_job(d, c.username)
    append(d, job, b"x\n")
    streams = [stream(d, c, job) for _ in range(16)]
    assert all(s.status == 200 for s in streams)
    extra = stream(d, c, job)
    assert extra.status == 429 and extra.header("Retry-After"), extra.status
    assert extra.json["error"]["code"] == "too_many_streams"
    # a hang-up frees its slot at once
    streams.pop().sock.close()

    def accepted():
        s = stream(d, c, job)
        ok = s.status == 200
        s.sock.close()
        return ok

    from labd_harness import wait_until
    wait_until(accepted, timeout=5, what="a freed follow slot")
    for s in streams:
        s.sock.close()
