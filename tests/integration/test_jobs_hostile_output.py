"""What a job leaves at <output_path>/log.txt never hangs labd (docs/security.md,
finding 4 of the December review): a FIFO, a Unix socket or a device node there
(the last planted by root from outside: a sandbox may not mknod) is replaced by
the copy of the job's log, the job ends at once as it would otherwise, the
supervisor holds no descriptor more than before, and the home is unmounted once
the pool is gone.

Before the fix the upload worker opened a FIFO there for writing and waited for a
reader for ever: the job stayed Uploading until its pool's deadline, and the
worker kept the home mounted and copies of every fd of the supervisor."""

import os
import time

import pytest

from jobs_lib import get_job, jobs_daemon, log_text, new_user, run_job, submit, wait_job
from labd_harness import SLOW, mounts_under, sandbox_records, user_id, wait_until

PROMPT_S = 30 * SLOW  # a job of a few lines, staging and upload included


@pytest.fixture(scope="module")
def hd(runtime_daemon_factory):
    return jobs_daemon(runtime_daemon_factory, "jobs-hostile-output")


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def pools_of(d, name):
    return [kv for _, kv in sandbox_records(d.state_dir) if kv.get("user") == name]


def ends_promptly(c, job):
    t0 = time.monotonic()
    j = wait_job(c, job["id"], timeout=PROMPT_S)
    assert j["status"] == "Completed", (j, log_text(c, j["id"]))
    return j, time.monotonic() - t0


def check_copy(c, name, job_name, said):
    """The next job reads what the upload left: a regular file with the log."""
    j = run_job(c, ["/bin/sh", "-c", f"stat -c %F ~/jobs/{job_name}/log.txt; "
                                     f"cat ~/jobs/{job_name}/log.txt"])
    text = log_text(c, j["id"])
    assert "regular file" in text and said in text, text


def test_fifo_socket_and_device_node_at_log_txt(hd):
    name, c = new_user(hd, "hostile")
    home = os.path.join(hd.state_dir, "homes", str(user_id(hd, name)), "mnt")
    before = fds(hd.pid)

    planted = {
        "fifo": 'mkfifo "$HOME/jobs/$JOB/log.txt"',
        "socket": "python3 -c 'import os, socket; socket.socket(socket.AF_UNIX)"
                  ".bind(os.path.expanduser(\"~/jobs/\" + os.environ[\"JOB\"] + \"/log.txt\"))'",
        # root plants it from outside while the job waits
        "node": 'while [ ! -e "$HOME/jobs/$JOB/planted" ]; do sleep 0.1; done',
    }
    for kind, line in planted.items():
        job_name = f"{kind}-{os.getpid()}"
        said = f"said-by-{kind}"
        job = submit(c, ["/bin/sh", "-c", f"echo {said}; {line}; ls -l ~/jobs/$JOB/"],
                     name=job_name, environment={"JOB": job_name})
        if kind == "node":
            wait_job(c, job["id"], "InProgress", secondary="Training", timeout=PROMPT_S)
            out = os.path.join(home, "jobs", job_name)
            os.mknod(os.path.join(out, "log.txt"), 0o666 | 0o020000, os.makedev(1, 3))
            open(os.path.join(out, "planted"), "w").close()
        j, took = ends_promptly(c, job)
        assert took < PROMPT_S, f"{kind}: {took:.1f} s"
        text = log_text(c, j["id"])
        assert said in text and "log.txt" in text, text  # it was there when the job ended
        check_copy(c, name, job_name, said)

    # every pool ended (no keep-alive): nothing of them is left with the supervisor
    wait_until(lambda: not pools_of(hd, name), 30 * SLOW, "the pools to end")
    wait_until(lambda: not mounts_under(home), 20 * SLOW, "the home to be unmounted")
    wait_until(lambda: fds(hd.pid) <= before, 10 * SLOW,
               lambda: f"the supervisor's fds back to {before}: {fds(hd.pid)} "
                       f"{sorted(os.readlink(f'/proc/{hd.pid}/fd/{f}') for f in os.listdir(f'/proc/{hd.pid}/fd'))}")
    assert get_job(c, j["id"])["status"] == "Completed"
