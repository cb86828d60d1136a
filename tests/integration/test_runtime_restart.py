"""Whole-daemon restart with [runtime] keep_on_shutdown = true: the running
runtime survives labd's SIGTERM and is re-adopted by the next start, and works
as before: a new kernel starts and answers, a terminal runs a command, and
Jupyter's output still reaches its log (its keeper drains the pipe, not the
supervisor that restarted)."""

import os
import time

import pytest

from labd_harness import (
    open_kernel_channel,
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
