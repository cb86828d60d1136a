"""Account events close the WebSockets they take away, at once: a logout closes
that session's kernel WebSockets, a password change those opened with the
user's cookie, a revoked API token those it opened, and disabling or deleting a
user every one of theirs (docs/security.md, section 5)."""

import os
import threading
import time

import pytest
from test_availability import fake_runtime, note_runtime_socket

from labd_harness import (
    SLOW,
    STRONG,
    WebSocket,
    WebSocketClosed,
    assert_status,
    start_runtime,
    unique_name,
    wait_until,
    ws_cookie_headers,
)

# "Closed within a second" of the event's reply; a sanitizer build is slower.
CLOSE_WITHIN_S = 1.0 * SLOW


@pytest.fixture(scope="module")
def cd(runtime_daemon_factory):
    return runtime_daemon_factory("conn-close", runtime={"cpu_limit": "2h"})


@pytest.fixture(scope="module")
def cadmin(cd):
    return cd.admin()


def login_as(d, name, pw):
    c = d.client()
    c.login(name, pw)
    c.password = pw
    return c


@pytest.fixture(scope="module")
def owner(cd, cadmin):
    """A user with a running runtime and one kernel for the whole module."""
    name = unique_name("cc")
    pw = f"{STRONG}-{name}"
    r = cadmin.post("/api/v1/users", json={"name": name, "role": "user", "password": pw})
    assert r.status == 201, r
    c = login_as(cd, name, pw)
    start_runtime(c)
    r = c.post(f"/user/{name}/api/kernels", json={"name": "python3"})
    assert r.status == 201, r
    c.kernel = r.json["id"]
    return c


def open_ws(d, c, kernel, bearer=None):
    headers = ws_cookie_headers(c) if not bearer else {"Authorization": f"Bearer {bearer}"}
    if not bearer:
        headers["Origin"] = c.runtime_origin()
    return WebSocket(d.port, f"/user/{c.user}/api/kernels/{kernel}/channels",
                     headers=headers, source=c.source).expect_open()


def still_open(ws):
    """True while ws is open: nothing but kernel messages arrive for a moment."""
    try:
        ws.recv(timeout=0.2)
        return True
    except TimeoutError:
        return True
    except WebSocketClosed:
        return False


def assert_closed_soon(ws, since, what):
    """ws is closed (close frame or EOF) within CLOSE_WITHIN_S of since."""
    while True:
        left = since + CLOSE_WITHIN_S - time.monotonic()
        assert left > 0, f"the WebSocket stayed open {CLOSE_WITHIN_S:.1f} s after {what}"
        try:
            ws.recv(timeout=left)  # kernel messages may come first: read on
        except TimeoutError:
            continue
        except (WebSocketClosed, ConnectionError):
            return


def test_logout_closes_that_sessions_websockets(cd, owner):
    other = login_as(cd, owner.user, owner.password)  # a second session
    mine = open_ws(cd, other, owner.kernel)
    kept = open_ws(cd, owner, owner.kernel)
    try:
        assert still_open(mine) and still_open(kept)
        r = other.post("/api/v1/logout")
        assert_status(r, 204)
        assert_closed_soon(mine, time.monotonic(), "logging out")
        assert still_open(kept), "a logout closed another session's WebSocket"
    finally:
        mine.close()
        kept.close()


def test_password_change_closes_cookie_websockets(cd, owner):
    c = login_as(cd, owner.user, owner.password)
    ws = open_ws(cd, c, owner.kernel)
    try:
        assert still_open(ws)
        new = owner.password + "-2"
        r = c.post("/api/v1/me/password",
                   json={"current_password": owner.password, "new_password": new})
        assert_status(r, 204)
        assert_closed_soon(ws, time.monotonic(), "changing the password")
        owner.password = new
    finally:
        ws.close()


def test_token_revocation_closes_its_websockets(cd, owner):
    c = login_as(cd, owner.user, owner.password)
    r = c.post("/api/v1/me/tokens", json={"name": "ws-close"})
    assert r.status == 201, r
    tid, secret = r.json["id"], r.json["token"]
    by_token = open_ws(cd, c, owner.kernel, bearer=secret)
    by_cookie = open_ws(cd, c, owner.kernel)
    try:
        assert still_open(by_token)
        r = c.delete(f"/api/v1/me/tokens/{tid}")
        assert_status(r, 204)
        assert_closed_soon(by_token, time.monotonic(), "revoking the token")
        assert still_open(by_cookie), "revoking a token closed a cookie's WebSocket"
    finally:
        by_token.close()
        by_cookie.close()


def request_in_flight(d, c, path):
    """Starts GET path as c in a thread; returns a dict that gets "status"
    (or "error") and "at" (time.monotonic()) when it ends."""
    out = {}

    def run():
        try:
            out["status"] = c.get(path).status
        except OSError as e:
            out["error"] = repr(e)
        out["at"] = time.monotonic()

    threading.Thread(target=run, daemon=True).start()
    return out


def test_disabling_a_user_closes_all_their_connections(cd, owner, cadmin):
    c = login_as(cd, owner.user, owner.password)
    r = c.post("/api/v1/me/tokens", json={"name": "ws-disable"})
    assert r.status == 201, r
    socks = [open_ws(cd, c, owner.kernel), open_ws(cd, c, owner.kernel, bearer=r.json["token"])]
    note_runtime_socket(cd, owner)
    try:
        assert all(still_open(ws) for ws in socks)
        # and a proxied request that the runtime never answers, parked in labd
        with fake_runtime(cd, owner, "silent") as rec:
            pending = request_in_flight(cd, c, f"/user/{owner.user}/api/status")
            wait_until(lambda: os.path.getsize(rec) > 0, 10 * SLOW,
                       "the request to reach the runtime")
            assert "at" not in pending, pending
            r = cadmin.patch(f"/api/v1/users/{owner.user}", json={"disabled": True})
            assert_status(r, 200)
            since = time.monotonic()
            for ws in socks:
                assert_closed_soon(ws, since, "disabling the user")
            wait_until(lambda: "at" in pending, CLOSE_WITHIN_S + 1,
                       "the proxied request to end after disabling the user")
            assert pending["at"] - since < CLOSE_WITHIN_S, \
                f"the proxied request ended {pending['at'] - since:.1f} s after disabling"
            assert pending.get("status") in (None, 403), pending
    finally:
        for ws in socks:
            ws.close()
