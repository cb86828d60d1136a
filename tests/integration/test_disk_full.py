"""A full state disk: labd's state dir on a small loop-mounted ext4 image that the
test fills (as root, a filler file) while a runtime runs.  Changes are refused
whole with 503 state_disk_full (nothing half-done, no audit entry missing for a
change that was made), reads of existing sessions go on, the running runtime and
its kernel go on, the database stays whole (PRAGMA integrity_check), and once the
filler is gone the same labd takes changes again, its ledger included."""

import errno
import os
import signal
import sqlite3
import subprocess
import tempfile
import time

import pytest

from jobs_lib import JOBS_DEFAULTS, log_text, submit, wait_job
from labd_harness import (
    SLOW,
    STRONG,
    jupyter_execute,
    open_kernel_channel,
    runtime_daemon,
    sandbox_records,
    start_runtime,
    teardown_runtime_daemon,
    unique_name,
    wait_until,
)

STATE_DISK_MB = 256  # room for labd's files and one 64 MiB home image
HEARTBEAT_S = 5  # LEDGER_HEARTBEAT_S


def sh(*cmd):
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def full(request):
    """A started runtime daemon whose state_dir is a fresh ext4 file system of
    STATE_DISK_MB; unmounted and removed after the module."""
    img_dir = tempfile.mkdtemp(prefix="labd-it-diskfull-img-")
    img = os.path.join(img_dir, "state.img")
    d = runtime_daemon("diskfull", runtime={"home_size": "64M", "cpu_limit": "1h"},
                       sections={"jobs": JOBS_DEFAULTS})
    d.keep_dir = True  # never rmtree through the mount; removed below once unmounted
    with open(img, "wb") as fh:
        fh.truncate(STATE_DISK_MB << 20)
    sh("mkfs.ext4", "-q", "-F", img)
    # the state dir one level below the mount: the teardown's check for mounts
    # left under the state dir must not count the disk itself
    disk = os.path.join(d.dir, "disk")
    os.makedirs(disk)
    sh("mount", "-o", "loop", img, disk)
    os.chmod(disk, 0o755)  # labd-web must reach the state dir below it
    d.state_dir = d.server["state_dir"] = os.path.join(disk, "state")
    d.db_file = os.path.join(d.state_dir, "db", "labd.db")
    d.write_config()
    try:
        d.start()
        yield d
    finally:
        try:
            remove_filler(d)
            teardown_runtime_daemon(d)
        finally:
            # lazily: a home's loop device may still be held by the mount
            # namespace of another test's sandbox for a while
            if subprocess.run(["umount", disk], capture_output=True, timeout=60).returncode:
                subprocess.run(["umount", "-l", disk], capture_output=True, timeout=60)
            if not os.path.ismount(disk):
                subprocess.run(["rm", "-rf", d.dir, img_dir], capture_output=True, timeout=60)


def filler_path(d):
    return os.path.join(d.state_dir, "filler")


def fill(d):
    """Writes zeros (as root, so past ext4's reserved blocks too) until ENOSPC."""
    fd = os.open(filler_path(d), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (1 << 20, 4096, 512):
            chunk = b"\0" * size
            while True:
                try:
                    os.write(fd, chunk)
                except OSError as e:
                    assert e.errno == errno.ENOSPC, e
                    break
        os.fsync(fd)
    finally:
        os.close(fd)
    vfs = os.statvfs(d.state_dir)
    assert vfs.f_bavail * vfs.f_frsize < (1 << 20), "the state disk is not full"


def remove_filler(d):
    try:
        os.unlink(filler_path(d))
    except FileNotFoundError:
        pass


def integrity(d):
    db = sqlite3.connect(f"file:{d.db_file}?mode=ro", uri=True, timeout=10)
    try:
        return db.execute("PRAGMA integrity_check").fetchall()
    finally:
        db.close()


def assert_disk_full(r, what):
    assert r.status == 503, f"{what} on a full state disk: {r!r}"
    err = r.json["error"]
    assert err["code"] == "state_disk_full", f"{what}: {r!r}"
    assert "disk is full" in err["message"], f"{what}: {r!r}"
    assert r.header("Retry-After"), f"{what}: no Retry-After: {r!r}"


def audit_targets(admin, action):
    r = admin.get(f"/api/v1/audit?action={action}&limit=500")
    assert r.status == 200, r
    return [e["target"] for e in r.json["entries"]]


def usage_entry(c):
    now = int(time.time())
    r = c.get(f"/api/v1/me/usage?from={now - 86400}&to={now + 3600}")
    assert r.status == 200, r
    es = r.json["entries"]
    assert len(es) == 1, es
    return es[0]


def new_user(d, admin, prefix):
    name = unique_name(prefix)
    pw = f"{STRONG}-{name}"
    assert admin.post("/api/v1/users", json={"name": name, "password": pw}).status == 201
    c = d.client()
    c.login(name, pw)
    return name, pw, c


def sandbox_pid(d, name):
    recs = [kv for _, kv in sandbox_records(d.state_dir) if kv.get("user") == name]
    assert recs, f"no sandbox record of {name}"
    return int(recs[-1]["pid"])


def test_full_state_disk_refuses_changes_keeps_runtimes_and_resumes(full):
    d = full
    pid = d.pid
    admin = d.admin()
    name, pw, c = new_user(d, admin, "dfu")
    _, running = start_runtime(c)
    # a second runtime, to end on its own while the disk is full
    gone, _, gc = new_user(d, admin, "dfg")
    start_runtime(gc)
    kid, ws = open_kernel_channel(d, c)
    try:
        assert jupyter_execute(ws, "before = 6*7; before")[0] == "42"

        fill(d)

        # changes are refused whole, with a reason the caller can act on
        refused = unique_name("dfx")
        assert_disk_full(admin.post("/api/v1/users",
                                    json={"name": refused, "password": f"{STRONG}-{refused}"}),
                         "creating a user")
        assert_disk_full(d.client().post("/api/v1/login",
                                         json={"username": name, "password": pw}, csrf=None),
                         "a new login")
        assert_disk_full(c.post("/api/v1/me/tokens", json={"name": "t1"}), "creating a token")
        assert_disk_full(c.delete("/api/v1/me/runtime"), "stopping the runtime")

        # existing sessions still read
        assert c.get("/api/v1/me").status == 200
        r = admin.get("/api/v1/users")
        assert r.status == 200, r
        assert refused not in [u["name"] for u in r.json["users"]]
        assert refused not in audit_targets(admin, "user.create")

        # a runtime that ends meanwhile (its sandbox killed): its end may not be written
        os.kill(sandbox_pid(d, gone), signal.SIGKILL)

        # the runtime, its Jupyter and its kernel go on; heartbeats meet the full disk
        time.sleep((HEARTBEAT_S + 1) * SLOW)
        r = c.get("/api/v1/me/runtime")
        assert r.status == 200 and r.json["runtime"]["state"] == "running", r
        assert r.json["runtime"]["id"] == running["id"], r
        assert c.get(f"/user/{name}/api/status").status == 200
        assert jupyter_execute(ws, "before + 1")[0] == "43"
        assert integrity(d) == [("ok",)]
        assert "state disk full" in d.log(), d.log_tail()

        # space returns: the same labd takes changes again, no restart
        remove_filler(d)
        t_back = int(time.time())
        again = unique_name("dfa")
        r = admin.post("/api/v1/users", json={"name": again, "password": f"{STRONG}-{again}"})
        assert r.status == 201, r
        assert again in audit_targets(admin, "user.create")
        assert refused not in audit_targets(admin, "user.create")
        d.client().login(again, f"{STRONG}-{again}")
        r = c.post("/api/v1/me/tokens", json={"name": "t2"})
        assert r.status == 201, r
        assert d.pid == pid and d.proc.poll() is None
        assert len(d.web_children()) == 1
        # the ledger's open entry is billed on past the full spell
        wait_until(lambda: usage_entry(c)["last_heartbeat_s"] >= t_back,
                   (HEARTBEAT_S + 10) * SLOW, lambda: f"a heartbeat after {t_back}: "
                   f"{usage_entry(c)}")
        assert jupyter_execute(ws, "before + 2")[0] == "44"
        # the runtime that ended during the full spell is ended and audited soon after
        # (a total reconciliation once there is room, not the 5-minute safety net)
        wait_until(lambda: gc.get("/api/v1/me/runtime").json["runtime"]["state"]
                   in ("stopped", "failed"), 20 * SLOW,
                   lambda: f"{gone}'s runtime to end: {gc.get('/api/v1/me/runtime')!r}")
        ends = [e for e in admin.get("/api/v1/audit?action=runtime.*&limit=500")
                .json["entries"] if e["target"] == gone]
        assert [e["action"] for e in ends if e["action"] in ("runtime.end", "runtime.failed")], \
            ends
    finally:
        ws.close()
        remove_filler(d)
    r = c.delete("/api/v1/me/runtime")
    assert r.status == 202, r
    assert integrity(d) == [("ok",)]


def test_job_that_ends_on_a_full_state_disk_says_its_log_is_incomplete(full):
    """The pool's keeper drops what it cannot write to the job's log, the job runs
    to its end, the supervisor says why the log is short and does not stop; once
    there is room the job's end is recorded without a restart."""
    d = full
    pid, web = d.pid, d.web_children()
    name, _, c = new_user(d, d.admin(), "dfj")
    # lines of 1 KiB: the log needs new blocks all along, not the room left in its last one
    j = submit(c, ["/bin/sh", "-c", "i=0; while [ $i -lt 100 ]; do printf 'line=%d %01000d\\n' "
                                    "$i 0; i=$((i+1)); sleep 0.1; done"])
    wait_until(lambda: "line=" in log_text(c, j["id"]), 60 * SLOW, "the job's first lines")
    try:
        fill(d)
        note = "the state disk is full: its log may be incomplete"
        wait_until(lambda: f"job {j['id']} in pool" in d.log() and note in d.log(), 60 * SLOW,
                   lambda: "the job's end, with the note, in labd's log:\n" + "\n".join(
                       ln for ln in d.log().splitlines() if ln.startswith("labd:")))
        assert d.pid == pid and d.proc.poll() is None and d.web_children() == web
        assert integrity(d) == [("ok",)]
    finally:
        remove_filler(d)
    ended = wait_job(c, j["id"], timeout=60 * SLOW)
    log = log_text(c, j["id"])
    assert "line=0 " in log
    assert "line=99 " not in log, f"no output was dropped: the disk was not full ({ended})"
    # its own end, held while the disk was full, not "labd lost the job's end"
    assert ended["status"] == "Completed", ended
    last = ended["transitions"][-1]["message"] or ""
    assert "the state disk was full when it ended: its log may be incomplete" in last, ended
    assert integrity(d) == [("ok",)]
