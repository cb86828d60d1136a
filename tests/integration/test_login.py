"""Login (API and form), open redirects, cookie flags, logout, /me."""

import re

import pytest

from labd_harness import assert_error, assert_status, redirect_target

ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
COOKIE_VALUE = re.compile(r"^(?:[A-Za-z0-9_-]{43,}={0,2}|[0-9a-f]{64})$")


def test_health(daemon):
    r = daemon.client().get("/api/v1/health")
    assert_status(r, 200)
    j = r.json
    assert j.get("status") == "ok", j
    assert j.get("supervisor") == "ok", j
    assert j.get("version") == "0.1.0", j


def test_api_login_success(daemon):
    c = daemon.client()
    r = c.login("admin", daemon.admin_password)
    j = r.json
    assert j["user"]["name"] == "admin", j
    assert j["user"]["role"] == "admin", j
    assert j["user"]["disabled"] is False, j
    assert ISO_UTC.match(j["user"]["created_at"]), j
    assert "labd_session" in r.set_cookies(), r.header_all("Set-Cookie")
    me = c.get("/api/v1/me")
    assert_status(me, 200)
    m = me.json
    assert m["name"] == "admin" and m["role"] == "admin" and m["disabled"] is False, m
    assert m["auth"] == "cookie", m
    assert m["csrf_token"] == j["csrf_token"], (m, j)
    assert ISO_UTC.match(m["created_at"]), m


def test_api_login_charset_param_accepted(daemon):
    c = daemon.client()
    r = c.post("/api/v1/login", json={"username": "admin", "password": daemon.admin_password},
               content_type="application/json; charset=utf-8", csrf=None)
    assert_status(r, 200)


def test_api_login_wrong_password_and_unknown_user_look_alike(daemon, new_user):
    name, pw = new_user()
    c = daemon.client()
    r1 = c.post("/api/v1/login", json={"username": name, "password": pw + "x"})
    e1 = assert_error(r1, 401, "invalid_credentials")
    r2 = c.post("/api/v1/login", json={"username": "nosuchuser", "password": pw})
    e2 = assert_error(r2, 401, "invalid_credentials")
    assert e1["message"] == e2["message"], (e1, e2)
    assert "labd_session" not in r1.set_cookies() or not r1.set_cookies()["labd_session"][0]
    assert_error(c.get("/api/v1/me"), 401, "unauthorized")


def test_api_login_missing_field(daemon):
    c = daemon.client()
    r = c.post("/api/v1/login", json={"username": "admin"})
    assert_error(r, 400, "bad_field", field="password")


def test_cookie_flags_and_randomness(daemon, new_user):
    name, pw = new_user()
    values = []
    for _ in range(2):
        c = daemon.client()
        r = c.login(name, pw)
        cookies = r.set_cookies()
        assert "labd_session" in cookies, r.header_all("Set-Cookie")
        value, attrs = cookies["labd_session"]
        assert COOKIE_VALUE.match(value), f"session cookie not 256-bit random-looking: {value!r}"
        assert attrs.get("httponly") is True, attrs
        assert str(attrs.get("samesite", "")).lower() == "lax", attrs
        assert attrs.get("path") == "/", attrs
        assert "secure" not in attrs, f"Secure set without secure_cookies: {attrs}"
        values.append(value)
    assert values[0] != values[1]


def test_form_login_cookie_flags(daemon):
    c = daemon.client()
    r = c.post("/login", form={"username": "admin", "password": daemon.admin_password})
    assert_status(r, 303)
    value, attrs = r.set_cookies()["labd_session"]
    assert COOKIE_VALUE.match(value), value
    assert attrs.get("httponly") is True and attrs.get("path") == "/", attrs
    assert str(attrs.get("samesite", "")).lower() == "lax", attrs
    assert "secure" not in attrs, attrs


def test_form_login_success(daemon, new_user):
    name, pw = new_user()
    c = daemon.client()
    r = c.post("/login", form={"username": name, "password": pw})
    assert_status(r, 303)
    path, _, loc = redirect_target(r, daemon.port)
    assert path == "/dashboard", loc
    assert c.session, r.header_all("Set-Cookie")
    me = c.get("/api/v1/me")
    assert_status(me, 200)
    assert me.json["name"] == name
    d = c.get("/dashboard")
    assert_status(d, 200)
    assert "text/html" in d.header("Content-Type", ""), d.header("Content-Type")


def test_form_login_next_local_path(daemon):
    c = daemon.client()
    r = c.post("/login", form={"username": "admin", "password": daemon.admin_password,
                               "next": "/admin"})
    assert_status(r, 303)
    path, _, loc = redirect_target(r, daemon.port)
    assert path == "/admin", loc


def test_form_login_failure(daemon, new_user):
    name, pw = new_user()
    c = daemon.client()
    r = c.post("/login", form={"username": name, "password": "wrong-password-123",
                               "next": "/admin"})
    assert_status(r, 303)
    path, query, loc = redirect_target(r, daemon.port)
    assert path == "/login", loc
    assert query.get("error") == ["invalid"], loc
    assert query.get("next", ["/admin"]) == ["/admin"], loc
    assert not c.session, r.header_all("Set-Cookie")
    assert_error(c.get("/api/v1/me"), 401, "unauthorized")


@pytest.mark.parametrize("nxt", [
    "//evil.example",
    "//evil.example/dashboard",
    "https://evil.example",
    "http://evil.example/",
    "/\\evil.example",
    "\\\\evil.example",
    "http:evil.example",
    "javascript:alert(1)",
    " //evil.example",
])
def test_form_login_open_redirect_refused(daemon, nxt):
    c = daemon.client()
    r = c.post("/login", form={"username": "admin", "password": daemon.admin_password,
                               "next": nxt})
    assert_status(r, 303)
    loc = r.header("Location") or ""
    assert "evil" not in loc and "javascript" not in loc, f"next={nxt!r} -> Location {loc!r}"
    path, _, loc = redirect_target(r, daemon.port)
    assert path == "/dashboard", f"next={nxt!r} -> Location {loc!r}"


@pytest.mark.parametrize("nxt", ["/\t/evil.example", "/\n/evil.example", "/%2F%2Fevil.example"])
def test_form_login_next_never_leaves_site(daemon, nxt):
    """Browsers drop tabs/newlines from a Location, so '/<TAB>/host' is '//host'."""
    c = daemon.client()
    r = c.post("/login", form={"username": "admin", "password": daemon.admin_password,
                               "next": nxt})
    assert_status(r, 303)
    loc = r.header("Location") or ""
    cleaned = loc.replace("\t", "").replace("\n", "").replace("\r", "")
    assert not cleaned.startswith("//") and not cleaned.startswith("/\\"), \
        f"next={nxt!r} -> Location {loc!r} (off-site once a browser strips control characters)"
    assert "\n" not in loc and "\r" not in loc, f"header injection: {loc!r}"
    redirect_target(r, daemon.port)


def test_form_login_failure_keeps_next_local(daemon):
    c = daemon.client()
    r = c.post("/login", form={"username": "admin", "password": "wrong-password-1",
                               "next": "//evil.example"})
    assert_status(r, 303)
    path, query, loc = redirect_target(r, daemon.port)
    assert path == "/login", loc
    assert query.get("error") == ["invalid"], loc


def test_api_logout_invalidates_cookie(daemon, user):
    old = user.session
    r = user.post("/api/v1/logout")
    assert_status(r, 204)
    other = daemon.client()
    other.cookies["labd_session"] = old
    assert_error(other.get("/api/v1/me"), 401, "unauthorized")


def test_form_logout(daemon, user):
    old = user.session
    r = user.post("/logout", form={"csrf_token": user.csrf}, csrf=None)
    assert_status(r, 303)
    path, _, loc = redirect_target(r, daemon.port)
    assert path == "/login", loc
    other = daemon.client()
    other.cookies["labd_session"] = old
    assert_error(other.get("/api/v1/me"), 401, "unauthorized")


def test_form_logout_without_csrf_refused(daemon, user):
    r = user.post("/logout", form={}, csrf=None)
    assert_status(r, 403)
    assert_status(user.get("/api/v1/me"), 200)


def test_garbage_cookie_is_unauthorized(daemon):
    c = daemon.client()
    c.cookies["labd_session"] = "A" * 43
    assert_error(c.get("/api/v1/me"), 401, "unauthorized")


def test_change_password(daemon, user):
    other = daemon.client()
    other.login(user.user, user.password)
    r = user.post("/api/v1/me/password",
                  json={"current_password": "not-my-password", "new_password": "x" * 20})
    assert_error(r, 403, "forbidden")
    r = user.post("/api/v1/me/password",
                  json={"current_password": user.password, "new_password": "short"})
    assert_error(r, 400, "bad_field", field="new_password")
    r = user.post("/api/v1/me/password", json={"current_password": user.password})
    assert_error(r, 400, "bad_field", field="new_password")
    # nothing changed so far
    daemon.client().login(user.user, user.password)
    newpw = "brand-new-password-42"
    r = user.post("/api/v1/me/password",
                  json={"current_password": user.password, "new_password": newpw})
    assert_status(r, 204)
    assert_error(daemon.client().post("/api/v1/login",
                                      json={"username": user.user, "password": user.password}),
                 401, "invalid_credentials")
    daemon.client().login(user.user, newpw)
    # this session stays, the user's other sessions end
    assert_status(user.get("/api/v1/me"), 200)
    assert_error(other.get("/api/v1/me"), 401, "unauthorized")
