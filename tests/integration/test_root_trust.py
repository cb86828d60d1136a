"""Root trusts nothing from the web process (docs/security.md section 4).

The state dir is root's; the web process's database lives in db/; every
directory the supervisor works in is made and verified at boot, and a planted
one stops the boot; a state file naming a path outside the state dir is
refused; in each case a canary outside the state dir survives."""

import json
import os
import pwd
import signal
import socket
import stat
import subprocess
import threading
import time

import pytest

from labd_harness import (
    SLOW,
    STRONG,
    Daemon,
    labd_binary,
    runtime_daemon,
    start_runtime,
    stop_runtime,
    teardown_daemon,
    unique_name,
    wait_until,
    web_process,
)


def labd_uid():
    return pwd.getpwnam("labd").pw_uid


def plant_canary(d):
    """A directory with a file, outside the state dir."""
    canary = os.path.join(d.dir, "canary")
    os.makedirs(canary, exist_ok=True)
    with open(os.path.join(canary, "keep"), "w") as fh:
        fh.write("precious\n")
    return canary


def assert_canary(canary):
    with open(os.path.join(canary, "keep")) as fh:
        assert fh.read() == "precious\n", "the canary outside the state dir was changed"


def boot_expecting_refusal(d, timeout=10):
    """Runs labd; it must exit non-zero by itself. Returns its output."""
    p = subprocess.run([labd_binary(), "--config", d.config_path], capture_output=True,
                       text=True, timeout=timeout * SLOW, cwd=d.dir)
    assert p.returncode != 0, "labd started on a planted state dir:\n" + p.stdout + p.stderr
    return p.stdout + p.stderr


def fresh_state(d):
    os.makedirs(d.state_dir, mode=0o700)


def plant_symlink(d, name, target):
    os.symlink(target, os.path.join(d.state_dir, name))


def plant_labd_dir(d, name, target):
    path = os.path.join(d.state_dir, name)
    os.mkdir(path, 0o700)
    os.chown(path, labd_uid(), -1)


@pytest.mark.parametrize("name", ["sandboxes", "homes", "runtimes", "boxes", "archive"])
@pytest.mark.parametrize("how", ["symlink", "labd_owned"])
def test_planted_state_subdir_stops_the_boot(name, how):
    d = Daemon(f"plant-{name}-{how}")
    try:
        canary = plant_canary(d)
        fresh_state(d)
        (plant_symlink if how == "symlink" else plant_labd_dir)(d, name, canary)
        out = boot_expecting_refusal(d)
        assert f"{name} is " in out and "refusing to start" in out, out[-2000:]
        assert_canary(canary)
        assert sorted(os.listdir(canary)) == ["keep"]
    finally:
        d.cleanup()


def test_state_dir_is_roots_and_db_is_labds():
    d = Daemon("perm")
    try:
        d.start()
        st = os.lstat(d.state_dir)
        assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o710, oct(st.st_mode)
        db = os.lstat(os.path.join(d.state_dir, "db"))
        assert stat.S_ISDIR(db.st_mode) and db.st_uid == labd_uid(), db
        assert stat.S_IMODE(db.st_mode) == 0o700, oct(db.st_mode)
        assert os.path.exists(os.path.join(d.state_dir, "db", "labd.db"))
        assert not os.path.exists(os.path.join(d.state_dir, "labd.db"))
        for name in ("sandboxes", "homes", "runtimes", "boxes", "archive"):
            sub = os.lstat(os.path.join(d.state_dir, name))
            assert stat.S_ISDIR(sub.st_mode) and sub.st_uid == 0, (name, sub)
            assert stat.S_IMODE(sub.st_mode) & 0o007 == 0, (name, oct(sub.st_mode))
    finally:
        teardown_daemon(d)


def test_old_layout_database_moves_once_without_loss():
    d = Daemon("migrate", keep_dir=True)
    try:
        d.start()
        admin = d.admin()
        name = unique_name("mig")
        pw = f"{STRONG}-{name}"
        assert admin.post("/api/v1/users", json={"name": name, "password": pw}).status == 201
        assert d.stop() == 0
        # the older layout: the database files directly in the state dir
        for f in os.listdir(os.path.join(d.state_dir, "db")):
            os.rename(os.path.join(d.state_dir, "db", f), os.path.join(d.state_dir, f))
        os.rmdir(os.path.join(d.state_dir, "db"))
        for run in range(2):  # the second boot finds nothing to move
            d.start(expect_admin_password=False)
            assert not os.path.exists(os.path.join(d.state_dir, "labd.db"))
            assert os.path.exists(os.path.join(d.state_dir, "db", "labd.db"))
            c = d.client()
            c.login(name, pw)
            assert c.get("/api/v1/me").json["name"] == name
            assert ("moved the database" in d.log()) == (run == 0), d.log_tail()
            assert d.stop() == 0
    finally:
        d.keep_dir = False
        teardown_daemon(d)


def test_forged_state_file_outside_the_state_dir_is_refused():
    d = Daemon("forged")
    try:
        canary = plant_canary(d)
        fresh_state(d)
        boxes = os.path.join(d.state_dir, "sandboxes")
        os.mkdir(boxes, 0o700)
        forged = os.path.join(boxes, "forged.state")
        with open(forged, "w") as fh:
            fh.write("version=1\nid=forged\nuser=ghost\npid=0\nstart_time=0\n"
                     f"home_image=\nrun_dir={canary}\ncgroup_parent=labd-forged\n")
        old = time.time() - 3600  # a start that never got its pid: due for gc
        os.utime(forged, (old, old))
        d.start()
        wait_until(lambda: not os.path.exists(forged), 10 * SLOW, "the forged state file dropped")
        log = d.log()
        assert "run_dir " + canary + " is outside" in log, d.log_tail()
        assert_canary(canary)
    finally:
        teardown_daemon(d)


# --------------------------------------------------------------------------- uids and GPUs
#
# What a compromised web process could ask: raw sandbox_start messages, sent on
# SIGUSR1 through the LABD_FAULT_BAD_MESSAGE hook (one message per line).

def start_message(msg_id, user, user_id, gpus=()):
    kind = "gpu" if gpus else "cpu"
    return json.dumps({
        "v": 2, "id": msg_id, "type": "sandbox_start", "user": user, "user_id": user_id,
        "runtime_id": 900000 + msg_id, "kind": kind, "token": "t" * 43,
        "deadline": int(time.time()) + 3600, "gpus": list(gpus)})


def send_raw(d, messages, expect):
    """Has the web process send messages; waits for each expected log line."""
    web = web_process(d)
    os.kill(web, signal.SIGUSR1)
    for line in expect:
        wait_until(lambda: line in d.log(), 15 * SLOW, f"log line {line!r}")


def no_trace_of(d, names):
    for n in names:
        assert not os.path.exists(os.path.join(d.state_dir, "boxes", f"{n}.json")), n
        assert not os.path.exists(os.path.join(d.state_dir, "runtimes", n)), n
        assert not any(f.startswith(n) for f in os.listdir(os.path.join(d.state_dir, "homes")))


UID_CASES = [
    # (user, user_id, why in the log)
    ("ghosta", 600, "user id 600 gives uid 65600, outside uid_base 65000 + uid_count 600"),
    ("ghostb", 534, "uid 65534 belongs to an account in /etc/passwd"),
    ("ghostc", 105, "uid 65105 lies in a range of"),
    ("ghostd", 9, "user ghostd has uid 65007, not 65009"),
    ("ghoste", 7, "uid 65007 belongs to ghostd"),
    ("ghostf", 8, "uid 65008 belongs to a deleted user"),
]


def test_uids_outside_the_supervisors_rules_are_refused(tmp_path):
    subuid = tmp_path / "subuid"
    subuid.write_text("someone:65100:10\n")
    os.chmod(tmp_path, 0o755)
    msgs = "\n".join(start_message(i + 1, u, uid) for i, (u, uid, _) in enumerate(UID_CASES))
    d = runtime_daemon("uids", runtime={"uid_base": "65000", "uid_count": "600",
                                        "subuid_file": str(subuid)},
                       env={"LABD_FAULT_BAD_MESSAGE": msgs})
    try:
        os.makedirs(d.state_dir, mode=0o700)
        # what the supervisor recorded before: ghostd holds 65007, 65008 was retired
        with open(os.path.join(d.state_dir, "uids.json"), "w") as fh:
            json.dump({"names": {"ghostd": 65007}, "retired": [65008]}, fh)
        d.start()
        send_raw(d, msgs, [f"refused sandbox_start for {u}: {why}" for u, _, why in UID_CASES])
        no_trace_of(d, [u for u, _, _ in UID_CASES])
        log = d.log()
        assert "attack?" not in log and "restarting the web process" not in log, d.log_tail()
    finally:
        teardown_daemon(d)


def make_gpu_nodes(base):
    """Stand-in nvidia nodes (as the escape suite makes them): nothing answers."""
    os.makedirs(base, exist_ok=True)
    for name, major, minor in (("nvidia0", 195, 0), ("nvidia1", 195, 1),
                               ("nvidiactl", 195, 255), ("nvidia-uvm", 235, 0)):
        os.mknod(os.path.join(base, name), 0o666 | stat.S_IFCHR, os.makedev(major, minor))


def pool_start_message(msg_id, user, user_id, gpus):
    return json.dumps({
        "v": 2, "id": msg_id, "type": "pool_start", "user": user, "user_id": user_id,
        "pool_id": 900000 + msg_id, "deadline": int(time.time()) + 3600, "gpus": list(gpus)})


def test_busy_gpu_is_never_given_to_a_second_sandbox():
    """A runtime and a pool asking for a held GPU are refused with gpu_busy; that race
    (a GPU freed and claimed in the same instant) is expected, so it is logged as
    info, never as an error line."""
    d = runtime_daemon("gpu-busy", gpu={"devices": "0"})
    nodes = os.path.join(d.dir, "gpudev")
    make_gpu_nodes(nodes)
    d.sections["gpu"]["dev_prefix"] = nodes
    d.write_config()
    d.env["LABD_FAULT_BAD_MESSAGE"] = "\n".join([
        start_message(77, "ghostg", 500, gpus=[0]),
        pool_start_message(78, "ghosth", 501, gpus=[0])])
    try:
        d.start()
        admin = d.admin()
        name = unique_name("gpu")
        pw = f"{STRONG}-{name}"
        assert admin.post("/api/v1/users", json={"name": name, "password": pw}).status == 201
        c = d.client()
        c.login(name, pw)
        _, running = start_runtime(c, "gpu")
        assert running["gpus"] == [0], running
        send_raw(d, None, ["labd: info: sandbox_start for ghostg waits: gpu is held by another sandbox",
                           "labd: info: pool_start for ghosth waits: gpu is held by another sandbox"])
        no_trace_of(d, ["ghostg"])
        errors = [ln for ln in d.log().splitlines() if ": error:" in ln]
        assert not errors, "\n".join(errors)
        stop_runtime(c)
    finally:
        teardown_daemon(d)


# --------------------------------------------------------------------------- runtime socket peer

class FakeJupyter:
    """A root-owned Unix socket that answers every request with 200 "forged"."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        os.chmod(path, 0o666)
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.served = 0
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: 8\r\n\r\n\"forged\"")
                    self.served += 1
                except OSError:
                    pass

    def close(self):
        self.stop = True
        self.thread.join(5)
        self.sock.close()


@pytest.mark.parametrize("how", ["symlink", "foreign"])
def test_runtime_socket_of_another_uid_is_refused(runtime_daemon_factory, how):
    d = runtime_daemon_factory(f"peer-{how}")
    admin = d.admin()
    name = unique_name("peer")
    pw = f"{STRONG}-{name}"
    assert admin.post("/api/v1/users", json={"name": name, "password": pw}).status == 201
    c = d.client()
    c.login(name, pw)
    start_runtime(c)
    sock = os.path.join(d.state_dir, "runtimes", name, "run", "jupyter.sock")
    real = sock + ".real"
    # made beside the real one: the run dir is its own file system (a tmpfs),
    # and a rename cannot cross into it
    fake = FakeJupyter(os.path.join(os.path.dirname(sock), f"fake-{how}.sock"))
    try:
        # no proxied request before the swap: nothing is pooled yet
        os.rename(sock, real)
        if how == "symlink":
            os.symlink(fake.path, sock)
        else:
            os.rename(fake.path, sock)
        r = c.get(f"/user/{name}/api/status")
        assert r.status == 502, r
        assert fake.served == 0 or "forged" not in r.text
        wait_until(lambda: "is not the runtime's uid" in d.log(), 5 * SLOW, "the refusal logged")
        os.unlink(sock)
        os.rename(real, sock)
        assert c.get(f"/user/{name}/api/status").status == 200
    finally:
        fake.close()
    stop_runtime(c)
