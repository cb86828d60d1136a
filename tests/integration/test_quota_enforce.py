"""Quota enforcement over the real daemon, store and sandboxes:

- a start whose kind's rolling window is used up (less than a minute left) is refused
  with 403 quota_exceeded naming the limit, used and limit, and the exact time the next
  minute frees up; nothing is created;
- a runtime's deadline is the earlier of its plan's length and what remains of its
  windows, and the supervisor warns before it as usual;
- GET /api/v1/me/quota and the admin's user quota give used, remaining and
  next_free_at per window;
- the plan's memory and CPUs reach the sandbox's cgroup, capped root-side.

Ledger entries with known times are written straight into labd's SQLite file (as
test_usage.py does); the daemon reads them at the next request."""

import os
import sqlite3
import time

import pytest

from labd_harness import (
    STRONG,
    SLOW,
    assert_error,
    assert_status,
    audit_entries,
    parse_api_time,
    sandbox_records,
    start_runtime,
    stop_runtime,
    unique_name,
    user_id,
    wait_runtime,
    wait_until,
)

DAY = 86400


@pytest.fixture(scope="module")
def qd(runtime_daemon_factory):
    return runtime_daemon_factory("quota-enf", runtime={"warn_before": "30m,90s"})


def new_user(d, overrides=None):
    name = unique_name("qe")
    pw = f"{STRONG}-{name}"
    a = d.admin()
    assert_status(a.post("/api/v1/users", json={"name": name, "password": pw}), 201)
    if overrides:
        assert_status(a.put(f"/api/v1/users/{name}/quota", json={"overrides": overrides}), 200)
    c = d.client()
    c.login(name, pw)
    return name, c


def seed(d, name, kind, start, end):
    """One closed ledger entry of user name billing [start, end)."""
    db = sqlite3.connect(d.db_file, timeout=10)
    try:
        db.execute(
            "INSERT INTO ledger (user_id, user_name, kind, plan, start_at, end_at, billable_s,"
            " end_reason, last_heartbeat) VALUES (?, ?, ?, 'default', ?, ?, ?, 'seeded', ?)",
            (user_id(d, name), name, kind, start, end, end - start, end))
        db.commit()
    finally:
        db.close()


def runtime_rows(d, name):
    db = sqlite3.connect(f"file:{d.db_file}?mode=ro", uri=True, timeout=10)
    try:
        return db.execute("SELECT count(*) FROM runtimes WHERE user_id = ?",
                          (user_id(d, name),)).fetchone()[0]
    finally:
        db.close()


def api_time(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def assert_quota_exceeded(r, limit, used_s, limit_s, next_free_at):
    assert r.status == 403, r
    e = r.json["error"]
    assert set(r.json) == {"error"}, r.json
    assert set(e) == {"code", "message", "limit", "used_s", "limit_s", "next_free_at"}, e
    assert e["code"] == "quota_exceeded" and e["limit"] == limit, e
    assert e["used_s"] == used_s and e["limit_s"] == limit_s, e
    assert e["next_free_at"] == (next_free_at and api_time(next_free_at)), e
    assert limit in e["message"], e
    if next_free_at:
        assert api_time(next_free_at) in e["message"], e
    return e


def test_gpu_start_refused_when_the_24h_window_is_used_up(qd):
    name, c = new_user(qd)
    now = int(time.time())
    start = now - 5 * 3600
    seed(qd, name, "gpu", start, start + 4 * 3600)  # the default plan's 4 h, all used
    r = c.post("/api/v1/me/runtime", json={"type": "gpu"})
    e = assert_quota_exceeded(r, "gpu_s_per_24h", 4 * 3600, 4 * 3600, start + DAY + 60)
    assert "4h used of 4h" in e["message"], e
    # nothing was created, started or audited
    assert runtime_rows(qd, name) == 0
    assert c.get("/api/v1/me/runtime").json["runtime"] is None
    assert not audit_entries(qd.admin(), "runtime.start", name)


def test_window_edge_one_minute_left_starts_59_seconds_do_not(qd):
    name, c = new_user(qd, {"cpu_s_per_24h": 3600})
    now = int(time.time())
    # 3541 s used: 59 s left, "used up"; the entry's first second leaves the
    # window at start + 24 h, and one second out is enough for a minute
    start = now - 2 * 3600
    seed(qd, name, "cpu", start, start + 3541)
    r = c.post("/api/v1/me/runtime", json={"type": "cpu"})
    assert_quota_exceeded(r, "cpu_s_per_24h", 3541, 3600, start + DAY + 1)
    # the same use just outside the window counts nothing: an entry that ended
    # exactly 24 h ago is out, [now - 24 h, now) is half-open
    name2, c2 = new_user(qd, {"cpu_s_per_24h": 3600})
    seed(qd, name2, "cpu", now - DAY - 3541, now - DAY - 1)
    q = c2.get("/api/v1/me/quota").json
    assert q["used"]["cpu_s_per_24h"] == 0 and q["remaining"]["cpu_s_per_24h"] == 3600, q
    # a minute left: the start goes through with a one-minute deadline
    assert_status(qd.admin().put(f"/api/v1/users/{name}/quota",
                                 json={"overrides": {"cpu_s_per_24h": 3601}}), 200)
    r = c.post("/api/v1/me/runtime", json={"type": "cpu"})
    assert_status(r, 202)
    s = r.json["runtime"]
    assert parse_api_time(s["deadline"]) - parse_api_time(s["started_at"]) == 60, s
    wait_runtime(c, ("running", "stopped", "failed"))
    stop_runtime(c)


def test_deadline_is_what_remains_and_warnings_follow(qd):
    # 100 s of 4000 s left in the 24 h window of a plan 12 h long: deadline 100 s
    name, c = new_user(qd, {"cpu_s_per_24h": 4000})
    now = int(time.time())
    seed(qd, name, "cpu", now - 5000, now - 1100)
    r = c.post("/api/v1/me/runtime", json={"type": "cpu"})
    assert_status(r, 202)
    s = r.json["runtime"]
    assert parse_api_time(s["deadline"]) - parse_api_time(s["started_at"]) == 100, s
    assert 95 <= s["seconds_left"] <= 100, s
    assert s["warn_before"] == [1800, 90], s
    rid = s["id"]
    wait_runtime(c, "running")
    # the supervisor enforces that deadline: its 90 s warning comes ~10 s in
    wait_until(lambda: f"runtime {rid} of {name}: 90 seconds left" in qd.log(),
               60 * SLOW, "the 90 s warning before the quota deadline")
    stop_runtime(c)


def test_me_quota_used_remaining_next_free_at(qd):
    name, c = new_user(qd, {"gpu_s_per_24h": 7200, "cpu_s_per_7d": 10 * 3600})
    now = int(time.time())
    seed(qd, name, "gpu", now - 3 * 3600, now - 2 * 3600)  # 1 h of 2 h
    seed(qd, name, "cpu", now - 3 * DAY, now - 3 * DAY + 3600)  # 1 h, outside 24 h
    for r in (c.get("/api/v1/me/quota"), qd.admin().get(f"/api/v1/users/{name}/quota")):
        assert_status(r, 200)
        j = r.json
        assert j["used"] == {"cpu_s_per_24h": 0, "cpu_s_per_7d": 3600,
                             "gpu_s_per_24h": 3600, "gpu_s_per_7d": 3600,
                             "storage_bytes": 0}, j
        # unlimited windows have no remainder (null)
        assert j["remaining"] == {"cpu_s_per_24h": None, "cpu_s_per_7d": 9 * 3600,
                                  "gpu_s_per_24h": 3600, "gpu_s_per_7d": None,
                                  "storage_bytes": 1 << 30}, j
        # not used up: when the next second beyond the remainder leaves the window
        assert j["next_free_at"] == {"cpu_s_per_24h": None,
                                     "cpu_s_per_7d": api_time(now - 3 * DAY + 7 * DAY + 1),
                                     "gpu_s_per_24h": api_time(now - 3 * 3600 + DAY + 1),
                                     "gpu_s_per_7d": None}, j


def cgroup_knob(pid, controller, v1_file, v2_file):
    """A cgroup file of process pid, read on the host (v1 controller or v2)."""
    with open(f"/proc/{pid}/cgroup") as fh:
        lines = [ln.rstrip("\n").split(":", 2) for ln in fh]
    for _, ctrls, path in lines:
        if controller in ctrls.split(","):
            with open(f"/sys/fs/cgroup/{controller}{path}/{v1_file}") as fh:
                return fh.read().strip()
    for hid, ctrls, path in lines:
        if hid == "0":
            base = "/sys/fs/cgroup/unified" if os.path.isdir("/sys/fs/cgroup/unified") \
                and not os.path.exists("/sys/fs/cgroup/cgroup.controllers") else "/sys/fs/cgroup"
            with open(f"{base}{path}/{v2_file}") as fh:
                return fh.read().strip()
    raise AssertionError(f"no {controller} cgroup for {pid}: {lines}")


def sandbox_pid(d, name):
    recs = [kv for _, kv in sandbox_records(d.state_dir) if kv.get("user") == name]
    assert recs, f"no sandbox record of {name}"
    return int(recs[-1]["pid"])


def test_plan_memory_and_cpus_reach_the_cgroup(qd):
    a = qd.admin()
    plan = unique_name("pl")
    assert_status(a.post("/api/v1/plans", json={"name": plan, "limits": {
        "memory_bytes": 384 << 20, "cpus_milli": 250}}), 201)
    name, c = new_user(qd)
    assert_status(a.put(f"/api/v1/users/{name}/quota", json={"plan": plan}), 200)
    start_runtime(c)
    pid = sandbox_pid(qd, name)
    mem = cgroup_knob(pid, "memory", "memory.limit_in_bytes", "memory.max")
    assert int(mem) == 384 << 20, mem
    quota = cgroup_knob(pid, "cpu", "cpu.cfs_quota_us", "cpu.max")
    period = cgroup_knob(pid, "cpu", "cpu.cfs_period_us", "cpu.max").split()[-1]
    assert int(quota.split()[0]) * 1000 // int(period) == 250, (quota, period)
    stop_runtime(c)


def test_plan_above_the_machine_cap_is_refused_root_side(runtime_daemon_factory):
    d = runtime_daemon_factory("quota-cap", runtime={"memory": "512M", "memory_max": "1G", "cpus_max": "2"})
    a = d.admin()
    plan = unique_name("pl")
    assert_status(a.post("/api/v1/plans", json={"name": plan, "limits": {
        "memory_bytes": 2 << 30}}), 201)
    name, c = new_user(d)
    assert_status(a.put(f"/api/v1/users/{name}/quota", json={"plan": plan}), 200)
    r = c.post("/api/v1/me/runtime", json={"type": "cpu"})
    assert_status(r, 202)
    s = wait_runtime(c, ("failed",))
    assert "memory_max" in s["reason"] and str(2 << 30) in s["reason"], s
    assert not [kv for _, kv in sandbox_records(d.state_dir) if kv.get("user") == name]
    assert f"refused sandbox_start for {name}: memory_bytes" in d.log()


def test_gpu_start_refused_when_the_plan_gives_no_gpus(qd):
    name, c = new_user(qd, {"gpus_per_runtime": 0})
    r = c.post("/api/v1/me/runtime", json={"type": "gpu"})
    assert_error(r, 403, "quota_exceeded", "gpus_per_runtime")
    assert runtime_rows(qd, name) == 0
