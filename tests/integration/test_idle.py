"""An idle labd-web sleeps (docs/architecture.md "Threads").

With no runtime and no job, and a logged-in user whose dashboard has its event
stream open (web/static/dashboard.js opens GET /api/v1/me/runtime/events; its
jobs list polls, it opens no jobs stream), the web process wakes at most
MAX_WAKEUPS_PER_S times a second: the sum over all its threads of
voluntary_ctxt_switches (/proc/<pid>/task/*/status) over MEASURE_S seconds, a
thread that starts meanwhile counted from 0. Then the timers that sleeping must
not lose: a job submitted to the idle process starts at once (the submit pokes
the jobs ticker), and a runtime idle past [runtime] idle_timeout is culled on
time (the reconciler's pass sleeps until the row's own due time)."""

import os
import time

import pytest

from jobs_lib import get_job, jobs_daemon, new_user, submit, wait_job
from labd_harness import (
    SLOW,
    remember_sandboxes,
    start_runtime,
    wait_runtime,
    web_process,
)

MEASURE_S = int(os.environ.get("LABD_IDLE_MEASURE_S", "60"))
MAX_WAKEUPS_PER_S = 2.0
IDLE_TIMEOUT_S = 6


@pytest.fixture(scope="module")
def idle(runtime_daemon_factory):
    return jobs_daemon(runtime_daemon_factory, "idle",
                       runtime={"idle_timeout": f"{IDLE_TIMEOUT_S}s", "stop_grace": "2s"})


def thread_switches(pid):
    """{tid: (name, voluntary_ctxt_switches)} of the process's threads now."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
            out[tid] = (fields["Name"].strip(), int(fields["voluntary_ctxt_switches"]))
        except (OSError, KeyError, ValueError):
            pass  # the thread ended between the listing and the read
    return out


def wakeups(pid, seconds):
    """Voluntary context switches of all of pid's threads over seconds: each
    thread's growth from the first look (0 for a thread born meanwhile) to the
    last look, the process looked at every 0.5 s so that a thread that ends
    counts up to its last look. (total, {thread name: count}, threads seen)"""
    first = thread_switches(pid)
    last = dict(first)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(min(0.5, max(end - time.monotonic(), 0)))
        last.update(thread_switches(pid))
    by_name = {}
    for tid, (name, v) in last.items():
        by_name[name] = by_name.get(name, 0) + v - first.get(tid, (name, 0))[1]
    return sum(by_name.values()), by_name, len(last)


def open_stream(d, c, path="/api/v1/me/runtime/events"):
    from test_runtime_events import EventStream, cookie_headers
    s = EventStream(d.port, headers=cookie_headers(c), path=path)
    assert s.status == 200, (s.status, s.body)
    return s


def test_idle_web_process_sleeps(idle):
    _, c = new_user(idle, "idl")
    # the dashboard and a runtime page, each with its stream open
    streams = [open_stream(idle, c), open_stream(idle, c)]
    try:
        pid = web_process(idle)
        time.sleep(3)  # the login and the streams' first events settle
        n, by_name, threads = wakeups(pid, MEASURE_S)
        for s in streams:  # still open and served: the stream is not what went quiet
            assert not s.ended
    finally:
        for s in streams:
            s.close()
    rate = n / MEASURE_S
    print(f"\nidle labd-web: {n} voluntary context switches in {MEASURE_S} s over "
          f"{threads} threads = {rate:.2f} wake-ups/s; by thread: "
          + ", ".join(f"{k} {v}" for k, v in sorted(by_name.items(), key=lambda kv: -kv[1])))
    assert rate <= MAX_WAKEUPS_PER_S, \
        f"idle labd-web woke {rate:.2f} times a second (at most {MAX_WAKEUPS_PER_S})"


def test_job_submitted_to_idle_process_starts_at_once(idle):
    _, c = new_user(idle, "ijb")
    time.sleep(2)  # every ticker has gone back to sleep
    t0 = time.monotonic()
    job = submit(c, ["/bin/true"])
    while get_job(c, job["id"])["secondary_status"] == "Pending":
        assert time.monotonic() - t0 < 30 * SLOW, "the job never left Pending"
        time.sleep(0.02)
    left_pending = time.monotonic() - t0
    done = wait_job(c, job["id"])
    print(f"\njob left Pending {left_pending * 1000:.0f} ms after the submit; "
          f"ended {done['status']} after {time.monotonic() - t0:.1f} s")
    assert done["status"] == "Completed", done
    # the pass runs on the submit's poke: no 250 ms tick (let alone a sleep) in the way
    assert left_pending < 1.0 * SLOW, f"the job left Pending after {left_pending:.2f} s"


def test_idle_runtime_culled_on_time(idle):
    _, c = new_user(idle, "icl")
    start_runtime(c)
    remember_sandboxes(idle)
    s = wait_runtime(c, ("running",))
    t0 = time.monotonic()
    # nothing touches it from now on (the API is not activity)
    s = wait_runtime(c, ("stopping", "stopped", "failed"), timeout=IDLE_TIMEOUT_S + 30 * SLOW,
                     interval=0.2)
    culled = time.monotonic() - t0
    print(f"\nidle runtime culled {culled:.1f} s after it ran ({IDLE_TIMEOUT_S} s idle_timeout)")
    assert "idle" in (s["reason"] or ""), s
    # due at ready (or the last activity) + idle_timeout + the touch interval (1 s):
    # never before idle_timeout, and woken for it, not found by a later sweep
    assert IDLE_TIMEOUT_S - 1 <= culled <= IDLE_TIMEOUT_S + 1 + 3 * SLOW, \
        f"culled after {culled:.1f} s"
    wait_runtime(c, ("stopped", "failed"), timeout=30 * SLOW)
