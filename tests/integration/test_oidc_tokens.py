"""Single sign-on's token checks, each refused with its reason and nothing
created: a fake provider on loopback signs the ID token a test asks for (a bad
signature, another audience, expired, a key id it does not publish, another
nonce or issuer, alg "none"), and refuses a code used twice. Then the account
rules: a group not allowed, an account with a local password, and
provisioning off for an unknown user. A valid token signs in first and last,
so each refusal is the one fault's."""

import threading
import time
import urllib.parse

import pytest

from labd_harness import Daemon, STRONG, assert_status, teardown_daemon
from oidc_lib import SECRET, Browser, FakeProvider, Signer


@pytest.fixture(scope="module")
def env():
    fake = FakeProvider()
    d = Daemon("oidc-fake")
    d.sections["oidc"] = {"issuer": fake.issuer, "client_id": "labd", "client_secret": SECRET,
                          "allowed_groups": "staff, teachers", "keys_refetch": "2s",
                          "timeout": "1s"}
    d.write_config()
    try:
        d.start()
        yield d, fake, d.admin()
    finally:
        teardown_daemon(d)
        fake.stop()


def sign_in(d, fake, name, tamper=None, groups=("staff",)):
    """One sign-in through the fake provider as name; the reason of a refusal, or
    "signed_in"."""
    fake.claims = {"preferred_username": name, "email": f"{name}@example.org",
                   "groups": list(groups)}
    fake.tamper = tamper or (lambda claims, header: (claims, header, fake.key))
    b = Browser()
    r = b.go(f"http://localhost:{d.port}/oidc/login",
             stop=lambda u: "/login?" in u or "/dashboard" in u)
    assert r.status == 303, (r.status, r.text[:300])
    if r.target.endswith("/dashboard"):
        assert b.request("GET", f"http://localhost:{d.port}/api/v1/me").status == 200
        return "signed_in"
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(r.target).query))
    assert q["error"] == "sso", r.target
    # the sign-in left no session behind
    assert b.request("GET", f"http://localhost:{d.port}/api/v1/me").status == 401
    return q["reason"]


def exists(admin, name):
    return admin.get(f"/api/v1/users/{name}").status == 200


def with_claims(fake, **change):
    def tamper(claims, header):
        claims.update(change)
        return claims, header, fake.key
    return tamper


def test_valid_token_signs_in(env):
    d, fake, admin = env
    assert sign_in(d, fake, "tok-ok") == "signed_in"
    assert exists(admin, "tok-ok")


@pytest.mark.parametrize("case,reason", [
    ("bad_signature", "bad_signature"),
    ("wrong_audience", "wrong_audience"),
    ("several_audiences_no_azp", "wrong_audience"),
    ("expired", "expired"),
    ("issued_in_future", "bad_issue_time"),
    ("unknown_kid", "unknown_key"),
    ("nonce_mismatch", "nonce_mismatch"),
    ("wrong_issuer", "wrong_issuer"),
    ("alg_none", "bad_algorithm"),
])
def test_bad_token_is_refused(env, case, reason):
    d, fake, admin = env
    now = int(time.time())
    tampers = {
        # signed by a key the provider does not publish, under a published kid
        "bad_signature": lambda c, h: (c, h, fake.other),
        "wrong_audience": with_claims(fake, aud="someone-else"),
        "several_audiences_no_azp": with_claims(fake, aud=["labd", "someone-else"]),
        # past the 60 s skew
        "expired": with_claims(fake, exp=now - 120, iat=now - 600),
        "issued_in_future": with_claims(fake, iat=now + 600),
        "unknown_kid": lambda c, h: (c, dict(h, kid=fake.other.kid), fake.other),
        "nonce_mismatch": with_claims(fake, nonce="not-this-sign-in"),
        "wrong_issuer": with_claims(fake, iss="http://127.0.0.1:1"),
        "alg_none": lambda c, h: (c, dict(h, alg="none"), fake.key),
    }
    name = f"tok-{case.replace('_', '-')}"[:32]
    assert sign_in(d, fake, name, tampers[case]) == reason
    assert not exists(admin, name)


def test_code_is_good_once(env):
    d, fake, admin = env
    b = Browser()
    fake.claims = {"preferred_username": "tok-replay", "groups": ["staff"]}
    fake.tamper = lambda c, h: (c, h, fake.key)
    first = b.go(f"http://localhost:{d.port}/oidc/login", stop=lambda u: urllib.parse.urlsplit(u).path == "/oidc/callback")
    callback = first.target
    ok = b.go(callback, stop=lambda u: "/dashboard" in u or "/login?" in u)
    assert ok.target.endswith("/dashboard"), ok.target
    # a fresh sign-in of this browser carrying the first one's code
    start = b.request("GET", f"http://localhost:{d.port}/oidc/login")
    state = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(
        start.headers["Location"]).query))["state"]
    code = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(callback).query))["code"]
    r = b.go(f"http://localhost:{d.port}/oidc/callback?code={code}&state={state}",
             stop=lambda u: "/login?" in u or "/dashboard" in u)
    assert "reason=code_refused" in r.target, r.target


def test_account_rules(env):
    d, fake, admin = env
    assert sign_in(d, fake, "tok-student", groups=["students"]) == "group_not_allowed"
    assert not exists(admin, "tok-student")
    assert sign_in(d, fake, "tok-teacher", groups=["teachers"]) == "signed_in"
    # a local account (break-glass admins are) is never taken over by a claim
    assert_status(admin.post("/api/v1/users", json={"name": "tok-local", "role": "admin",
                                                    "password": STRONG}), 201)
    assert sign_in(d, fake, "tok-local") == "local_account"
    assert sign_in(d, fake, "admin") == "local_account"


def test_key_rotation_is_fetched_at_most_once_per_interval(env):
    d, fake, admin = env
    new = Signer("fake-3")
    try:
        fake.published = [fake.key.jwk, new.jwk]  # the provider rotates
        rotated = lambda c, h: (c, dict(h, kid=new.kid), new)  # noqa: E731
        # the last fetch of the keys is [oidc] keys_refetch (2 s) old: one refetch
        time.sleep(max(0.0, 2.2 - (time.monotonic() - fake.jwks_calls[-1])))
        calls = len(fake.jwks_calls)
        assert sign_in(d, fake, "tok-rotated", rotated) == "signed_in"
        assert len(fake.jwks_calls) == calls + 1
        # more unknown key ids at once: no further fetch within the interval
        for _ in range(3):
            assert sign_in(d, fake, "tok-unknown-kid",
                           lambda c, h: (c, dict(h, kid="fake-9"), fake.other)) == "unknown_key"
        assert len(fake.jwks_calls) == calls + 1, fake.jwks_calls
        assert not exists(admin, "tok-unknown-kid")
    finally:
        new.cleanup()


def test_slow_provider_is_cut_off_and_stalls_nobody(env):
    d, fake, admin = env
    fake.token_delay = 3.0  # past [oidc] timeout (1 s)
    result = {}

    def slow():
        t0 = time.monotonic()
        result["reason"] = sign_in(d, fake, "tok-slow")
        result["seconds"] = time.monotonic() - t0

    try:
        t = threading.Thread(target=slow)
        t.start()
        time.sleep(0.3)  # the sign-in is now waiting on the token endpoint
        for _ in range(5):  # everyone else is served meanwhile
            t0 = time.monotonic()
            assert_status(d.client().get("/api/v1/health"), 200)
            assert time.monotonic() - t0 < 0.5
        t.join(10)
    finally:
        fake.token_delay = 0.0
    assert result["reason"] == "unavailable", result
    assert result["seconds"] < 2.5, result
    assert not exists(admin, "tok-slow")


def test_provisioning_off(env):
    d, fake, admin = env
    d.stop()
    d.sections["oidc"]["provision"] = "false"
    d.write_config()
    d.start(expect_admin_password=False)
    assert sign_in(d, fake, "tok-newcomer") == "not_provisioned"
    admin = d.admin()
    assert not exists(admin, "tok-newcomer")
    # an account made by an earlier sign-in still signs in
    assert sign_in(d, fake, "tok-ok") == "signed_in"


@pytest.mark.parametrize("change,says", [
    ({"issuer": "http://idp.example.org"}, "[oidc] issuer"),
    ({"client_secret": ""}, "[oidc] client_secret or client_secret_file"),
    ({"client_secret_file": "/nonexistent/secret"}, "[oidc] client_secret"),
    ({"scopes": "profile email"}, "[oidc] scopes"),
])
def test_bad_section_stops_labd_at_start(change, says):
    d = Daemon("oidc-bad")
    d.sections["oidc"] = dict({"issuer": "http://127.0.0.1:9", "client_id": "labd",
                               "client_secret": SECRET}, **change)
    d.write_config()
    try:
        with pytest.raises(AssertionError, match="exited with 1 at start"):
            d.start()
        assert says in d.log(), d.log()
    finally:
        teardown_daemon(d)
