"""`labd node` (docs/slurm.md "Nodes"): the real node supervisor and its link process
against a head stand-in (build/tests/test_link --head: proto/link.c's server side, the
same code the head's backend uses).

The node dials and says hello; the supervisor's channel answers through the link as it
answers labd-web; a killed link is restarted and dials again; the link runs unprivileged;
a node with another key is refused and says so; two nodes run side by side with their
own state dirs and cgroup parents; the data port splices a good data line to the
runtime's socket and refuses a replayed, stale, forged or misdirected one, and a socket
reached through a planted link; it serves a job log from an offset and never a planted
link in its place. The data lines here are made in Python, so the format
is checked against a second implementation of docs/slurm.md's definition."""

import hashlib
import hmac
import json
import os
import pwd
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from labd_harness import (SLOW, build_dir, free_port, labd_binary, pid_alive, proc_children,
                          proc_comm, proc_status, wait_until)

# run as a sandbox's uid: an interpreter any uid may execute (not one under /root)
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
SANDBOX_UID = 3999001  # stands for a sandbox's host uid: neither root nor labd
OTHER_UID = 3999002


class Head:
    """The head stand-in: one link at a time; lines in, lines out."""

    def __init__(self, secret_file):
        self.proc = subprocess.Popen(
            [os.path.join(build_dir(), "tests", "test_link"), "--head", secret_file],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True)
        self.buf = b""
        self.port = self.read(10)["port"]

    def read(self, timeout):
        deadline = time.monotonic() + timeout * SLOW
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            assert left > 0, f"head stand-in: nothing within {timeout} s (have {self.buf!r})"
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if r:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                assert chunk, "head stand-in exited"
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def send(self, msg):
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, msg, timeout=10):
        """Sends a request and returns its reply (events before it are skipped)."""
        self.send(msg)
        while True:
            m = self.read(timeout)
            if m.get("type") == "reply" and m.get("id") == msg["id"]:
                return m

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


class Node:
    """One `labd node` with its own dir, state dir, secret and data port."""

    def __init__(self, name, head_port, secret, gpus=2):
        self.name = name
        self.dir = tempfile.mkdtemp(prefix=f"labd-it-node-{name}-")
        os.chmod(self.dir, 0o755)
        self.state_dir = os.path.join(self.dir, "state")
        self.secret_file = os.path.join(self.dir, "secret")
        with open(self.secret_file, "wb") as fh:
            fh.write(secret)
        os.chmod(self.secret_file, 0o600)
        self.data_port = free_port()
        self.config = os.path.join(self.dir, "node.ini")
        with open(self.config, "w") as fh:
            fh.write(f"[server]\nstate_dir = {self.state_dir}\n\n"
                     f"[gpu]\nstand_in = {gpus}\n\n"
                     "[runtime]\nkeep_on_shutdown = false\n\n"
                     f"[node]\nname = {name}\nhead = 127.0.0.1:{head_port}\n"
                     f"secret_file = {self.secret_file}\n"
                     f"data_listen = 127.0.0.1:{self.data_port}\n")
        self.log_path = os.path.join(self.dir, "node.log")
        self.proc = None

    def start(self, command_first=False):
        """command_first: `labd node --config FILE` (else `labd --config FILE node`)."""
        argv = ([labd_binary(), "node", "--config", self.config] if command_first
                else [labd_binary(), "--config", self.config, "node"])
        with open(self.log_path, "wb") as logf:
            self.proc = subprocess.Popen(argv,
                                         stdin=subprocess.DEVNULL, stdout=logf,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def log(self):
        with open(self.log_path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")

    def link_pid(self):
        kids = [k for k in proc_children(self.proc.pid)
                if pid_alive(k) and proc_comm(k) == "labd-link"]
        return kids[0] if len(kids) == 1 else None

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15 * SLOW)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


SECRET = os.urandom(48)


@pytest.fixture(scope="module")
def linked():
    """A head stand-in and one node linked to it: the node's hello read, the channel's
    own hello answered."""
    d = tempfile.mkdtemp(prefix="labd-it-head-")
    secret_file = os.path.join(d, "secret")
    with open(secret_file, "wb") as fh:
        fh.write(SECRET)
    os.chmod(secret_file, 0o600)
    head = Head(secret_file)
    node = Node("n1", head.port, SECRET).start()
    try:
        hello = head.read(20)
        # the supervisor's own channel, unchanged: hello first, then requests
        r = head.request({"v": 2, "type": "hello", "id": 1, "version": hello["version"]})
        assert r["ok"] is True, r
        yield head, node, hello
    finally:
        node.cleanup()
        head.stop()
        shutil.rmtree(d, ignore_errors=True)


def test_hello_and_ping_through_the_link(linked):
    head, node, hello = linked
    assert hello["type"] == "node_hello"
    assert hello["name"] == "n1"
    assert hello["data"] == f"127.0.0.1:{node.data_port}"
    assert hello["gpus"] == [0, 1]
    assert hello["cpus"] >= 1 and hello["memory_bytes"] > 0
    assert head.request({"v": 2, "type": "ping", "id": 2})["ok"] is True
    r = head.request({"v": 2, "type": "sandbox_list", "id": 3})
    assert r["ok"] is True and r["sandboxes"] == [], r


def test_link_runs_unprivileged(linked):
    _, node, _ = linked
    pid = wait_until(node.link_pid, 10 * SLOW, "the link process")
    labd = pwd.getpwnam("labd")
    st = proc_status(pid)
    assert [int(x) for x in st["Uid"].split()] == [labd.pw_uid] * 4
    assert int(st["CapEff"], 16) == 0 and int(st["CapBnd"], 16) == 0
    assert st["NoNewPrivs"] == "1"
    assert os.readlink(f"/proc/{pid}/cwd") == node.state_dir


def test_dead_link_is_restarted(linked):
    head, node, _ = linked
    pid = wait_until(node.link_pid, 10 * SLOW, "the link process")
    os.kill(pid, signal.SIGKILL)
    closed = head.read(10)
    assert "closed" in closed, closed
    hello = head.read(20)  # a fresh link dials again
    assert hello["name"] == "n1"
    new = wait_until(node.link_pid, 10 * SLOW, "the new link process")
    assert new != pid
    assert "restarting the link process" in node.log()
    # the new link carries a fresh channel: hello is accepted again
    r = head.request({"v": 2, "type": "hello", "id": 1, "version": hello["version"]})
    assert r["ok"] is True
    assert head.request({"v": 2, "type": "ping", "id": 4})["ok"] is True


def test_wrong_key_is_refused_and_two_nodes_share_a_machine(linked):
    _, n1, _ = linked
    d = tempfile.mkdtemp(prefix="labd-it-head2-")
    secret_file = os.path.join(d, "secret")
    with open(secret_file, "wb") as fh:
        fh.write(os.urandom(48))
    os.chmod(secret_file, 0o600)
    head2 = Head(secret_file)
    n2 = Node("n2", head2.port, SECRET).start(command_first=True)  # not head2's key
    try:
        assert head2.read(20) == {"refused": 13}  # EACCES: the handshake failed
        wait_until(lambda: "the head refused the key" in n2.log(), 10 * SLOW,
                   lambda: "the node's complaint\n" + n2.log())
        # n2 runs beside n1: its own state dir (its own lock), its own cgroup parent
        assert n2.proc.poll() is None and n1.proc.poll() is None
        assert os.path.exists(os.path.join(n2.state_dir, "labd.lock"))
        assert "n2" in n2.log() and n1.link_pid()
    finally:
        n2.cleanup()
        head2.stop()
        shutil.rmtree(d, ignore_errors=True)


# ---- the data port ----

def data_line(path, unix_ms=None, key=SECRET, nonce=None):
    unix_ms = int(time.time() * 1000) if unix_ms is None else unix_ms
    nonce = nonce or os.urandom(16).hex()
    mac = hmac.new(key, f"{path} {unix_ms} {nonce}".encode(), hashlib.sha256).hexdigest()
    return f"LABD-DATA1 {path} {unix_ms} {nonce} {mac}\n".encode()


ECHO_SERVER = r"""
import os, socket, sys
os.umask(0)
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(16)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    data = b""
    while not data.endswith(b"\n"):
        chunk = c.recv(4096)
        if not chunk:
            break
        data += chunk
    c.sendall(b"echo:" + data)
    c.close()
"""


def serve_socket(run_dir, uid):
    """A stand-in Jupyter: an echo server on run_dir/jupyter.sock, as uid."""
    def drop():
        os.chdir(run_dir)  # as root: the state dir above is closed to the uid
        os.setgid(uid)
        os.setuid(uid)
    p = subprocess.Popen([PYTHON, "-c", ECHO_SERVER, "jupyter.sock"],
                         stdout=subprocess.PIPE, preexec_fn=drop)
    assert p.stdout.readline() == b"ready\n"
    return p


def make_run_dir(node, user, uid):
    runtime = os.path.join(node.state_dir, "runtimes", user)
    os.makedirs(os.path.join(runtime, "run"), exist_ok=True)
    os.chmod(runtime, 0o711)
    run = os.path.join(runtime, "run")
    os.chown(run, uid, uid)
    os.chmod(run, 0o711)
    return run


def exchange(node, payload):
    """Sends payload on a fresh data-port connection; what comes back before the close
    (a refusal closes with the payload's rest unread: a reset, read as nothing)."""
    with socket.create_connection(("127.0.0.1", node.data_port), timeout=10 * SLOW) as s:
        got = b""
        try:
            s.sendall(payload)
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    return got
                got += chunk
        except ConnectionResetError:
            return got


@pytest.fixture(scope="module")
def runtime_socket(linked):
    _, node, _ = linked
    run = make_run_dir(node, "alice", SANDBOX_UID)
    p = serve_socket(run, SANDBOX_UID)
    yield node
    p.kill()
    p.wait()


def test_data_port_splices_a_good_line(runtime_socket):
    node = runtime_socket
    path = "runtimes/alice/run/jupyter.sock"
    assert exchange(node, data_line(path) + b"GET / HTTP/1.1\n") == b"echo:GET / HTTP/1.1\n"


def test_data_port_refuses_bad_lines(runtime_socket):
    node = runtime_socket
    path = "runtimes/alice/run/jupyter.sock"
    line = data_line(path)
    assert exchange(node, line + b"first\n") == b"echo:first\n"
    assert exchange(node, line + b"again\n") == b""  # replayed
    now = int(time.time() * 1000)
    assert exchange(node, data_line(path, unix_ms=now - 40000) + b"x\n") == b""  # stale
    assert exchange(node, data_line(path, key=os.urandom(48)) + b"x\n") == b""  # forged
    assert exchange(node, b"GET / HTTP/1.1\r\n\r\n") == b""  # no line at all
    for other in ("db/labd.db", "runtimes/alice/../alice/run/jupyter.sock",
                  "runtimes/bob/run/jupyter.sock"):
        assert exchange(node, data_line(other) + b"x\n") == b"", other
    wait_until(lambda: "data port: refused a connection" in node.log(), 5 * SLOW,
               "the refusal in the log")
    # once a minute: many refusals, one line
    assert node.log().count("data port: refused a connection") == 1
    assert exchange(node, data_line(path) + b"still\n") == b"echo:still\n"


def test_data_port_refuses_a_planted_link(runtime_socket):
    """bob's run dir holds a link to alice's socket: the data port never follows it."""
    node = runtime_socket
    run = make_run_dir(node, "bob", OTHER_UID)
    target = os.path.join(node.state_dir, "runtimes", "alice", "run", "jupyter.sock")
    os.symlink(target, os.path.join(run, "jupyter.sock"))
    assert exchange(node, data_line("runtimes/bob/run/jupyter.sock") + b"x\n") == b""


def plant_job_log(node, job_id, data):
    """A job log as the node's supervisor writes it (joblog.c): root:labd 0640 in its
    root:labd 0750 joblogs/; the data port reads it as labd."""
    joblogs = os.path.join(node.state_dir, "joblogs")
    st = os.stat(joblogs)
    assert (st.st_uid, st.st_mode & 0o777) == (0, 0o750)
    path = os.path.join(joblogs, f"{job_id}.log")
    with open(path, "wb") as fh:
        fh.write(data)
    os.chown(path, 0, st.st_gid)
    os.chmod(path, 0o640)
    return path


def test_data_port_serves_a_job_log_from_an_offset(linked):
    """The head's pull (docs/slurm.md "Job logs"): the bytes from the offset to the end,
    then the close; nothing for a missing log or an offset at or past its end."""
    _, node, _ = linked
    text = b"epoch 1 loss 0.9\nepoch 2 loss 0.5\nran\n"
    plant_job_log(node, 41, text)
    assert exchange(node, data_line("joblogs/41.log@0")) == text
    assert exchange(node, data_line("joblogs/41.log@17")) == text[17:]
    assert exchange(node, data_line(f"joblogs/41.log@{len(text)}")) == b""
    assert exchange(node, data_line(f"joblogs/41.log@{len(text) + 100}")) == b""
    assert exchange(node, data_line("joblogs/42.log@0")) == b""  # no such log
    for bad in ("joblogs/41.log", "joblogs/0.log@0", "joblogs/41.log@-1",
                "joblogs/../joblogs/41.log@0", "joblogs/041.log@0"):
        assert exchange(node, data_line(bad)) == b"", bad
    # the line is checked as the runtime's: a replay gets nothing
    line = data_line("joblogs/41.log@0")
    assert exchange(node, line) == text
    assert exchange(node, line) == b""


def test_data_port_does_not_follow_a_planted_job_log(linked):
    """A link (or anything not a regular file) where a job log goes is not read, even
    when what it points at is readable to the data port."""
    _, node, _ = linked
    target = os.path.join(node.dir, "not-a-log")
    with open(target, "wb") as fh:
        fh.write(b"not for the head\n")
    os.chmod(target, 0o644)
    joblogs = os.path.join(node.state_dir, "joblogs")
    os.symlink(target, os.path.join(joblogs, "43.log"))
    assert exchange(node, data_line("joblogs/43.log@0")) == b""
    os.mkfifo(os.path.join(joblogs, "44.log"), 0o644)
    assert exchange(node, data_line("joblogs/44.log@0")) == b""


def sandbox_cgroups(parent):
    """The cgroups below parent (in any hierarchy) that hold processes."""
    found = []
    for root in ["/sys/fs/cgroup"] + [os.path.join("/sys/fs/cgroup", d)
                                      for d in os.listdir("/sys/fs/cgroup")]:
        base = os.path.join(root, parent)
        if not os.path.isdir(base):
            continue
        for child in os.listdir(base):
            procs = os.path.join(base, child, "cgroup.procs")
            try:
                with open(procs) as fh:
                    if fh.read().strip():
                        found.append(os.path.join(base, child))
            except OSError:
                pass
    return found


def test_a_runtime_on_the_node_through_link_and_data_port(linked):
    """The head's start crosses the link; the node builds a real sandbox under its own
    cgroup parent (labd-n1); the head reaches its Jupyter through the data port; a killed
    link leaves it running and listed."""
    head, node, _ = linked
    user, token = "carol", "k" * 43
    r = head.request({"v": 2, "id": 50, "type": "sandbox_start", "user": user, "user_id": 7,
                      "runtime_id": 4242, "kind": "cpu", "token": token,
                      "deadline": int(time.time()) + 3600, "gpus": []}, timeout=60)
    assert r["ok"] is True, r
    deadline = time.monotonic() + 120 * SLOW
    while True:
        m = head.read(max(1, deadline - time.monotonic()))
        if m.get("type") == "sandbox_ready":
            break
        assert m.get("type") != "sandbox_ended", m
    assert m["endpoint"] == f"unix:runtimes/{user}/run/jupyter.sock"
    assert sandbox_cgroups("labd-n1"), "the sandbox is not under the cgroup parent labd-n1"
    path = m["endpoint"][len("unix:"):]
    req = (f"GET /user/{user}/api/status HTTP/1.1\r\nHost: node\r\n"
           f"Authorization: token {token}\r\nConnection: close\r\n\r\n").encode()
    got = exchange(node, data_line(path) + req)
    assert got.startswith(b"HTTP/1.1 200"), got[:200]
    # a dead link is a web restart to the sandbox: it keeps running, the new link lists it
    os.kill(wait_until(node.link_pid, 10 * SLOW, "the link process"), signal.SIGKILL)
    while "type" not in (m := head.read(20)):
        pass  # {"closed": ...}, then the new link's hello
    assert head.request({"v": 2, "type": "hello", "id": 60, "version": m["version"]})["ok"]
    r = head.request({"v": 2, "type": "sandbox_list", "id": 61})
    assert [b["user"] for b in r["sandboxes"]] == [user], r
    got = exchange(node, data_line(path) + req)
    assert got.startswith(b"HTTP/1.1 200"), got[:200]
    r = head.request({"v": 2, "id": 51, "type": "sandbox_stop", "user": user, "runtime_id": 4242,
                      "reason": "test"}, timeout=60)
    assert r["ok"] is True, r
    while True:
        m = head.read(max(1, deadline - time.monotonic()))
        if m.get("type") == "sandbox_ended":
            break


def test_bad_node_config_stops_at_start():
    """Each refusal names its key and changes nothing (no state dir is made)."""
    n = Node("n3", 1, SECRET)
    try:
        cases = [
            (lambda: os.chmod(n.secret_file, 0o644), "open to others"),
            (lambda: short_secret(n), "must hold 32 to 512 bytes"),
            (lambda: rewrite(n, "data_listen", "0.0.0.0:7001"), "[node] data_listen"),
            (lambda: rewrite(n, "name", "bad name"), "[node] name"),
        ]
        for spoil, said in cases:
            spoil()
            p = subprocess.run([labd_binary(), "node", "--config", n.config],
                               capture_output=True, timeout=30)
            assert p.returncode == 1, p
            assert said in p.stderr.decode(), p.stderr
            assert not os.path.exists(n.state_dir)
    finally:
        n.cleanup()


def short_secret(node):
    with open(node.secret_file, "wb") as fh:
        fh.write(b"short")
    os.chmod(node.secret_file, 0o600)


def rewrite(node, key, value):
    with open(node.config) as fh:
        lines = [f"{key} = {value}" if ln.startswith(f"{key} = ") else ln
                 for ln in fh.read().splitlines()]
    with open(node.config, "w") as fh:
        fh.write("\n".join(lines) + "\n")
