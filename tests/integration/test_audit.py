"""The audit log."""

from datetime import datetime

from labd_harness import STRONG, assert_error, assert_status, unique_name


def entries(admin, q="limit=200"):
    r = admin.get(f"/api/v1/audit?{q}")
    assert_status(r, 200)
    es = r.json["entries"]
    assert isinstance(es, list)
    return es


def find(es, action, **kw):
    return [e for e in es if e.get("action") == action
            and all(e.get(k) == v for k, v in kw.items())]


def test_audit_records_actions(daemon, admin):
    name = unique_name("aud")
    pw = f"{STRONG}-{name}"
    assert_status(admin.post("/api/v1/users", json={"name": name, "password": pw}), 201)
    u = daemon.client()
    u.login(name, pw)
    t = u.post("/api/v1/me/tokens", json={"name": "audit-tok"})
    assert_status(t, 201)
    tid = t.json["id"]
    assert_status(u.delete(f"/api/v1/me/tokens/{tid}"), 204)
    bad = daemon.client()
    r = bad.post("/api/v1/login", json={"username": name, "password": "wrong-password-9"})
    assert_error(r, 401, "invalid_credentials")

    es = entries(admin)
    for e in es[:5]:
        assert set(e) >= {"id", "time", "actor", "action", "target", "address", "detail"}, e
    ids = [e["id"] for e in es]
    assert ids == sorted(ids, reverse=True), "audit entries are not newest first"

    assert find(es, "user.create", actor="admin", target=name), \
        f"no user.create admin->{name}: {es[:6]}"
    ok = find(es, "login.success", target=name) or find(es, "login.success", actor=name)
    assert ok, f"no login.success for {name}: {es[:6]}"

    def about_token(e):
        text = f"{e.get('target') or ''} {e.get('detail') or ''}"
        return "audit-tok" in text or str(tid) in text

    tc = [e for e in find(es, "token.create", actor=name) if about_token(e)]
    assert tc, f"no token.create by {name} naming the token: {find(es, 'token.create')[:3]}"
    tr = [e for e in find(es, "token.revoke", actor=name) if about_token(e)]
    assert tr, f"no token.revoke by {name} naming the token: {find(es, 'token.revoke')[:3]}"
    assert tr[0]["id"] > tc[0]["id"]

    lf = find(es, "login.failure", target=name)
    assert lf, f"no login.failure with target {name}: {es[:6]}"
    assert lf[0]["address"] == bad.source, lf[0]
    assert lf[0]["id"] > tr[0]["id"]
    assert "wrong-password-9" not in str(es), "a tried password is in the audit log"


def test_audit_update_delete_and_logout(daemon, admin, new_user):
    name, pw = new_user(prefix="aud")
    assert_status(admin.patch(f"/api/v1/users/{name}", json={"disabled": True}), 200)
    assert_status(admin.patch(f"/api/v1/users/{name}", json={"reset_password": True}), 200)
    assert_status(admin.delete(f"/api/v1/users/{name}"), 204)
    c = daemon.client()
    c.login("admin", daemon.admin_password)
    assert_status(c.post("/api/v1/logout"), 204)
    es = entries(admin)
    assert find(es, "user.update", actor="admin", target=name), find(es, "user.update")[:3]
    assert find(es, "user.password_reset", actor="admin", target=name), \
        find(es, "user.password_reset")[:3]
    assert find(es, "user.delete", actor="admin", target=name), find(es, "user.delete")[:3]
    assert find(es, "logout", actor="admin"), find(es, "logout")[:3]


def test_audit_password_change(daemon, user, admin):
    r = user.post("/api/v1/me/password",
                  json={"current_password": user.password, "new_password": "audited-change-1"})
    assert_status(r, 204)
    es = entries(admin)
    assert find(es, "password.change", actor=user.user), find(es, "password.change")[:3]


def test_audit_bootstrap(daemon, admin):
    page = entries(admin, "limit=500")
    every = list(page)
    while len(page) == 500:
        page = entries(admin, f"limit=500&before={page[-1]['id']}")
        every += page
    assert find(every, "admin.bootstrap"), "no admin.bootstrap entry in the audit log"


def test_audit_paging(daemon, admin):
    es = entries(admin, "limit=3")
    assert len(es) == 3, es
    page2 = entries(admin, f"limit=3&before={es[-1]['id']}")
    assert page2 and all(e["id"] < es[-1]["id"] for e in page2), (es, page2)
    for q in ("limit=0", "limit=501", "limit=abc", "before=xyz"):
        r = admin.get(f"/api/v1/audit?{q}")
        assert_error(r, 400)


def test_audit_filters(daemon, admin):
    """action (exact or a "prefix.*"), actor and a [from, to) window, with next_before."""
    name = unique_name("audf")
    pw = f"{STRONG}-{name}"
    assert_status(admin.post("/api/v1/users", json={"name": name, "password": pw}), 201)
    u = daemon.client()
    u.login(name, pw)
    assert_status(u.post("/api/v1/me/tokens", json={"name": "f1"}), 201)

    es = entries(admin, "action=user.create&limit=500")
    assert es and all(e["action"] == "user.create" for e in es), es[:3]
    assert find(es, "user.create", target=name)

    es = entries(admin, f"actor={name}&limit=500")
    assert es and all(e["actor"] == name for e in es), es[:3]
    assert find(es, "token.create"), es

    es = entries(admin, f"action=token.*&actor={name}")
    assert [e["action"] for e in es] == ["token.create"], es
    # "user.*" is a prefix with the dot: never "users.x" nor a bare "user".
    assert all(e["action"].startswith("user.") for e in entries(admin, "action=user.*&limit=500"))

    newest = entries(admin, "limit=1")[0]
    t = int(datetime.fromisoformat(newest["time"].replace("Z", "+00:00")).timestamp())
    inside = entries(admin, f"from={t}&to={t + 1}&limit=500")
    assert any(e["id"] == newest["id"] for e in inside), inside[:3]
    assert all(e["time"] == newest["time"] for e in inside), inside[:3]
    assert entries(admin, f"to={t}&action=token.create&actor={name}") == []
    assert entries(admin, f"from={t + 1}") == []

    # Filters page like the plain list: next_before leads to the next page, then null.
    r = admin.get("/api/v1/audit?action=user.create&limit=1")
    assert_status(r, 200)
    assert r.json["next_before"] == r.json["entries"][0]["id"], r.json
    r2 = admin.get(f"/api/v1/audit?action=user.create&limit=500&before={r.json['next_before']}")
    assert all(e["id"] < r.json["next_before"] and e["action"] == "user.create"
               for e in r2.json["entries"])
    assert r2.json["next_before"] is None


def test_audit_filter_errors(daemon, admin):
    before = len(entries(admin, "limit=500"))
    for q, field in (("action=User.create", "action"), ("action=", "action"),
                     ("action=user..create", "action"), ("action=.*", "action"),
                     ("action=user%27%20OR%201", "action"), ("action=" + "a" * 65, "action"),
                     ("actor=Bob", "actor"), ("actor=a%25", "actor"), ("actor=" + "a" * 33, "actor"),
                     ("from=-1", "from"), ("from=x", "from"), ("to=0", "to"),
                     ("from=10&to=10", "from"), ("from=20&to=10", "from")):
        r = admin.get(f"/api/v1/audit?{q}")
        assert_error(r, 400, "bad_field")
        assert f'"{field}"' in r.json["error"]["message"], (q, r.json)
    assert len(entries(admin, "limit=500")) == before
