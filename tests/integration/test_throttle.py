"""Login throttling: exponential backoff and lockout (each on its own daemon)."""

import time

import pytest

from labd_harness import STRONG, assert_error, assert_status, redirect_target, unique_name


def retry_after(r):
    v = r.header("Retry-After")
    assert v is not None, f"{r.method} {r.path} ({r.status}): no Retry-After header"
    assert v.strip().isdigit(), f"Retry-After is not whole seconds: {v!r}"
    return int(v)


def login_from(d, source, name, pw):
    return d.client(source=source).post("/api/v1/login", json={"username": name, "password": pw})


def make_users(d, n, prefix):
    admin = d.admin()
    out = []
    for _ in range(n):
        name = unique_name(prefix)
        pw = f"{STRONG}-{name}"
        r = admin.post("/api/v1/users", json={"name": name, "password": pw})
        assert_status(r, 201)
        out.append((name, pw))
    return admin, out


# ---------------------------------------------------------------------- lockout


@pytest.fixture(scope="module")
def lockd(daemon_factory):
    return daemon_factory("lockout")


def test_lockout_account(lockd):
    admin, [(victim, vpw), (other, opw)] = make_users(lockd, 2, "lk")
    attacker = "127.20.0.1"
    statuses = []
    for i in range(10):
        r = login_from(lockd, attacker, victim, f"wrong-password-{i}")
        statuses.append(r.status)
        if i < 9:
            assert_error(r, 401, "invalid_credentials")
        else:
            assert_error(r, (401, 429), ("invalid_credentials", "account_locked"))
    # the right password, from a clean address: still locked
    r = login_from(lockd, "127.20.0.2", victim, vpw)
    assert_error(r, 429, "account_locked")
    ra = retry_after(r)
    assert 0 < ra <= 15 * 60, ra
    r = login_from(lockd, "127.20.0.3", victim, vpw)
    assert_error(r, 429, "account_locked")
    # the form shows the lock
    f = lockd.client(source="127.20.0.4").post("/login", form={"username": victim, "password": vpw})
    assert_status(f, 303)
    path, query, loc = redirect_target(f, lockd.port)
    assert path == "/login" and query.get("error") == ["locked"], loc
    assert "labd_session" not in f.set_cookies() or not f.set_cookies()["labd_session"][0]
    # another user is not affected
    c = lockd.client(source="127.20.0.5")
    c.login(other, opw)
    # the audit log has it
    entries = admin.get("/api/v1/audit?limit=100").json["entries"]
    locked = [e for e in entries if e["action"] == "login.locked"]
    assert any(e.get("target") == victim or victim in (e.get("detail") or "") for e in locked), \
        f"no login.locked entry for {victim}: {[e for e in entries if e['action'].startswith('login')][:5]}"
    failures = [e for e in entries if e["action"] == "login.failure"
                and e.get("target") == victim and e.get("address") == attacker]
    assert len(failures) >= 9, \
        f"expected >= 9 login.failure entries for {victim} from {attacker}, got {len(failures)}"


def test_lockout_address(lockd):
    """50 failures (auth.address_lockout_failures) from one address, each for a name
    that does not exist, lock that address."""
    _, [(name, pw)] = make_users(lockd, 1, "la")
    addr = "127.21.0.1"
    for i in range(50):
        r = login_from(lockd, addr, f"ghost{i}", "wrong-password-x")
        if i < 49:
            assert_error(r, 401, "invalid_credentials")
    r = login_from(lockd, addr, name, pw)
    assert_error(r, 429, "account_locked")
    retry_after(r)
    # the same user from elsewhere is fine: the user itself was never attacked
    lockd.client(source="127.21.0.2").login(name, pw)


def test_success_clears_user_counter(lockd):
    _, [(name, pw)] = make_users(lockd, 1, "lc")
    for i in range(7):
        assert_error(login_from(lockd, f"127.22.0.{i + 1}", name, "nope-nope-nope"), 401,
                     "invalid_credentials")
    lockd.client(source="127.22.1.1").login(name, pw)
    for i in range(7):
        assert_error(login_from(lockd, f"127.22.2.{i + 1}", name, "nope-nope-nope"), 401,
                     "invalid_credentials")
    lockd.client(source="127.22.3.1").login(name, pw)


# ---------------------------------------------------------------------- backoff


@pytest.fixture(scope="module")
def backd(daemon_factory):
    return daemon_factory("backoff", server={"secure_cookies": "true"},
                          auth={"backoff_after": "2", "backoff_base": "2s",
                                "backoff_max": "5m"})


def test_backoff_per_user(backd):
    _, [(name, pw)] = make_users(backd, 1, "bo")
    addr = iter(f"127.30.0.{i}" for i in range(1, 50))
    assert_error(login_from(backd, next(addr), name, "wrong-1-aaaaaa"), 401, "invalid_credentials")
    assert_error(login_from(backd, next(addr), name, "wrong-2-aaaaaa"), 401, "invalid_credentials")
    # now a 2 s wait is due: an immediate attempt is not even checked
    r = login_from(backd, next(addr), name, pw)
    assert_error(r, 429, "throttled")
    ra = retry_after(r)
    assert 1 <= ra <= 3, f"Retry-After {ra} for a 2 s backoff"
    f = backd.client(source=next(addr)).post("/login", form={"username": name, "password": pw})
    assert_status(f, 303)
    path, query, loc = redirect_target(f, backd.port)
    assert path == "/login" and query.get("error") == ["throttled"], loc
    time.sleep(ra + 0.3)
    # checked again: a wrong password is a plain failure, and doubles the wait
    assert_error(login_from(backd, next(addr), name, "wrong-3-aaaaaa"), 401, "invalid_credentials")
    r = login_from(backd, next(addr), name, pw)
    assert_error(r, 429, "throttled")
    ra2 = retry_after(r)
    assert 3 <= ra2 <= 5, f"Retry-After {ra2} for a 4 s backoff (base 2 s, doubled)"
    time.sleep(ra2 + 0.3)
    c = backd.client(source=next(addr))
    c.login(name, pw)
    # success cleared the counter: the next failure is checked at once
    assert_error(login_from(backd, next(addr), name, "wrong-4-aaaaaa"), 401, "invalid_credentials")


def test_backoff_per_address(backd):
    _, [(name, pw)] = make_users(backd, 1, "ba")
    addr = "127.31.0.1"
    assert_error(login_from(backd, addr, "ghost-a", "wrong-password"), 401, "invalid_credentials")
    assert_error(login_from(backd, addr, "ghost-b", "wrong-password"), 401, "invalid_credentials")
    r = login_from(backd, addr, name, pw)
    assert_error(r, 429, "throttled")
    retry_after(r)
    backd.client(source="127.31.0.2").login(name, pw)


def test_secure_cookie_flag_when_configured(backd):
    c = backd.client()
    r = c.login("admin", backd.admin_password)
    value, attrs = r.set_cookies()["labd_session"]
    assert attrs.get("secure") is True, f"secure_cookies = true but Set-Cookie lacks Secure: {attrs}"
    assert attrs.get("httponly") is True and str(attrs.get("samesite", "")).lower() == "lax", attrs
