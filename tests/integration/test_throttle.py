"""Login throttling (docs/security.md, section 6): failures slow attempts down per user
name and per client address, with a delay that doubles up to a cap and never becomes a
lockout; an attacker hammering a name does not delay its owner on another address;
X-Forwarded-For counts only from [server] trusted_proxies; the password change is
throttled like a login; hashing has bounded concurrency so a login flood leaves
/api/v1/health answering, and a stop during logins waits for their hashes.  Each
group runs on a daemon of its own.

X-Forwarded-For values are header text from 198.18.0.0/15; no traffic goes there."""

import http.client
import json
import threading
import time

import pytest

from labd_harness import (STRONG, assert_error, assert_status, redirect_target, unique_name,
                          wait_until)


def retry_after(r):
    v = r.header("Retry-After")
    assert v is not None, f"{r.method} {r.path} ({r.status}): no Retry-After header"
    assert v.strip().isdigit(), f"Retry-After is not whole seconds: {v!r}"
    return int(v)


def login_from(d, source, name, pw, xff=None):
    headers = {"X-Forwarded-For": xff} if xff else None
    return d.client(source=source).post("/api/v1/login", json={"username": name, "password": pw},
                                        csrf=None, headers=headers)


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


def wait_out(d, source, name, pw, what, xff=None):
    """Retries pw from source until it is checked (not 429); returns that answer and
    the Retry-After values seen meanwhile.  Attempts inside a delay are not counted."""
    seen = []

    def attempt():
        r = login_from(d, source, name, pw, xff)
        if r.status == 429:
            assert_error(r, 429, "throttled")
            seen.append(retry_after(r))
            return None
        return r
    return wait_until(attempt, 30, what, interval=0.25), seen


def audit(admin, action):
    return [e for e in admin.get("/api/v1/audit?limit=500").json["entries"]
            if e["action"] == action]


# ------------------------------------------------------------ delay, never lockout


@pytest.fixture(scope="module")
def thr(daemon_factory):
    return daemon_factory("throttle", server={"secure_cookies": "true"},
                          auth={"backoff_after": "2", "backoff_base": "2s", "backoff_max": "8s",
                                "address_backoff_max": "8s", "alert_after": "4"})


def test_delay_grows_caps_and_never_locks(thr):
    """From one address the delay after each failure doubles (2 s, 4 s, 8 s) and stays
    at the cap; inside it even the right password gets 429 + Retry-After and is not
    checked; far more failures than the old lockout (10) never refuse the right
    password from a clean address, nor from the attacker's own once the delay ran."""
    _, [(name, pw)] = make_users(thr, 1, "dg")
    attacker = "127.30.0.1"
    assert_error(login_from(thr, attacker, name, "wrong-1-aaaaaa"), 401, "invalid_credentials")
    assert_error(login_from(thr, attacker, name, "wrong-2-aaaaaa"), 401, "invalid_credentials")
    waits = []
    for i in range(3):
        r = login_from(thr, attacker, name, pw)  # the right one, inside the delay
        assert_error(r, 429, "throttled")
        assert "try again in" in r.json["error"]["message"], r.json
        waits.append(retry_after(r))
        r, _ = wait_out(thr, attacker, name, f"wrong-{i + 3}-aaaaaa", f"delay {i} to run out")
        assert_error(r, 401, "invalid_credentials")
    r = login_from(thr, attacker, name, pw)
    assert_error(r, 429, "throttled")
    waits.append(retry_after(r))
    # whole seconds, counted from the failure: the value shown is the delay or 1 less
    for got, delay in zip(waits, (2, 4, 8, 8)):
        assert delay - 1 <= got <= delay, f"Retry-After {waits} for delays 2, 4, 8, 8 (capped)"
    # eleven failures in all, from fresh addresses: each is checked at once
    for i in range(6):
        assert_error(login_from(thr, f"127.30.1.{i + 1}", name, "wrong-x-aaaaaa"), 401,
                     "invalid_credentials")
    # no lockout: the owner on a clean address gets in at once...
    thr.client(source="127.30.2.1").login(name, pw)
    # ...and so does the attacker's address with the right password once its delay ran
    r, _ = wait_out(thr, attacker, name, pw, "the attacker's delay to run out")
    assert_status(r, 200)


def test_attacker_cannot_delay_owner(thr):
    """An attacker hammering a user name from one address is throttled himself; the
    owner from another address logs in with the right password meanwhile, and the
    audit log holds the attacker's failures under the attacker's address."""
    admin, [(name, pw)] = make_users(thr, 1, "ad")
    attacker = "127.31.0.1"
    stop = time.monotonic() + 3
    statuses = []
    while time.monotonic() < stop:
        statuses.append(login_from(thr, attacker, name, "guess-guess-guess").status)
    assert 429 in statuses and set(statuses) <= {401, 429}, statuses[:20]
    r = login_from(thr, attacker, name, pw)
    assert_error(r, 429, "throttled")
    c = thr.client(source="127.31.0.2")
    c.login(name, pw)
    assert_status(c.get("/api/v1/me"), 200)
    r = login_from(thr, attacker, name, pw)
    assert_error(r, 429, "throttled")
    failures = [e for e in audit(admin, "login.failure") if e.get("target") == name]
    assert failures and all(e.get("address") == attacker for e in failures), failures[:5]


def test_repeated_failures_alert(thr):
    """alert_after (4) failures for one name are audited as login.alert and logged as a
    warning, even when they come from many addresses."""
    admin, [(name, pw)] = make_users(thr, 1, "al")
    for i in range(4):
        assert_error(login_from(thr, f"127.32.0.{i + 1}", name, "nope-nope-nope"), 401,
                     "invalid_credentials")
    alerts = [e for e in audit(admin, "login.alert") if e.get("target") == name]
    assert len(alerts) == 1, alerts
    assert "4 failed logins for this user name" in alerts[0]["detail"], alerts
    wait_until(lambda: f"4 failed logins for user {name}" in thr.log(), 5,
               lambda: f"the warning line for {name}\n{thr.log_tail()}")
    thr.client(source="127.32.1.1").login(name, pw)


def test_spray_from_one_address(thr):
    """Failures for many names from one address delay that address (capped, no lockout)
    but not the same users on other addresses."""
    _, [(name, pw)] = make_users(thr, 1, "sp")
    addr = "127.33.0.1"
    assert_error(login_from(thr, addr, "ghost-a", "wrong-password"), 401, "invalid_credentials")
    assert_error(login_from(thr, addr, "ghost-b", "wrong-password"), 401, "invalid_credentials")
    r = login_from(thr, addr, name, pw)
    assert_error(r, 429, "throttled")
    assert 1 <= retry_after(r) <= 2
    thr.client(source="127.33.0.2").login(name, pw)
    r, _ = wait_out(thr, addr, name, pw, "the address delay to run out")
    assert_status(r, 200)


def test_form_shows_throttled(thr):
    _, [(name, pw)] = make_users(thr, 1, "fm")
    addr = "127.34.0.1"
    for i in range(2):
        assert_error(login_from(thr, addr, name, f"wrong-{i}-aaaaaa"), 401, "invalid_credentials")
    f = thr.client(source=addr).post("/login", form={"username": name, "password": pw})
    assert_status(f, 303)
    path, query, loc = redirect_target(f, thr.port)
    assert path == "/login" and query.get("error") == ["throttled"], loc
    assert "labd_session" not in f.set_cookies() or not f.set_cookies()["labd_session"][0]


def test_password_change_throttled(thr):
    """A wrong current password counts as a failed login: after backoff_after (2) of
    them the change is answered 429 + Retry-After without being checked; once the
    delay ran the right one works.  Failures are audited as password.failure."""
    admin, [(name, pw)] = make_users(thr, 1, "pc")
    c = thr.client(source="127.35.0.1")
    c.login(name, pw)
    new = f"{STRONG}-changed"
    for i in range(2):
        r = c.post("/api/v1/me/password", json={"current_password": f"wrong-{i}-aaaaaa",
                                                "new_password": new})
        assert_error(r, 403, "forbidden")
        assert "current_password" in r.json["error"]["message"]
    r = c.post("/api/v1/me/password", json={"current_password": pw, "new_password": new})
    assert_error(r, 429, "throttled")
    assert 1 <= retry_after(r) <= 2

    def changed():
        r = c.post("/api/v1/me/password", json={"current_password": pw, "new_password": new})
        if r.status == 429:
            retry_after(r)
            return None
        return r
    assert_status(wait_until(changed, 10, "the password change delay to run out"), 204)
    failures = [e for e in audit(admin, "password.failure") if e.get("target") == name]
    assert len(failures) == 2, failures
    thr.client(source="127.35.0.2").login(name, new)


def test_token_reauth_throttled(thr):
    """The password that re-authenticates a token creation is checked like a login:
    wrong ones count, and inside the delay even the right one is answered 429
    without being checked (a page in the owner's browser gets no more guesses
    here than at the login form)."""
    admin, [(name, pw)] = make_users(thr, 1, "tk")
    c = thr.client(source="127.35.1.1")
    c.login(name, pw)
    for i in range(2):
        r = c.post("/api/v1/me/tokens", json={"name": f"t{i}", "password": f"wrong-{i}-aaaaaa"})
        assert_error(r, 403, "reauth_failed")
    r = c.post("/api/v1/me/tokens", json={"name": "t2", "password": pw})
    assert_error(r, 429, "throttled")
    assert 1 <= retry_after(r) <= 2

    def created():
        r = c.post("/api/v1/me/tokens", json={"name": "t3", "password": pw})
        if r.status == 429:
            retry_after(r)
            return None
        return r
    assert_status(wait_until(created, 10, "the token re-authentication delay to run out"), 201)
    failures = [e for e in audit(admin, "password.failure") if e.get("target") == name]
    assert len(failures) == 2, failures


# ------------------------------------------------------------ front proxy


def test_xff_ignored_without_trusted_proxies(thr):
    """Without trusted_proxies, X-Forwarded-For is what a client says: failures with
    different forwarded addresses all count against the real peer, the audit log
    shows the peer, and labd warns once that a forwarded header was ignored."""
    admin, [(name, pw)] = make_users(thr, 1, "xi")
    peer = "127.36.0.1"
    for i in range(2):
        assert_error(login_from(thr, peer, f"ghost-x{i}", "wrong-password", xff=f"198.18.1.{i + 1}"),
                     401, "invalid_credentials")
    r = login_from(thr, peer, name, pw, xff="198.18.1.9")
    assert_error(r, 429, "throttled")
    entries = [e for e in audit(admin, "login.failure") if e.get("target") in ("ghost-x0", "ghost-x1")]
    assert {e["address"] for e in entries} == {peer}, entries
    assert "x-forwarded-for from" in thr.log() and "trusted_proxies" in thr.log(), thr.log_tail()


@pytest.fixture(scope="module")
def proxied(daemon_factory):
    # 127.37.0.1 plays nginx (proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for)
    return daemon_factory("proxied", server={"trusted_proxies": "127.37.0.1, 10.0.0.0/8"},
                          auth={"backoff_after": "2", "backoff_base": "2s", "backoff_max": "8s",
                                "address_backoff_max": "8s"})


def test_xff_honoured_behind_trusted_proxy(proxied):
    """Behind a trusted proxy every client has the proxy's address as peer, but each is
    throttled on its own forwarded address (the right-most untrusted one), and the
    audit log shows it; a client that is not a trusted proxy cannot choose its key."""
    admin, [(name, pw)] = make_users(proxied, 1, "xh")
    proxy = "127.37.0.1"
    x, y = "198.18.2.10", "198.18.2.11"
    for i in range(2):
        assert_error(login_from(proxied, proxy, f"ghost-h{i}", "wrong-password", xff=x), 401,
                     "invalid_credentials")
    assert_error(login_from(proxied, proxy, name, pw, xff=x), 429, "throttled")
    # what client x wrote itself stays on the left; the proxy appended x
    assert_error(login_from(proxied, proxy, name, pw, xff=f"{y}, {x}"), 429, "throttled")
    # a second hop through a trusted 10.x proxy still finds x
    assert_error(login_from(proxied, proxy, name, pw, xff=f"{x}, 10.1.2.3"), 429, "throttled")
    # client y, behind the same proxy, is not throttled
    r = login_from(proxied, proxy, name, pw, xff=y)
    assert_status(r, 200)
    entries = [e for e in audit(admin, "login.failure") if e.get("target") in ("ghost-h0", "ghost-h1")]
    assert {e["address"] for e in entries} == {x}, entries
    success = [e for e in audit(admin, "login.success") if e.get("target") == name]
    assert success and success[0]["address"] == y, success
    # a client that is not a trusted proxy is keyed on its own address, whatever it says
    spoof = "127.37.0.2"
    for i in range(2):
        assert_error(login_from(proxied, spoof, f"ghost-s{i}", "wrong-password", xff=f"198.18.3.{i}"),
                     401, "invalid_credentials")
    assert_error(login_from(proxied, spoof, name, pw, xff="198.18.3.200"), 429, "throttled")
    entries = [e for e in audit(admin, "login.failure") if e.get("target") in ("ghost-s0", "ghost-s1")]
    assert {e["address"] for e in entries} == {spoof}, entries


# ------------------------------------------------------------ hashing concurrency


@pytest.fixture(scope="module")
def flood(daemon_factory):
    # two workers, one hash at once, and a costly one (256 MiB, about a second): a
    # worker that hashed itself would hold its other connections that long
    return daemon_factory("flood", server={"threads": "2"},
                          auth={"scrypt_n": "262144", "hash_concurrency": "1"})


def test_login_flood_keeps_health(flood):
    """Twelve clients on their own addresses log in as fast as they can; hashing is
    bounded (logins beyond it get 503 busy + Retry-After) and runs off the HTTP
    workers, so /api/v1/health on a kept-alive connection keeps answering within
    half a second throughout (a hash takes about a second), and logins still
    succeed."""
    _, [(name, pw)] = make_users(flood, 1, "fl")
    deadline = time.monotonic() + 6
    statuses, lock = [], threading.Lock()
    errors = []

    def hammer(i):
        try:
            c = flood.client(source=f"127.38.0.{i + 1}")
            while time.monotonic() < deadline:
                body = {"username": name if i % 2 else f"ghost{i}",
                        "password": pw if i % 2 else "wrong-password"}
                r = c.post("/api/v1/login", json=body, csrf=None)
                if r.status == 503:
                    assert_error(r, 503, "busy")
                    assert retry_after(r) >= 1
                with lock:
                    statuses.append(r.status)
        except Exception as e:  # reported below, not lost in the thread
            errors.append(repr(e))

    threads = [threading.Thread(target=hammer, args=(i,), daemon=True) for i in range(12)]
    for t in threads:
        t.start()
    wait_until(lambda: len(statuses) >= 3, 10, "the flood to get going")
    # kept alive, as a browser's: it stays on the worker that accepted it
    probe = http.client.HTTPConnection("127.0.0.1", flood.port, timeout=30,
                                       source_address=("127.38.1.1", 0))
    latencies, sockets = [], set()
    while time.monotonic() < deadline - 0.5:
        t0 = time.monotonic()
        probe.request("GET", "/api/v1/health")
        r = probe.getresponse()
        r.read()
        assert r.status == 200, r.status
        latencies.append(time.monotonic() - t0)
        sockets.add(probe.sock.getsockname())
    probe.close()
    assert len(sockets) == 1, f"the probe's connection was not kept alive: {sockets}"
    for t in threads:
        t.join(30)
    assert not errors, errors[:3]
    assert max(latencies) < 0.5, f"health took {max(latencies):.2f} s during the flood: {latencies}"
    assert 503 in statuses, f"no login was refused busy: {sorted(set(statuses))}"
    assert 200 in statuses, f"no login succeeded during the flood: {sorted(set(statuses))}"


@pytest.fixture(scope="module")
def draining(daemon_factory):
    # as flood's: a login's hash takes about a second, on a thread of its own
    return daemon_factory("draining", server={"threads": "2"},
                          auth={"scrypt_n": "262144", "hash_concurrency": "1"})


def test_a_stop_during_logins_waits_for_them_and_exits_cleanly(draining):
    """labd stopped (SIGTERM) while logins hash on their own threads: it waits for
    them (offload_drain) and exits 0 within its usual time; every client gets an
    answer or a closed connection, none hangs; the next start logs in."""
    d = draining
    _, [(name, pw)] = make_users(d, 1, "dr")
    outcomes, lock = [], threading.Lock()

    def login(i):
        try:
            c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=20,
                                           source_address=(f"127.39.0.{i + 1}", 0))
            c.request("POST", "/api/v1/login",
                      body=json.dumps({"username": name, "password": pw}),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            got = r.status
        except (OSError, http.client.HTTPException) as e:
            got = type(e).__name__  # closed by the stop: an answer too
        with lock:
            outcomes.append(got)

    threads = [threading.Thread(target=login, args=(i,), daemon=True) for i in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.3)  # the first hash is under way, the others wait or were refused
    t0 = time.monotonic()
    rc = d.stop()
    took = time.monotonic() - t0
    for t in threads:
        t.join(25)
    assert rc == 0, f"labd exited with {rc} when stopped during logins\n" + d.log_tail()
    assert took < 8, f"the stop took {took:.1f} s"
    assert len(outcomes) == 3, f"a login never got an answer: {outcomes}"
    assert all(o in (200, 503) or isinstance(o, str) for o in outcomes), outcomes
    assert "sanitizer" not in d.log().lower(), d.log_tail()
    d.start(expect_admin_password=False)
    r = login_from(d, "127.39.1.1", name, pw)
    assert_status(r, 200)


@pytest.fixture(scope="module")
def racy(daemon_factory):
    # three hashes at once, each a few hundred ms: parallel attempts overlap for long
    return daemon_factory("racy", server={"threads": "4"},
                          auth={"scrypt_n": "65536", "hash_concurrency": "3",
                                "backoff_after": "2", "backoff_base": "30s",
                                "backoff_max": "30s", "address_backoff_max": "30s"})


def test_parallel_attempts_share_one_window(racy):
    """Eight wrong passwords sent at once from one address: each attempt is counted
    before its hash, so only backoff_after (2) of them are checked and the rest are
    answered 429 (or 503 when no hashing slot is free), not checked in parallel."""
    _, [(name, _pw)] = make_users(racy, 1, "pa")
    addr = "127.39.0.1"
    clients = [racy.client(source=addr) for _ in range(8)]
    go = threading.Barrier(len(clients))
    statuses, errors = [], []

    def attempt(c):
        try:
            go.wait(10)
            statuses.append(c.post("/api/v1/login", csrf=None,
                                   json={"username": name, "password": "wrong-password"}).status)
        except Exception as e:  # reported below, not lost in the thread
            errors.append(repr(e))

    threads = [threading.Thread(target=attempt, args=(c,), daemon=True) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:3]
    assert len(statuses) == 8 and set(statuses) <= {401, 429, 503}, statuses
    assert statuses.count(401) == 2, f"checked in parallel: {sorted(statuses)}"
