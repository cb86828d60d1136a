"""Whole-daemon restart with [runtime] keep_on_shutdown = true: the running
runtime survives labd's SIGTERM and is re-adopted by the next start, and works
as before: a new kernel starts and answers, a terminal runs a command, and
Jupyter's output still reaches its log (its keeper drains the pipe, not the
supervisor that restarted)."""

import json
import os
import subprocess
import time

import pytest

from labd_harness import (
    open_kernel_channel,
    pid_alive,
    SLOW,
    STRONG,
    WebSocket,
    assert_error,
    assert_status,
    audit_entries,
    jupyter_execute,
    remember_sandboxes,
    sandbox_records,
    start_runtime,
    unique_name,
    wait_runtime,
    wait_until,
    web_process,
    ws_cookie_headers,
)
from runtime_shell import kernel_run, terminal_run


@pytest.fixture(scope="module")
def rd(runtime_daemon_factory):
    return runtime_daemon_factory("rt-restart", runtime={"keep_on_shutdown": "true",
                                                         "cpu_limit": "1h"})


def check_keeper(d, name):
    """The runtime's keeper (its pid in the sandbox record): in its own session, in
    every cgroup of the sandbox's init that labd made, oom_score_adj -1000, and
    the one process outside the sandbox that reads Jupyter's output pipe."""
    with open(os.path.join(d.state_dir, "boxes", f"{name}.json")) as fh:
        rec = json.load(fh)
    kpid = rec.get("keeper_pid")
    assert kpid and pid_alive(kpid), rec
    with open(f"/proc/{kpid}/comm") as fh:
        assert fh.read().strip() == "labd-keeper"
    (_, box), = sandbox_records(d.state_dir)
    init = int(box["pid"])
    assert os.getsid(kpid) == kpid
    with open(f"/proc/{kpid}/oom_score_adj") as fh:
        assert fh.read().strip() == "-1000" or not oom_adj_allowed()

    def cgroups(pid):
        with open(f"/proc/{pid}/cgroup") as fh:
            return {ln.split(":")[1]: ln.split(":", 2)[2].strip() for ln in fh
                    if "labd/" in ln}
    assert cgroups(init) and cgroups(kpid) == cgroups(init), (cgroups(kpid), cgroups(init))
    out = os.readlink(f"/proc/{init}/fd/1")
    assert out.startswith("pipe:"), out
    readers = [int(p) for p in os.listdir("/proc") if p.isdigit() and holds(int(p), out)]
    assert kpid in readers and str(d.pid) not in map(str, readers), (kpid, readers)
    return kpid


def oom_adj_allowed():
    """Whether this host lets root set an oom_score_adj (some containers refuse)."""
    return subprocess.run(["sh", "-c", "echo -1000 > /proc/self/oom_score_adj"],
                          capture_output=True).returncode == 0


def holds(pid, link):
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{f}") == link
                   and os.stat(f"/proc/{pid}/fdinfo/{f}") and _reads(pid, f)
                   for f in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def _reads(pid, fd):
    with open(f"/proc/{pid}/fdinfo/{fd}") as fh:
        flags = int(next(ln for ln in fh if ln.startswith("flags:")).split()[1], 8)
    return flags & os.O_ACCMODE == os.O_RDONLY


def test_runtime_survives_daemon_restart(rd):
    admin = rd.admin()
    name = unique_name("rst")
    pw = f"{STRONG}-{name}"
    assert admin.post("/api/v1/users", json={"name": name, "password": pw}).status == 201
    c = rd.client()
    c.login(name, pw)
    base = f"/user/{name}/"
    _, before = start_runtime(c)
    remember_sandboxes(rd)
    r = c.put(base + "api/contents/saved.txt",
              json={"type": "file", "format": "text", "content": "from before the restart"})
    assert r.status == 201, r
    kid, ws = open_kernel_channel(rd, c)
    try:
        assert jupyter_execute(ws, "survivor = 6*7; survivor")[0] == "42"
    finally:
        ws.close()
    boxes = {kv["id"]: kv["pid"] for _, kv in sandbox_records(rd.state_dir)}
    assert len(boxes) == 1, boxes
    keeper = check_keeper(rd, name)
    print("\n" + "\n".join(ln for ln in rd.log().splitlines() if "output keeper" in ln))

    # SIGTERM: labd exits, the sandbox stays
    t0 = time.monotonic()
    rc = rd.stop(15)
    assert rc == 0, f"labd exit status {rc} on SIGTERM\n" + rd.log_tail()
    assert time.monotonic() - t0 < 10 * SLOW
    assert {kv["id"]: kv["pid"] for _, kv in sandbox_records(rd.state_dir)} == boxes, \
        "the sandbox did not survive labd's exit (keep_on_shutdown = true)"

    # the same config again: re-adopted
    rd.start(expect_admin_password=False)
    after = wait_runtime(c, ("running", "stopping", "stopped", "failed"), timeout=10 * SLOW)
    assert after["state"] == "running", f"after the restart: {after}\n" + rd.log_tail()
    for k in ("id", "started_at", "deadline", "ready_at"):
        assert after[k] == before[k], f"{k}: {before[k]!r} -> {after[k]!r}"
    assert {kv["id"]: kv["pid"] for _, kv in sandbox_records(rd.state_dir)} == boxes
    assert check_keeper(rd, name) == keeper, "the keeper did not outlive labd"
    r = c.get(base + "api/status")
    assert_status(r, 200)
    r = c.get(base + "api/contents/saved.txt")
    assert_status(r, 200)
    assert r.json["content"] == "from before the restart", r.json
    # the kernel (and its state) lived on inside the sandbox
    ws = WebSocket(rd.port, base + f"api/kernels/{kid}/channels",
                   headers=dict(ws_cookie_headers(c), Origin=c.runtime_origin()),
                   source=c.source).expect_open()
    try:
        assert jupyter_execute(ws, "survivor")[0] == "42"
    finally:
        ws.close()
    web_process(rd)

    # Jupyter's output pipe still has a reader: a NEW kernel (which inherits
    # Jupyter's stdout and writes to it at once) starts and answers, a terminal
    # works, and what Jupyter printed about them reached its log
    log = os.path.join(rd.state_dir, "runtimes", name, "jupyter.log")
    size = os.path.getsize(log)
    t0 = time.monotonic()
    result, _ = kernel_run(rd, c, "new_one = 40 + 2; new_one", timeout=30 * SLOW)
    assert result == "42", result
    print(f"\na new kernel answered {time.monotonic() - t0:.2f}s after it was asked for")
    assert "after the restart" in terminal_run(rd, c, "echo after the restart",
                                               timeout=30 * SLOW)
    wait_until(lambda: os.path.getsize(log) > size, 10 * SLOW,
               "Jupyter's output (a kernel started) in jupyter.log after the restart")

    # a clean stop, then the daemon (the fixture asserts nothing is left)
    r = c.delete("/api/v1/me/runtime")
    assert_status(r, 202)
    s = wait_runtime(c, ("stopped", "failed"), timeout=20 * SLOW)
    assert s["state"] == "stopped" and s["reason"] == "stopped by the user", s
    assert not sandbox_records(rd.state_dir), sandbox_records(rd.state_dir)
    assert_error(c.get(base + "api/status"), 503, "runtime_not_running")
    stops = audit_entries(admin, "runtime.stop", name)
    assert len(stops) == 1 and stops[0]["detail"] == "stopped by the user", stops


def test_a_runtime_whose_keeper_cannot_start_fails_with_its_cause(runtime_daemon_factory):
    """Without a keeper a runtime would stop starting kernels at the next restart of
    labd: its start fails instead, saying why, and nothing is left of it."""
    name = unique_name("nokeep")
    d = runtime_daemon_factory("rt-nokeeper", env={"LABD_FAULT_NO_KEEPER": name})
    pw = f"{STRONG}-{name}"
    assert d.admin().post("/api/v1/users", json={"name": name, "password": pw}).status == 201
    c = d.client()
    c.login(name, pw)
    r = c.post("/api/v1/me/runtime", json={"type": "cpu"})
    assert r.status == 202, r
    remember_sandboxes(d)
    s = wait_runtime(c, ("running", "stopped", "failed"), timeout=60 * SLOW)
    assert s["state"] == "failed", s
    assert "its output keeper could not start" in s["reason"], s
    assert "output keeper did not start" in d.log(), d.log_tail()
    wait_until(lambda: not sandbox_records(d.state_dir), 20 * SLOW, "the sandbox's teardown")
