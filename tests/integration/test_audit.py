"""The audit log."""

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
