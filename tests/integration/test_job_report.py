"""The profiler report of real jobs (docs/jobs.md "Profiling rules", "The
profiler report"): a job whose first steps are slow (start-up) and then
steady gets no StepOutlier with its own warm-up (rules.warmup_s) and gets
one without (the same job with warmup_s 0: the test can fail); the report
names every rule with its status and advice, marks the warm-up's samples,
gives percentiles after it and a histogram of the job's step metric
(rules.step_metric); a job without one says so; a job under the default
warm-up reports [jobs] rules_warmup; bad rules fields are 400 naming the
field and make nothing; another user's report is 404.  One daemon."""

import pytest

from jobs_lib import jobs_daemon, new_user, submit, wait_job
from labd_harness import assert_error, assert_status

# three slow steps at once (the start-up), then after the warm-up 20 steady ones
STEPS = ("for i in 1 2 3; do echo step_time=0.90; done; sleep 2.5; "
         "for i in $(seq 1 20); do echo step_time=0.05$((i % 5)); sleep 0.1; done")
METRICS = [{"name": "iter", "regex": r"step_time=([0-9.]+)"}]
RULES = ["LowGPUUtilization", "CPUBottleneck", "IOBottleneck", "GPUMemoryIncrease",
         "StepOutlier", "SlowInitialization", "MemoryNearLimit", "NoLogOutput"]


@pytest.fixture(scope="module")
def rd(runtime_daemon_factory):
    # the config's warm-up stays at its default: the jobs set their own
    return jobs_daemon(runtime_daemon_factory, "job-report", jobs={
        "rules_interval": "1s", "rules_min_samples": "5"})


@pytest.fixture(scope="module")
def ran(rd):
    """Both step jobs and a plain one, at once; their ended objects and reports."""
    _, c = new_user(rd, "rp", overrides={"concurrent_jobs": 4})
    ids = {
        "warm": submit(c, ["/bin/sh", "-c", STEPS], metric_definitions=METRICS,
                       rules={"warmup_s": 2, "step_metric": "iter"})["id"],
        "cold": submit(c, ["/bin/sh", "-c", STEPS], metric_definitions=METRICS,
                       rules={"warmup_s": 0, "step_metric": "iter"})["id"],
        "plain": submit(c, ["/bin/sh", "-c", "echo hello; sleep 1"])["id"],
    }
    jobs = {k: wait_job(c, i) for k, i in ids.items()}
    reports = {}
    for k, i in ids.items():
        r = c.get(f"/api/v1/jobs/{i}/report")
        assert_status(r, 200)
        reports[k] = r.json
    return c, jobs, reports


def rule(report, name):
    return [r for r in report["rules"] if r["rule"] == name][0]


def test_the_warmup_keeps_the_start_up_steps_from_being_outliers(ran):
    _, jobs, reports = ran
    assert jobs["warm"]["status"] == "Completed", jobs["warm"]
    assert jobs["warm"]["findings"] == [], jobs["warm"]["findings"]
    rep = reports["warm"]
    assert rep["warmup_s"] == 2 and rep["warmup_from"] == "job", rep
    assert len(rep["runs"]) == 1, rep["runs"]
    assert rule(rep, "StepOutlier")["status"] == "NoIssuesFound", rule(rep, "StepOutlier")
    steps = rep["step_times"]
    assert steps["metric"] == "iter" and steps["warmup_count"] == 3, steps
    assert steps["count"] == 20, steps
    assert sum(b["count"] for b in steps["histogram"]) == 20, steps
    assert steps["spread"]["max"] < 0.1 and steps["spread"]["p5"] >= 0.05, steps


def test_without_the_warmup_the_same_job_has_an_outlier(ran):
    _, jobs, reports = ran
    found = [f for f in jobs["cold"]["findings"] if f["rule"] == "StepOutlier"]
    assert found, jobs["cold"]["findings"]
    rep = reports["cold"]
    assert rep["warmup_s"] == 0 and rep["warmup_samples"] == 0, rep
    r = rule(rep, "StepOutlier")
    assert r["status"] == "IssuesFound" and r["finding"]["rule"] == "StepOutlier", r
    assert "slower" in r["description"] and len(r["recommendation"]) > 40, r
    assert rep["findings_count"] == len(jobs["cold"]["findings"]), rep
    assert rep["step_times"]["count"] == 23 and rep["step_times"]["warmup_count"] == 0, rep


def test_every_rule_is_reported_with_advice(ran):
    _, _, reports = ran
    rep = reports["warm"]
    assert [r["rule"] for r in rep["rules"]] == RULES, rep["rules"]
    for r in rep["rules"]:
        assert r["recommendation"] and r["description"], r
        want = "NotApplicable" if r["needs_gpu"] else "NoIssuesFound"
        assert r["status"] == want and r["finding"] is None, r
    assert rule(rep, "LowGPUUtilization")["skips_warmup"] is True
    assert rule(rep, "MemoryNearLimit")["skips_warmup"] is False


def test_samples_are_marked_in_and_out_of_the_warmup(ran):
    _, _, reports = ran
    rep = reports["warm"]
    marks = [s["warmup"] for s in rep["samples"]]
    assert marks and marks[0] is True and marks[-1] is False, marks
    # the warm-up is a prefix of the run: once over, it stays over
    assert marks == sorted(marks, reverse=True), marks
    assert rep["warmup_samples"] == marks.count(True), rep
    u = rep["usage"]
    assert u["cpu_percent"] is not None and u["memory_bytes"]["max"] > 0, u
    assert u["gpu_percent"] is None and u["gpu_memory_bytes"] is None, u
    assert rep["metrics_complete"] is True, rep


def test_the_config_warmup_and_a_job_without_step_metric(ran):
    _, jobs, reports = ran
    rep = reports["plain"]
    assert jobs["plain"]["status"] == "Completed", jobs["plain"]
    assert rep["warmup_s"] == 20 and rep["warmup_from"] == "config", rep
    # a 1 s job is all warm-up: nothing of it is judged by the steady-state rules
    assert rep["samples"] and all(s["warmup"] for s in rep["samples"]), rep["samples"]
    assert rep["usage"]["cpu_percent"] is None, rep["usage"]
    steps = rep["step_times"]
    assert steps["metric"] == "step_time" and steps["count"] == 0, steps
    assert steps["histogram"] == [] and steps["spread"] is None, steps


BAD = [
    ({"rules": []}, "rules"),
    ({"rules": {"warmup_s": -1}}, "rules.warmup_s"),
    ({"rules": {"warmup_s": 86401}}, "rules.warmup_s"),
    ({"rules": {"warmup_s": "10"}}, "rules.warmup_s"),
    ({"rules": {"warmup_s": 1.5}}, "rules.warmup_s"),
    ({"rules": {"step_metric": "nope"}, "metric_definitions": METRICS}, "rules.step_metric"),
    ({"rules": {"step_metric": 3}, "metric_definitions": METRICS}, "rules.step_metric"),
    ({"rules": {"patience": 3}}, "rules.patience"),
]


def test_bad_rules_are_named_and_make_nothing(rd, ran):
    c = ran[0]
    before = c.get("/api/v1/jobs").json["total"]
    for fields, field in BAD:
        r = submit(c, ["true"], expect=None, **fields)
        assert_error(r, 400, field=field)
    assert c.get("/api/v1/jobs").json["total"] == before


def test_another_users_report_is_not_found(rd, ran):
    c, jobs, _ = ran
    _, other = new_user(rd, "ro")
    assert_error(other.get(f"/api/v1/jobs/{jobs['warm']['id']}/report"), 404)
    assert_error(c.get("/api/v1/jobs/999999/report"), 404)
    page = c.get(f"/jobs/{jobs['warm']['id']}/report")
    assert page.status == 200 and b"job-report.js" in page.body, page
