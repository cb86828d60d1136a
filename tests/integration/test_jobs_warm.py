"""Warm pools: a job with keep_alive_s leaves its sandbox Available; the next job
with the same criteria reuses it, skips Starting, says so, and starts within
milliseconds; a job whose criteria differ does not reuse it; the keep-alive
expiring or the user releasing it ends it; the ledger bills job seconds (Starting
through Uploading) and warm seconds separately, matching the phases."""

import sqlite3
import time

import pytest

from jobs_lib import (
    at,
    get_job,
    jobs_daemon,
    log_text,
    new_user,
    secondaries,
    submit,
    usage_entries,
    wait_job,
)
from labd_harness import SLOW, assert_status, sandbox_records, wait_until

STAMP = ["/bin/sh", "-c", "date +%s.%N"]


@pytest.fixture(scope="module")
def wd(runtime_daemon_factory):
    return jobs_daemon(runtime_daemon_factory, "jobs-warm")


def warm_pools(c):
    r = c.get("/api/v1/warm-pools")
    assert_status(r, 200)
    return {p["id"]: p for p in r.json["warm_pools"]}


def pool_boxes(d, user):
    return [kv for _, kv in sandbox_records(d.state_dir) if kv.get("user") == user]


def started_after(c, job, t_submit):
    """Seconds from just before the submit to the command's own first line."""
    return float(log_text(c, job["id"]).split()[0]) - t_submit


def test_reuse_skips_starting_is_recorded_and_fast(wd):
    name, c = new_user(wd, "jw")
    first = wait_job(c, submit(c, STAMP, keep_alive_s=60)["id"])
    assert first["status"] == "Completed", first
    wp = first["warm_pool"]
    assert wp["status"] == "Available" and wp["reused"] is False and wp["reused_by"] is None, wp
    until = at(wp["available_until"])
    assert 50 <= until - at(first["ended_at"]) <= 61, (wp, first["ended_at"])
    listed = warm_pools(c)
    assert listed[wp["id"]]["status"] == "Available" and listed[wp["id"]]["job_id"] == first["id"], listed
    assert len(pool_boxes(wd, name)) == 1

    t0 = time.time()
    second = wait_job(c, submit(c, STAMP, keep_alive_s=60)["id"])
    assert second["status"] == "Completed", second
    assert "Starting" not in secondaries(second), second["transitions"]
    assert secondaries(second)[:2] == ["Downloading", "Training"] or \
        secondaries(second)[:3] == ["Pending", "Downloading", "Training"], second["transitions"]
    assert second["warm_pool"]["reused"] is True and second["warm_pool"]["id"] == wp["id"], second
    first = get_job(c, first["id"])
    assert first["warm_pool"]["status"] == "Reused" and first["warm_pool"]["reused_by"] == second["id"], \
        first["warm_pool"]
    latency = started_after(c, second, t0)
    assert 0 <= latency < 1.0 * SLOW, f"warm start took {latency:.3f} s"
    assert len(pool_boxes(wd, name)) == 1, "the warm job did not run in the same sandbox"
    # release it now: Terminated, said why, and its sandbox goes
    assert_status(c.delete(f"/api/v1/warm-pools/{wp['id']}"), 204)
    wait_until(lambda: not pool_boxes(wd, name), 20 * SLOW, "the released pool's sandbox to go")
    w = get_job(c, second["id"])["warm_pool"]
    assert w["status"] == "Terminated" and w["reason"] == "released by the user", w
    r = c.delete(f"/api/v1/warm-pools/{wp['id']}")
    assert r.status in (404, 409), r


def test_non_matching_job_does_not_reuse(wd):
    _, c = new_user(wd, "jn")
    first = wait_job(c, submit(c, STAMP, keep_alive_s=60, memory_bytes=512 << 20)["id"])
    assert first["warm_pool"]["status"] == "Available", first
    other = wait_job(c, submit(c, STAMP, memory_bytes=384 << 20)["id"])
    assert other["status"] == "Completed", other
    assert other["warm_pool"] is None or other["warm_pool"]["reused"] is False, other
    assert "Starting" in secondaries(other), other["transitions"]
    # another user never gets it either
    _, stranger = new_user(wd, "js")
    theirs = wait_job(stranger, submit(stranger, STAMP, memory_bytes=512 << 20)["id"])
    assert "Starting" in secondaries(theirs), theirs["transitions"]
    assert first["warm_pool"]["id"] not in warm_pools(stranger)
    for p in warm_pools(c):
        c.delete(f"/api/v1/warm-pools/{p}")


def test_keep_alive_expiry_releases_and_the_ledger_matches_the_phases(wd):
    name, c = new_user(wd, "jk")
    j = wait_job(c, submit(c, ["/bin/sh", "-c", "sleep 1; echo done"], keep_alive_s=2)["id"])
    assert j["status"] == "Completed", j
    pid = j["warm_pool"]["id"]

    def terminated():
        w = get_job(c, j["id"])["warm_pool"]
        return w if w["status"] == "Terminated" else None

    w = wait_until(terminated, 15 * SLOW, "the keep-alive to expire")
    assert "keep" in w["reason"].lower() or "expire" in w["reason"].lower(), w
    assert 1 <= w["warm_s"] <= 4, w
    wait_until(lambda: not pool_boxes(wd, name), 20 * SLOW, "the expired pool's sandbox to go")
    assert pid not in warm_pools(c) or warm_pools(c)[pid]["status"] == "Terminated"

    # the ledger (GET /api/v1/me/usage): one job entry = the billable phases, one warm
    # entry = the warm time; the database's rows say the same
    j = get_job(c, j["id"])
    es = usage_entries(c)
    jobs = [e for e in es if e["source"] == "job"]
    warm = [e for e in es if e["source"] == "warm"]
    assert len(jobs) == 1 and len(warm) == 1 and len(es) == 2, es
    assert jobs[0]["job_id"] == j["id"] and warm[0]["pool_id"] == pid, es
    assert jobs[0]["runtime_id"] is None and warm[0]["end_reason"] == "keep-alive expired", es
    phases = {t["status"]: t for t in j["transitions"]}
    start = at(phases["Starting"]["start_at"])
    end = at(phases["Uploading"]["end_at"])
    assert abs(jobs[0]["billable_s"] - j["billable_s"]) <= 1, (jobs[0], j["billable_s"])
    assert abs(j["billable_s"] - (end - start)) <= 1, (j["billable_s"], start, end)
    assert j["billable_s"] >= 1, j  # the job slept 1 s while Training
    assert abs(warm[0]["billable_s"] - w["warm_s"]) <= 1, (warm[0], w)
    assert jobs[0]["end_s"] <= warm[0]["start_s"] + 1, es
    rows = ledger_rows(wd, name)
    assert sorted((r["source"], r["billable_s"]) for r in rows) == \
        sorted((e["source"], e["billable_s"]) for e in es), (rows, es)


def ledger_rows(d, name):
    db = sqlite3.connect(f"file:{d.db_file}?mode=ro", uri=True, timeout=10)
    db.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in db.execute(
            "SELECT source, job_id, pool_id, start_at, end_at, billable_s FROM ledger "
            "WHERE user_name = ? ORDER BY id", (name,))]
    finally:
        db.close()
