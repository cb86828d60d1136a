"""Runtime limits with seconds-scale settings: the deadline ([runtime] cpu_limit)
and idle culling ([runtime] idle_timeout), each on its own daemon."""

import os
import signal
import time

import pytest

from labd_harness import (
    assert_error,
    assert_status,
    audit_entries,
    jupyter_execute,
    kernel_recv,
    kernel_send,
    jupyter_message,
    open_kernel_channel,
    parse_api_time,
    pid_alive,
    remember_sandboxes,
    sandbox_records,
    SLOW,
    start_runtime,
    STRONG,
    unique_name,
    wait_runtime,
    wait_until,
    web_process,
)

CPU_LIMIT = 20
IDLE = 8
GRACE = 3
# The reconciler looks once a second; allow for a busy machine on top.
SLACK = 5 * SLOW


def new_user(d, admin, prefix):
    name = unique_name(prefix)
    pw = f"{STRONG}-{name}"
    r = admin.post("/api/v1/users", json={"name": name, "password": pw})
    assert r.status == 201, r
    c = d.client()
    c.login(name, pw)
    return c


# ------------------------------------------------------------------ deadline


@pytest.fixture(scope="module")
def dd(runtime_daemon_factory):
    return runtime_daemon_factory("rt-deadline", runtime={
        "cpu_limit": f"{CPU_LIMIT}s", "stop_grace": f"{GRACE}s", "warn_before": "10s"})


def box_of(d, user):
    recs = [kv for _, kv in sandbox_records(d.state_dir) if kv.get("user") == user]
    return recs[0] if recs else None


def test_deadline_stops_runtime_and_home_survives(dd):
    admin = dd.admin()
    c = new_user(dd, admin, "dl")
    base = f"/user/{c.user}/"
    _, s = start_runtime(c)
    remember_sandboxes(dd)
    started, deadline = parse_api_time(s["started_at"]), parse_api_time(s["deadline"])
    assert deadline == started + CPU_LIMIT, s
    assert s["warn_before"] == [10], s
    r = c.put(base + "api/contents/keep.txt",
              json={"type": "file", "format": "text", "content": "saved before the deadline"})
    assert r.status == 201, r

    # running (and counting down) until shortly before the deadline
    while time.time() < deadline - 2:
        s = wait_runtime(c, ("running", "stopping", "stopped", "failed"), timeout=5)
        assert s["state"] == "running", f"{deadline - time.time():.1f} s before the deadline: {s}"
        assert abs(s["seconds_left"] - (deadline - time.time())) <= 2, s
        time.sleep(1)

    s = wait_runtime(c, ("stopped", "failed"), timeout=deadline - time.time() + GRACE + SLACK + 10)
    seen_at = time.time()
    assert s["state"] == "stopped", s
    assert "time limit" in (s["reason"] or ""), f"reason {s['reason']!r}"
    ended = parse_api_time(s["ended_at"])
    print(f"\ndeadline {s['deadline']}: ended_at {s['ended_at']} "
          f"({ended - deadline:+d} s), state seen stopped {seen_at - deadline:+.1f} s")
    assert deadline <= ended <= deadline + GRACE + SLACK, \
        f"ended_at {s['ended_at']} vs deadline {s['deadline']} (grace {GRACE} s)"
    assert s["seconds_left"] == 0, s
    assert box_of(dd, c.user) is None, "the sandbox is still there"

    ends = audit_entries(admin, "runtime.end", c.user)
    assert len(ends) == 1 and ends[0]["detail"] == s["reason"], ends
    assert_error(c.get(base + "api/status"), 503, "runtime_not_running")

    # the next runtime finds the file
    _, s2 = start_runtime(c)
    remember_sandboxes(dd)
    assert s2["id"] != s["id"], (s, s2)
    assert parse_api_time(s2["deadline"]) == parse_api_time(s2["started_at"]) + CPU_LIMIT, s2
    r = c.get(base + "api/contents/keep.txt")
    assert_status(r, 200)
    assert r.json["content"] == "saved before the deadline", r.json


def test_supervisor_enforces_deadline_without_web_process(dd):
    """The web process frozen (SIGSTOP) past the deadline cannot extend the
    runtime: the supervisor ends it itself; the web process catches up later."""
    admin = dd.admin()
    c = new_user(dd, admin, "dz")
    _, s = start_runtime(c)
    remember_sandboxes(dd)
    deadline = parse_api_time(s["deadline"])
    box = box_of(dd, c.user)
    assert box, sandbox_records(dd.state_dir)
    box_pid = int(box["pid"])
    web = web_process(dd)
    os.kill(web, signal.SIGSTOP)
    try:
        wait_until(lambda: not pid_alive(box_pid), max(deadline + GRACE + SLACK - time.time(), 0),
                   lambda: f"sandbox pid {box_pid} to end: still alive "
                   f"{time.time() - deadline:.1f} s after the deadline while the web process "
                   "was stopped", interval=0.2)
        gone_at = time.time()
        # the supervisor tears down (unmounts the home, removes cgroups and the
        # state file) right after it sees the exit: give that a moment
        wait_until(lambda: box_of(dd, c.user) is None, 5 * SLOW,
                   lambda: f"the sandbox's state to go: {box_of(dd, c.user)}", interval=0.1)
    finally:
        os.kill(web, signal.SIGCONT)
    print(f"\nsandbox ended {gone_at - deadline:+.1f} s from the deadline with the web "
          "process frozen")
    s = wait_runtime(c, ("stopped", "failed"), timeout=10 * SLOW)
    assert s["state"] == "stopped" and "time limit" in (s["reason"] or ""), s
    assert web_process(dd) == web


# ------------------------------------------------------------------ idle culling


@pytest.fixture(scope="module")
def idd(runtime_daemon_factory):
    return runtime_daemon_factory("rt-idle", runtime={
        "idle_timeout": f"{IDLE}s", "stop_grace": f"{GRACE}s"})


def assert_running_for(c, seconds, why):
    """Polls the runtime API (not the proxy: no activity) for seconds."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        r = c.get("/api/v1/me/runtime")
        s = r.json["runtime"]
        assert s["state"] == "running", \
            f"{why}: {s['state']} ({s['reason']!r}) after " \
            f"{seconds - (end - time.monotonic()):.1f} of {seconds} s"
        time.sleep(0.5)


def test_idle_culling(idd):
    admin = idd.admin()
    c = new_user(idd, admin, "idl")
    base = f"/user/{c.user}/"
    start_runtime(c)
    remember_sandboxes(idd)
    # 1. kernel messages over a WebSocket (no HTTP request) keep it alive well past
    #    idle_timeout (a socket merely open does not: test_availability.py)
    kid, ws = open_kernel_channel(idd, c)
    try:
        result, _, _ = jupyter_execute(ws, "6*7")
        assert result == "42"
        end = time.monotonic() + 15
        while time.monotonic() < end:
            jupyter_execute(ws, "1")
            assert_running_for(c, 2, "with kernel messages over a WebSocket")

        # 2. a busy kernel keeps it alive with no connection and no request
        msg = jupyter_message("execute_request", {
            "code": "import time; time.sleep(14)", "silent": False, "store_history": False,
            "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})
        kernel_send(ws, msg)
        while True:
            m = kernel_recv(ws, timeout=10)
            if (m.get("parent_header") or {}).get("msg_id") == msg["header"]["msg_id"] and \
                    m.get("msg_type") == "status" and \
                    m["content"]["execution_state"] == "busy":
                break
    finally:
        ws.close()
    busy_from = time.monotonic()
    assert_running_for(c, 12, "with a busy kernel and no connection")

    # 3. one request once the kernel is idle, then nothing: culled after IDLE s
    while True:
        r = c.get(base + f"api/kernels/{kid}")
        assert_status(r, 200)
        if r.json["execution_state"] == "idle":
            break
        assert time.monotonic() - busy_from < 30, r.json
        time.sleep(0.5)
    t_req = time.time()
    s = wait_runtime(c, ("stopping", "stopped", "failed"), timeout=IDLE + SLACK + 5, interval=0.2)
    t_stopping = time.time()
    s = wait_runtime(c, ("stopped", "failed"), timeout=GRACE + SLACK + 5)
    print(f"\nidle: stopping {t_stopping - t_req:.1f} s after the last request, "
          f"ended_at {s['ended_at']}")
    assert s["state"] == "stopped", s
    assert s["reason"] == f"idle for {IDLE} seconds", s
    culls = audit_entries(admin, "runtime.cull", c.user)
    assert len(culls) == 1 and culls[0]["detail"] == f"idle for {IDLE} seconds", culls
    assert_error(c.get(base + "api/status"), 503, "runtime_not_running")
    # "no request ... for idle_timeout": not earlier than that after the last
    # request (1 s for the whole-second clock), nor much later
    assert t_stopping - t_req >= IDLE - 1, \
        f"culled (state stopping) {t_stopping - t_req:.1f} s after the last proxied request " \
        f"(GET {base}api/kernels/{kid} -> 200); idle_timeout is {IDLE} s"
    assert t_stopping - t_req <= IDLE + SLACK, f"culled only {t_stopping - t_req:.1f} s after"
