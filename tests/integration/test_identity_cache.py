"""The web process keeps resolved identities (cookie or token -> user) in memory
so that a proxied request costs no database read. Every change that ends a
session or token, or changes a user, must be seen by the very next request:
each test first makes requests with the credential (the cache is warm), then
makes the change, then expects the old credential refused at once, both by
the API and by the runtime gate (/user/<name>/: 503 "runtime_not_running"
while authenticated, 401 once not)."""

import time

from labd_harness import SLOW, STRONG, assert_error, assert_status


def gate_path(name):
    return f"/user/{name}/api/status"


def warm(c, name, times=3):
    """Authenticated requests through the API and through the gate."""
    for _ in range(times):
        me = c.get("/api/v1/me")
        assert_status(me, 200)
        assert me.json["name"] == name, me.json
        assert_error(c.get(gate_path(name)), 503, "runtime_not_running")


def refused(c, name):
    assert_error(c.get("/api/v1/me"), 401, "unauthorized")
    assert_error(c.get(gate_path(name)), 401, "unauthorized")


def login(daemon, name, pw):
    c = daemon.client()
    c.login(name, pw)
    return c


def with_cookie(daemon, cookie):
    c = daemon.client()
    c.cookies["labd_session"] = cookie
    return c


def with_token(daemon, c, label="t"):
    r = c.post("/api/v1/me/tokens", json={"name": label})
    assert_status(r, 201)
    b = daemon.client()
    b.bearer = r.json["token"]
    return b, r.json["id"]


def test_api_logout_forgets_the_session_at_once(daemon, new_user):
    name, pw = new_user()
    c = login(daemon, name, pw)
    copy = with_cookie(daemon, c.session)
    warm(c, name)
    warm(copy, name)
    assert_status(c.post("/api/v1/logout"), 204)
    refused(copy, name)


def test_form_logout_forgets_the_session_at_once(daemon, new_user):
    name, pw = new_user()
    c = login(daemon, name, pw)
    copy = with_cookie(daemon, c.session)
    warm(copy, name)
    assert_status(c.post("/logout", form={"csrf_token": c.csrf}, csrf=None), 303)
    refused(copy, name)


def test_other_sessions_survive_a_logout(daemon, new_user):
    """Only the session that logged out ends (the cache is not simply off)."""
    name, pw = new_user()
    a, b = login(daemon, name, pw), login(daemon, name, pw)
    warm(a, name)
    warm(b, name)
    assert_status(a.post("/api/v1/logout"), 204)
    warm(b, name)


def test_revoked_token_is_refused_at_once(daemon, new_user):
    name, pw = new_user()
    c = login(daemon, name, pw)
    b, tid = with_token(daemon, c)
    keep, _ = with_token(daemon, c, "kept")
    warm(b, name)
    warm(keep, name)
    assert_status(c.delete(f"/api/v1/me/tokens/{tid}"), 204)
    refused(b, name)
    warm(keep, name)


def test_disabled_user_is_refused_at_once(daemon, admin, new_user):
    name, pw = new_user()
    c = login(daemon, name, pw)
    b, _ = with_token(daemon, c)
    warm(c, name)
    warm(b, name)
    assert_status(admin.patch(f"/api/v1/users/{name}", json={"disabled": True}), 200)
    refused(c, name)
    refused(b, name)
    # enabled again: the token is valid again at once, the session stays ended
    assert_status(admin.patch(f"/api/v1/users/{name}", json={"disabled": False}), 200)
    warm(b, name)
    refused(c, name)


def test_admin_password_reset_ends_sessions_at_once(daemon, admin, new_user):
    name, pw = new_user()
    c = login(daemon, name, pw)
    warm(c, name)
    assert_status(admin.patch(f"/api/v1/users/{name}", json={"password": f"{STRONG}-new"}),
                  200)
    refused(c, name)
    warm(login(daemon, name, f"{STRONG}-new"), name)


def test_own_password_change_ends_other_sessions_at_once(daemon, new_user):
    name, pw = new_user()
    a, b = login(daemon, name, pw), login(daemon, name, pw)
    warm(a, name)
    warm(b, name)
    r = a.post("/api/v1/me/password",
               json={"current_password": pw, "new_password": f"{STRONG}-changed"})
    assert_status(r, 204)
    refused(b, name)
    warm(a, name)  # the session that changed it stays


def test_role_change_applies_at_once(daemon, admin, new_user):
    name, pw = new_user()
    c = login(daemon, name, pw)
    warm(c, name)
    assert_error(c.get("/api/v1/users"), 403, "forbidden")
    assert_status(admin.patch(f"/api/v1/users/{name}", json={"role": "admin"}), 200)
    assert_status(c.get("/api/v1/users"), 200)
    assert_status(c.get("/api/v1/users"), 200)
    assert_status(admin.patch(f"/api/v1/users/{name}", json={"role": "user"}), 200)
    assert_error(c.get("/api/v1/users"), 403, "forbidden")


def test_deleted_user_is_refused_at_once(daemon, admin, new_user):
    name, pw = new_user()
    c = login(daemon, name, pw)
    b, _ = with_token(daemon, c)
    warm(c, name)
    warm(b, name)
    assert_status(admin.delete(f"/api/v1/users/{name}"), 204)
    refused(c, name)
    refused(b, name)


def test_cli_password_reset_ends_sessions(daemon, new_user):
    """The host CLI writes the database from another process: the daemon
    notices within about a second (it polls SQLite's data_version)."""
    name, pw = new_user()
    c = login(daemon, name, pw)
    warm(c, name)
    r = daemon.run_cli("user", "passwd", name, "--password-stdin", input=f"{STRONG}-cli\n")
    assert r.returncode == 0, f"user passwd: rc {r.returncode}\n{r.stdout}\n{r.stderr}"
    deadline = time.monotonic() + 3 * SLOW
    while c.get("/api/v1/me").status == 200:
        assert time.monotonic() < deadline, "the old session still works 3 s after the reset"
        time.sleep(0.05)
    refused(c, name)
