"""A shell into a running job (docs/jobs.md, "A shell into a running job"):
GET /api/v1/jobs/{id}/shell as a WebSocket gives a terminal in the job's own
sandbox, as the user (inner uid, no capability, no_new_privs, seccomp), beside the
job's command and nothing else: ps shows the job's processes, not the host's nor
another user's job.  The jobs scope and the owner only; 409 once the job is not
training; audited open and close; the shell is closed when the job ends; and it
works on a job whose pool labd re-adopted after a restart.  One daemon for all."""

import json
import re
import socket
import time

import pytest

from jobs_lib import get_job, jobs_daemon, new_user, submit, wait_job
from labd_harness import SLOW, STRONG, WebSocket, WebSocketClosed, assert_error, \
    assert_status, unique_name, wait_until
from runtime_shell import job_shell_run

# the job keeps its environment where its shell can compare it with its own
SLEEPER = ["/bin/sh", "-c", "env | sort > /tmp/job.env; echo shell-test-job; exec sleep 300"]
# what a shell sets for itself, or what only one of them has on purpose
SHELL_OWN = {"PWD", "OLDPWD", "SHLVL", "_", "TERM", "LINES", "COLUMNS"}
# this user's shells start 4 s late (LABD_FAULT_SLOW_SHELL): their job ends meanwhile
SLOW_USER = unique_name("slsh")


@pytest.fixture(scope="module")
def sd(runtime_daemon_factory):
    return jobs_daemon(runtime_daemon_factory, "job-shell",
                       runtime={"keep_on_shutdown": "true"},
                       env={"LABD_FAULT_SLOW_SHELL": f"{SLOW_USER}:4000"})


def token(c, scopes, whole=False):
    r = c.post("/api/v1/me/tokens", json={"name": f"t{time.monotonic_ns()}",
                                          "password": c.password, "scopes": scopes})
    assert_status(r, 201)
    return r.json if whole else r.json["token"]


def training(c, command=SLEEPER):
    j = submit(c, command)
    return wait_job(c, j["id"], statuses=("InProgress",), secondary="Training")


def shell(d, job_id, tok, host=None, **kw):
    where = "" if host is None else f"&host={host}"
    return WebSocket(d.port, f"/api/v1/jobs/{job_id}/shell?cols=200&rows=50{where}",
                     headers={"Authorization": f"Bearer {tok}"}, **kw)


def pools_settled(d):
    """Every pool labd began killing in this run has ended (a stop of the daemon,
    which keeps pools, must not catch one half torn down)."""
    log = d.log()
    killing = set(re.findall(r"killing pool (\d+) of (\S+):", log))
    ended = set(re.findall(r"pool (\d+) of (\S+) ended", log))
    return killing <= ended


def audit_actions(d, job_name):
    rows = d.admin().get("/api/v1/audit?limit=200").json["entries"]
    return [r["action"] for r in rows
            if r["action"].startswith("job.shell") and job_name in (r.get("detail") or "")]


@pytest.fixture(scope="module")
def owner(sd):
    _, c = new_user(sd, "sh")
    c.tok = token(c, ["jobs"])
    return c


def test_shell_is_in_the_job_sandbox_as_the_user(sd, owner):
    _, other = new_user(sd, "so")
    theirs = training(other, ["/bin/sh", "-c", "exec sleep 301"])
    j = training(owner)
    ws = shell(sd, j["id"], owner.tok).expect_open()
    try:
        out = job_shell_run(ws, "id -u; id -G; ps -e -o pid=,args=; "
                      "tr '\\0' ' ' </proc/1/cmdline; echo; "
                      "grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; "
                      "echo job=$LABD_JOB_ID term=$TERM; stty size")
    finally:
        ws.close()
    lines = out.split("\n")
    assert "1000" in [ln.strip() for ln in lines], out  # the inner uid, not root
    assert not any(ln.strip() == "0" for ln in lines), out
    procs = [ln for ln in lines if re.match(r"\s*\d+ ", ln)]
    assert any("sleep 300" in p for p in procs), out  # the job's command
    assert any("labd-jobagent" in p for p in procs), out
    assert not any("sleep 301" in p for p in procs), out  # another user's job
    assert not any(re.search(r"\blabd(-web)?\b", p) and "jobagent" not in p
                   and "sandbox" not in p for p in procs), out  # nothing of the host
    assert len(procs) < 12, out
    assert re.search(r"CapEff:\s+0{16}", out) and re.search(r"CapBnd:\s+0{16}", out), out
    assert re.search(r"NoNewPrivs:\s+1", out) and re.search(r"Seccomp:\s+2", out), out
    assert f"job={j['id']} term=xterm-256color" in out, out
    assert "50 200" in out, out  # the size asked for
    # the job's environment, entry for entry (but what a shell sets for itself)
    ws = shell(sd, j["id"], owner.tok).expect_open()
    try:
        out = job_shell_run(ws, "cat /tmp/job.env; echo =====; env | sort")
    finally:
        ws.close()
    # no echoed command (the terminal may echo it twice: once as typed ahead, once
    # after the prompt), no marker
    lines = out.split("\n")
    last_echo = max(i for i, ln in enumerate(lines) if "env | sort; echo END-" in ln)
    body = "\n".join(ln for ln in lines[last_echo + 1:] if "END-42" not in ln)
    job_env, _, shell_env = body.partition("=====\n")

    def entries(text):
        return {ln for ln in text.splitlines()
                if "=" in ln and ln.split("=", 1)[0] not in SHELL_OWN}
    assert entries(job_env) == entries(shell_env), \
        (entries(job_env) ^ entries(shell_env), out)
    assert any(ln.startswith("SM_") for ln in entries(job_env)), job_env
    wait_until(lambda: audit_actions(sd, j["name"]).count("job.shell.close") >= 1,
               10 * SLOW, "the close's audit entry")
    assert "job.shell.open" in audit_actions(sd, j["name"])
    for c, jj in ((owner, j), (other, theirs)):
        assert_status(c.post(f"/api/v1/jobs/{jj['id']}/stop", json={}), 202)


def test_resize_and_refusals(sd, owner):
    j = training(owner)
    ws = shell(sd, j["id"], owner.tok).expect_open()
    try:
        ws.send_text(json.dumps({"type": "resize", "cols": 91, "rows": 33}))
        assert "33 91" in job_shell_run(ws, "stty size")
        # a flood of output comes through whole, at the relay's rate (1 MiB/s after a
        # 256 KiB burst): 3 MB take about 2.6 s
        t0 = time.monotonic()
        out = job_shell_run(ws, "head -c 3000000 /dev/zero | tr '\\0' x; echo", timeout=30 * SLOW)
        took = time.monotonic() - t0
        assert out.count("x") >= 3000000, len(out)
        assert took >= 2.2, f"3 MB in {took:.2f} s: faster than the rate"
        print(f"3 MB of shell output relayed in {took:.2f} s")
    finally:
        ws.close()
    # a client that upgrades a POST gets the same terminal
    s = socket.create_connection(("127.0.0.1", sd.port), timeout=10 * SLOW)
    try:
        s.sendall((f"POST /api/v1/jobs/{j['id']}/shell HTTP/1.1\r\nHost: 127.0.0.1:{sd.port}\r\n"
                   "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                   f"Authorization: Bearer {owner.tok}\r\nContent-Length: 0\r\n\r\n").encode())
        head = s.recv(4096)
        assert head.startswith(b"HTTP/1.1 101"), head
        assert b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in head, head  # RFC 6455's own example
    finally:
        s.close()
    # wrong scope, another user, no WebSocket, no job
    assert shell(sd, j["id"], token(owner, ["runtimes"])).status == 403
    _, stranger = new_user(sd, "sx")
    assert shell(sd, j["id"], token(stranger, ["jobs"])).status == 404
    assert_error(owner.get(f"/api/v1/jobs/{j['id']}/shell"), 426, "websocket_required")
    assert shell(sd, 999999, owner.tok).status == 404
    # one machine runs a job on one host: algo-1 is it, any other is refused, naming host
    ws = shell(sd, j["id"], owner.tok, host="algo-1").expect_open()
    try:
        assert "\nalgo-1\n" in job_shell_run(ws, "echo $SM_CURRENT_HOST")
    finally:
        ws.close()
    for bad in ("algo-2", "algo-0", "1", ""):
        ws = shell(sd, j["id"], owner.tok, host=bad)
        assert ws.status == 400, (bad, ws.raw_head)
        assert b'"field":"host"' in ws.buf.replace(b" ", b""), (bad, ws.buf)
        ws.sock.close()
    # a cookie session from another site's page
    _, ck = new_user(sd, "sc")
    jar = "; ".join(f"{k}={v}" for k, v in ck.cookies.items())
    bad = WebSocket(sd.port, f"/api/v1/jobs/{j['id']}/shell",
                    headers={"Cookie": jar, "Origin": "http://evil.example"})
    assert bad.status == 403, bad.raw_head
    # at most a few at once per job
    open_ = [shell(sd, j["id"], owner.tok).expect_open() for _ in range(4)]
    try:
        assert shell(sd, j["id"], owner.tok).status == 429
    finally:
        for w in open_:
            w.close()
    # revoking the token that opened a shell closes it (1008)
    t = token(owner, ["jobs"], whole=True)
    ws = shell(sd, j["id"], t["token"]).expect_open()
    job_shell_run(ws, "true")
    assert_status(owner.delete(f"/api/v1/me/tokens/{t['id']}"), 204)
    with pytest.raises(WebSocketClosed) as closed:
        while True:
            ws.recv(timeout=10 * SLOW)
    assert closed.value.code == 1008, closed.value
    assert_status(owner.post(f"/api/v1/jobs/{j['id']}/stop", json={}), 202)
    wait_job(owner, j["id"])
    wait_until(lambda: pools_settled(sd), 30 * SLOW, "its pool to end")
    assert shell(sd, j["id"], owner.tok).status == 409


def test_shell_closes_when_the_job_ends(sd, owner):
    j = training(owner)
    ws = shell(sd, j["id"], owner.tok).expect_open()
    job_shell_run(ws, "sleep 1000 & true")  # a child of the shell holds the terminal too
    assert_status(owner.post(f"/api/v1/jobs/{j['id']}/stop", json={}), 202)
    t0 = time.monotonic()
    with pytest.raises(WebSocketClosed):
        while True:
            ws.recv(timeout=20 * SLOW)
    assert time.monotonic() - t0 < 15 * SLOW
    wait_job(owner, j["id"])


def test_a_job_that_ends_while_its_shell_starts_takes_it_along(sd):
    """The agent kills what the user runs when the command ends; a shell still being
    set up then (not yet the user's) is refused by root, which checks the job again."""
    pw = f"{STRONG}-{SLOW_USER}"
    assert_status(sd.admin().post("/api/v1/users", json={"name": SLOW_USER, "password": pw}), 201)
    c = sd.client()
    c.login(SLOW_USER, pw)
    c.password = pw
    # kept warm: the late shell starts in the idle pool, and root ends it there
    j = wait_job(c, submit(c, ["/bin/sh", "-c", "exec sleep 2"], keep_alive_s=60)["id"],
                 statuses=("InProgress",), secondary="Training")
    ws = shell(sd, j["id"], token(c, ["jobs"]))
    assert ws.status == 409, ws.raw_head
    assert "the job ended while its shell started" in sd.log()
    j = wait_job(c, j["id"])
    assert j["warm_pool"]["status"] == "Available", j["warm_pool"]
    assert_status(c.delete(f"/api/v1/warm-pools/{j['warm_pool']['id']}"), 204)


def test_shell_after_a_restart(sd, owner):
    j = training(owner)
    wait_until(lambda: pools_settled(sd), 30 * SLOW, "the earlier tests' pools to end")
    before = shell(sd, j["id"], owner.tok).expect_open()
    job_shell_run(before, "true")
    assert sd.stop(15) == 0, sd.log_tail()
    # the stop closed the shell open then (going away), its close audited first
    with pytest.raises(WebSocketClosed) as closed:
        while True:
            before.recv(timeout=5 * SLOW)
    assert closed.value.code == 1001, closed.value
    sd.start(expect_admin_password=False)
    assert any(e["action"] == "job.shell.close" and "labd stops" in (e["detail"] or "")
               for e in sd.admin().get("/api/v1/audit?limit=50").json["entries"])
    owner.login(owner.name, owner.password)
    j = wait_job(owner, j["id"], statuses=("InProgress",), secondary="Training")
    ws = shell(sd, j["id"], owner.tok).expect_open()
    try:
        out = job_shell_run(ws, "ps -e -o args=")
        assert "sleep 300" in out, out
    finally:
        ws.close()
    assert_status(owner.post(f"/api/v1/jobs/{j['id']}/stop", json={}), 202)
    wait_job(owner, j["id"])
    wait_until(lambda: pools_settled(sd), 30 * SLOW, "its pool to end")
