"""GET /api/v1/me/runtime/events: the caller's runtime as Server-Sent Events.

A raw-socket SSE client follows a real runtime through starting, running,
stopping and stopped; the endpoint needs authentication, caps the streams of a
user (429) and frees a slot as soon as a client hangs up; a client that stops
reading is cut off once its bounded buffer is full, without the web process's
memory growing."""

import json
import socket
import time

import pytest

from labd_harness import (
    HTTP_TIMEOUT,
    RUNTIME_START_TIMEOUT,
    SLOW,
    STRONG,
    assert_error,
    assert_security_headers,
    proc_kib,
    remember_sandboxes,
    unique_name,
    web_process,
)

PATH = "/api/v1/me/runtime/events"
PER_USER = 8
RUNTIME_KEYS = {"id", "type", "state", "reason", "started_at", "ready_at", "deadline", "queue",
                "seconds_left", "ended_at", "gpus", "url", "warn_before", "image", "image_hash",
                "gpu_notice"}


class EventStream:
    """A raw HTTP/1.1 GET of an event stream: the head, then the events of
    the chunked body one by one (comments counted, not returned)."""

    def __init__(self, port, headers=None, source=None, rcvbuf=None, path=PATH):
        self.sock = socket.socket()
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if source:
            self.sock.bind((source, 0))
        self.sock.settimeout(HTTP_TIMEOUT)
        self.sock.connect(("127.0.0.1", port))
        lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Accept: text/event-stream"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.raw = b""
        self.text = ""  # de-chunked body not yet parsed into events
        self.comments = 0
        self.ended = False
        while b"\r\n\r\n" not in self.raw:
            self._recv()
        head, _, self.raw = self.raw.partition(b"\r\n\r\n")
        first, *rest = head.decode("latin-1").split("\r\n")
        self.status = int(first.split()[1])
        self.headers = {}
        for ln in rest:
            k, _, v = ln.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self.body = b""
        if self.status != 200:
            n = int(self.headers.get("content-length", "0"))
            while len(self.raw) < n:
                self._recv()
            self.body = self.raw[:n]

    method, path = "GET", PATH  # for the harness's asserts

    def header(self, name, default=None):
        return self.headers.get(name.lower(), default)

    @property
    def json(self):
        return json.loads(self.body)

    def _recv(self):
        b = self.sock.recv(65536)
        if not b:
            raise EOFError("the server closed the stream")
        self.raw += b

    def _dechunk(self):
        while not self.ended:
            line, sep, rest = self.raw.partition(b"\r\n")
            if not sep:
                return
            size = int(line.split(b";")[0], 16)
            if len(rest) < size + 2:
                return
            self.text += rest[:size].decode()
            self.raw = rest[size + 2:]
            if size == 0:
                self.ended = True

    def next_event(self, timeout=HTTP_TIMEOUT):
        """The next event as {"id", "event", "data"}; comments are skipped."""
        deadline = time.monotonic() + timeout
        while True:
            self._dechunk()
            while "\n\n" in self.text:
                block, _, self.text = self.text.partition("\n\n")
                ev = {"id": None, "event": "message", "data": []}
                for ln in block.split("\n"):
                    if ln.startswith(":"):
                        self.comments += 1
                        continue
                    field, _, value = ln.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if field == "data":
                        ev["data"].append(value)
                    elif field in ("id", "event"):
                        ev[field] = value
                if ev["data"] or ev["id"] is not None:
                    ev["data"] = "\n".join(ev["data"])
                    return ev
            if self.ended:
                raise EOFError("the stream ended")
            left = deadline - time.monotonic()
            assert left > 0, f"no event within {timeout:.1f}s"
            self.sock.settimeout(left)
            try:
                self._recv()
            except TimeoutError:
                raise AssertionError(f"no event within {timeout:.1f}s") from None

    def next_runtime(self, timeout=HTTP_TIMEOUT):
        """The next runtime event: (id, session or None)."""
        ev = self.next_event(timeout)
        assert ev["event"] == "runtime", ev
        return int(ev["id"]), json.loads(ev["data"])["runtime"]

    def wait_comment(self, timeout=HTTP_TIMEOUT):
        seen = self.comments
        deadline = time.monotonic() + timeout
        while self.comments == seen:
            self._dechunk()
            while "\n\n" in self.text:
                block, _, self.text = self.text.partition("\n\n")
                self.comments += block.startswith(":")
            if self.comments > seen:
                break
            left = deadline - time.monotonic()
            assert left > 0, "no keepalive comment"
            self.sock.settimeout(left)
            try:
                self._recv()
            except TimeoutError:
                raise AssertionError("no keepalive comment") from None

    def close(self):
        self.sock.close()


@pytest.fixture(scope="module")
def ed(runtime_daemon_factory):
    # Short pings, so hang-ups of idle streams are also found by a send.
    return runtime_daemon_factory("rt-events", env={"LABD_EVENT_KEEPALIVE_MS": "300"})


def new_client(d, prefix="ev"):
    admin = d.admin()
    name = unique_name(prefix)
    pw = f"{STRONG}-{name}"
    assert admin.post("/api/v1/users", json={"name": name, "password": pw}).status == 201
    c = d.client()
    c.login(name, pw)
    return c


def cookie_headers(c):
    return {"Cookie": "; ".join(f"{k}={v}" for k, v in c.cookies.items())}


def bearer(c):
    r = c.post("/api/v1/me/tokens", json={"name": unique_name("tok")})
    assert r.status == 201, r
    return {"Authorization": f"Bearer {r.json['token']}"}


def test_needs_authentication(ed):
    s = EventStream(ed.port)
    assert s.status == 401, (s.status, s.body)
    assert s.json["error"]["code"] == "unauthorized"
    s.close()
    s = EventStream(ed.port, {"Authorization": "Bearer labd_" + "x" * 43})
    assert s.status == 401, (s.status, s.body)
    s.close()
    # only GET (and HEAD)
    r = ed.client().post(PATH, json={})
    assert_error(r, 405, "method_not_allowed")


def test_events_follow_the_runtime(ed):
    c = new_client(ed)
    other = new_client(ed, "evo")
    s = EventStream(ed.port, cookie_headers(c), source=c.source)
    assert s.status == 200, (s.status, s.body)
    assert s.header("content-type") == "text/event-stream"
    assert s.header("cache-control") == "no-store"
    assert s.header("x-accel-buffering") == "no"
    assert s.header("transfer-encoding") == "chunked"
    assert_security_headers(s)
    theirs = EventStream(ed.port, cookie_headers(other), source=other.source)
    assert theirs.next_runtime() == (1, None)

    # on connect: what GET /api/v1/me/runtime says (no runtime yet)
    ids = []
    i, first = s.next_runtime()
    ids.append(i)
    assert first is None
    assert c.get("/api/v1/me/runtime").json == {"runtime": None, "session": None}

    r = c.post("/api/v1/me/runtime", json={"type": "cpu"})
    assert r.status == 202, r
    remember_sandboxes(ed)
    states = []
    deadline = time.monotonic() + RUNTIME_START_TIMEOUT
    while not states or states[-1] != "running":
        i, rt = s.next_runtime(timeout=max(1, deadline - time.monotonic()))
        ids.append(i)
        assert set(rt) == RUNTIME_KEYS, rt
        assert rt["id"] == r.json["runtime"]["id"]
        states.append(rt["state"])
        assert rt["state"] in ("starting", "running"), states
    assert states == ["starting", "running"], states
    got = c.get("/api/v1/me/runtime").json["runtime"]
    for k in RUNTIME_KEYS - {"seconds_left"}:
        assert got[k] == rt[k], (k, got, rt)

    # a stream opened now starts with the current state
    late = EventStream(ed.port, cookie_headers(c), source=c.source)
    _, now = late.next_runtime()
    assert now["state"] == "running"
    late.close()

    r = c.delete("/api/v1/me/runtime")
    assert r.status == 202, r
    while states[-1] not in ("stopped", "failed"):
        i, rt = s.next_runtime(timeout=60 * SLOW)
        ids.append(i)
        states.append(rt["state"])
    assert states[2:] == ["stopping", "stopped"], states
    assert rt["reason"] == "stopped by the user"
    assert ids == list(range(1, len(ids) + 1)), ids

    # the other user heard nothing of it
    with pytest.raises(AssertionError):
        theirs.next_event(timeout=0.5)
    assert theirs.comments > 0  # but got the keepalive
    theirs.close()
    s.close()


def test_last_event_id_numbers_on(ed):
    c = new_client(ed)
    s = EventStream(ed.port, {**bearer(c), "Last-Event-ID": "41"})
    assert s.status == 200
    assert s.next_runtime() == (42, None)  # no replay: the current state, numbered on
    s.close()
    s = EventStream(ed.port, {**bearer(c), "Last-Event-ID": "junk"})
    assert s.next_runtime() == (1, None)
    s.wait_comment(timeout=5 * SLOW)  # ": ping" keeps a quiet stream alive
    s.close()


def test_per_user_cap_and_release(ed):
    c = new_client(ed)
    auth = bearer(c)
    streams = [EventStream(ed.port, auth) for _ in range(PER_USER)]
    for s in streams:
        assert s.status == 200, (s.status, s.body)
        assert s.next_runtime()[1] is None
    extra = EventStream(ed.port, auth)
    assert extra.status == 429, (extra.status, extra.body)
    assert extra.json["error"]["code"] == "too_many_streams"
    assert extra.header("retry-after")
    extra.close()
    # another user is not affected
    other = EventStream(ed.port, bearer(new_client(ed, "evc")))
    assert other.status == 200
    other.close()

    # a client that goes away frees its slot at once (the hang-up is
    # watched; no need to wait for a ping)
    streams.pop().close()
    deadline = time.monotonic() + 5 * SLOW
    while True:
        again = EventStream(ed.port, auth)
        if again.status == 200 or time.monotonic() > deadline:
            break
        again.close()
        time.sleep(0.05)
    assert again.status == 200, (again.status, again.body)
    assert again.next_runtime()[1] is None
    again.close()
    for s in streams:
        s.close()


def test_stalled_clients_are_cut_off_without_memory_growth(daemon_factory):
    """Clients that stop reading: what they do not take piles up in the
    stream's bounded buffer (64 KiB) until the write that would pass it fails
    and the stream ends; labd-web's memory does not follow. Pings every
    millisecond produce the bytes (a stalled client gets ~8 KiB/s)."""
    d = daemon_factory("events-stall", env={"LABD_EVENT_KEEPALIVE_MS": "1"})
    c = d.client()
    admin = d.admin()
    name = unique_name("stall")
    pw = f"{STRONG}-{name}"
    assert admin.post("/api/v1/users", json={"name": name, "password": pw}).status == 201
    c.login(name, pw)
    auth = bearer(c)
    web = web_process(d)
    rss0 = proc_kib(web, "VmRSS")
    stalled = [EventStream(d.port, auth, rcvbuf=4096) for _ in range(PER_USER)]
    for s in stalled:
        assert s.status == 200, (s.status, s.body)
    # from here on they read nothing; the cap is full
    assert EventStream(d.port, auth).status == 429
    deadline = time.monotonic() + 90 * SLOW
    peak = rss0
    while "client is" not in d.log() or d.log().count("client is") < PER_USER:
        peak = max(peak, proc_kib(web, "VmRSS"))
        assert time.monotonic() < deadline, \
            f"stalled streams not cut off within {90 * SLOW:.0f}s\n" + d.log_tail()
        time.sleep(0.2)
    assert peak - rss0 < 4 * 1024, f"labd-web grew {peak - rss0} KiB with {PER_USER} stalled streams"
    # cut off: the slots are free again, and a reading client is served
    deadline = time.monotonic() + 10 * SLOW
    while True:
        s = EventStream(d.port, auth)
        if s.status == 200 or time.monotonic() > deadline:
            break
        s.close()
        time.sleep(0.1)
    assert s.status == 200, (s.status, s.body)
    assert s.next_runtime()[1] is None
    s.close()
    for s in stalled:
        s.close()
