"""CSRF protection of cookie-authenticated state-changing requests."""

from labd_harness import assert_error, assert_status


def token_names(c):
    r = c.get("/api/v1/me/tokens")
    assert_status(r, 200)
    return sorted(t["name"] for t in r.json["tokens"])


def test_post_without_or_with_wrong_csrf_token(daemon, user):
    before = token_names(user)
    r = user.post("/api/v1/me/tokens", json={"name": "nocsrf"}, csrf=None)
    assert_error(r, 403, "csrf_failed")
    r = user.post("/api/v1/me/tokens", json={"name": "badcsrf"}, csrf="wrong" + user.csrf)
    assert_error(r, 403, "csrf_failed")
    r = user.post("/api/v1/me/tokens", json={"name": "emptycsrf"}, csrf="")
    assert_error(r, 403, "csrf_failed")
    assert token_names(user) == before, "a refused request changed something"
    r = user.post("/api/v1/me/tokens", json={"name": "withcsrf"})
    assert_status(r, 201)
    assert "withcsrf" in token_names(user)


def test_csrf_token_of_another_session_refused(daemon, user, admin):
    r = user.post("/api/v1/me/tokens", json={"name": "othercsrf"}, csrf=admin.csrf)
    assert_error(r, 403, "csrf_failed")
    assert "othercsrf" not in token_names(user)


def test_patch_and_delete_without_csrf(daemon, admin, new_user):
    name, pw = new_user()
    r = admin.patch(f"/api/v1/users/{name}", json={"disabled": True}, csrf=None)
    assert_error(r, 403, "csrf_failed")
    r = admin.patch(f"/api/v1/users/{name}", json={"role": "admin"}, csrf="0" * 64)
    assert_error(r, 403, "csrf_failed")
    r = admin.delete(f"/api/v1/users/{name}", csrf=None)
    assert_error(r, 403, "csrf_failed")
    g = admin.get(f"/api/v1/users/{name}")
    assert_status(g, 200)
    u = g.json["user"]
    assert u["disabled"] is False and u["role"] == "user", u
    daemon.client().login(name, pw)
    r = admin.patch(f"/api/v1/users/{name}", json={"disabled": True})
    assert_status(r, 200)
    assert r.json["user"]["disabled"] is True
    r = admin.delete(f"/api/v1/users/{name}")
    assert_status(r, 204)


def test_create_user_without_csrf(daemon, admin):
    r = admin.post("/api/v1/users", json={"name": "csrfvictim"}, csrf=None)
    assert_error(r, 403, "csrf_failed")
    assert_error(admin.get("/api/v1/users/csrfvictim"), 404, "not_found")


def test_logout_needs_csrf(daemon, user):
    r = user.post("/api/v1/logout", csrf=None)
    assert_error(r, 403, "csrf_failed")
    assert_status(user.get("/api/v1/me"), 200)


def test_password_change_needs_csrf(daemon, user):
    r = user.post("/api/v1/me/password", csrf=None,
                  json={"current_password": user.password, "new_password": "csrf-changed-pw"})
    assert_error(r, 403, "csrf_failed")
    daemon.client().login(user.user, user.password)


def test_cross_site_origin_refused(daemon, user):
    r = user.post("/api/v1/me/tokens", json={"name": "evilorigin"},
                  headers={"Origin": "http://evil.example"})
    assert_error(r, 403, "csrf_failed")
    r = user.post("/api/v1/me/tokens", json={"name": "evilorigin2"},
                  headers={"Origin": f"http://127.0.0.1:{daemon.port + 1}"})
    assert_error(r, 403, "csrf_failed")
    assert "evilorigin" not in token_names(user)
    assert "evilorigin2" not in token_names(user)
    r = user.post("/api/v1/me/tokens", json={"name": "sameorigin"},
                  headers={"Origin": user.origin})
    assert_status(r, 201)


def test_bearer_needs_no_csrf(daemon, user):
    r = user.post("/api/v1/me/tokens", json={"name": "bearer-maker"})
    assert_status(r, 201)
    tok = r.json["token"]
    b = daemon.client()
    b.bearer = tok
    # a bearer token is no fresh login: it makes another only with the password
    r = b.post("/api/v1/me/tokens", json={"name": "made-by-bearer", "password": user.password})
    assert_status(r, 201)
    tid = r.json["id"]
    r = b.delete(f"/api/v1/me/tokens/{tid}")
    assert_status(r, 204)
    assert "made-by-bearer" not in token_names(user)


def test_get_needs_no_csrf(daemon, user):
    assert_status(user.get("/api/v1/me", csrf=None), 200)
    assert_status(user.get("/api/v1/me/tokens", csrf=None), 200)
