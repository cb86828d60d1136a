"""API tokens: create (shown once), bearer auth, listing, revoke, isolation."""

import re

from labd_harness import assert_error, assert_status

ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def create_token(c, name):
    r = c.post("/api/v1/me/tokens", json={"name": name})
    assert_status(r, 201)
    return r.json


def test_token_lifecycle(daemon, user):
    t = create_token(user, "ci")
    assert set(t) >= {"id", "name", "prefix", "created_at", "last_used_at", "token"}, t
    assert isinstance(t["id"], int), t
    assert t["name"] == "ci", t
    assert t["last_used_at"] is None, t
    assert ISO_UTC.match(t["created_at"]), t
    tok = t["token"]
    assert tok.startswith("labd_") and len(tok) >= 5 + 22, t
    assert t["prefix"].startswith("labd_") and tok.startswith(t["prefix"]), t
    assert len(t["prefix"]) < len(tok), t

    # bearer works, and says so
    b = daemon.client()
    b.bearer = tok
    me = b.get("/api/v1/me")
    assert_status(me, 200)
    assert me.json["name"] == user.user, me.json
    assert me.json["auth"] == "token", me.json
    assert "csrf_token" not in me.json, me.json

    # listing never shows the secret
    lst = user.get("/api/v1/me/tokens")
    assert_status(lst, 200)
    assert tok.encode() not in lst.body, "token secret appears in the listing"
    entries = [e for e in lst.json["tokens"] if e["id"] == t["id"]]
    assert len(entries) == 1, lst.json
    e = entries[0]
    assert "token" not in e, e
    assert e["name"] == "ci" and e["prefix"] == t["prefix"], e
    assert not any(k in e for k in ("hash", "token_hash", "secret")), e

    # revoke -> 401
    r = user.delete(f"/api/v1/me/tokens/{t['id']}")
    assert_status(r, 204)
    assert_error(b.get("/api/v1/me"), 401, "unauthorized")
    assert all(x["id"] != t["id"] for x in user.get("/api/v1/me/tokens").json["tokens"])
    assert_error(user.delete(f"/api/v1/me/tokens/{t['id']}"), 404, "not_found")


def test_token_last_used_is_recorded(daemon, user):
    t = create_token(user, "used")
    b = daemon.client()
    b.bearer = t["token"]
    assert_status(b.get("/api/v1/me"), 200)
    e = [x for x in user.get("/api/v1/me/tokens").json["tokens"] if x["id"] == t["id"]][0]
    assert e["last_used_at"] is not None and ISO_UTC.match(e["last_used_at"]), e


def test_token_duplicate_name(daemon, user):
    create_token(user, "dup")
    r = user.post("/api/v1/me/tokens", json={"name": "dup"})
    assert_error(r, 409, "conflict")


def test_token_bad_names(daemon, user):
    for bad in ("", "x" * 65):
        r = user.post("/api/v1/me/tokens", json={"name": bad})
        assert_error(r, 400, "bad_field", field="name")
    r = user.post("/api/v1/me/tokens", json={"name": 7})
    assert_error(r, 400, "bad_field", field="name")
    r = user.post("/api/v1/me/tokens", json={})
    assert_error(r, 400, "bad_field", field="name")
    r = user.post("/api/v1/me/tokens", json={"name": "tab\there"})
    assert_error(r, 400, "bad_field", field="name")
    names = [t["name"] for t in user.get("/api/v1/me/tokens").json["tokens"]]
    assert names == [] or all(n not in ("", "x" * 65) for n in names), names


def test_other_users_token_is_not_found(daemon, user, new_user):
    name2, pw2 = new_user()
    other = daemon.client()
    other.login(name2, pw2)
    t = create_token(other, "mine")
    r = user.delete(f"/api/v1/me/tokens/{t['id']}")
    assert_error(r, 404, "not_found")
    b = daemon.client()
    b.bearer = t["token"]
    me = b.get("/api/v1/me")
    assert_status(me, 200)
    assert me.json["name"] == name2
    assert_error(user.delete("/api/v1/me/tokens/999999"), 404, "not_found")
    r = user.delete("/api/v1/me/tokens/notanumber")
    assert r.status in (400, 404), r
    assert_error(r, r.status)


def test_bogus_bearer_tokens(daemon, user):
    t = create_token(user, "real")
    b = daemon.client()
    for bogus in ("labd_" + "A" * 43, t["token"] + "x", t["token"][:-1], t["prefix"], "", "labd_"):
        b.bearer = None
        r = b.get("/api/v1/me", headers={"Authorization": f"Bearer {bogus}"})
        assert_error(r, 401, "unauthorized")
    r = b.get("/api/v1/me", headers={"Authorization": f"Basic {t['token']}"})
    assert_error(r, 401, "unauthorized")


def test_tokens_need_auth(daemon):
    c = daemon.client()
    assert_error(c.get("/api/v1/me/tokens"), 401, "unauthorized")
    assert_error(c.post("/api/v1/me/tokens", json={"name": "x"}), 401, "unauthorized")
    assert_error(c.delete("/api/v1/me/tokens/1"), 401, "unauthorized")
