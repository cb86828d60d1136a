"""Profiling rules: each rule that a CPU job can show fires on a job built to
trigger it (jobs_scripts/rules.py), with the samples that triggered it, and a
healthy job gets no finding.  Thresholds are lowered in [jobs] so that each job
lasts seconds.  The GPU rules (LowGPUUtilization, CPUBottleneck, GPUMemoryIncrease)
need GPU samples, which a CPU-only machine (or [gpu] stand_in devices) cannot give:
they are proven by the unit tests of the rules (docs/jobs.md says so)."""

import pytest

from jobs_lib import (
    PY,
    get_job,
    jobs_daemon,
    log_text,
    new_user,
    put_files,
    script,
    submit,
    wait_job,
)
from labd_harness import SLOW, wait_until

MEM = 256 << 20
JOBS = {
    # rule: (mode, seconds, extra submit fields)
    "IOBottleneck": ("io", 5, {}),
    "MemoryNearLimit": ("memory", 3, {"memory_bytes": MEM, "hyperparameters": {"limit_bytes": MEM}}),
    "NoLogOutput": ("quiet", 6, {}),
    "SlowInitialization": ("slowinit", 6, {}),
    "StepOutlier": ("steps", 0, {"metric_definitions": [
        {"name": "step_time", "regex": r"step_time=([0-9.]+)"}]}),
    None: ("healthy", 4, {"metric_definitions": [{"name": "loss", "regex": r"loss=([0-9.]+)"}]}),
}


# rules read from the samples (the others from the log and metrics: no samples to show)
SAMPLED = ("IOBottleneck", "MemoryNearLimit")


def samples(c, j):
    r = c.get(f"/api/v1/jobs/{j['id']}/samples")
    return r.json if r.status == 200 else r


@pytest.fixture(scope="module")
def rd(runtime_daemon_factory):
    return jobs_daemon(runtime_daemon_factory, "jobs-rules", jobs={
        "rules_init": "3s", "rules_quiet": "3s", "sample_interval": "200ms",
        "rules_interval": "1s", "rules_min_samples": "5", "max_pools_per_user": "8",
        # jobs of seconds: judged from their start (the warm-up has test_job_report.py)
        "rules_warmup": "0",
        # an fsync loop on this VM's disk waits 25-60 % of the time (a busy shared
        # disk or a faster one moves that): the I/O threshold is lowered to 20 %
        # so that the rule's logic, not the disk, is what is tested; the healthy
        # job waits on I/O ~0 % and must stay quiet under it
        "rules_io_wait": "20"})


@pytest.fixture(scope="module")
def ran(rd):
    """All the rule jobs at once (one user, concurrent_jobs raised); waits for the
    quiet job to show its finding while it runs, then for every job's end."""
    _, c = new_user(rd, "jp", overrides={"concurrent_jobs": len(JOBS) + 1})
    put_files(c, {"code/rules.py": script("rules.py")})
    ids = {}
    for rule, (mode, secs, extra) in JOBS.items():
        ids[rule] = submit(c, [PY, "code/rules.py", mode, str(secs)], name=f"rule-{mode}",
                           **extra)["id"]

    def quiet_finding_while_running():
        j = get_job(c, ids["NoLogOutput"])
        assert j["status"] == "InProgress", f"the quiet job ended before its finding: {j}"
        return [f for f in j["findings"] if f["rule"] == "NoLogOutput"]

    live = wait_until(quiet_finding_while_running, 30 * SLOW, "NoLogOutput while the job runs")
    jobs = {rule: wait_job(c, i, timeout=90 * SLOW) for rule, i in ids.items()}
    return c, jobs, live


@pytest.mark.parametrize("rule", [r for r in JOBS if r])
def test_rule_fires_on_the_job_built_for_it(ran, rule):
    c, jobs, _ = ran
    j = jobs[rule]
    assert j["status"] == "Completed", f"{j}\n{log_text(c, j['id'])}"
    found = [f for f in j["findings"] if f["rule"] == rule]
    assert len(found) == 1, (rule, j["findings"], samples(c, j))
    f = found[0]
    assert f["status"] == "IssuesFound" and f["message"], f
    assert f["first_at"] <= f["last_at"], f
    if rule in SAMPLED:
        assert f["samples"], f"{rule}: no triggering samples: {f}"


def test_finding_shows_while_the_job_runs(ran):
    _, _, live = ran
    assert live and live[0]["rule"] == "NoLogOutput", live


def test_healthy_job_has_no_finding(ran):
    c, jobs, _ = ran
    j = jobs[None]
    assert j["status"] == "Completed", j
    assert j["findings"] == [], j["findings"]
    r = c.get(f"/api/v1/jobs/{j['id']}/samples")
    assert r.status == 200, r
