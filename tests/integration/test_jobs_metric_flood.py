"""A hostile job's metric regexes do not freeze labd for anyone else (docs/jobs.md
"Metrics", docs/security.md finding 1): one user's job has 40 definitions like
`(a|aa)+$`, each of which hits PCRE2's match limit on every line, and floods its
log with near-matching lines. Meanwhile another user stops a running job (its end
is a backend event, whose reader thread also delivers every reply) and runs a
trivial job, and a third user's runtime starts and stops, all within seconds; the
hostile job's own responses name the definitions that were dropped, and once it is
stopped its metrics are complete within seconds (its end does not read a flooded
log line by line under every definition)."""

import time

import pytest

from jobs_lib import get_job, jobs_daemon, new_user, submit, wait_job
from labd_harness import SLOW, assert_status, start_runtime, stop_runtime, wait_until

DEFS = [{"name": f"m{i:02d}", "regex": "(a|aa)+$"} for i in range(40)]
LINES = 40000  # of 34 bytes: about 1.3 MiB, five of the extractor's reads
FLOOD = f"yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa! | head -n {LINES}; echo flood-done; sleep 600"
FLOOD_BYTES = LINES * 34 + len("flood-done\n")
# What "within seconds" allows on the loaded 2-core test host: a trivial job on a new
# pool and a runtime start each take a few seconds here when labd is idle.
TRIVIAL_S = 30 * SLOW
RUNTIME_S = 45 * SLOW


@pytest.fixture(scope="module")
def fd(runtime_daemon_factory):
    return jobs_daemon(runtime_daemon_factory, "jobs-flood", quota={"concurrent_jobs": "4"})


def timed(fn):
    t0 = time.monotonic()
    out = fn()
    return out, time.monotonic() - t0


def test_hostile_metric_regexes_leave_everyone_else_alone(fd):
    _, evil = new_user(fd, "fe")
    _, other = new_user(fd, "fo")
    _, rt = new_user(fd, "fr")
    sleeper = submit(other, ["/bin/sh", "-c", "echo up; exec sleep 600"])
    wait_job(other, sleeper["id"], statuses="InProgress", secondary="Training")
    hostile = submit(evil, ["/bin/sh", "-c", FLOOD], metric_definitions=DEFS, max_runtime_s=300)

    def flooded():
        j = get_job(evil, hostile["id"])
        assert j["status"] == "InProgress", j
        return j["log_bytes"] >= FLOOD_BYTES and j

    wait_until(flooded, 60 * SLOW, "the hostile job's flood in its log")

    # another user's running job is stopped: its end comes as a backend event
    assert_status(other.post(f"/api/v1/jobs/{sleeper['id']}/stop", json={"grace_s": 1}), 202)
    j, took = timed(lambda: wait_job(other, sleeper["id"], timeout=TRIVIAL_S))
    print(f"\nrunning job of another user: Stopped {took:.1f} s after its stop")
    assert j["status"] == "Stopped", j

    # and a trivial job of theirs runs, while the hostile one's log is read
    trivial = submit(other, ["true"])
    j, took = timed(lambda: wait_job(other, trivial["id"], timeout=TRIVIAL_S))
    print(f"trivial job of another user: Completed after {took:.1f} s")
    assert j["status"] == "Completed", j

    # a third user's runtime starts and stops
    (_, running), started = timed(lambda: start_runtime(rt))
    print(f"runtime of a third user: running after {started:.1f} s")
    assert running["state"] == "running", running
    stopped, took = timed(lambda: stop_runtime(rt, timeout=RUNTIME_S))
    print(f"runtime of a third user: stopped after {took:.1f} s")
    assert stopped["state"] == "stopped", stopped
    assert started < RUNTIME_S, started

    # the hostile job says which definitions were dropped, and why
    j = get_job(evil, hostile["id"])
    assert j["status"] == "InProgress" and j["metrics_complete"] is False, j
    dropped = j["dropped_metrics"]
    assert [d["name"] for d in dropped] == [d["name"] for d in DEFS], dropped
    assert [d["index"] for d in dropped] == list(range(40)), dropped
    assert all("match limit" in d["reason"] for d in dropped), dropped
    m = evil.get(f"/api/v1/jobs/{hostile['id']}/metrics").json
    assert m["metrics"] == {} and m["dropped_metrics"] == dropped, m
    assert m["metrics_complete"] is False, m

    # stopped: over, with its metrics complete (the rest of its flooded log read), within
    # seconds (wait_job waits for both)
    assert_status(evil.post(f"/api/v1/jobs/{hostile['id']}/stop", json={"grace_s": 1}), 202)
    j, took = timed(lambda: wait_job(evil, hostile["id"], timeout=30 * SLOW))
    print(f"hostile job Stopped, metrics complete, {took:.1f} s after the stop")
    assert j["status"] == "Stopped" and j["metrics_complete"] is True, j
    assert j["final_metrics"] == [] and len(j["dropped_metrics"]) == 40, j
