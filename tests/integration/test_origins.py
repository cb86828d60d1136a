"""Users' content on its own origin (docs/security.md §3), without a runtime: the
one-time handoff from labd's origin to <user>.localhost, the runtime cookie it
sets, which cookie counts on which origin, what a user origin serves, the API's
refusal of requests from a user origin, and re-authentication for API tokens.

The client connects to 127.0.0.1 and names the origin in the Host header, as a
browser resolving *.localhost to loopback would."""

import os
import re
import sqlite3
import urllib.parse

import pytest

from labd_harness import (assert_error, assert_status, make_user, unique_name,
                          user_origin_host)


def db_exec(daemon, sql, args=()):
    """Changes labd's real database as root (to age a code or a login)."""
    db = sqlite3.connect(daemon.db_file, timeout=10)
    try:
        with db:
            n = db.execute(sql, args).rowcount
    finally:
        db.close()
    assert n >= 1, f"{sql}: no row changed"


def issue_code(c, name=None):
    """GET /user/<name>/ on labd's origin: the redirect to name's origin with a
    code; returns (host, path?query of the handoff, code)."""
    name = name or c.user
    r = c.get(f"/user/{name}/", origin_route=False)
    assert r.status in (302, 303), r
    loc = urllib.parse.urlsplit(r.header("Location"))
    assert loc.scheme == "http" and loc.netloc == user_origin_host(name, c.port), loc
    assert loc.path == "/_labd/handoff", loc
    q = urllib.parse.parse_qs(loc.query)
    assert q["next"] == [f"/user/{name}/"], q
    assert r.header("Cache-Control") == "no-store", r.headers
    return loc.netloc, f"{loc.path}?{loc.query}", q["code"][0]


def redeem(c, host, target):
    return c.get(target, host=host)


@pytest.fixture
def u(daemon, new_user):
    name, pw = new_user()
    c = daemon.client()
    c.login(name, pw)
    c.password = pw
    return c


@pytest.fixture
def v(daemon, new_user):
    name, pw = new_user()
    c = daemon.client()
    c.login(name, pw)
    c.password = pw
    return c


def status_path(c):
    return f"/user/{c.user}/api/status"


def test_handoff_sets_a_host_only_runtime_cookie_once(daemon, u):
    host, target, code = issue_code(u)
    # nothing in the store or the redirect repeats the code's secret in the clear
    db = sqlite3.connect(f"file:{daemon.db_file}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT code_hash, cookie_hash FROM runtime_grants").fetchall()
    finally:
        db.close()
    assert rows and all(code not in (a or "") + (b or "") for a, b in rows), rows
    r = redeem(u, host, target)
    assert r.status in (302, 303), r
    assert r.header("Location") == f"/user/{u.user}/", r.header("Location")
    cookies = r.set_cookies()
    assert set(cookies) == {"labd_rt"}, r.header_all("Set-Cookie")
    value, attrs = cookies["labd_rt"]
    assert attrs.get("httponly") is True and attrs.get("samesite") == "Lax", attrs
    assert "domain" not in attrs and attrs.get("path") == "/", attrs
    assert value and value != u.session
    # with it the runtime path answers as for the owner (not running: 503, not 401)
    assert_error(u.get(status_path(u)), 503, "runtime_not_running")
    # the same code a second time: refused, and no cookie
    again = u.get(target, host=host, cookies=False)
    assert_error(again, 403, "handoff_invalid")
    assert "labd_rt" not in again.set_cookies()


def test_university_names_get_a_dns_label_origin(daemon, admin):
    """A student number and a name with '.' and '_' are user names; each is
    served on its derived label (a DNS label), never on the raw name."""
    suffix = unique_name("")
    for name in (f"2023{suffix}"[:32], f"j.doe_{suffix}"[:32]):
        pw = "p" * 16
        assert_status(admin.post("/api/v1/users", json={"name": name, "password": pw}), 201)
        c = daemon.client()
        c.login(name, pw)
        host, target, _ = issue_code(c)
        label = host.split(".")[0]
        assert re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", label), host
        assert redeem(c, host, target).status in (302, 303)
        assert_error(c.get(status_path(c)), 503, "runtime_not_running")
        if label != name:
            raw = f"{name}.localhost:{c.port}"
            assert_error(c.get(status_path(c), host=raw, cookies=False), 404, "not_found")


def test_handoff_code_expires(daemon, u):
    host, target, code = issue_code(u)
    db_exec(daemon, "UPDATE runtime_grants SET code_expires_at = code_expires_at - 31"
                    " WHERE cookie_hash IS NULL")
    r = redeem(u, host, target)
    assert_error(r, 403, "handoff_invalid")
    assert "labd_rt" not in r.set_cookies() and "labd_rt" not in u.runtime_jars[u.user]
    assert_error(u.get(status_path(u), cookies=False), 401, "unauthorized")


def test_handoff_code_is_bound_to_its_origin(daemon, u, v):
    host, target, code = issue_code(u)
    # shown to v's origin instead: refused there, and spent for u's too
    r = u.get(target, host=user_origin_host(v.user, u.port))
    assert_error(r, 403, "handoff_invalid")
    assert_error(redeem(u, host, target), 403, "handoff_invalid")
    # a forged or missing code
    assert_error(u.get("/_labd/handoff?code=" + "A" * 43, host=host), 403, "handoff_invalid")
    assert_error(u.get("/_labd/handoff", host=host), 403, "handoff_invalid")


def test_handoff_next_stays_in_the_runtime(daemon, u):
    host, target, code = issue_code(u)
    evil = target.split("&next=")[0] + "&next=" + urllib.parse.quote("//evil.example/x", safe="")
    r = u.get(evil, host=host)
    assert r.status in (302, 303) and r.header("Location") == f"/user/{u.user}/", r


def test_runtime_cookie_not_accepted_on_another_origin(daemon, u, v):
    assert u.handoff() is None
    rt = u.runtime_jars[u.user]["labd_rt"]
    cookie = {"Cookie": f"labd_rt={rt}"}
    # v's origin, v's runtime path: u's runtime cookie is nobody there
    r = u.get(status_path(v), host=user_origin_host(v.user, u.port), cookies=False,
              headers=cookie)
    assert_error(r, 401, "unauthorized")
    # labd's own origin: not a session
    r = u.get("/api/v1/me", cookies=False, headers=cookie)
    assert_error(r, 401, "unauthorized")


def test_session_cookie_not_accepted_on_a_user_origin(daemon, u):
    host = user_origin_host(u.user, u.port)
    sess = {"Cookie": f"labd_session={u.session}"}
    r = u.get(status_path(u), host=host, cookies=False, headers=sess)
    assert_error(r, 401, "unauthorized")
    # and labd's UI and API are not served on a user origin at all
    for path in ("/api/v1/me", "/api/v1/health", "/login", "/admin", "/dashboard",
                 "/static/common.js"):
        r = u.get(path, host=host, cookies=False, headers=sess)
        assert_error(r, 404, "not_found")
    r = u.post("/api/v1/users", host=host, cookies=False, headers=sess,
               json={"name": "x", "password": "y" * 12})
    assert_error(r, 404, "not_found")
    # "/" on a user origin leads into the runtime
    r = u.get("/", host=host, cookies=False)
    assert r.status in (302, 303) and r.header("Location") == f"/user/{u.user}/", r


def test_the_host_decides_whose_runtime(daemon, u, v):
    assert u.handoff() is None
    # v's runtime path on u's origin: not served
    r = u.get(status_path(v), host=user_origin_host(u.user, u.port))
    assert_error(r, 404, "not_found")
    # names that are no user: 404, nothing served
    for host in (f"Not_A_User.localhost:{u.port}", f"a.b.localhost:{u.port}"):
        assert_error(u.get(status_path(u), host=host, cookies=False), 404, "not_found")
        assert_error(u.get("/api/v1/health", host=host, cookies=False), 404, "not_found")
    # other users never get a code for u's origin
    r = v.get(f"/user/{u.user}/", origin_route=False)
    assert_error(r, 403, "forbidden")


def test_runtime_path_on_labd_origin_is_not_served(daemon, u):
    # a browser not logged in goes to the login page
    r = u.get(status_path(u), origin_route=False, cookies=False,
              headers={"Accept": "text/html"})
    assert r.status in (302, 303) and r.header("Location").startswith("/login?next="), r
    # an API client is told where the runtime lives
    t = u.post("/api/v1/me/tokens", json={"name": "rt"})
    assert_status(t, 201)
    r = u.get(status_path(u), origin_route=False, cookies=False, bearer=t.json["token"])
    assert_error(r, 421, "wrong_origin")
    assert user_origin_host(u.user, u.port) in r.json["error"]["message"], r.json
    # ... and a bearer token is accepted on the user origin itself (benchmarks, scripts)
    r = u.get(status_path(u), cookies=False, bearer=t.json["token"])
    assert_error(r, 503, "runtime_not_running")


def test_logout_ends_the_runtime_cookie(daemon, u):
    assert u.handoff() is None
    assert_error(u.get(status_path(u)), 503, "runtime_not_running")
    assert_status(u.post("/api/v1/logout"), 204)
    assert_error(u.get(status_path(u)), 401, "unauthorized")


def test_api_refuses_requests_from_a_user_origin(daemon, admin, u):
    origin = f"http://{user_origin_host(u.user, u.port)}"
    r = u.get("/api/v1/me", headers={"Origin": origin})
    assert_error(r, 403, "csrf_failed")
    r = admin.post("/api/v1/users", headers={"Origin": origin},
                   json={"name": "fromorigin", "role": "admin", "password": "p" * 16})
    assert_error(r, 403, "csrf_failed")
    assert_error(admin.get("/api/v1/users/fromorigin"), 404, "not_found")
    r = u.post("/api/v1/me/tokens", headers={"Origin": origin}, json={"name": "o"})
    assert_error(r, 403, "csrf_failed")
    # labd's own origin still works
    assert_status(u.get("/api/v1/me", headers={"Origin": u.origin}), 200)


def test_token_creation_needs_reauthentication(daemon, u):
    # a fresh login counts (within [auth] token_reauth, 5 minutes by default)
    assert_status(u.post("/api/v1/me/tokens", json={"name": "fresh"}), 201)
    # a login made longer ago does not: the password is needed
    db_exec(daemon, "UPDATE sessions SET created_at = created_at - 301 WHERE user_id ="
                    " (SELECT id FROM users WHERE name = ?)", (u.user,))
    r = u.post("/api/v1/me/tokens", json={"name": "stale"})
    assert_error(r, 403, "reauth_required")
    assert "password" in r.json["error"]["message"], r.json
    r = u.post("/api/v1/me/tokens", json={"name": "stale", "password": "wrong-" + u.password})
    assert_error(r, 403, "reauth_failed")
    r = u.post("/api/v1/me/tokens", json={"name": "stale", "password": 5})
    assert_error(r, 400, "bad_field")
    names = [t["name"] for t in u.get("/api/v1/me/tokens").json["tokens"]]
    assert "stale" not in names, names
    assert_status(u.post("/api/v1/me/tokens", json={"name": "stale", "password": u.password}),
                  201)


def test_password_change_revokes_tokens_by_default(daemon, u):
    tok = u.post("/api/v1/me/tokens", json={"name": "a"}).json["token"]
    b = daemon.client()
    b.bearer = tok
    assert_status(b.get("/api/v1/me"), 200)
    new = u.password + "-2"
    r = u.post("/api/v1/me/password", json={"current_password": u.password,
                                            "new_password": new})
    assert_status(r, 204)
    assert_error(b.get("/api/v1/me"), 401, "unauthorized")
    assert u.get("/api/v1/me/tokens").json["tokens"] == []
    # kept when asked
    tok = u.post("/api/v1/me/tokens", json={"name": "b"}).json["token"]
    b.bearer = tok
    r = u.post("/api/v1/me/password", json={"current_password": new,
                                            "new_password": new + "-3",
                                            "revoke_tokens": False})
    assert_status(r, 204)
    assert_status(b.get("/api/v1/me"), 200)
    r = u.post("/api/v1/me/password", json={"current_password": new + "-3",
                                            "new_password": new + "-4",
                                            "revoke_tokens": "no"})
    assert_error(r, 400, "bad_field")
    assert_status(b.get("/api/v1/me"), 200)


def test_browser_without_runtime_cookie_goes_to_labd_origin(daemon, daemon_factory, u):
    """A user origin sends a browser without its cookie to labd's UI origin (which logs it
    in and hands it back): http://<user_domain>:<port> by default, or [server] ui_origin."""
    path = f"/user/{u.user}/tree?x=1"
    html = {"Accept": "text/html"}
    r = u.get(path, cookies=False, headers=html)
    assert r.status == 303 and r.header("Location") == f"http://localhost:{u.port}{path}", r
    d = daemon_factory("origins-ui", server={"ui_origin": "https://lab.example.org"})
    c = d.client()
    r = c.get(path, headers=html, host=user_origin_host(u.user, d.port))
    assert r.status == 303 and r.header("Location") == f"https://lab.example.org{path}", r


def test_cookies_carry_the_host_prefix_behind_tls(daemon_factory):
    """Cookie tossing between users' origins (the December review): with user origins
    under one parent domain, alice's page can set `labd_rt` with `Domain=<parent>` and
    a longer Path, which bob's browser then sends first to bob's origin. Behind TLS
    (secure_cookies) labd names its cookies `__Host-...`, a prefix browsers accept only
    with Secure, Path=/ and no Domain, so no other origin can set one; and labd reads
    only that name, so a tossed cookie of the bare name changes nothing."""
    d = daemon_factory("origins-tls", server={"secure_cookies": "true"})
    owner = make_user(d, prefix="tls")
    c = d.client()
    cookies = c.login(owner.user, owner.password).set_cookies()
    assert set(cookies) == {"__Host-labd_session"}, cookies
    session, attrs = cookies["__Host-labd_session"]
    assert attrs.get("secure") is True and attrs.get("path") == "/", attrs
    assert "domain" not in attrs and attrs.get("httponly") is True, attrs
    bare = d.client()
    assert_error(bare.get("/api/v1/me", cookies=False,
                          headers={"Cookie": f"labd_session={session}"}), 401, "unauthorized")
    for header in (f"__Host-labd_session={session}",
                   f"labd_session=tossed; __Host-labd_session={session}"):
        assert_status(bare.get("/api/v1/me", cookies=False, headers={"Cookie": header}), 200)

    # the handoff to the user's origin sets the runtime cookie the same way
    r = c.get(f"/user/{owner.user}/", origin_route=False)
    assert r.status in (302, 303), r
    loc = urllib.parse.urlsplit(r.header("Location"))
    assert loc.scheme == "https" and loc.path == "/_labd/handoff", loc
    r = c.get(f"{loc.path}?{loc.query}", host=loc.netloc)
    assert r.status in (302, 303), r
    cookies = r.set_cookies()
    assert set(cookies) == {"__Host-labd_rt"}, r.header_all("Set-Cookie")
    rt, attrs = cookies["__Host-labd_rt"]
    assert attrs.get("secure") is True and attrs.get("path") == "/", attrs
    assert "domain" not in attrs, attrs
    path = f"/user/{owner.user}/api/status"
    assert_error(bare.get(path, host=loc.netloc, cookies=False,
                          headers={"Cookie": f"labd_rt={rt}"}), 401, "unauthorized")
    for header in (f"__Host-labd_rt={rt}", f"labd_rt=tossed; __Host-labd_rt={rt}"):
        assert_error(bare.get(path, host=loc.netloc, cookies=False, headers={"Cookie": header}),
                     503, "runtime_not_running")
