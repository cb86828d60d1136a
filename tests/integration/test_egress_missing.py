"""A host without the egress tools (docs/operations.md, "GPUs on a real server"): with
[network] nft naming a file that is not there and the default [quota] network = egress,
labd says so once at start, and a runtime's start and a job's are refused up front with
egress_tools_missing, naming the tool and the remedy, instead of failing deep in the
sandbox's network step. A plan with network none still runs."""

import pytest

from jobs_lib import jobs_daemon, new_user, submit, wait_job
from labd_harness import assert_status, stop_runtime, unique_name, wait_runtime

MISSING = "/nonexistent/nft"
REMEDY = "install nftables"


@pytest.fixture(scope="module")
def d(runtime_daemon_factory):
    return jobs_daemon(runtime_daemon_factory, "egressmissing",
                       sections={"network": {"nft": MISSING}})


@pytest.fixture(scope="module")
def offline_plan(d):
    name = unique_name("off")
    assert_status(d.admin().post("/api/v1/plans",
                                 json={"name": name, "limits": {"network": "none"}}), 201)
    return name


def test_start_warns_once(d):
    log = d.log()
    assert log.count(f"[network] {MISSING} is missing") == 1, log[-3000:]
    assert "set [quota] network = none" in log, log[-3000:]


def test_runtime_start_names_the_tool_and_the_remedy(d):
    _, c = new_user(d, "egm")
    r = c.post("/api/v1/me/runtime", json={"type": "cpu"})
    assert r.status in (202, 201), r
    failed = wait_runtime(c, "failed")
    reason = failed["reason"]
    assert "egress_tools_missing" in reason and MISSING in reason, failed
    assert REMEDY in reason and "[quota] network = none" in reason, failed
    assert "exit status" not in d.log(), "the start reached the network step"


def test_job_failure_reason_names_the_tool_and_the_remedy(d):
    _, c = new_user(d, "egj")
    j = wait_job(c, submit(c, ["true"])["id"])
    assert j["status"] == "Failed", j
    reason = j["failure_reason"] or ""
    assert MISSING in reason and REMEDY in reason and "[quota] network = none" in reason, j


def test_network_none_still_runs(d, offline_plan):
    _, c = new_user(d, "egn", plan=offline_plan)
    j = wait_job(c, submit(c, ["sh", "-c", "echo offline-ran"])["id"])
    assert j["status"] == "Completed", j
    r = c.post("/api/v1/me/runtime", json={"type": "cpu"})
    assert r.status in (202, 201), r
    wait_runtime(c, "running")
    stop_runtime(c)
