"""The usage ledger over a real daemon and real runtimes: an entry opens when
the runtime runs, advances with the heartbeat, closes with the runtime's end
reason and bills its wall time; after kill -9 of the web process the entry
continues (the sandbox lived on) and still closes exactly."""

import os
import signal
import sqlite3
import time

import pytest

from labd_harness import (
    SLOW,
    STRONG,
    parse_api_time,
    pid_alive,
    start_runtime,
    stop_runtime,
    unique_name,
    wait_until,
    web_process,
)

HEARTBEAT_S = 5  # LEDGER_HEARTBEAT_S
CLOSE_SLACK_S = 30  # LEDGER_CLOSE_SLACK_S


@pytest.fixture(scope="module")
def ld(runtime_daemon_factory):
    return runtime_daemon_factory("ledger", runtime={"cpu_limit": "1h"})


def new_user(d):
    name = unique_name("led")
    pw = f"{STRONG}-{name}"
    assert d.admin().post("/api/v1/users", json={"name": name, "password": pw}).status == 201
    c = d.client()
    c.login(name, pw)
    return name, c


def entries(c):
    now = int(time.time())
    r = c.get(f"/api/v1/me/usage?from={now - 86400}&to={now + 3600}")
    assert r.status == 200, r
    return r.json["entries"]


def only_entry(c):
    es = entries(c)
    assert len(es) == 1, es
    return es[0]


def wait_heartbeat_past(c, t, what):
    return wait_until(lambda: (lambda e: e if e["last_heartbeat_s"] >= t else None)(only_entry(c)),
                      (HEARTBEAT_S + 10) * SLOW, lambda: f"{what}: {entries(c)}")


def assert_closed_like(entry, runtime):
    ready, ended = parse_api_time(runtime["ready_at"]), parse_api_time(runtime["ended_at"])
    assert entry["start_s"] == ready, (entry, runtime)
    assert entry["end_s"] == ended, (entry, runtime)
    assert entry["billable_s"] == ended - ready, (entry, runtime)
    assert entry["end_reason"] == runtime["reason"], (entry, runtime)


def test_entry_opens_heartbeats_and_closes(ld):
    name, c = new_user(ld)
    assert entries(c) == []
    _, running = start_runtime(c)
    seen_running = time.time()
    e = only_entry(c)
    assert e["runtime_id"] == running["id"]
    assert (e["kind"], e["plan"], e["gpus"], e["end_s"], e["end_reason"]) == \
        ("cpu", "default", "", None, None), e
    assert e["start_s"] == parse_api_time(running["ready_at"])
    # the heartbeat advances the open entry
    wait_heartbeat_past(c, e["start_s"] + HEARTBEAT_S, "no heartbeat")
    e = only_entry(c)
    assert e["billable_s"] == e["last_heartbeat_s"] - e["start_s"], e
    stopped = stop_runtime(c)
    seen_stopped = time.time()
    assert stopped["state"] == "stopped", stopped
    e = only_entry(c)
    assert_closed_like(e, stopped)
    # close to the wall time the test saw (seconds are whole)
    assert abs(e["billable_s"] - (seen_stopped - seen_running)) <= 3 * SLOW, e
    # the admin's view of the same entry
    r = ld.admin().get(f"/api/v1/usage?from={e['start_s']}&to={e['end_s']}&group_by=user")
    assert r.status == 200, r
    assert {g["key"]: g["cpu_s"] for g in r.json["groups"]}[name] == e["billable_s"]


def test_kill9_web_mid_runtime_entry_continues(ld):
    name, c = new_user(ld)
    _, running = start_runtime(c)
    e = only_entry(c)
    wait_heartbeat_past(c, e["start_s"] + 1, "no heartbeat before the kill")
    old = web_process(ld)
    os.kill(old, signal.SIGKILL)
    killed_at = time.time()

    def new_web():
        try:
            pid = web_process(ld)
        except AssertionError:
            return None
        return pid if pid != old and pid_alive(pid) else None

    wait_until(new_web, 20 * SLOW, lambda: "no new web process\n" + ld.log_tail())
    # recovery left it open (its sandbox lived on) and the heartbeat resumes
    e = wait_heartbeat_past(c, int(killed_at) + 1, "the entry did not continue after kill -9")
    assert e["end_s"] is None, e
    after = c.get("/api/v1/me/runtime").json["runtime"]
    assert after["state"] == "running" and after["id"] == running["id"], after
    stopped = stop_runtime(c)
    assert_closed_like(only_entry(c), stopped)


def test_entry_closes_when_the_account_is_deleted(ld):
    name, c = new_user(ld)
    _, running = start_runtime(c)
    e = only_entry(c)
    wait_heartbeat_past(c, e["start_s"] + 1, "no heartbeat before the deletion")
    admin = ld.admin()
    assert admin.delete(f"/api/v1/users/{name}").status == 204
    deleted_at = time.time()
    r = admin.get(f"/api/v1/usage?from={e['start_s']}&to={int(deleted_at) + 3600}"
                  "&group_by=user")
    assert r.status == 200, r
    billed = {g["key"]: g["cpu_s"] for g in r.json["groups"]}[name]
    assert abs(billed - (deleted_at - e["start_s"])) <= 3 * SLOW, (billed, e)
    # closed in the deleting transaction, under the name it had
    db = sqlite3.connect(f"file:{ld.db_file}?mode=ro", uri=True, timeout=10)
    try:
        row = db.execute("SELECT end_at, end_reason, billable_s FROM ledger WHERE user_name = ?",
                         (name,)).fetchone()
    finally:
        db.close()
    assert row is not None and row[0] is not None, row
    assert row[1] == "account deleted" and row[2] == billed, row


def test_entry_names_the_plan_the_user_is_on(ld):
    """An entry records the user's plan: their own plan over their group's; a user on
    neither is billed under "default" (the first test)."""
    admin = ld.admin()
    name, c = new_user(ld)
    grp, own = unique_name("lgp"), unique_name("lown")
    for plan in (grp, own):
        assert admin.post("/api/v1/plans", json={"name": plan, "limits": {}}).status == 201
    assert admin.post("/api/v1/groups", json={"name": unique_name("lg"), "plan": grp,
                                              "members": [name]}).status == 201
    start_runtime(c)
    assert only_entry(c)["plan"] == grp
    stop_runtime(c)
    assert admin.put(f"/api/v1/users/{name}/quota", json={"plan": own}).status == 200
    start_runtime(c)
    assert [e["plan"] for e in entries(c) if e["end_s"] is None] == [own]
    stop_runtime(c)


def test_runtime_ids_never_reused_after_a_user_is_deleted(ld):
    """Deleting a user deletes their runtime rows; the next runtime must still get a new
    id, or its ledger entry (keyed on the runtime id) would be taken for the old one."""
    admin = ld.admin()
    name, c = new_user(ld)
    _, first = start_runtime(c)
    stop_runtime(c)
    assert admin.delete(f"/api/v1/users/{name}").status == 204
    _, c2 = new_user(ld)
    _, second = start_runtime(c2)
    assert second["id"] > first["id"], (first["id"], second["id"])
    assert only_entry(c2)["runtime_id"] == second["id"]
    stop_runtime(c2)
