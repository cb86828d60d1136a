"""Privilege separation: the web process, its restart, and shutdown."""

import os
import pwd
import signal

import pytest

from labd_harness import SLOW, assert_status, pid_alive, proc_status, wait_until


def labd_ids():
    pw = pwd.getpwnam("labd")
    return pw.pw_uid, pw.pw_gid


def web_pid(d, timeout=10):
    """The supervisor's (single) child, the web process."""
    kids = wait_until(lambda: [k for k in d.web_children() if pid_alive(k)], timeout * SLOW,
                      lambda: "a child of the supervisor\n" + d.log_tail())
    assert len(kids) == 1, f"supervisor has {len(kids)} children: {kids}"
    return kids[0]


def assert_unprivileged(pid):
    uid, gid = labd_ids()
    tasks = sorted(os.listdir(f"/proc/{pid}/task"))
    assert tasks
    for t in tasks:
        st = proc_status(pid, t)
        where = f"web pid {pid} task {t}"
        assert [int(x) for x in st["Uid"].split()] == [uid] * 4, f"{where}: Uid {st['Uid']}"
        assert [int(x) for x in st["Gid"].split()] == [gid] * 4, f"{where}: Gid {st['Gid']}"
        groups = {int(x) for x in st.get("Groups", "").split()}
        assert groups <= {gid}, f"{where}: supplementary groups {groups}"
        for cap in ("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb"):
            if cap in st:
                assert int(st[cap], 16) == 0, f"{where}: {cap} {st[cap]}"
        assert st.get("NoNewPrivs") == "1", f"{where}: NoNewPrivs {st.get('NoNewPrivs')}"


def test_supervisor_is_root_web_is_not(daemon):
    sup = proc_status(daemon.pid)
    assert sup["Uid"].split()[0] == "0", f"supervisor Uid {sup['Uid']}"
    pid = web_pid(daemon)
    assert_unprivileged(pid)


@pytest.fixture(scope="module")
def procd(daemon_factory):
    return daemon_factory("process")


def test_web_restart_after_kill(procd):
    c = procd.client()
    c.login("admin", procd.admin_password)
    tok = c.post("/api/v1/me/tokens", json={"name": "survivor"})
    assert_status(tok, 201)
    old = web_pid(procd)
    os.kill(old, signal.SIGKILL)

    def new_web_answering():
        kids = [k for k in procd.web_children() if pid_alive(k) and k != old]
        if not kids:
            return None
        try:
            r = procd.client(source=None).get("/api/v1/health")
        except OSError:
            return None
        return kids[0] if r.status == 200 else None

    new = wait_until(new_web_answering, 10 * SLOW,
                     lambda: "a new web process answering health after kill -9\n"
                     + procd.log_tail())
    assert procd.proc.poll() is None, "supervisor died with its child\n" + procd.log_tail()
    h = procd.client(source=None).get("/api/v1/health")
    assert_status(h, 200)
    assert h.json["supervisor"] == "ok", h.json
    assert_unprivileged(new)
    # sessions and tokens live in SQLite: still valid
    me = c.get("/api/v1/me")
    assert_status(me, 200)
    assert me.json["name"] == "admin"
    b = procd.client()
    b.bearer = tok.json["token"]
    assert_status(b.get("/api/v1/me"), 200)
    assert_status(c.post("/api/v1/me/tokens", json={"name": "after-restart"}), 201)


def test_sigterm_stops_both(procd):
    web = web_pid(procd)
    procd.proc.send_signal(signal.SIGTERM)
    try:
        rc = procd.proc.wait(10 * SLOW)
    except Exception:
        procd.kill()
        raise AssertionError("supervisor did not exit within 10 s of SIGTERM\n" + procd.log_tail())
    assert rc == 0, f"supervisor exit status {rc}\n" + procd.log_tail()
    wait_until(lambda: not pid_alive(web), 10 * SLOW,
               f"web process {web} to exit after the supervisor did")
    with pytest.raises(OSError):
        procd.client(source=None).get("/api/v1/health")
