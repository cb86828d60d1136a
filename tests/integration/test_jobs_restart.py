"""A restart of the whole daemon mid-job (SIGTERM to labd with keep_on_shutdown =
true, then the same config again): the job's sandbox lives on, labd re-adopts it,
the job completes and its log holds every line, before, during and after."""

import time

import pytest

from jobs_lib import jobs_daemon, log_text, new_user, submit, wait_job
from labd_harness import SLOW, sandbox_records, wait_until


@pytest.fixture(scope="module")
def rd(runtime_daemon_factory):
    return jobs_daemon(runtime_daemon_factory, "jobs-restart", runtime={"keep_on_shutdown": "true"})


def test_job_and_log_survive_a_daemon_restart(rd):
    _, c = new_user(rd, "jr")
    n = 50
    j = submit(c, ["/bin/sh", "-c", f"i=0; while [ $i -lt {n} ]; do i=$((i+1)); echo tick=$i; "
                                    "sleep 0.2; done"])
    wait_until(lambda: "tick=3" in log_text(c, j["id"]), 60 * SLOW, "tick=3")
    boxes = {kv["id"] for _, kv in sandbox_records(rd.state_dir)}
    assert boxes, "no job sandbox"
    assert rd.stop(15) == 0, rd.log_tail()
    assert {kv["id"] for _, kv in sandbox_records(rd.state_dir)} == boxes, \
        "the job's sandbox did not survive labd's exit"
    time.sleep(1)  # the job goes on printing while labd is down
    rd.start(expect_admin_password=False)
    c.login(c.name, c.password)  # sessions persist; a fresh login proves nothing is lost either
    j = wait_job(c, j["id"], timeout=60 * SLOW)
    assert j["status"] == "Completed", f"{j}\n" + rd.log_tail()
    assert log_text(c, j["id"]) == "".join(f"tick={i}\n" for i in range(1, n + 1))
    assert [t["status"] for t in j["transitions"]].count("Training") == 1, j["transitions"]
