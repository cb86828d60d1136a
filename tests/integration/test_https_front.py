"""HTTPS in front, the conventional way: the shipped nginx configuration
(deploy/nginx/, via https_front.py) terminates TLS for labd's host and every
user origin, and labd behind it has secure_cookies and trusted_proxies.

Every client behind the front shares nginx's address, so labd exempts a
trusted proxy's connections from [server] max_connections_per_address and
applies the cap to each request's forwarded client instead: 200 users at once,
each with an event stream open, all get their answers, while one client over
the cap gets 429 too_many_connections and its count is released as its
requests end."""

import http.client
import itertools
import json
import os
import shutil
import socket
import ssl
import tempfile
import threading
import time

import pytest

from https_front import LAB_HOST, USER_DOMAIN, Front
from labd_harness import SLOW, STRONG, unique_name

USERS = 200
PER_ADDRESS = 6  # below each user's own streams cap (8), so the 429 is the address's
TIMEOUT_S = 60 * SLOW
_sources = itertools.count(1)


def source_address():
    """A fresh loopback address for one client (never 127.0.0.1: that is nginx,
    the trusted proxy)."""
    n = next(_sources)
    return f"127.21.{n // 250}.{n % 250 + 1}"


class HTTPS(http.client.HTTPSConnection):
    """HTTPS to the front on 127.0.0.1 for any host name (SNI and Host), from a
    chosen source address, trusting only the test CA."""

    def __init__(self, front, source, host=LAB_HOST):
        ctx = ssl.create_default_context(cafile=front.ca)
        ctx.set_alpn_protocols(["http/1.1"])
        super().__init__(host, front.https_port, context=ctx, timeout=TIMEOUT_S)
        self.front, self.src = front, source

    def connect(self):
        sock = socket.create_connection(("127.0.0.1", self.front.https_port), self.timeout,
                                        source_address=(self.src, 0))
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


class User:
    """One browser-like client of the front: a keep-alive connection, labd's cookies."""

    def __init__(self, front, name, password, source=None):
        self.front, self.name, self.password = front, name, password
        self.source = source or source_address()
        self.conn = HTTPS(front, self.source)
        self.cookies, self.csrf = {}, None

    def request(self, method, path, body=None, conn=None):
        conn = conn or self.conn
        hdrs = {"Host": f"{LAB_HOST}:{self.front.https_port}"}
        if body is not None:
            hdrs["Content-Type"] = "application/json"
            body = json.dumps(body)
        if self.cookies:
            hdrs["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        if self.csrf and method != "GET":
            hdrs["X-CSRF-Token"] = self.csrf
        conn.request(method, path, body=body, headers=hdrs)
        r = conn.getresponse()
        for h in r.headers.get_all("Set-Cookie") or []:
            k, v = h.split(";", 1)[0].split("=", 1)
            self.cookies[k.strip()] = v
        return r

    def call(self, method, path, body=None):
        r = self.request(method, path, body)
        data = r.read()
        return r, data

    def login(self):
        """Logs in; a 503 busy (labd hashes only a few passwords at once) is
        tried again after its Retry-After, as the login page does."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            r, data = self.call("POST", "/api/v1/login",
                                {"username": self.name, "password": self.password})
            if r.status != 503 or time.monotonic() > deadline:
                break
            assert json.loads(data)["error"]["code"] == "busy", data
            time.sleep(float(r.headers["Retry-After"]))
        assert r.status == 200, (r.status, data)
        self.csrf = json.loads(data)["csrf_token"]
        return r

    def open_stream(self):
        """GET the runtime event stream on a connection of its own: (conn, response)."""
        conn = HTTPS(self.front, self.source)
        r = self.request("GET", "/api/v1/me/runtime/events", conn=conn)
        return conn, r


@pytest.fixture(scope="module")
def front(daemon_factory):
    d = tempfile.mkdtemp(prefix="labd-it-https-")
    os.chmod(d, 0o755)
    # labd as docs/operations.md sets it behind the front (trusted_proxies,
    # secure_cookies, user_domain, ui_origin); room for 200 event streams (a
    # quarter of max_connections); a small per-address cap, to see it apply
    f = None
    try:
        labd = daemon_factory("https-front", server={
            "secure_cookies": "true", "trusted_proxies": "127.0.0.1",
            "user_domain": USER_DOMAIN, "max_connections": "1024",
            "max_connections_per_address": str(PER_ADDRESS)})
        f = Front(d, labd.port)
        f.labd = labd
        yield f
    finally:
        if f:
            f.stop()
        shutil.rmtree(d, ignore_errors=True)


def make_users(front, n):
    admin = front.labd.admin()
    out = []
    for _ in range(n):
        name = unique_name("hf")
        pw = f"{STRONG}-{name}"
        r = admin.post("/api/v1/users", json={"name": name, "role": "user", "password": pw})
        assert r.status == 201, r
        out.append((name, pw))
    return out


def test_tls_front_cookies_hsts_and_http2(front):
    """Login through the front: __Host- cookies with Secure, HSTS, HTTP/2
    offered, plain HTTP sent to HTTPS."""
    (name, pw), = make_users(front, 1)
    u = User(front, name, pw)
    r = u.login()
    cookies = r.headers.get_all("Set-Cookie")
    assert any(c.startswith("__Host-labd_session=") for c in cookies), cookies
    for c in cookies:
        attrs = [a.strip().lower() for a in c.split(";")[1:]]
        assert "secure" in attrs and "path=/" in attrs, c
    assert r.headers["Strict-Transport-Security"] == "max-age=63072000", r.headers
    r, _ = u.call("GET", "/api/v1/me")
    assert r.status == 200
    # nginx is trusted: its X-Forwarded-For names the client
    assert "x-forwarded-for from" not in front.labd.log(), front.labd.log_tail()
    # HTTP/2 is what a browser gets (ALPN)
    ctx = ssl.create_default_context(cafile=front.ca)
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    with socket.create_connection(("127.0.0.1", front.https_port), 10) as s:
        with ctx.wrap_socket(s, server_hostname=f"alice.{USER_DOMAIN}") as t:
            assert t.selected_alpn_protocol() == "h2"
    # plain HTTP: a redirect to HTTPS
    c = http.client.HTTPConnection("127.0.0.1", front.http_port, timeout=10)
    c.request("GET", "/", headers={"Host": LAB_HOST})
    r = c.getresponse()
    assert r.status == 301 and r.headers["Location"].startswith(f"https://{LAB_HOST}/"), \
        (r.status, r.headers)
    c.close()


def test_200_users_at_once(front):
    """200 users log in at once through the front, each holding an event stream
    open (so nginx holds 200+ connections to labd from its one address) while
    making API calls: every request gets its answer, none is dropped."""
    users = [User(front, n, p) for n, p in make_users(front, USERS)]
    all_streams_open = threading.Barrier(USERS, timeout=TIMEOUT_S)
    failures, streams = [], []
    lock = threading.Lock()

    def one(u):
        try:
            u.login()
            for path in ("/api/v1/me", "/api/v1/me/runtime"):
                r, data = u.call("GET", path)
                assert r.status == 200, (path, r.status, data)
            conn, r = u.open_stream()
            with lock:
                streams.append(conn)
            assert r.status == 200, (r.status, r.read(200))
            assert r.fp.readline(), "no event"  # the current state, first
            all_streams_open.wait()
            r, data = u.call("GET", "/api/v1/me")
            assert r.status == 200 and json.loads(data)["name"] == u.name, (r.status, data)
        except BaseException as e:  # noqa: BLE001 - every failure is reported
            all_streams_open.abort()
            with lock:
                failures.append(f"{u.name} from {u.source}: {e!r}")

    threads = [threading.Thread(target=one, args=(u,)) for u in users]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in streams:
        c.close()
    for u in users:
        u.conn.close()
    # a barrier broken by one failure makes the others fail too: report the first ones
    real = [f for f in failures if "BrokenBarrierError" not in f]
    assert not failures, f"{len(failures)} of {USERS} users failed: {(real or failures)[:5]}" \
        + "\n" + front.error_log()[-2000:] + front.labd.log_tail()


def test_cap_applies_to_the_forwarded_client(front):
    """One client address over the cap gets 429 too_many_connections (JSON,
    Retry-After) while another address is served; its requests ending release
    their count, through kept-alive connections that carry other clients."""
    (name, pw), (other_name, other_pw) = make_users(front, 2)
    u = User(front, name, pw)
    u.login()
    # sequential requests far past the cap: each one's count ends with it
    for _ in range(3 * PER_ADDRESS):
        r, data = u.call("GET", "/api/v1/me")
        assert r.status == 200, (r.status, data)
    held = []
    try:
        for _ in range(PER_ADDRESS):
            conn, r = u.open_stream()
            held.append(conn)
            assert r.status == 200, (r.status, r.read(200))
        r, data = u.call("GET", "/api/v1/me")
        assert r.status == 429, (r.status, data)
        assert json.loads(data)["error"]["code"] == "too_many_connections", data
        assert r.headers["Retry-After"], r.headers
        v = User(front, other_name, other_pw)
        v.login()
        r, _ = v.call("GET", "/api/v1/me")
        assert r.status == 200
    finally:
        for c in held:
            c.close()
    # the streams' ends release the address: labd notices the hang-ups
    u.conn.close()
    u.conn = HTTPS(front, u.source)
    deadline = time.monotonic() + 10 * SLOW
    while True:
        r, data = u.call("GET", "/api/v1/me")
        if r.status == 200:
            break
        assert r.status == 429 and time.monotonic() < deadline, (r.status, data)
        time.sleep(0.1)
