"""Single sign-on against a real, certified OpenID Provider (npm oidc-provider,
tests/oidc/provider.mjs) on loopback: a first sign-in creates the user and
mirrors the provider's groups onto labd's, the session works, logout ends it
and sends the browser to the provider's end_session_endpoint; a state that is
not the browser's, a replayed callback or code, a disallowed domain and a bad
name are refused with the reason named and nothing created. ES256 through a
second client of the same provider."""

import json
import os
import re
import urllib.parse

import pytest

from labd_harness import Daemon, assert_status, teardown_daemon
from oidc_lib import SECRET, Browser, Provider, form_action, sign_in_real


def labd_url(d):
    # labd's origin as [server] user_domain (localhost) makes it: the redirect URI
    return f"http://localhost:{d.port}"


def oidc_section(provider, client_id):
    return {"issuer": provider.issuer, "name": "Test IdP", "client_id": client_id,
            "client_secret": SECRET, "scopes": "openid profile email groups",
            "allowed_domains": "example.org"}


@pytest.fixture(scope="module")
def env():
    rs, es = Daemon("oidc-rs"), Daemon("oidc-es")
    provider = Provider([f"{labd_url(d)}/oidc/callback" for d in (rs, es)],
                        [f"{labd_url(d)}/login" for d in (rs, es)])
    try:
        rs.sections["oidc"] = oidc_section(provider, "labd")
        # the other daemon reads its secret from a root-only file, as production does
        secret_file = os.path.join(es.dir, "oidc-secret")
        with open(os.open(secret_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as fh:
            fh.write(SECRET + "\n")
        es.sections["oidc"] = dict(oidc_section(provider, "labd-es"), client_secret="",
                                   client_secret_file=secret_file)
        for d in (rs, es):
            d.write_config()
            d.start()
        yield rs, es, provider
    finally:
        for d in (rs, es):
            teardown_daemon(d)
        provider.stop()


def refusal(r):
    """The reason a refused sign-in names: labd answers 303 to its login page."""
    assert r.status == 303, (r.status, r.text[:300])
    loc = urllib.parse.urlsplit(r.headers["Location"])
    q = dict(urllib.parse.parse_qsl(loc.query))
    assert loc.path == "/login" and q.get("error") == "sso", r.headers["Location"]
    return q["reason"]


def user_exists(admin, name):
    r = admin.get(f"/api/v1/users/{urllib.parse.quote(name)}")
    assert r.status in (200, 404), r
    return r.status == 200


def at_callback(url):
    return urllib.parse.urlsplit(url).path == "/oidc/callback"


def test_login_page_learns_of_sso(env):
    rs, _, _ = env
    r = rs.client().get("/api/v1/sso")
    assert_status(r, 200)
    assert r.json == {"enabled": True, "name": "Test IdP", "url": "/oidc/login"}, r.json


def test_first_sign_in_provisions_mirrors_groups_and_logs_out(env):
    rs, _, provider = env
    admin = rs.admin()
    assert_status(admin.post("/api/v1/plans", json={"name": "course",
                                                    "limits": {"gpu_s_per_24h": 7200}}), 201)
    assert_status(admin.post("/api/v1/groups", json={"name": "students", "plan": "course"}),
                  201)
    # bob is labd-local in "staff"... alice's claim does not name it: she leaves it
    assert_status(admin.post("/api/v1/groups", json={"name": "staff"}), 201)
    assert not user_exists(admin, "alice")

    b = Browser()
    page = sign_in_real(b, labd_url(rs), "alice", "alice-password", next_path="/dashboard?from=sso")
    # landed on labd's page of next
    assert page.status == 200 and b.trail[-1] == f"{labd_url(rs)}/dashboard?from=sso", b.trail[-3:]
    me = b.request("GET", f"{labd_url(rs)}/api/v1/me")
    assert me.status == 200, me.text
    me = json.loads(me.text)
    assert me["name"] == "alice" and me["role"] == "user", me

    assert user_exists(admin, "alice")
    students = admin.get("/api/v1/groups/students").json["group"]
    assert students["members"] == ["alice"], students
    # the group's plan now limits alice: plans follow the provider
    quota = admin.get("/api/v1/users/alice/quota").json
    assert quota["groups"] == ["students"], quota
    gpu = quota["limits"]["gpu_s_per_24h"]
    assert gpu["value"] == 7200 and gpu.get("plan") == "course", quota
    audit = admin.get("/api/v1/audit?action=login.success").json
    assert any(e.get("detail") == "single sign-on" and e.get("target") == "alice"
               for e in audit["entries"]), audit

    # the provider no longer names a group labd has: membership follows it
    assert_status(admin.put("/api/v1/groups/staff", json={"add_members": ["alice"]}), 200)
    b2 = Browser()
    sign_in_real(b2, labd_url(rs), "alice", "alice-password")
    assert admin.get("/api/v1/groups/staff").json["group"]["members"] == [], "alice still in staff"
    assert admin.get("/api/v1/groups/students").json["group"]["members"] == ["alice"]

    # logout: labd's session ends, then the login page goes on to the provider's
    # end_session_endpoint (a form's answer may not leave labd's origin: CSP)
    r = b.request("GET", f"{labd_url(rs)}/dashboard")
    assert r.status == 200, r.status
    r = b.go(f"{labd_url(rs)}/logout", "POST", {"csrf_token": me["csrf_token"]},
             stop=lambda url: True)
    assert r.status == 303 and r.target == f"{labd_url(rs)}/login?logout=sso", r.target
    assert b.request("GET", f"{labd_url(rs)}/api/v1/me").status == 401
    r = b.go(f"{labd_url(rs)}/oidc/logout", stop=lambda url: url.startswith(provider.issuer))
    assert r.status == 303 and r.target.startswith(f"{provider.issuer}/session/end?"), \
        (r.status, r.headers.get("Location"))
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(r.target).query))
    assert q == {"client_id": "labd", "post_logout_redirect_uri": f"{labd_url(rs)}/login"}, q
    # the provider's logout page, confirmed, comes back to labd's login page
    page = b.go(r.target)
    assert page.status == 200, page.text[:300]
    page = b.go(form_action(page, page.url), "POST", {"xsrf": _xsrf(page), "logout": "yes"})
    assert b.trail[-1] == f"{labd_url(rs)}/login", b.trail[-3:]
    # a local account's logout stays with labd
    admin_browser = Browser()
    admin_browser.go(f"{labd_url(rs)}/login", "POST",
                     {"username": "admin", "password": rs.admin_password}, stop=lambda u: True)
    csrf = json.loads(admin_browser.request("GET", f"{labd_url(rs)}/api/v1/me").text)["csrf_token"]
    r = admin_browser.go(f"{labd_url(rs)}/logout", "POST", {"csrf_token": csrf},
                         stop=lambda url: True)
    assert r.target == f"{labd_url(rs)}/login", r.target


def _xsrf(page):
    m = re.search(r'name="xsrf" value="([^"]+)"', page.text)
    assert m, page.text[:500]
    return m.group(1)


def test_state_of_another_browser_is_refused(env):
    rs, _, _ = env
    admin = rs.admin()
    a = Browser()
    r = sign_in_real(a, labd_url(rs), "bob", "bob-password", stop=at_callback)
    callback = r.target
    # the same callback in a browser that did not start the sign-in (login CSRF)
    assert refusal(Browser().go(callback, stop=lambda u: "/login" in u)) == "state_mismatch"
    # a state changed on the way
    bad = callback.replace("state=", "state=x")
    assert refusal(a.go(bad, stop=lambda u: "/login" in u)) == "state_mismatch"
    assert not user_exists(admin, "bob")


def test_answer_naming_another_issuer_is_refused(env):
    rs, _, provider = env
    admin = rs.admin()
    a = Browser()
    callback = sign_in_real(a, labd_url(rs), "bob", "bob-password", stop=at_callback).target
    assert f"iss={urllib.parse.quote(provider.issuer, safe='')}" in callback, callback
    mixed = callback.replace("iss=", "iss=https%3A%2F%2Fevil.example%2F&x=")
    assert refusal(a.go(mixed, stop=lambda u: "/login" in u)) == "wrong_issuer"
    assert not user_exists(admin, "bob")


def test_replayed_callback_and_code_are_refused(env):
    rs, _, provider = env
    a = Browser()
    r = sign_in_real(a, labd_url(rs), "bob", "bob-password", stop=at_callback)
    callback = r.target
    ok = a.go(callback, stop=lambda u: u.endswith("/dashboard"))
    assert ok.status == 303 and ok.target.endswith("/dashboard"), ok.headers.get("Location")
    # the same answer again: its state is used up
    assert refusal(a.go(callback, stop=lambda u: "/login" in u)) == "state_mismatch"
    # the old code under a fresh state of this browser: the provider refuses it
    start = a.request("GET", f"{labd_url(rs)}/oidc/login")
    state = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(
        start.headers["Location"]).query))["state"]
    code = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(callback).query))["code"]
    replay = f"{labd_url(rs)}/oidc/callback?code={code}&state={state}&iss=" \
             f"{urllib.parse.quote(provider.issuer)}"
    assert refusal(a.go(replay, stop=lambda u: "/login" in u)) == "code_refused"


def test_disallowed_domain_and_bad_name_create_nothing(env):
    rs, _, _ = env
    admin = rs.admin()
    r = sign_in_real(Browser(), labd_url(rs), "mallory", "mallory-password",
                     stop=lambda u: "/login" in u or "/dashboard" in u)
    assert refusal(r) == "domain_not_allowed"
    assert not user_exists(admin, "mallory")
    r = sign_in_real(Browser(), labd_url(rs), "Bad Name", "bad-password",
                     stop=lambda u: "/login" in u or "/dashboard" in u)
    assert refusal(r) == "bad_name"
    users = admin.get("/api/v1/users").json
    assert not [u for u in users["users"] if u["name"].lower().startswith("bad")], users


def test_es256_signed_tokens_sign_in(env):
    _, es, _ = env
    b = Browser()
    page = sign_in_real(b, labd_url(es), "alice", "alice-password")
    assert page.status == 200 and b.trail[-1] == f"{labd_url(es)}/dashboard", b.trail[-3:]
    assert b.request("GET", f"{labd_url(es)}/api/v1/me").status == 200
