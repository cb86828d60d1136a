"""The runtime API: POST/GET/DELETE /api/v1/me/runtime, the states, errors,
the stop of a running runtime (its WebSocket closes), the proxy's answer for a
runtime that is not running, and the deprecated /api/v1/me/session (308)."""

import os
import socket
import time

import pytest

from labd_harness import (
    assert_error,
    assert_security_headers,
    assert_status,
    audit_entries,
    home_image,
    jupyter_execute,
    loops_under,
    open_kernel_channel,
    parse_api_time,
    remember_sandboxes,
    sandbox_records,
    SLOW,
    STRONG,
    unique_name,
    wait_runtime,
    WebSocketClosed,
)

RUNTIME_KEYS = {"id", "type", "state", "reason", "started_at", "ready_at", "deadline", "queue",
                "seconds_left", "ended_at", "gpus", "url", "warn_before", "image", "image_hash",
                "gpu_notice"}
CPU_LIMIT = 7200


@pytest.fixture(scope="module")
def sd(runtime_daemon_factory):
    return runtime_daemon_factory("rt-api", runtime={"cpu_limit": "2h",
                                                         "warn_before": "10m,1m"})


@pytest.fixture(scope="module")
def sadmin(sd):
    return sd.admin()


@pytest.fixture
def suser(sd, sadmin):
    name = unique_name("rta")
    pw = f"{STRONG}-{name}"
    r = sadmin.post("/api/v1/users", json={"name": name, "password": pw})
    assert r.status == 201, r
    c = sd.client()
    c.login(name, pw)
    c.password = pw
    return c


NO_RUNTIME = {"runtime": None, "session": None}


def test_start_runs_with_documented_fields(sd, sadmin, suser):
    r = suser.get("/api/v1/me/runtime")
    assert_status(r, 200)
    assert r.json == NO_RUNTIME, r.json

    t0 = time.time()
    r = suser.post("/api/v1/me/runtime", json={"type": "cpu"})
    assert_status(r, 202)
    # "session" is the runtime's old name, the same object, kept for one release
    assert set(r.json) == {"runtime", "session"}, r.json
    assert r.json["session"] == r.json["runtime"], r.json
    s = r.json["runtime"]
    assert set(s) == RUNTIME_KEYS, f"runtime keys {sorted(s)}"
    assert s["image"] is None and s["image_hash"] is None, s  # the host's root (no [images])
    assert s["type"] == "cpu" and s["state"] == "starting", s
    assert s["reason"] is None and s["ready_at"] is None and s["ended_at"] is None, s
    assert s["gpus"] == [] and s["url"] == f"/user/{suser.user}/", s
    assert s["warn_before"] == [600, 60], s
    started = parse_api_time(s["started_at"])
    assert t0 - 2 <= started <= time.time() + 1, (t0, s)
    assert parse_api_time(s["deadline"]) == started + CPU_LIMIT, s
    assert CPU_LIMIT - 3 <= s["seconds_left"] <= CPU_LIMIT, s

    # one runtime per user, whatever its state
    r = suser.post("/api/v1/me/runtime", json={"type": "cpu"})
    assert_error(r, 409, "runtime_exists")

    s2 = wait_runtime(suser, "running")
    remember_sandboxes(sd)
    assert s2["id"] == s["id"] and s2["started_at"] == s["started_at"], (s, s2)
    assert s2["deadline"] == s["deadline"] and s2["reason"] is None, s2
    assert s2["ready_at"] and parse_api_time(s2["ready_at"]) >= started, s2
    elapsed = time.time() - started
    assert CPU_LIMIT - elapsed - 2 <= s2["seconds_left"] <= CPU_LIMIT, (elapsed, s2)
    print(f"\nruntime ready after {parse_api_time(s2['ready_at']) - started} s")

    r = suser.post("/api/v1/me/runtime", json={"type": "cpu"})
    assert_error(r, 409, "runtime_exists")
    assert wait_runtime(suser, "running")["id"] == s["id"]

    # the proxy reaches Jupyter
    r = suser.get(f"/user/{suser.user}/api/status")
    assert_status(r, 200)

    ents = audit_entries(sadmin, "runtime.start", suser.user)
    assert len(ents) == 1, ents
    assert ents[0]["actor"] == suser.user and ents[0]["detail"] == "cpu", ents
    assert len(audit_entries(sadmin, "runtime.ready", suser.user)) == 1


def test_gpu_without_devices(sd, suser):
    r = suser.post("/api/v1/me/runtime", json={"type": "gpu"})
    assert_error(r, 409, "no_gpu_available")
    r = suser.get("/api/v1/me/runtime")
    assert r.json == NO_RUNTIME, "a refused GPU start left a runtime: " + repr(r.json)


@pytest.mark.parametrize("body", [{"type": "tpu"}, {"type": 5}, {"type": None}, {},
                                  {"type": "CPU"}, {"type": ""}])
def test_bad_type(sd, suser, body):
    r = suser.post("/api/v1/me/runtime", json=body)
    assert_error(r, 400, "bad_field", field="type")
    assert suser.get("/api/v1/me/runtime").json == NO_RUNTIME


def test_runtime_auth(sd, suser):
    anon = sd.client()
    assert_error(anon.post("/api/v1/me/runtime", json={"type": "cpu"}), 401)
    assert_error(anon.get("/api/v1/me/runtime"), 401)
    assert_error(anon.delete("/api/v1/me/runtime"), 401)
    # cookie without the CSRF token
    assert_error(suser.post("/api/v1/me/runtime", json={"type": "cpu"}, csrf=None),
                 403, "csrf_failed")
    assert suser.get("/api/v1/me/runtime").json == NO_RUNTIME
    assert_error(suser.delete("/api/v1/me/runtime"), 404, "no_runtime")


def test_not_running_pages(sd, suser):
    """No runtime: browsers get the start page, API clients 503 runtime_not_running."""
    r = suser.get(f"/user/{suser.user}/tree", headers={"Accept": "text/html"})
    # the user origin sends the browser to labd's origin for the start page
    assert_status(r, 303)
    assert r.header("Location") == f"http://localhost:{suser.port}/user/{suser.user}/tree", r
    r = suser.get(f"/user/{suser.user}/tree", headers={"Accept": "text/html"},
                  origin_route=False)
    assert_status(r, 503)
    assert r.header("Content-Type", "").startswith("text/html"), r.header("Content-Type")
    assert "Jupyter" not in r.header("Server", ""), r.headers
    assert "start" in r.text.lower(), r.text[:500]
    assert_security_headers(r)
    r = suser.get(f"/user/{suser.user}/api/status")
    assert_error(r, 503, "runtime_not_running")
    r = suser.put(f"/user/{suser.user}/api/contents/x.txt",
                  json={"type": "file", "format": "text", "content": "x"})
    assert_error(r, 503, "runtime_not_running")


def test_stop_closes_websocket(sd, sadmin, suser):
    r = suser.post("/api/v1/me/runtime", json={"type": "cpu"})
    assert_status(r, 202)
    running = wait_runtime(suser, "running")
    remember_sandboxes(sd)
    ids = [kv["id"] for _, kv in sandbox_records(sd.state_dir) if kv["user"] == suser.user]
    assert len(ids) == 1, sandbox_records(sd.state_dir)
    base = f"/user/{suser.user}/"
    kid, ws = open_kernel_channel(sd, suser)
    try:
        result, _, _ = jupyter_execute(ws, "6*7")
        assert result == "42"

        t0 = time.monotonic()
        r = suser.delete("/api/v1/me/runtime")
        assert_status(r, 202)
        s = r.json["runtime"]
        assert s["id"] == running["id"] and s["state"] == "stopping", s
        assert s["reason"] == "stopped by the user", s

        # the open WebSocket is closed (close frame or EOF) within a few seconds
        closed = None
        while time.monotonic() - t0 < 15 * SLOW:
            try:
                ws.recv(timeout=1)
            except WebSocketClosed as e:
                closed = e
                break
            except socket.timeout:
                continue
        assert closed is not None, "the kernel WebSocket stayed open 15 s after the stop"
        # a close frame, not a dropped connection (browsers would report 1006)
        assert closed.clean and closed.code in (1000, 1001), closed
        print(f"\nwebsocket closed {time.monotonic() - t0:.2f} s after DELETE: {closed}")
    finally:
        ws.close()

    s = wait_runtime(suser, ("stopped", "failed"), timeout=15 * SLOW)
    took = time.monotonic() - t0
    assert s["state"] == "stopped", s
    assert s["reason"] == "stopped by the user", s
    assert s["ended_at"] is not None and s["seconds_left"] == 0, s
    assert s["started_at"] == running["started_at"], s
    assert took < 10 * SLOW, f"stopped only after {took:.1f} s"
    print(f"runtime stopped {took:.2f} s after DELETE")

    ents = audit_entries(sadmin, "runtime.stop", suser.user)
    assert len(ents) == 1 and ents[0]["detail"] == "stopped by the user", ents
    assert ents[0]["actor"] == suser.user, ents

    # nothing of the sandbox is left, and the proxy says so
    left = [kv for _, kv in sandbox_records(sd.state_dir) if kv["id"] in ids]
    assert not left, f"sandbox state left after the stop: {left}"
    r = suser.get(base + "tree", headers={"Accept": "text/html"})
    assert_status(r, 303)  # to the start page on labd's origin
    r = suser.get(base + "tree", headers={"Accept": "text/html"}, origin_route=False)
    assert_status(r, 503)
    assert r.header("Content-Type", "").startswith("text/html"), r.header("Content-Type")
    assert "start" in r.text.lower()
    r = suser.get(base + "api/status")
    assert_error(r, 503, "runtime_not_running")
    r = suser.get(base + "tree", headers={"Accept": "application/json"})
    assert_error(r, 503, "runtime_not_running")
    # a second stop has nothing to stop; GET shows the stopped one
    assert_error(suser.delete("/api/v1/me/runtime"), 404, "no_runtime")
    assert suser.get("/api/v1/me/runtime").json["runtime"]["id"] == running["id"]


def test_restart_while_another_runtime_runs(sd, sadmin):
    """Stop and start again while another user's runtime (whose sandbox was
    cloned while this home was mounted) keeps running: the home image is never
    attached twice, and the file saved before is there."""
    users = []
    for prefix in ("hma", "hmb"):
        name = unique_name(prefix)
        pw = f"{STRONG}-{name}"
        assert sadmin.post("/api/v1/users", json={"name": name, "password": pw}).status == 201
        c = sd.client()
        c.login(name, pw)
        users.append(c)
    a, b = users
    img = home_image(sd, a.user)

    def a_loops():
        return [lp for lp in loops_under(sd.state_dir) if lp.endswith(f" -> {img}")]

    wait = lambda c: wait_runtime(c, "running")  # noqa: E731
    assert a.post("/api/v1/me/runtime", json={"type": "cpu"}).status == 202
    wait(a)
    r = a.put(f"/user/{a.user}/api/contents/mine.txt",
              json={"type": "file", "format": "text", "content": "first runtime"})
    assert r.status == 201, r
    assert b.post("/api/v1/me/runtime", json={"type": "cpu"}).status == 202
    wait(b)
    remember_sandboxes(sd)
    assert len(a_loops()) == 1, a_loops()

    assert a.delete("/api/v1/me/runtime").status == 202
    s = wait_runtime(a, ("stopped", "failed"), timeout=15 * SLOW)
    assert s["state"] == "stopped", s
    assert len(a_loops()) <= 1, a_loops()
    assert a.post("/api/v1/me/runtime", json={"type": "cpu"}).status == 202
    wait(a)
    remember_sandboxes(sd)
    assert len(a_loops()) == 1, f"{img} attached more than once: {a_loops()}"
    r = a.get(f"/user/{a.user}/api/contents/mine.txt")
    assert_status(r, 200)
    assert r.json["content"] == "first runtime", r.json
    r = a.put(f"/user/{a.user}/api/contents/mine.txt",
              json={"type": "file", "format": "text", "content": "second runtime"})
    assert_status(r, 200)
    for c in (a, b):
        assert c.delete("/api/v1/me/runtime").status == 202
    for c in (a, b):
        assert wait_runtime(c, ("stopped", "failed"), timeout=15 * SLOW)["state"] == "stopped"


# --------------------------------------------------------------------------- 308
#
# /api/v1/me/session was the runtime API's path until this release; it answers
# 308 to /api/v1/me/runtime (method and body kept) and goes away in the next.

OLD_PATH = "/api/v1/me/session"
NEW_PATH = "/api/v1/me/runtime"


def assert_moved(r):
    """The old path's answer: 308 to the new path, with an error-shaped body."""
    e = assert_error(r, 308, "moved")
    assert r.header("Location") == NEW_PATH, r.headers
    assert NEW_PATH in e["message"], e
    assert_security_headers(r)


def follow(c, method, path, **kw):
    """Sends method to path and, like a client that follows redirects, sends the
    same method and body again to each 307/308 Location; returns (hops, last)."""
    hops = []
    r = c.request(method, path, **kw)
    while r.status in (307, 308) and len(hops) < 5:
        hops.append(r)
        r = c.request(method, r.header("Location"), **kw)
    return hops, r


def test_old_path_redirects_each_method(sd, sadmin, suser):
    """POST, GET and DELETE on the old path each get 308 with the Location, and a
    client that follows it gets exactly what the new path answers."""
    for method in ("GET", "POST", "DELETE"):
        kw = {"json": {"type": "cpu"}} if method == "POST" else {}
        # without following: nothing is started, whatever the method
        assert_moved(suser.request(method, OLD_PATH, **kw))
        assert suser.get(NEW_PATH).json == NO_RUNTIME

    hops, r = follow(suser, "GET", OLD_PATH)
    assert len(hops) == 1 and r.path == NEW_PATH, (hops, r)
    assert_status(r, 200)
    assert r.json == NO_RUNTIME, r.json

    # POST is re-sent with its body: the runtime starts (202), as on the new path
    hops, r = follow(suser, "POST", OLD_PATH, json={"type": "cpu"})
    assert [h.status for h in hops] == [308] and r.path == NEW_PATH, (hops, r)
    assert_status(r, 202)
    started = r.json["runtime"]
    assert set(started) == RUNTIME_KEYS and started["state"] == "starting", started
    hops, r = follow(suser, "POST", OLD_PATH, json={"type": "cpu"})
    assert_error(r, 409, "runtime_exists")
    running = wait_runtime(suser, "running")
    remember_sandboxes(sd)

    hops, r = follow(suser, "GET", OLD_PATH)
    assert_status(r, 200)
    assert r.json["runtime"]["id"] == started["id"], r.json

    # DELETE (the curl -X DELETE case): 308 with the Location, then the stop
    r = suser.delete(OLD_PATH)
    assert_moved(r)
    assert suser.get(NEW_PATH).json["runtime"]["state"] == "running"
    hops, r = follow(suser, "DELETE", OLD_PATH)
    assert [h.status for h in hops] == [308] and r.path == NEW_PATH, (hops, r)
    assert_status(r, 202)
    assert r.json["runtime"]["id"] == running["id"], r.json
    assert r.json["runtime"]["state"] == "stopping", r.json
    assert wait_runtime(suser, ("stopped", "failed"), timeout=15 * SLOW)["state"] == "stopped"
    hops, r = follow(suser, "DELETE", OLD_PATH)
    assert_error(r, 404, "no_runtime")
    assert len(audit_entries(sadmin, "runtime.start", suser.user)) == 1
    assert len(audit_entries(sadmin, "runtime.stop", suser.user)) == 1


def test_old_path_is_public_and_the_new_path_gates(sd, suser):
    """The redirect needs no login and no CSRF token (it changes nothing); the
    new path then refuses as it always did."""
    anon = sd.client()
    for method in ("GET", "POST", "DELETE"):
        kw = {"json": {"type": "cpu"}} if method == "POST" else {}
        hops, r = follow(anon, method, OLD_PATH, **kw)
        assert len(hops) == 1, hops
        assert_moved(hops[0])
        assert_error(r, 401, "unauthorized")
    hops, r = follow(suser, "POST", OLD_PATH, json={"type": "cpu"}, csrf=None)
    assert_moved(hops[0])
    assert_error(r, 403, "csrf_failed")
    assert suser.get(NEW_PATH).json == NO_RUNTIME
    # methods the old path never had are still 405, not redirected
    r = suser.put(OLD_PATH, json={"type": "cpu"})
    assert_error(r, 405, "method_not_allowed")
    allowed = set(r.header("Allow", "").replace(" ", "").split(","))
    assert {"GET", "POST", "DELETE"} <= allowed <= {"GET", "HEAD", "POST", "DELETE"}, r.headers
