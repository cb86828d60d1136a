"""labd stays available whatever one user does (docs/security.md, section 2).

While one user's runtime misbehaves (its socket replaced by one that never
accepts, accepts and never answers, or trickles bytes; hundreds of WebSockets;
a slow-loris flood; ambiguous framing), another user logs in, starts a runtime
and runs code on a kernel, and /api/v1/health answers within a second. Each
misbehaviour is also held to its own limit: a deadline, a cap or a 400."""

import contextlib
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from labd_harness import (
    SLOW,
    STRONG,
    WebSocket,
    WebSocketClosed,
    jupyter_execute,
    open_kernel_channel,
    raw_request,
    start_runtime,
    stop_runtime,
    uid_base,
    unique_name,
    wait_runtime,
    wait_until,
    ws_cookie_headers,
)

HERE = os.path.dirname(os.path.abspath(__file__))
# The limits under test, small so that the deadlines pass within a test. The
# proxy's leave room for the well-behaved user's Jupyter, which answers a kernel
# WebSocket's upgrade only once the kernel is ready (seconds on a busy machine).
DEADLINE_S = 2
PROXY_DEADLINE_S = int(8 * SLOW)
PER_USER = 8
PER_ADDRESS = 16
SERVER = {
    "max_body": "1M",
    "max_unauthenticated_body": "64K",
    "max_connections_per_address": str(PER_ADDRESS),
    "request_header_timeout": f"{DEADLINE_S}s",
    "request_body_timeout": f"{DEADLINE_S}s",
}
PROXY = {
    "connect_timeout": f"{PROXY_DEADLINE_S}s",
    "header_timeout": f"{PROXY_DEADLINE_S}s",
    "idle_timeout": f"{PROXY_DEADLINE_S}s",
    "max_requests_per_user": str(PER_USER),
    "max_websockets_per_user": str(PER_USER),
    "websocket_idle_timeout": f"{PROXY_DEADLINE_S}s",
}
# How late past a deadline labd may act: its sweeps run every 0.25-1 s, and
# this machine is shared.
SLACK_S = 3 * SLOW
HEALTH_WITHIN_S = 1.0 * SLOW
LORIS_STEP_S = 0.5


@pytest.fixture(scope="module")
def ad(runtime_daemon_factory):
    return runtime_daemon_factory("avail", runtime={"cpu_limit": "2h"}, server=SERVER,
                                  sections={"proxy": PROXY})


def new_user(d, admin, prefix):
    name = unique_name(prefix)
    pw = f"{STRONG}-{name}"
    r = admin.post("/api/v1/users", json={"name": name, "role": "user", "password": pw})
    assert r.status == 201, r
    return name, pw


@pytest.fixture(scope="module")
def admin(ad):
    return ad.admin()


def note_runtime_socket(d, c):
    """Sets c.socket_path and c.sandbox_uid from the store for c's running runtime."""
    db = sqlite3.connect(f"file:{d.db_file}?mode=ro", uri=True,
                         timeout=10)
    try:
        uid, endpoint = db.execute(
            "SELECT u.id, r.endpoint FROM runtimes r JOIN users u ON u.id = r.user_id "
            "WHERE u.name = ? AND r.state = 'running'", (c.user,)).fetchone()
    finally:
        db.close()
    assert endpoint.startswith("unix:"), endpoint
    c.socket_path = os.path.join(d.state_dir, endpoint[5:])  # relative to the state dir
    c.sandbox_uid = uid_base(d) + uid  # [runtime] uid_base (auto: recorded) + user id


@pytest.fixture(scope="module")
def bad(ad, admin):
    """The misbehaving user: a running runtime, its socket and sandbox uid."""
    name, pw = new_user(ad, admin, "bad")
    c = ad.client()
    c.login(name, pw)
    start_runtime(c)
    note_runtime_socket(ad, c)
    return c


@pytest.fixture(scope="module")
def good(ad, admin):
    return new_user(ad, admin, "good")


@pytest.fixture
def good_stops(ad, good):
    """Stops the well-behaved user's runtime after the test, so each test
    starts it again while the other user misbehaves."""
    yield
    c = ad.client()
    c.login(*good)
    if c.get("/api/v1/me/runtime").json["runtime"]:
        stop_runtime(c)


def service_ok(d, good):
    """Health within a second; the other user logs in, starts a runtime and
    runs code on a kernel through the proxy."""
    t0 = time.monotonic()
    status, _, body = raw_request(
        d.port, f"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1:{d.port}\r\n"
        "Connection: close\r\n\r\n", timeout=10)
    took = time.monotonic() - t0
    assert status == 200, f"health: {status} {body[:200]!r}"
    assert took < HEALTH_WITHIN_S, f"health took {took:.2f} s"
    c = d.client()
    c.login(*good)
    r = c.get("/api/v1/me/runtime")
    s = r.json["runtime"]
    if not s or s["state"] not in ("starting", "running"):
        start_runtime(c)
    else:
        wait_runtime(c, "running")
    kid, ws = open_kernel_channel(d, c)
    try:
        result, _, _ = jupyter_execute(ws, "6*7", timeout=60 * SLOW)
        assert result == "42", result
    finally:
        ws.close()
    c.delete(f"/user/{c.user}/api/kernels/{kid}")


@contextlib.contextmanager
def fake_runtime(d, bad, mode):
    """Replaces bad's runtime socket with misbehave.py MODE (listening as the
    sandbox uid); yields the file recording what reached it; puts the real
    socket back afterwards."""
    path, real = bad.socket_path, bad.socket_path + ".real"
    rec = os.path.join(d.dir, f"fake-{mode}.rec")
    open(rec, "wb").close()
    os.chown(rec, bad.sandbox_uid, bad.sandbox_uid)
    os.rename(path, real)
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "misbehave.py"), mode, path,
                             rec, str(bad.sandbox_uid)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == b"ready", "misbehave.py did not start"
        yield rec
    finally:
        proc.kill()
        proc.wait()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.rename(real, path)


def flood(d, bad, n, path="api/status"):
    """n concurrent proxied GETs as bad, each on its own connection; returns a
    list of (status or exception name, seconds taken), once all are done."""
    out = [None] * n
    bad.origin_headers(f"/user/{bad.user}/{path}")  # the handoff, once, before the flood

    def one(i):
        c = d.client()
        c.cookies = dict(bad.cookies)
        c.runtime_jars = {k: dict(v) for k, v in bad.runtime_jars.items()}
        t0 = time.monotonic()
        try:
            st = c.get(f"/user/{bad.user}/{path}").status
        except OSError as e:
            st = type(e).__name__
        out[i] = (st, time.monotonic() - t0)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    return threads, out


def finish(threads, out):
    for t in threads:
        t.join(60)
    assert all(o is not None for o in out), f"a request never finished: {out}"
    return out


def test_socket_that_never_accepts(ad, bad, good, good_stops):
    with fake_runtime(ad, bad, "noaccept"):
        threads, out = flood(ad, bad, 30)
        service_ok(ad, good)
        out = finish(threads, out)
    statuses = [s for s, _ in out]
    assert set(statuses) <= {429, 502, 504}, statuses
    slowest = max(t for _, t in out)
    assert slowest < PROXY_DEADLINE_S + SLACK_S, f"a request took {slowest:.1f} s: {out}"


def test_socket_that_never_answers(ad, bad, good, good_stops):
    with fake_runtime(ad, bad, "silent") as rec:
        threads, out = flood(ad, bad, 3 * PER_USER)
        service_ok(ad, good)
        out = finish(threads, out)
        assert os.path.getsize(rec) > 0, "no request reached the fake runtime"
    statuses = [s for s, _ in out]
    assert set(statuses) <= {429, 504}, statuses
    assert statuses.count(504) <= PER_USER, f"more than {PER_USER} in flight: {statuses}"
    assert 429 in statuses, f"no request was refused by the per-user cap: {statuses}"
    slowest = max(t for _, t in out)
    assert slowest < PROXY_DEADLINE_S + SLACK_S, f"a request took {slowest:.1f} s: {out}"


def test_socket_that_trickles(ad, bad, good, good_stops):
    with fake_runtime(ad, bad, "trickle"):
        threads, out = flood(ad, bad, PER_USER)
        service_ok(ad, good)
        out = finish(threads, out)
    statuses = [s for s, _ in out]
    assert set(statuses) <= {429, 504}, statuses
    slowest = max(t for _, t in out)
    assert slowest < PROXY_DEADLINE_S + SLACK_S, f"a trickled head held a request {slowest:.1f} s"


def test_hundreds_of_websockets(ad, bad, good, good_stops):
    r = bad.post(f"/user/{bad.user}/api/kernels", json={"name": "python3"})
    assert r.status == 201, r
    kid = r.json["id"]
    path = f"/user/{bad.user}/api/kernels/{kid}/channels"
    headers = dict(ws_cookie_headers(bad), Origin=bad.runtime_origin())
    socks, statuses = [], []
    try:
        for i in range(200):  # from 20 addresses, under the per-address cap
            ws = WebSocket(ad.port, path, headers=headers, source=f"127.31.{i % 20}.1")
            socks.append(ws)
            statuses.append(ws.status)
        service_ok(ad, good)
    finally:
        for ws in socks:
            ws.close()
    assert statuses.count(101) == PER_USER, \
        f"{statuses.count(101)} WebSockets opened, cap {PER_USER}"
    assert set(statuses) == {101, 429}, statuses


def test_websocket_that_stays_silent_is_closed(ad, bad, good, good_stops):
    with fake_runtime(ad, bad, "upgrade"):
        ws = WebSocket(ad.port, f"/user/{bad.user}/api/kernels/x/channels",
                       headers=dict(ws_cookie_headers(bad), Origin=bad.runtime_origin()),
                       source=bad.source).expect_open()
        t0 = time.monotonic()
        try:
            with pytest.raises((WebSocketClosed, ConnectionError)):
                ws.recv(timeout=PROXY_DEADLINE_S + SLACK_S)
        finally:
            ws.close()
        assert time.monotonic() - t0 >= PROXY_DEADLINE_S - 0.5, "closed before its idle timeout"
        service_ok(ad, good)


def loris(port, sources, per_source, run_s, closed_after):
    """Slow-loris: per_source connections from each source address, each
    sending a request head one byte every 0.5 s; records in closed_after
    when labd closed each (None: still open after run_s)."""
    socks = []
    for src in sources:
        for _ in range(per_source):
            s = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(src, 0))
            s.setblocking(False)
            socks.append(s)
    t0 = time.monotonic()
    head = b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000
    pos = 0
    closed_after.extend([None] * len(socks))
    while time.monotonic() - t0 < run_s and None in closed_after:
        for i, s in enumerate(socks):
            if closed_after[i] is not None:
                continue
            try:
                if s.recv(4096) == b"":
                    closed_after[i] = time.monotonic() - t0
                    continue
            except BlockingIOError:
                pass
            except OSError:
                closed_after[i] = time.monotonic() - t0
                continue
            try:
                s.send(head[pos:pos + 1])
            except OSError:
                closed_after[i] = time.monotonic() - t0
        pos += 1
        time.sleep(LORIS_STEP_S)
    for s in socks:
        s.close()


def test_slow_loris_flood(ad, good, good_stops):
    closed = []
    sources = [f"127.32.0.{i}" for i in range(1, 6)]
    t = threading.Thread(target=loris, args=(ad.port, sources, 2 * PER_ADDRESS,
                                              DEADLINE_S + SLACK_S + 4, closed))
    t.start()
    try:
        wait_until(lambda: len(closed) > 0, 10, "the slow-loris connections")
        service_ok(ad, good)
    finally:
        t.join(60)
    still_open = [i for i, c in enumerate(closed) if c is None]
    assert not still_open, f"{len(still_open)} of {len(closed)} trickling connections were " \
        f"still open after {DEADLINE_S + SLACK_S + 4} s"
    # over the per-address cap: closed at once, not at the deadline
    at_once = sum(1 for c in closed if c < 1.5 * SLOW)
    assert at_once >= len(sources) * PER_ADDRESS, \
        f"only {at_once} connections over the per-address cap were refused at once: {closed}"
    assert max(closed) < DEADLINE_S + SLACK_S, f"a head trickled for {max(closed):.1f} s"


def test_unauthenticated_body_is_small_and_timed(ad, bad):
    big = b"x" * (100 * 1024)
    c = ad.client()
    r = c.post("/api/v1/login", body=big, content_type="application/json", csrf=None)
    assert r.status == 413, f"a 100 KiB login body: {r!r}"
    # the same body with a session is read (and refused as JSON, not for its size)
    c2 = ad.client()
    c2.cookies, c2.csrf = dict(bad.cookies), bad.csrf
    r = c2.post("/api/v1/me/tokens", body=big, content_type="application/json")
    assert r.status == 400, f"a 100 KiB body with a session: {r!r}"
    # a body that trickles is cut at the body deadline
    s = socket.create_connection(("127.0.0.1", ad.port), timeout=DEADLINE_S + SLACK_S + 5,
                                 source_address=(c.source, 0))
    s.sendall(b"POST /api/v1/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 100\r\n\r\n{")
    t0 = time.monotonic()
    got = None
    try:
        while got != b"" and time.monotonic() - t0 < DEADLINE_S + SLACK_S + 4:
            s.settimeout(0.5)
            try:
                got = s.recv(4096)
            except TimeoutError:
                s.send(b" ")
    except OSError:
        got = b""
    finally:
        s.close()
    took = time.monotonic() - t0
    assert got == b"" and took < DEADLINE_S + SLACK_S, \
        f"a trickled login body was still read after {took:.1f} s"


AMBIGUOUS = {
    "content-length and transfer-encoding":
        "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "two different content-lengths":
        "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    "transfer-encoding other than chunked":
        "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    "transfer-encoding twice":
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
}


@pytest.mark.parametrize("case", sorted(AMBIGUOUS))
def test_ambiguous_framing_refused(ad, bad, case):
    with fake_runtime(ad, bad, "silent") as rec:
        path = f"/user/{bad.user}/api/contents/x.txt"
        h = bad.origin_headers(path)  # a request that would reach Jupyter but for its framing
        req = (f"PUT {path} HTTP/1.1\r\n"
               f"Host: {h['Host']}\r\nOrigin: {bad.runtime_origin()}\r\nCookie: {h['Cookie']}\r\n"
               f"Content-Type: application/json\r\nConnection: close\r\n" + AMBIGUOUS[case])
        status, _, body = raw_request(ad.port, req, timeout=10)
        assert status == 400, f"{case}: {status} {body[:200]!r}"
        assert os.path.getsize(rec) == 0, f"{case}: bytes reached the runtime"


IDLE_S = 3


@pytest.fixture(scope="module")
def cull_daemon(runtime_daemon_factory):
    return runtime_daemon_factory("avail-cull", runtime={"idle_timeout": f"{IDLE_S}s"})


def test_open_idle_websocket_does_not_keep_a_runtime_alive(cull_daemon):
    """Only kernel messages count as activity: a kernel WebSocket left open,
    with pings going over it, does not stop idle culling."""
    d = cull_daemon
    name, pw = new_user(d, d.admin(), "idle")
    c = d.client()
    c.login(name, pw)
    start_runtime(c)
    kid, ws = open_kernel_channel(d, c)
    try:
        result, _, _ = jupyter_execute(ws, "1+1")  # a message: activity now
        assert result == "2", result
        t0 = time.monotonic()
        s = wait_until(lambda: (lambda s: s if s and s["state"] in ("stopping", "stopped")
                                else None)(c.get("/api/v1/me/runtime").json["runtime"]),
                       IDLE_S + 10 * SLOW, "the idle runtime to be culled with a WebSocket open")
        assert time.monotonic() - t0 >= IDLE_S - 1, "culled before idle_timeout"
        assert "idle" in (s.get("reason") or ""), s
    finally:
        ws.close()
    wait_runtime(c, ("stopped", "failed"))
