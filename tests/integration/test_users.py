"""Admin-only user management."""

import pytest

from labd_harness import STRONG, assert_error, assert_status, unique_name

ADMIN_ENDPOINTS = [
    ("GET", "/api/v1/users", None),
    ("POST", "/api/v1/users", {"name": "shouldnotexist"}),
    ("GET", "/api/v1/users/{victim}", None),
    ("PATCH", "/api/v1/users/{victim}", {"disabled": True}),
    ("DELETE", "/api/v1/users/{victim}", None),
    ("GET", "/api/v1/audit", None),
]


@pytest.mark.parametrize("method,path,body", ADMIN_ENDPOINTS)
def test_admin_endpoints_forbidden_for_user(daemon, user, admin, new_user, method, path, body):
    victim, _ = new_user(prefix="victim")
    kw = {"json": body} if body is not None else {}
    r = user.request(method, path.format(victim=victim), **kw)
    assert_error(r, 403, "forbidden")
    v = admin.get(f"/api/v1/users/{victim}")
    assert_status(v, 200)
    assert v.json["user"]["disabled"] is False
    assert_error(admin.get("/api/v1/users/shouldnotexist"), 404, "not_found")


@pytest.mark.parametrize("method,path,body", ADMIN_ENDPOINTS + [
    ("GET", "/api/v1/me", None),
    ("POST", "/api/v1/me/password", {"current_password": "a", "new_password": "b" * 12}),
    ("POST", "/api/v1/logout", None),
])
def test_endpoints_need_auth(daemon, method, path, body):
    c = daemon.client()
    kw = {"json": body} if body is not None else {}
    r = c.request(method, path.format(victim="admin"), **kw)
    assert_error(r, 401, "unauthorized")


def test_user_forbidden_then_nothing_changed(daemon, user, admin):
    r = user.post("/api/v1/users", json={"name": "sneaky", "role": "admin"})
    assert_error(r, 403, "forbidden")
    assert_error(admin.get("/api/v1/users/sneaky"), 404, "not_found")
    r = user.patch(f"/api/v1/users/{user.user}", json={"role": "admin"})
    assert_error(r, 403, "forbidden")
    assert admin.get(f"/api/v1/users/{user.user}").json["user"]["role"] == "user"


def test_create_user_generated_password(daemon, admin):
    name = unique_name("gen")
    r = admin.post("/api/v1/users", json={"name": name})
    assert_status(r, 201)
    j = r.json
    assert j["user"]["name"] == name and j["user"]["role"] == "user", j
    assert j["user"]["disabled"] is False, j
    pw = j.get("password")
    assert isinstance(pw, str) and len(pw) >= 10, j
    daemon.client().login(name, pw)
    g = admin.get(f"/api/v1/users/{name}")
    assert_status(g, 200)
    assert pw not in g.body.decode(), g.json
    assert pw not in admin.get("/api/v1/users").body.decode()


def test_create_user_given_password_not_echoed(daemon, admin):
    name = unique_name("giv")
    pw = STRONG + "-given"
    r = admin.post("/api/v1/users", json={"name": name, "role": "user", "password": pw})
    assert_status(r, 201)
    assert "password" not in r.json, r.json
    assert pw not in r.body.decode()
    daemon.client().login(name, pw)


def test_create_user_duplicate(daemon, admin, new_user):
    name, _ = new_user()
    r = admin.post("/api/v1/users", json={"name": name, "password": STRONG})
    assert_error(r, 409, "conflict")
    r = admin.post("/api/v1/users", json={"name": "admin", "password": STRONG})
    assert_error(r, 409, "conflict")


@pytest.mark.parametrize("bad", [
    "Bob", ".bob", "", "a" * 33, "bo b", "../etc", "bob!", "_bob", "-bob", "böb", "bob\n",
])
def test_create_user_bad_name(daemon, admin, bad):
    r = admin.post("/api/v1/users", json={"name": bad, "password": STRONG})
    assert_error(r, 400, "bad_field", field="name")
    names = [u["name"] for u in admin.get("/api/v1/users").json["users"]]
    assert bad not in names


def test_create_user_name_limits_ok(daemon, admin):
    name = unique_name("lim").ljust(32, "9")
    r = admin.post("/api/v1/users", json={"name": name, "password": STRONG})
    assert_status(r, 201)
    assert r.json["user"]["name"] == name


def test_create_user_bad_fields(daemon, admin):
    name = unique_name("bf")
    r = admin.post("/api/v1/users", json={"name": name, "role": "root", "password": STRONG})
    assert_error(r, 400, "bad_field", field="role")
    r = admin.post("/api/v1/users", json={"name": name, "password": "short"})
    assert_error(r, 400, "bad_field", field="password")
    r = admin.post("/api/v1/users", json={"name": name, "password": 12345678901})
    assert_error(r, 400, "bad_field", field="password")
    r = admin.post("/api/v1/users", json={"name": name, "role": True})
    assert_error(r, 400, "bad_field", field="role")
    r = admin.post("/api/v1/users", json={"password": STRONG})
    assert_error(r, 400, "bad_field", field="name")
    assert_error(admin.get(f"/api/v1/users/{name}"), 404, "not_found")


def test_list_users_ordered(daemon, admin, new_user):
    a, _ = new_user(prefix="zz")
    b, _ = new_user(prefix="aa")
    r = admin.get("/api/v1/users")
    assert_status(r, 200)
    users = r.json["users"]
    names = [u["name"] for u in users]
    assert names == sorted(names), names
    assert "admin" in names and a in names and b in names, names
    for u in users:
        assert set(u) >= {"name", "role", "disabled", "created_at"}, u
        assert not any("pass" in k or "hash" in k or "salt" in k for k in u), u


def test_get_user(daemon, admin, new_user):
    name, _ = new_user()
    r = admin.get(f"/api/v1/users/{name}")
    assert_status(r, 200)
    assert r.json["user"]["name"] == name and r.json["user"]["role"] == "user", r.json
    assert_error(admin.get("/api/v1/users/nosuchuser"), 404, "not_found")


def test_disable_user_kills_sessions_and_tokens(daemon, admin, new_user):
    name, pw = new_user()
    c = daemon.client()
    c.login(name, pw)
    tok = c.post("/api/v1/me/tokens", json={"name": "t"})
    assert_status(tok, 201)
    b = daemon.client()
    b.bearer = tok.json["token"]
    assert_status(b.get("/api/v1/me"), 200)

    r = admin.patch(f"/api/v1/users/{name}", json={"disabled": True})
    assert_status(r, 200)
    assert r.json["user"]["disabled"] is True and r.json["user"]["name"] == name, r.json
    assert admin.get(f"/api/v1/users/{name}").json["user"]["disabled"] is True

    assert_error(c.get("/api/v1/me"), 401, "unauthorized")
    assert_error(b.get("/api/v1/me"), 401, "unauthorized")
    r = daemon.client().post("/api/v1/login", json={"username": name, "password": pw})
    assert_error(r, 401)
    f = daemon.client().post("/login", form={"username": name, "password": pw})
    assert_status(f, 303)
    assert "/login" in (f.header("Location") or ""), f.header("Location")

    r = admin.patch(f"/api/v1/users/{name}", json={"disabled": False})
    assert_status(r, 200)
    assert r.json["user"]["disabled"] is False, r.json
    daemon.client().login(name, pw)
    # disabling ended the old session for good
    assert_error(c.get("/api/v1/me"), 401, "unauthorized")


def test_patch_role_and_bad_patch(daemon, admin, new_user):
    name, pw = new_user()
    r = admin.patch(f"/api/v1/users/{name}", json={"role": "admin"})
    assert_status(r, 200)
    assert r.json["user"]["role"] == "admin", r.json
    c = daemon.client()
    c.login(name, pw)
    assert_status(c.get("/api/v1/users"), 200)
    r = admin.patch(f"/api/v1/users/{name}", json={"role": "user"})
    assert_status(r, 200)
    assert r.json["user"]["role"] == "user"
    assert_error(c.get("/api/v1/users"), 403, "forbidden")

    assert_error(admin.patch(f"/api/v1/users/{name}", json={"role": "god"}), 400, "bad_field",
                 field="role")
    assert_error(admin.patch(f"/api/v1/users/{name}", json={"disabled": "yes"}), 400,
                 "bad_field", field="disabled")
    assert_error(admin.patch(f"/api/v1/users/{name}", json={"password": ""}), 400)
    assert_error(admin.patch(f"/api/v1/users/{name}", json={"password": "short"}), 400,
                 "bad_field", field="password")
    assert_error(admin.patch("/api/v1/users/nosuchuser", json={"disabled": True}), 404,
                 "not_found")
    daemon.client().login(name, pw)


def test_patch_password_and_reset(daemon, admin, new_user):
    name, pw = new_user()
    c = daemon.client()
    c.login(name, pw)
    newpw = "admin-set-password-1"
    r = admin.patch(f"/api/v1/users/{name}", json={"password": newpw})
    assert_status(r, 200)
    assert_error(c.get("/api/v1/me"), 401, "unauthorized")
    assert_error(daemon.client().post("/api/v1/login", json={"username": name, "password": pw}),
                 401, "invalid_credentials")
    c = daemon.client()
    c.login(name, newpw)

    r = admin.patch(f"/api/v1/users/{name}", json={"reset_password": True})
    assert_status(r, 200)
    gen = r.json.get("password")
    assert isinstance(gen, str) and len(gen) >= 10, r.json
    assert_error(c.get("/api/v1/me"), 401, "unauthorized")
    assert_error(daemon.client().post("/api/v1/login",
                                      json={"username": name, "password": newpw}),
                 401, "invalid_credentials")
    daemon.client().login(name, gen)


def test_delete_user(daemon, admin, new_user):
    name, pw = new_user()
    c = daemon.client()
    c.login(name, pw)
    tok = c.post("/api/v1/me/tokens", json={"name": "t"}).json["token"]
    r = admin.delete(f"/api/v1/users/{name}")
    assert_status(r, 204)
    assert r.body == b"", r.body
    assert_error(admin.get(f"/api/v1/users/{name}"), 404, "not_found")
    assert_error(admin.delete(f"/api/v1/users/{name}"), 404, "not_found")
    assert_error(c.get("/api/v1/me"), 401, "unauthorized")
    b = daemon.client()
    b.bearer = tok
    assert_error(b.get("/api/v1/me"), 401, "unauthorized")
    assert_error(daemon.client().post("/api/v1/login", json={"username": name, "password": pw}),
                 401, "invalid_credentials")
    # the name can be used again
    r = admin.post("/api/v1/users", json={"name": name, "password": STRONG})
    assert_status(r, 201)


def enabled_admins(admin):
    return [u["name"] for u in admin.get("/api/v1/users").json["users"]
            if u["role"] == "admin" and not u["disabled"]]


def test_last_admin_protected(daemon, admin, new_user):
    # make "admin" the only enabled admin
    for n in enabled_admins(admin):
        if n != "admin":
            assert_status(admin.patch(f"/api/v1/users/{n}", json={"role": "user"}), 200)
    assert enabled_admins(admin) == ["admin"]
    # a disabled admin does not count
    dis, _ = new_user(role="admin", prefix="disadm")
    assert_status(admin.patch(f"/api/v1/users/{dis}", json={"disabled": True}), 200)

    assert_error(admin.patch("/api/v1/users/admin", json={"disabled": True}), 409, "last_admin")
    assert_error(admin.patch("/api/v1/users/admin", json={"role": "user"}), 409, "last_admin")
    assert_error(admin.delete("/api/v1/users/admin"), 409, "last_admin")
    me = admin.get("/api/v1/me")
    assert_status(me, 200)
    assert me.json["role"] == "admin" and me.json["disabled"] is False, me.json

    # with a second enabled admin, one of them may go
    second, spw = new_user(role="admin", prefix="adm")
    r = admin.patch(f"/api/v1/users/{second}", json={"role": "user"})
    assert_status(r, 200)
    assert_status(admin.patch(f"/api/v1/users/{second}", json={"role": "admin"}), 200)
    s = daemon.client()
    s.login(second, spw)
    assert_status(s.patch("/api/v1/users/admin", json={"disabled": True}), 200)
    try:
        assert_error(s.patch(f"/api/v1/users/{second}", json={"disabled": True}), 409,
                     "last_admin")
        assert_error(s.patch(f"/api/v1/users/{second}", json={"role": "user"}), 409,
                     "last_admin")
        assert_error(s.delete(f"/api/v1/users/{second}"), 409, "last_admin")
    finally:
        assert_status(s.patch("/api/v1/users/admin", json={"disabled": False}), 200)
    assert_status(s.delete(f"/api/v1/users/{second}"), 204)
    assert_status(daemon.admin().get("/api/v1/me"), 200)
