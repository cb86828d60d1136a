"""API token scopes and expiry: what a scoped token may do, that a token never
holds more than its owner (at creation and, for a demoted owner, at use), the
expiry, and that every route of the table declares the scope it needs."""

import re
import time

import pytest

from labd_harness import (
    REPO,
    assert_error,
    assert_status,
    parse_api_time,
    wait_until,
    SLOW,
)

USER_SCOPES = ["identify", "account", "tokens", "runtimes", "read:usage", "read:quota",
               "read:gpus", "jobs"]
# in the table's order: jobs and admin:jobs came last
ADMIN_SCOPES = USER_SCOPES[:-1] + ["admin:users", "admin:quota", "admin:usage", "admin:runtimes",
                                   "admin:audit", "metrics", "jobs", "admin:jobs"]


def make_token(c, name, expect=201, **fields):
    body = {"name": name, "password": c.password}
    body.update(fields)
    r = c.post("/api/v1/me/tokens", json=body)
    if expect is not None:
        assert_status(r, expect)
    return r


def bearer(daemon, token):
    b = daemon.client()
    b.bearer = token
    return b


@pytest.fixture
def admin_user(daemon, new_user):
    """A client logged in as a fresh administrator (not the bootstrap one)."""
    name, pw = new_user(role="admin", prefix="adm")
    c = daemon.client()
    c.login(name, pw)
    c.password = pw
    return c


def test_read_usage_token_reads_usage_only(daemon, user):
    t = make_token(user, "usage-only", scopes=["read:usage"]).json
    assert t["scopes"] == ["identify", "read:usage"], t
    assert t["expires_at"] is None, t
    b = bearer(daemon, t["token"])
    assert_status(b.get("/api/v1/me/usage"), 200)
    assert_status(b.get("/api/v1/me"), 200)  # identify: every token knows its owner
    e = assert_error(b.delete("/api/v1/me/runtime"), 403, "insufficient_scope")
    assert '"runtimes"' in e["message"], e
    assert_error(b.post("/api/v1/me/runtime", json={"type": "cpu"}), 403,
                 "insufficient_scope", field='"runtimes"')
    assert_error(b.get("/api/v1/me/quota"), 403, "insufficient_scope", field='"read:quota"')
    assert_error(b.get("/api/v1/me/tokens"), 403, "insufficient_scope", field='"tokens"')
    listed = [x for x in user.get("/api/v1/me/tokens").json["tokens"] if x["id"] == t["id"]]
    assert listed and listed[0]["scopes"] == ["identify", "read:usage"], listed


def test_default_scopes_are_all_of_the_owners(daemon, user, admin_user):
    assert make_token(user, "all").json["scopes"] == USER_SCOPES
    t = make_token(admin_user, "all").json
    assert t["scopes"] == ADMIN_SCOPES, t
    b = bearer(daemon, t["token"])
    for path in ("/api/v1/users", "/api/v1/usage", "/api/v1/runtimes", "/api/v1/audit",
                 "/api/v1/plans", "/metrics"):
        assert_status(b.get(path), 200)


def test_admin_scopes_refused_on_a_users_token(daemon, user):
    for scope in ("admin:users", "admin:quota", "admin:usage", "admin:runtimes",
                  "admin:audit", "metrics", "admin:jobs"):
        r = make_token(user, f"want-{scope}", expect=None, scopes=["read:usage", scope])
        e = assert_error(r, 403, "forbidden", field='"scopes"')
        assert f'"{scope}"' in e["message"], e
    names = [x["name"] for x in user.get("/api/v1/me/tokens").json["tokens"]]
    assert not any(n.startswith("want-") for n in names), names


def test_bad_scopes_and_expiry_are_400_naming_the_field(daemon, user):
    for bad in ("read:usage", ["nope"], [1], [None], {"a": 1}, ["read:usage", "admin"]):
        assert_error(make_token(user, "bad", expect=None, scopes=bad), 400, "bad_field",
                     field='"scopes"')
    for bad in (0, -5, "60", 1.5, True, 10 * 366 * 86400 + 1):
        assert_error(make_token(user, "bad", expect=None, expires_in_s=bad), 400, "bad_field",
                     field='"expires_in_s"')
    assert all(x["name"] != "bad" for x in user.get("/api/v1/me/tokens").json["tokens"])


def test_a_token_cannot_make_a_wider_token(daemon, user):
    t = make_token(user, "minter", scopes=["tokens"]).json
    b = bearer(daemon, t["token"])
    r = b.post("/api/v1/me/tokens", json={"name": "wider", "password": user.password,
                                          "scopes": ["read:usage"]})
    assert_error(r, 403, "forbidden", field='"read:usage"')
    # without "scopes" the new token gets what the maker holds, not the owner's all
    r = b.post("/api/v1/me/tokens", json={"name": "same", "password": user.password})
    assert_status(r, 201)
    assert r.json["scopes"] == ["identify", "tokens"], r.json


def test_demoted_owner_token_loses_admin_scopes_at_use(daemon, admin, admin_user):
    t = make_token(admin_user, "ops", scopes=["admin:users", "read:usage"]).json
    b = bearer(daemon, t["token"])
    assert_status(b.get("/api/v1/users"), 200)
    assert_status(admin.patch(f"/api/v1/users/{admin_user.user}", json={"role": "user"}), 200)
    assert_error(b.get("/api/v1/users"), 403)
    assert_status(b.get("/api/v1/me/usage"), 200)
    listed = [x for x in admin_user.get("/api/v1/me/tokens").json["tokens"]
              if x["id"] == t["id"]]
    assert listed and listed[0]["scopes"] == ["identify", "read:usage"], listed
    # promoted again, the token's own scopes count again: it never held more than them
    assert_status(admin.patch(f"/api/v1/users/{admin_user.user}", json={"role": "admin"}), 200)
    assert_status(b.get("/api/v1/users"), 200)
    assert_error(b.get("/api/v1/audit"), 403, "insufficient_scope", field='"admin:audit"')


def test_metrics_needs_the_metrics_scope(daemon, admin_user):
    t = make_token(admin_user, "no-metrics", scopes=["admin:usage"]).json
    assert_error(bearer(daemon, t["token"]).get("/metrics"), 403, "insufficient_scope",
                 field='"metrics"')
    t = make_token(admin_user, "metrics", scopes=["metrics"]).json
    r = bearer(daemon, t["token"]).get("/metrics")
    assert_status(r, 200)
    assert_error(bearer(daemon, t["token"]).get("/api/v1/usage"), 403, "insufficient_scope")


def test_expired_token_is_401_saying_so(daemon, user):
    t0 = time.time()
    t = make_token(user, "short", expires_in_s=2).json
    exp = parse_api_time(t["expires_at"])
    assert int(t0) + 1 <= exp <= time.time() + 3, (t0, t)
    listed = [x for x in user.get("/api/v1/me/tokens").json["tokens"] if x["id"] == t["id"]]
    assert listed[0]["expires_at"] == t["expires_at"], listed
    b = bearer(daemon, t["token"])
    assert_status(b.get("/api/v1/me"), 200)

    def refused():
        r = b.get("/api/v1/me")
        return r if r.status == 401 else None

    r = wait_until(refused, 15 * SLOW, "the token to expire")
    e = assert_error(r, 401, "unauthorized")
    assert "expired" in e["message"] and t["expires_at"] in e["message"], e
    assert time.time() >= exp, "refused before its expiry"
    # the runtime path refuses it too
    assert_error(b.get(f"/user/{user.user}/api/status"), 401)


def test_token_max_lifetime_bounds_and_defaults(daemon_factory):
    d = daemon_factory("toklife", auth={"token_max_lifetime": "1h"})
    c = d.admin()
    c.password = d.admin_password
    t0 = time.time()
    t = make_token(c, "default").json
    assert abs(parse_api_time(t["expires_at"]) - (t0 + 3600)) <= 3, t
    assert_error(make_token(c, "long", expect=None, expires_in_s=3601), 400, "bad_field",
                 field='"expires_in_s"')
    assert_status(make_token(c, "hour", expect=None, expires_in_s=3600), 201)


ROUTE_LINE = re.compile(r"^(GET|POST|PUT|PATCH|DELETE) (/\S*) (public|user|admin) (api|page) (\S+)$")


def documented_scopes():
    """The scope names of docs/api.md's table under "Token scopes"."""
    with open(f"{REPO}/docs/api.md", encoding="utf-8") as fh:
        text = fh.read()
    section = text.split("### Token scopes", 1)[1].split("\n### ", 1)[0]
    return set(re.findall(r"^\| `([a-z:]+)` \|", section, re.M))


def test_every_route_declares_a_scope(daemon):
    r = daemon.run_cli("routes")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) > 40, r.stdout
    scopes = documented_scopes()
    assert set(ADMIN_SCOPES) == scopes, f"docs/api.md lists {sorted(scopes)}"
    for line in lines:
        m = ROUTE_LINE.match(line)
        assert m, f"unexpected route line {line!r}"
        method, path, access, _, scope = m.groups()
        if access == "public" and path != "/metrics":
            assert scope == "-", line
            continue
        assert scope in scopes, f"{method} {path} declares no documented scope: {line!r}"
        if access == "user":
            assert scope in USER_SCOPES, f"a user route needs an admin scope: {line!r}"
