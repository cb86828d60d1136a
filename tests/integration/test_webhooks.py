"""Notifications (docs/jobs.md "Notifications"): a user's webhooks hear of their jobs'
ends as JSON bodies signed with HMAC-SHA256, retried with doubling waits, logged per
attempt, kept across a restart of labd, and sent only where the user's own egress may
go.  The receiver is a test host of testnet.py (198.18.0.0/15); every other address
named here is refused before anything is sent."""

import hashlib
import hmac
import json
import os
import sqlite3
import subprocess
import tempfile
import time

import pytest

from jobs_lib import get_job, jobs_daemon, new_user, submit, wait_job
from labd_harness import (NETWORK_DENY_DEFAULT, SLOW, assert_error, assert_status, audit_entries,
                          start_runtime, stop_runtime, user_id, wait_until)
from testnet import TestHost

PORT = 8080
TLS_PORT = 8443  # a receiver with a self-signed certificate
LATE_PORT = 8081  # nothing listens there until the restart test starts a receiver
RETRY_BASE_MS = 400
MAX_PER_USER = 4

# The receiver: answers by path (/ok 200, /flaky 500 then 200, /redirect 302) and
# appends each request (path, headers, body, time) as a JSON line to a file.
RECEIVER = r"""
import http.server, json, sys, time
log, port = sys.argv[1], int(sys.argv[2])
seen = {}
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        n = seen[self.path] = seen.get(self.path, 0) + 1
        with open(log, "a") as fh:
            fh.write(json.dumps({"path": self.path, "headers": dict(self.headers),
                                 "body": body.decode(), "t": time.time()}) + "\n")
        if self.path.startswith("/flaky") and n == 1:
            self.send_response(500)
        elif self.path.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1/")
        else:
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("0.0.0.0", port), H).serve_forever()
"""


@pytest.fixture(scope="module")
def net():
    with TestHost() as h:
        yield h


@pytest.fixture(scope="module")
def wd(runtime_daemon_factory):
    sections = {
        "network": {"deny": "198.19.0.0/16," + NETWORK_DENY_DEFAULT},
        "webhooks": {"retry_base": f"{RETRY_BASE_MS}ms", "attempts": "8", "timeout": "3s",
                     "max_per_user": str(MAX_PER_USER)},
    }
    return jobs_daemon(runtime_daemon_factory, "webhooks", quota={"network": "egress"},
                       sections=sections)


@pytest.fixture(scope="module")
def received():
    fd, path = tempfile.mkstemp(prefix="labd-hooks-", suffix=".jsonl")
    os.close(fd)
    os.chmod(path, 0o666)
    yield path
    os.unlink(path)


@pytest.fixture(scope="module")
def receiver(net, received):
    net.spawn(["python3", "-c", RECEIVER, received, str(PORT)])
    net.wait_port(PORT)
    return f"http://{net.addr}:{PORT}"


# The same over TLS, with a certificate nobody signed.
TLS_RECEIVER = RECEIVER.replace(
    'http.server.ThreadingHTTPServer(("0.0.0.0", port), H).serve_forever()',
    'import ssl\n'
    's = http.server.ThreadingHTTPServer(("0.0.0.0", port), H)\n'
    'ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(sys.argv[3], sys.argv[4])\n'
    's.socket = ctx.wrap_socket(s.socket, server_side=True)\n'
    's.serve_forever()')


def requests(path, prefix):
    with open(path) as fh:
        return [r for r in map(json.loads, fh) if r["path"].startswith(prefix)]


def make_hook(c, url, events=("job.ended", "job.failed"), **extra):
    r = c.post("/api/v1/webhooks", json=dict({"url": url, "events": list(events)}, **extra))
    assert_status(r, 201)
    return r.json["webhook"]


def deliveries(c, hook_id):
    r = c.get(f"/api/v1/webhooks/{hook_id}/deliveries")
    assert_status(r, 200)
    return r.json["deliveries"]


def wait_delivery(c, hook_id, state, timeout=20 * SLOW):
    def done():
        ds = deliveries(c, hook_id)
        return ds if ds and ds[0]["state"] == state else None
    return wait_until(done, timeout, lambda: f"webhook {hook_id} {state}: {deliveries(c, hook_id)}")


def verify(req, secret):
    """The signature a receiver checks: HMAC-SHA256 over "<timestamp>.<body>"."""
    h = {k.lower(): v for k, v in req["headers"].items()}
    ts = h["x-labd-timestamp"]
    want = hmac.new(secret.encode(), f"{ts}.{req['body']}".encode(), hashlib.sha256).hexdigest()
    assert hmac.compare_digest(h["x-labd-signature"], f"sha256={want}"), h
    assert abs(int(ts) - time.time()) < 60, ts
    return h


def test_signed_job_ended_and_failed(wd, receiver, received):
    _, c = new_user(wd, "wh")
    hook = make_hook(c, f"{receiver}/ok/{c.name}")
    assert hook["secret"].startswith("whsec_") and len(hook["secret"]) > 40, hook
    assert "secret" not in c.get("/api/v1/webhooks").json["webhooks"][0]  # shown once
    ok = submit(c, ["/bin/true"])["id"]
    bad = submit(c, ["/bin/false"])["id"]
    wait_job(c, ok)
    wait_job(c, bad)
    got = wait_until(lambda: len(requests(received, f"/ok/{c.name}")) == 2 and
                     requests(received, f"/ok/{c.name}"), 20 * SLOW, "two deliveries")
    by_event = {}
    for req in got:
        h = verify(req, hook["secret"])
        body = json.loads(req["body"])
        assert h["x-labd-event"] == body["event"] and h["content-type"] == "application/json", h
        assert body["user"] == c.name, body
        by_event[body["event"]] = body
    assert by_event["job.ended"]["data"]["job_id"] == ok, by_event
    assert by_event["job.ended"]["data"]["status"] == "Completed", by_event
    assert by_event["job.failed"]["data"]["job_id"] == bad, by_event
    assert by_event["job.failed"]["data"]["exit_code"] == 1, by_event
    ds = wait_delivery(c, hook["id"], "delivered")
    assert all(d["state"] == "delivered" and d["attempts"] == 1 for d in ds), ds
    assert ds[0]["log"][0]["status"] == 200 and ds[0]["log"][0]["error"] == "", ds
    # the body a tampered secret would sign differently: the check can fail
    with pytest.raises(AssertionError):
        verify(got[0], hook["secret"] + "x")


def test_runtime_ended(wd, receiver, received):
    _, c = new_user(wd, "wu")
    hook = make_hook(c, f"{receiver}/ok/{c.name}", events=["runtime.ended"])
    _, running = start_runtime(c)
    stop_runtime(c)
    got = wait_until(lambda: requests(received, f"/ok/{c.name}"), 20 * SLOW, "runtime.ended")
    body = json.loads(got[0]["body"])
    verify(got[0], hook["secret"])
    assert body["event"] == "runtime.ended" and body["data"]["runtime_id"] == running["id"], body
    assert body["data"]["status"] == "stopped" and body["data"]["failed"] is False, body
    assert body["data"]["kind"] == "cpu", body


def test_500_then_200_is_retried_with_backoff_and_logged(wd, receiver, received):
    _, c = new_user(wd, "wr")
    hook = make_hook(c, f"{receiver}/flaky/{c.name}", events=["job.ended"])
    wait_job(c, submit(c, ["/bin/true"])["id"])
    d = wait_delivery(c, hook["id"], "delivered")[0]
    assert d["attempts"] == 2, d
    first, second = d["log"]
    assert first["status"] == 500 and first["error"] == "answered 500", d
    assert second["status"] == 200 and second["error"] == "", d
    got = requests(received, f"/flaky/{c.name}")
    assert len(got) == 2, got
    assert got[1]["t"] - got[0]["t"] >= RETRY_BASE_MS / 1000 * 0.9, got
    # the same event, the same body, each attempt signed anew
    assert got[0]["body"] == got[1]["body"], got
    for req in got:
        verify(req, hook["secret"])


REFUSED_URLS = [
    "http://127.0.0.1:8080/",
    "http://[::1]/",
    "http://0.0.0.0/",
    "http://10.1.2.3/",
    "http://192.168.1.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[::ffff:127.0.0.1]/",
    "http://[64:ff9b::a01:203]/",  # NAT64 of 10.1.2.3
    "http://198.19.5.5/",  # [network] deny
]


def test_private_loopback_and_host_addresses_are_refused(wd, net, receiver):
    _, c = new_user(wd, "wp")
    for url in REFUSED_URLS + [f"http://{net.host_addr}:{PORT}/"]:
        r = c.post("/api/v1/webhooks", json={"url": url, "events": ["job.ended"]})
        assert_error(r, 400, "bad_field", "url")
    for body, field in [({"url": "ftp://example.org/x", "events": ["job.ended"]}, "url"),
                        ({"url": "http://u:p@example.org/", "events": ["job.ended"]}, "url"),
                        ({"url": "http://example.org/" + "a" * 2100, "events": ["job.ended"]}, "url"),
                        ({"url": 5, "events": ["job.ended"]}, "url"),
                        ({"events": ["job.ended"]}, "url"),
                        ({"url": "http://example.org/", "events": []}, "events"),
                        ({"url": "http://example.org/", "events": ["job.exploded"]}, "events"),
                        ({"url": "http://example.org/", "events": ["job.ended"], "secret": "short"}, "secret")]:
        assert_error(c.post("/api/v1/webhooks", json=body), 400, "bad_field", field)
    assert c.get("/api/v1/webhooks").json["webhooks"] == []
    # a name is checked where it resolves, at delivery: localhost is loopback
    local = make_hook(c, f"http://localhost:{PORT}/", events=["job.ended"])
    # a redirect is never followed, whatever it points at
    moved = make_hook(c, f"{receiver}/redirect/{c.name}", events=["job.ended"])
    wait_job(c, submit(c, ["/bin/true"])["id"])
    d = wait_delivery(c, local["id"], "failed")[0]
    assert d["attempts"] == 1 and d["last_status"] is None, d
    assert d["last_error"].startswith(("refused: 127.0.0.1 is in a range",
                                       "refused: ::1 is in a range")), d
    d = wait_delivery(c, moved["id"], "failed")[0]
    assert d["attempts"] == 1 and d["last_status"] == 302, d
    assert "redirects are not followed" in d["last_error"], d


def test_https_checks_the_receivers_certificate(wd, net, received, tmp_path):
    """https is verified against the host's CAs: a self-signed receiver is never sent
    the body (the handshake fails, the attempt is logged and retried)."""
    key, crt = str(tmp_path / "r.key"), str(tmp_path / "r.crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-keyout", key, "-out", crt, "-days", "1", "-subj", f"/CN={net.addr}",
                    "-addext", f"subjectAltName=IP:{net.addr}"], check=True, capture_output=True)
    net.spawn(["python3", "-c", TLS_RECEIVER, received, str(TLS_PORT), crt, key])
    net.wait_port(TLS_PORT)
    _, c = new_user(wd, "wt")
    hook = make_hook(c, f"https://{net.addr}:{TLS_PORT}/tls/{c.name}", events=["job.ended"])
    wait_job(c, submit(c, ["/bin/true"])["id"])
    d = wait_until(lambda: (deliveries(c, hook["id"]) or [{}])[0].get("attempts", 0) >= 1 and
                   deliveries(c, hook["id"])[0], 20 * SLOW, "a first attempt")
    assert d["state"] == "pending" and d["last_status"] is None, d
    assert "certificate" in d["last_error"].lower() or "ssl" in d["last_error"].lower(), d
    assert requests(received, f"/tls/{c.name}") == []
    assert_status(c.delete(f"/api/v1/webhooks/{hook['id']}"), 204)


def test_limits_and_other_users_cannot_see_hooks(wd, receiver):
    _, ann = new_user(wd, "wa")
    _, bob = new_user(wd, "wb")
    hooks = [make_hook(ann, f"{receiver}/ok/{ann.name}/{i}") for i in range(MAX_PER_USER)]
    assert_error(ann.post("/api/v1/webhooks", json={"url": f"{receiver}/x", "events": ["quota.low"]}),
                 409, "too_many_webhooks")
    assert bob.get("/api/v1/webhooks").json["webhooks"] == []
    assert_error(bob.get(f"/api/v1/webhooks/{hooks[0]['id']}/deliveries"), 404, "not_found")
    assert_error(bob.delete(f"/api/v1/webhooks/{hooks[0]['id']}"), 404, "not_found")
    assert len(ann.get("/api/v1/webhooks").json["webhooks"]) == MAX_PER_USER
    assert_status(ann.delete(f"/api/v1/webhooks/{hooks[0]['id']}"), 204)
    assert len(ann.get("/api/v1/webhooks").json["webhooks"]) == MAX_PER_USER - 1
    audited = audit_entries(wd.admin(), target=ann.name)
    assert [e["detail"] for e in audited if e["action"] == "webhook.delete"] == [hooks[0]["url"]], audited
    assert sum(e["action"] == "webhook.create" for e in audited) == MAX_PER_USER, audited
    # a plan without egress could never deliver: refused at once
    _, cut = new_user(wd, "wn", overrides={"network": "none"})
    assert_error(cut.post("/api/v1/webhooks", json={"url": f"{receiver}/x", "events": ["job.ended"]}),
                 403, "no_egress")


def test_quota_low_and_warm_pool_expiring(wd, receiver, received):
    """A job's end finds 91 % of the 24 h CPU window used (a closed ledger entry seeded
    as test_jobs_control does): quota.low; its warm pool, kept 61 s, is a minute from
    its end at once: warm_pool.expiring, long before it expires."""
    name, c = new_user(wd, "wq", overrides={"cpu_s_per_24h": 10000})
    hook = make_hook(c, f"{receiver}/ok/{name}", events=["quota.low", "warm_pool.expiring"])
    now = int(time.time())
    db = sqlite3.connect(wd.db_file, timeout=10)
    try:
        db.execute(
            "INSERT INTO ledger (user_id, user_name, kind, plan, start_at, end_at, billable_s,"
            " end_reason, last_heartbeat) VALUES (?, ?, 'cpu', 'default', ?, ?, 9100, 'seeded', ?)",
            (user_id(wd, name), name, now - 9300, now - 200, now - 200))
        db.commit()
    finally:
        db.close()
    job = wait_job(c, submit(c, ["/bin/true"], keep_alive_s=61)["id"])
    assert job["warm_pool"]["status"] == "Available", job
    got = wait_until(lambda: len(requests(received, f"/ok/{name}")) == 2 and
                     requests(received, f"/ok/{name}"), 20 * SLOW, "quota.low and warm_pool.expiring")
    by_event = {json.loads(r["body"])["event"]: json.loads(r["body"])["data"] for r in got}
    for r in got:
        verify(r, hook["secret"])
    low = by_event["quota.low"]
    assert low["limit"] == "cpu_s_per_24h" and low["limit_s"] == 10000, low
    assert 91 <= low["percent_used"] < 100 and low["used_s"] >= 9100, low
    warm = by_event["warm_pool.expiring"]
    assert warm["job_id"] == job["id"] and warm["pool_id"] == job["warm_pool"]["id"], warm
    assert warm["available_until"] == job["warm_pool"]["available_until"], (warm, job)
    assert_status(c.delete(f"/api/v1/warm-pools/{job['warm_pool']['id']}"), 204)
    # once each: another job's end in the same day sends no second quota.low
    wait_job(c, submit(c, ["/bin/true"])["id"])
    time.sleep(1)
    assert [json.loads(r["body"])["event"] for r in requests(received, f"/ok/{name}")].count("quota.low") == 1


def test_receiver_down_across_a_restart_is_delivered_after(wd, net, received):
    _, c = new_user(wd, "wd")
    name, password = c.name, c.password
    hook = make_hook(c, f"http://{net.addr}:{LATE_PORT}/late/{name}", events=["job.ended"])
    job = submit(c, ["/bin/true"])["id"]
    wait_job(c, job)
    d = wait_until(lambda: (deliveries(c, hook["id"]) or [{}])[0].get("attempts", 0) >= 1 and
                   deliveries(c, hook["id"])[0], 20 * SLOW, "a first attempt")
    assert d["state"] == "pending" and d["last_status"] is None and d["last_error"], d
    assert wd.stop(15) == 0, wd.log_tail()
    net.spawn(["python3", "-c", RECEIVER, received, str(LATE_PORT)])
    net.wait_port(LATE_PORT)
    wd.start(expect_admin_password=False)
    c = wd.client()
    c.login(name, password)
    d = wait_delivery(c, hook["id"], "delivered", timeout=40 * SLOW)[0]
    assert d["log"][-1]["status"] == 200 and d["attempts"] >= 2, d
    got = requests(received, f"/late/{name}")
    assert len(got) == 1 and json.loads(got[0]["body"])["data"]["job_id"] == job, got
    verify(got[0], hook["secret"])
    assert get_job(c, job)["status"] == "Completed"
