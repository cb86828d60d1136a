"""Streaming through the runtime proxy: a 200 MB upload and download must not
grow the web process's memory (VmHWM) by more than a few MB."""

import base64
import hashlib
import http.client
import json
import os
import random
import time

import pytest

from labd_harness import (
    REPO,
    SLOW,
    STRONG,
    assert_status,
    proc_kib,
    remember_sandboxes,
    start_runtime,
    stop_runtime,
    unique_name,
    web_process,
)

SIZE = 200 * 1024 * 1024
GROWTH_LIMIT_KIB = 16 * 1024
FIGURES = os.path.join(REPO, "tests", "integration", "last-stream-figures.txt")
PIECE = 1 << 20


@pytest.fixture(scope="module")
def std(runtime_daemon_factory):
    return runtime_daemon_factory("rt-stream", runtime={"memory": "3G"})


@pytest.fixture(scope="module")
def streamer(std):
    admin = std.admin()
    name = unique_name("str")
    pw = f"{STRONG}-{name}"
    assert admin.post("/api/v1/users", json={"name": name, "password": pw}).status == 201
    c = std.client()
    c.login(name, pw)
    start_runtime(c)
    remember_sandboxes(std)
    yield c
    stop_runtime(c)


def memory(pid):
    return {"VmHWM": proc_kib(pid, "VmHWM"), "VmRSS": proc_kib(pid, "VmRSS")}


def send_streaming(c, method, path, pieces, length, headers, chunked=False):
    """Sends a request whose body comes piece by piece; returns (status, body)."""
    conn = http.client.HTTPConnection(c.host, c.port, timeout=300 * SLOW,
                                      source_address=(c.source, 0) if c.source else None)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in c.origin_headers(path).items():
            conn.putheader(k, v)
        conn.putheader("X-CSRF-Token", c.csrf)
        for k, v in headers.items():
            conn.putheader(k, v)
        if chunked:
            conn.putheader("Transfer-Encoding", "chunked")
        else:
            conn.putheader("Content-Length", str(length))
        conn.endheaders()
        sent = 0
        for p in pieces:
            if chunked:
                conn.send(b"%x\r\n" % len(p) + p + b"\r\n")
            else:
                conn.send(p)
            sent += len(p)
        if chunked:
            conn.send(b"0\r\n\r\n")
        assert sent == length, (sent, length)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def contents_body(data):
    """The contents API PUT body for a base64 file, as pieces of ~1 MiB."""
    head = b'{"type": "file", "format": "base64", "content": "'
    tail = b'"}'
    b64 = base64.b64encode(data)
    length = len(head) + len(b64) + len(tail)

    def pieces():
        yield head
        for off in range(0, len(b64), PIECE):
            yield b64[off:off + PIECE]
        yield tail

    return pieces(), length


def download(c, path):
    """GET path, reading the body in pieces; returns (status, headers, size, sha256)."""
    conn = http.client.HTTPConnection(c.host, c.port, timeout=300 * SLOW,
                                      source_address=(c.source, 0) if c.source else None)
    try:
        conn.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
        for k, v in c.origin_headers(path).items():
            conn.putheader(k, v)
        conn.endheaders()
        r = conn.getresponse()
        h = hashlib.sha256()
        n = 0
        while True:
            b = r.read(PIECE)
            if not b:
                break
            h.update(b)
            n += len(b)
        return r.status, r.msg, n, h.hexdigest()
    finally:
        conn.close()


def test_chunked_upload_roundtrip(std, streamer):
    """A request body sent with Transfer-Encoding: chunked is relayed intact."""
    data = random.Random(7).randbytes(3 * 1024 * 1024 + 17)
    pieces, length = contents_body(data)
    path = f"/user/{streamer.user}/api/contents/chunked.bin"
    status, body = send_streaming(streamer, "PUT", path, pieces, length,
                                  {"Content-Type": "application/json"}, chunked=True)
    assert status == 201, f"chunked PUT: {status} {body[:300]!r}"
    assert json.loads(body)["size"] == len(data), body[:300]
    status, headers, n, digest = download(streamer, f"/user/{streamer.user}/files/chunked.bin")
    assert status == 200 and n == len(data), (status, n)
    assert digest == hashlib.sha256(data).hexdigest()


def test_200mb_upload_and_download_memory(std, streamer):
    pid = web_process(std)
    data = random.Random(42).randbytes(SIZE)
    want = hashlib.sha256(data).hexdigest()
    pieces, length = contents_body(data)
    del data
    path = f"/user/{streamer.user}/api/contents/big.bin"
    m0 = memory(pid)

    t0 = time.monotonic()
    status, body = send_streaming(streamer, "PUT", path, pieces, length,
                                  {"Content-Type": "application/json"})
    t_up = time.monotonic() - t0
    assert status == 201, f"PUT {path} ({length} bytes): {status} {body[:300]!r}"
    assert json.loads(body)["size"] == SIZE, body[:300]
    m1 = memory(pid)

    t0 = time.monotonic()
    status, headers, n, digest = download(streamer, f"/user/{streamer.user}/files/big.bin")
    t_down = time.monotonic() - t0
    m2 = memory(pid)
    assert web_process(std) == pid, "the web process changed during the transfer"

    growth = m2["VmHWM"] - m0["VmHWM"]
    figures = (
        f"200 MB streaming through labd's runtime proxy (web process {pid}):\n"
        f"  upload   PUT contents API, {length} bytes (base64 JSON, Content-Length): "
        f"{t_up:.2f} s, {length / t_up / 1e6:.1f} MB/s\n"
        f"  download GET /files/, {n} bytes: {t_down:.2f} s, {n / t_down / 1e6:.1f} MB/s\n"
        f"  VmHWM before {m0['VmHWM']} KiB, after upload {m1['VmHWM']} KiB, "
        f"after download {m2['VmHWM']} KiB (peak growth {growth} KiB)\n"
        f"  VmRSS before {m0['VmRSS']} KiB, after upload {m1['VmRSS']} KiB, "
        f"after download {m2['VmRSS']} KiB\n")
    print("\n" + figures)
    try:
        with open(FIGURES, "w") as fh:
            fh.write(time.strftime("%Y-%m-%dT%H:%M:%SZ\n", time.gmtime()) + figures)
    except OSError:
        pass

    assert status == 200, f"GET files/big.bin: {status}"
    ct = (headers.get("Content-Type") or "").split(";")[0]
    assert ct == "application/octet-stream", f"Content-Type {headers.get('Content-Type')!r}"
    assert n == SIZE, f"downloaded {n} bytes, want {SIZE}"
    assert digest == want, "downloaded bytes differ from the upload"
    assert growth < GROWTH_LIMIT_KIB, \
        f"web process VmHWM grew by {growth} KiB (limit {GROWTH_LIMIT_KIB}): {m0} -> {m2}"
    # the file is really in the home
    r = streamer.get(f"/user/{streamer.user}/api/contents/big.bin?content=0")
    assert_status(r, 200)
    assert r.json["size"] == SIZE, r.json
