"""A restart of the whole daemon mid-job (SIGTERM to labd with keep_on_shutdown =
true, then the same config again).  The job's record and its log survive; the
running attempt does not (the job's output pipes end with the supervisor, so labd
ends that pool as lost: an infrastructure failure), and a job with a retry left
resumes from its checkpoint and completes.  Every line logged before the restart
is still in the log, once."""

import pytest

from jobs_lib import PY, jobs_daemon, log_text, new_user, put_files, script, submit, wait_job
from labd_harness import SLOW, sandbox_records, wait_until


@pytest.fixture(scope="module")
def rd(runtime_daemon_factory):
    return jobs_daemon(runtime_daemon_factory, "jobs-restart", runtime={"keep_on_shutdown": "true"})


def test_job_and_log_survive_a_daemon_restart(rd):
    _, c = new_user(rd, "jr")
    put_files(c, {"code/resume.py": script("resume.py")})
    j = submit(c, [PY, "code/resume.py"], name="across", max_retries=1,
               hyperparameters={"target": 16})
    wait_until(lambda: "count=3" in log_text(c, j["id"]), 60 * SLOW, "count=3")
    assert rd.stop(15) == 0, rd.log_tail()
    rd.start(expect_admin_password=False)
    c.login(c.name, c.password)
    j = wait_job(c, j["id"], timeout=90 * SLOW)
    log = log_text(c, j["id"])
    assert j["status"] == "Completed", f"{j}\n{log}\n" + rd.log_tail()
    lines = log.splitlines()
    assert lines[:4] == ["fresh start", "count=1", "count=2", "count=3"], log
    resumed = [int(ln.split()[-1]) for ln in lines if ln.startswith("resumed from")]
    assert len(resumed) == 1 and resumed[0] >= 3, log
    counts = [int(ln.split("=")[1]) for ln in lines if ln.startswith("count=")]
    assert counts == sorted(set(counts)) and counts[-1] == 16, log  # none repeated
    assert j["attempt"] == 2, j
    assert any(t["status"] == "Training" and "retry" in (t["message"] or "").lower()
               for t in j["transitions"]) or len([t for t in j["transitions"]
                                                   if t["status"] == "Training"]) == 2, j["transitions"]
    assert "done at 16" in log
    # the retry's pool (keep_alive_s 0) goes: nothing is left for labd's next stop to keep
    wait_until(lambda: not sandbox_records(rd.state_dir), 20 * SLOW,
               lambda: f"the job's pool to end: {sandbox_records(rd.state_dir)}")
