"""A real training job observed end to end (docs/jobs.md "Logs", "Metrics",
"Profiling rules"): the supervisor runs a shell script in a job sandbox that
prints metric lines slowly; a follower reads its log live over SSE and
resumes by Last-Event-ID; the metric definitions (one with a capture group,
one whole-match, one hostile) are extracted into points and final values;
samples are kept with CPU percent; SlowInitialization fires on a job that
stays silent past a lowered rules_init, with the samples that showed it,
and the status events end after the final status."""

import json
import time

import pytest

from labd_harness import assert_status, make_user, wait_until
from test_job_logs import auth_headers
from test_runtime_events import EventStream

JOB_TIMEOUT = 90

SCRIPT = ("for i in 1 2 3 4 5 6; do echo \"step $i loss=0.$((10 - i)) acc=0.$i\"; "
          "sleep 0.4; done; printf 'last loss=0.01'")


@pytest.fixture(scope="module")
def rd(runtime_daemon_factory):
    return runtime_daemon_factory("jobs-observe", sections={
        "jobs": {"sample_interval": "200ms", "rules_interval": "1s", "rules_init": "2s",
                 "rules_quiet": "3s", "rules_min_samples": "2", "rules_warmup": "0"},
        "quota": {"concurrent_jobs": "10"}})


def submit(c, name, script, **extra):
    body = {"name": name, "command": ["/bin/sh", "-c", script]}
    body.update(extra)
    r = c.post("/api/v1/jobs", json=body)
    assert_status(r, 201)
    return r.json["id"]


def wait_job(c, job_id, until=("Completed", "Failed", "Stopped")):
    seen = {}

    def done():
        seen["j"] = c.get(f"/api/v1/jobs/{job_id}").json
        # over, and its log read to the end: final metrics and findings are final
        return seen["j"]["status"] in until and seen["j"]["metrics_complete"]

    wait_until(done, timeout=JOB_TIMEOUT, what=f"job {job_id} to end")
    return seen["j"]


def test_log_follow_metrics_and_samples_of_a_real_job(rd):
    c = make_user(rd, prefix="jo")
    job = submit(c, "metrics", SCRIPT, metric_definitions=[
        {"name": "loss", "regex": r"loss=([0-9.]+)"},
        {"name": "acc", "regex": r"(?<=acc=)[0-9.]+"},
        {"name": "evil", "regex": r"^(a|aa)+$"}])
    events = EventStream(rd.port, headers=auth_headers(c), path=f"/api/v1/jobs/{job}/events")
    s = EventStream(rd.port, headers=auth_headers(c), path=f"/api/v1/jobs/{job}/logs?follow=1")
    first = s.next_event(timeout=JOB_TIMEOUT)
    assert first["event"] == "log" and first["data"].startswith("step 1 loss=0.9"), first
    s.sock.close()
    # resume after the first event: the rest, exactly once, then end
    s = EventStream(rd.port, headers=dict(auth_headers(c), **{"Last-Event-ID": first["id"]}),
                    path=f"/api/v1/jobs/{job}/logs?follow=1")
    lines = first["data"].split("\n")
    while True:
        ev = s.next_event(timeout=JOB_TIMEOUT)
        if ev["event"] == "end":
            break
        lines += ev["data"].split("\n")
    steps = [ln for ln in lines if ln.startswith("step ")]
    assert steps == [f"step {i} loss=0.{10 - i} acc=0.{i}" for i in range(1, 7)], lines
    assert lines[-1] == "last loss=0.01"
    j = wait_job(c, job)
    assert j["status"] == "Completed", j
    raw = c.get(f"/api/v1/jobs/{job}/logs")
    assert int(ev["id"]) == len(raw.body) == j["log_bytes"]
    # metrics: group 1, whole match, the hostile one gives nothing; the last line without
    # newline counts at the end
    m = c.get(f"/api/v1/jobs/{job}/metrics").json
    assert [p["value"] for p in m["metrics"]["loss"]] == [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.01]
    assert [p["value"] for p in m["metrics"]["acc"]] == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    assert "evil" not in m["metrics"]
    final = {f["name"]: f["value"] for f in j["final_metrics"]}
    assert final == {"loss": 0.01, "acc": 0.6}, j["final_metrics"]
    assert m["final"] == j["final_metrics"]
    # samples: kept while it trained, CPU percent from the second on
    smp = c.get(f"/api/v1/jobs/{job}/samples").json["samples"]
    assert len(smp) >= 3, smp
    assert all(x["memory_bytes"] > 0 for x in smp)
    assert any(x["cpu_percent"] is not None for x in smp[1:]), smp
    # the status events: each change once, end after the final status
    seen = []
    while True:
        ev = events.next_event(timeout=JOB_TIMEOUT)
        if ev["event"] == "end":
            break
        obj = json.loads(ev["data"])
        seen.append(obj["secondary_status"])
    assert seen[-1] == "Completed" and "Training" in seen, seen


def test_slow_initialization_fires_with_its_samples(rd):
    c = make_user(rd, prefix="js")
    job = submit(c, "quiet", "sleep 5; echo done", max_runtime_s=60)

    def found():
        j = c.get(f"/api/v1/jobs/{job}").json
        return any(f["rule"] == "SlowInitialization" for f in j["findings"]) and j

    j = wait_until(found, timeout=JOB_TIMEOUT, what="SlowInitialization")
    f = [f for f in j["findings"] if f["rule"] == "SlowInitialization"][0]
    assert f["status"] == "IssuesFound" and "no log line" in f["message"], f
    j = wait_job(c, job)
    assert j["status"] == "Completed", j
    # a job that talks from the start stays quiet
    job = submit(c, "talky", "for i in 1 2 3 4 5 6 7 8; do echo tick $i; sleep 0.5; done")
    j = wait_job(c, job)
    assert j["status"] == "Completed" and j["findings"] == [], j["findings"]


def test_points_are_capped_per_metric(rd):
    c = make_user(rd, prefix="jc")
    job = submit(c, "capped", "seq 1 10050 | sed 's/^/m=/'",
                 metric_definitions=[{"name": "m", "regex": r"^m=(\d+)$"}])
    j = wait_job(c, job)
    assert j["status"] == "Completed", j
    m = c.get(f"/api/v1/jobs/{job}/metrics").json
    values = [p["value"] for p in m["metrics"]["m"]]
    assert values == [float(i) for i in range(1, 10001)]
    assert m["final"][0]["value"] == 10000


def test_extraction_resumes_after_a_web_restart(rd):
    """labd-web killed mid-job: the job runs on, and the restarted web process
    resumes reading its log at the saved offset - every point once."""
    import os
    import signal

    from labd_harness import web_process

    c = make_user(rd, prefix="jw")
    job = submit(c, "restart", "for i in $(seq 1 30); do echo loss=$i; sleep 0.2; done",
                 metric_definitions=[{"name": "loss", "regex": r"loss=(\d+)"}])

    def some_points():
        r = c.get(f"/api/v1/jobs/{job}/metrics")
        return r.status == 200 and len(r.json["metrics"].get("loss", [])) >= 5

    wait_until(some_points, timeout=JOB_TIMEOUT, what="the first points")
    os.kill(web_process(rd), signal.SIGKILL)
    time.sleep(0.5)

    def answers():
        try:
            return c.get("/api/v1/health").status == 200
        except OSError:
            return False

    wait_until(answers, timeout=JOB_TIMEOUT, what="the web process back")
    j = wait_job(c, job)
    assert j["status"] == "Completed", j
    values = [p["value"] for p in c.get(f"/api/v1/jobs/{job}/metrics").json["metrics"]["loss"]]
    assert values == [float(i) for i in range(1, 31)], values


def test_a_job_shorter_than_the_rules_interval_is_judged_at_its_end(rd):
    c = make_user(rd, prefix="jq")
    job = submit(c, "outlier", "for i in $(seq 1 12); do echo step_time=0.10; done; "
                               "echo step_time=9.5",
                 metric_definitions=[{"name": "step_time", "regex": r"step_time=([0-9.]+)"}])
    j = wait_job(c, job)
    assert j["status"] == "Completed", j
    f = [f for f in j["findings"] if f["rule"] == "StepOutlier"]
    assert f and f[0]["samples"] == [{"at": f[0]["samples"][0]["at"], "metric": "step_time",
                                      "value": 9.5}], j["findings"]


def test_a_gpu_job_without_nvml_has_unknown_gpu_readings_and_no_gpu_findings(runtime_daemon_factory):
    """[gpu] stand_in: a GPU job's samples say null for what NVML did not read, and the
    GPU rules (which need readings) stay quiet."""
    gd = runtime_daemon_factory("jobs-observe-gpu", gpu={"stand_in": "1"}, sections={
        "jobs": {"sample_interval": "200ms", "rules_interval": "1s", "rules_min_samples": "2"}})
    c = make_user(gd, prefix="jg")
    job = submit(c, "gpu", "for i in 1 2 3 4 5 6 7 8 9 10; do echo step=$i; sleep 0.2; done",
                 type="gpu")
    j = wait_job(c, job)
    assert j["status"] == "Completed", j
    r = c.get(f"/api/v1/jobs/{job}/samples").json
    assert r["gpu"] is True and len(r["samples"]) >= 3, r
    assert all(s["gpu_percent"] is None and s["gpu_memory_bytes"] is None for s in r["samples"])
    assert not [f for f in j["findings"] if f["rule"] in (
        "LowGPUUtilization", "CPUBottleneck", "GPUMemoryIncrease")], j["findings"]


def test_a_partial_line_left_hanging_is_no_output(rd):
    """Output that stops mid-line (a progress bar, then a hang): the bytes count
    once, not at each re-read of the waiting line, so NoLogOutput fires."""
    c = make_user(rd, prefix="jh")
    job = submit(c, "hang", "echo start; printf 'progress 50%%'; sleep 6")

    def quiet():
        j = c.get(f"/api/v1/jobs/{job}").json
        return any(f["rule"] == "NoLogOutput" for f in j["findings"]) and j

    wait_until(quiet, timeout=JOB_TIMEOUT, what="NoLogOutput")
    j = wait_job(c, job)
    assert j["status"] == "Completed", j
