"""Admin runtimes (GET /api/v1/runtimes, DELETE /api/v1/runtimes/{id}) over
real runtimes, and what a token without the "runtimes" scope cannot do to one."""

import pytest

from labd_harness import (
    STRONG,
    assert_error,
    assert_status,
    audit_entries,
    start_runtime,
    unique_name,
    wait_runtime,
    wait_until,
    SLOW,
)

ADMIN_STOP = "stopped by an administrator (admin)"


@pytest.fixture(scope="module")
def rd(runtime_daemon_factory):
    return runtime_daemon_factory("rt-admin")


@pytest.fixture(scope="module")
def radmin(rd):
    return rd.admin()


def new_client(rd, radmin, prefix):
    name = unique_name(prefix)
    pw = f"{STRONG}-{name}"
    assert_status(radmin.post("/api/v1/users", json={"name": name, "password": pw}), 201)
    c = rd.client()
    c.login(name, pw)
    c.password = pw
    return c


@pytest.fixture(scope="module")
def running(rd, radmin):
    """Two users, each with a running CPU runtime."""
    a, b = new_client(rd, radmin, "rda"), new_client(rd, radmin, "rdb")
    ra, rb = start_runtime(a)[1], start_runtime(b)[1]
    return a, ra, b, rb


def listed(radmin):
    r = radmin.get("/api/v1/runtimes")
    assert_status(r, 200)
    assert set(r.json) == {"runtimes"}, r.json
    return {x["id"]: x for x in r.json["runtimes"]}


def ledger_end_reason(c, runtime_id):
    entries = [e for e in c.get("/api/v1/me/usage").json["entries"]
               if e["runtime_id"] == runtime_id]
    return entries[0]["end_reason"] if entries else None


def test_admin_lists_every_live_runtime(rd, radmin, running):
    a, ra, b, rb = running
    got = listed(radmin)
    for c, rt in ((a, ra), (b, rb)):
        x = got[rt["id"]]
        assert x["user"] == c.user and x["state"] == "running", x
        assert {k: v for k, v in x.items() if k not in ("user", "seconds_left")} == \
            {k: v for k, v in rt.items() if k != "seconds_left"}, (x, rt)
    assert_error(a.get("/api/v1/runtimes"), 403, "forbidden")
    assert_error(a.delete(f"/api/v1/runtimes/{rb['id']}"), 403, "forbidden")


def test_read_usage_token_cannot_stop_or_use_a_runtime(rd, running):
    a, ra, _, _ = running
    r = a.post("/api/v1/me/tokens", json={"name": "report", "password": a.password,
                                          "scopes": ["read:usage"]})
    assert_status(r, 201)
    t = rd.client()
    t.bearer = r.json["token"]
    assert_status(t.get("/api/v1/me/usage"), 200)
    assert_error(t.delete("/api/v1/me/runtime"), 403, "insufficient_scope", field='"runtimes"')
    assert_error(t.get(f"/user/{a.user}/api/status"), 403, "insufficient_scope",
                 field='"runtimes"')
    assert a.get("/api/v1/me/runtime").json["runtime"]["state"] == "running"
    # the same owner's token with the scope does reach it
    r = a.post("/api/v1/me/tokens", json={"name": "rt", "password": a.password,
                                          "scopes": ["runtimes"]})
    t.bearer = r.json["token"]
    assert_status(t.get(f"/user/{a.user}/api/status"), 200)


def test_bad_stop_requests_change_nothing(rd, radmin, running):
    a, ra, _, _ = running
    rid = ra["id"]
    for body in ({"reason": "x" * 201}, {"reason": 5}, {"reason": "a\nb"}):
        assert_error(radmin.delete(f"/api/v1/runtimes/{rid}", json=body), 400, "bad_field",
                     field='"reason"')
    assert_error(radmin.delete(f"/api/v1/runtimes/{rid}", json={"why": "x"}), 400, "bad_field")
    for bad in ("999999", "abc", "-1", "0"):
        assert_error(radmin.delete(f"/api/v1/runtimes/{bad}"), 404, "not_found")
    # an admin token without admin:runtimes
    r = radmin.post("/api/v1/me/tokens", json={"name": "users-only",
                                                "password": rd.admin_password,
                                                "scopes": ["admin:users"]})
    t = rd.client()
    t.bearer = r.json["token"]
    assert_error(t.get("/api/v1/runtimes"), 403, "insufficient_scope", field='"admin:runtimes"')
    assert_error(t.delete(f"/api/v1/runtimes/{rid}"), 403, "insufficient_scope")
    assert a.get("/api/v1/me/runtime").json["runtime"]["state"] == "running"
    assert not [e for e in audit_entries(radmin, "runtime.stop", a.user)]


def test_admin_stop_with_reason_is_audited_and_billed(rd, radmin, running):
    a, ra, _, _ = running
    why = "maintenance at 18:00 — sorry"
    r = radmin.delete(f"/api/v1/runtimes/{ra['id']}", json={"reason": why})
    assert_status(r, 202)
    x = r.json["runtime"]
    assert x["id"] == ra["id"] and x["user"] == a.user, x
    assert x["state"] in ("stopping", "stopped"), x
    assert x["reason"] == f"{ADMIN_STOP}: {why}", x
    end = wait_runtime(a, ("stopped",), timeout=30 * SLOW)
    assert end["reason"] == f"{ADMIN_STOP}: {why}", end
    assert ra["id"] not in listed(radmin)
    stops = audit_entries(radmin, "runtime.stop", a.user)
    assert len(stops) == 1 and stops[0]["actor"] == "admin", stops
    assert stops[0]["detail"] == f"runtime {ra['id']}: {why}", stops
    reason = wait_until(lambda: ledger_end_reason(a, ra["id"]), 10 * SLOW, "the ledger entry")
    assert reason == f"{ADMIN_STOP}: {why}", reason
    # gone: a second stop finds nothing
    assert_error(radmin.delete(f"/api/v1/runtimes/{ra['id']}"), 404, "not_found")


def test_admin_stop_without_body(rd, radmin, running):
    _, _, b, rb = running
    t = radmin.post("/api/v1/me/tokens", json={"name": "ops", "password": rd.admin_password,
                                                "scopes": ["admin:runtimes"]})
    c = rd.client()
    c.bearer = t.json["token"]
    r = c.delete(f"/api/v1/runtimes/{rb['id']}")
    assert_status(r, 202)
    assert r.json["runtime"]["reason"] == ADMIN_STOP, r.json
    end = wait_runtime(b, ("stopped",), timeout=30 * SLOW)
    assert end["reason"] == ADMIN_STOP, end
    stops = audit_entries(radmin, "runtime.stop", b.user)
    assert stops and stops[0]["detail"] == f"runtime {rb['id']}: no reason given", stops


def test_long_reason_is_cut_whole_characters(rd, radmin, running):
    """A 200-character reason of 2-byte characters is kept whole in the audit
    log; the runtime's and the ledger's reason are cut on a character boundary
    to what the supervisor carries, and stay the same text end to end."""
    a = running[0]
    wait_runtime(a, ("stopped", "failed"), timeout=30 * SLOW)
    rt = start_runtime(a)[1]
    why = "é" * 200
    r = radmin.delete(f"/api/v1/runtimes/{rt['id']}", json={"reason": why})
    assert_status(r, 202)
    reason = r.json["runtime"]["reason"]
    assert reason.startswith(f"{ADMIN_STOP}: é") and why.startswith(reason.split(": ", 1)[1]), r.json
    assert len(reason.encode()) <= 150, len(reason.encode())
    end = wait_runtime(a, ("stopped",), timeout=30 * SLOW)
    assert end["reason"] == reason, (end["reason"], reason)
    got = wait_until(lambda: ledger_end_reason(a, rt["id"]), 10 * SLOW, "the ledger entry")
    assert got == reason, got
    stops = [e for e in audit_entries(radmin, "runtime.stop", a.user)
             if e["detail"].startswith(f"runtime {rt['id']}:")]
    assert stops and stops[0]["detail"] == f"runtime {rt['id']}: {why}", stops
