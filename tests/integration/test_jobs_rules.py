"""Profiling rules: each rule that a CPU job can show fires on a job built to
trigger it (jobs_scripts/rules.py), with the samples that triggered it, and a
healthy job gets no finding.  Thresholds are lowered in [jobs] so that each job
lasts seconds.  The GPU rules (LowGPUUtilization, CPUBottleneck, GPUMemoryIncrease)
need GPU samples, which a CPU-only machine (or [gpu] stand_in devices) cannot give:
they are proven by the unit tests of the rules (docs/jobs.md says so)."""

import glob
import os
import uuid

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
# the I/O job's gate (jobs_scripts/rules.py): opened once its writes are throttled
GATE = f"gate-{uuid.uuid4().hex}"
# its writes to its home, each 4 KiB with an fsync: at this rate an fsync waits about
# 0.1 s for its turn on the device, however long the writer itself waited for a CPU
IO_WRITE_BYTES_PER_S = 32 << 10
JOBS = {
    # rule: (mode, seconds, extra submit fields)
    "IOBottleneck": ("io", 5, {"hyperparameters": {"gate": GATE}}),
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


def gated_job_pid():
    """The pid of the I/O job waiting at GATE (its environment names the gate,
    SM_HPS), or None."""
    for env in glob.glob("/proc/[0-9]*/environ"):
        pid = env.split("/")[2]
        try:
            with open(env, "rb") as fh:
                if GATE.encode() not in fh.read():
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if b"rules.py\0io\0" in fh.read():
                    return int(pid)
        except OSError:
            continue
    return None


def cgroup_knob_dirs(pid):
    """{hierarchy: cgroup dir} of pid: "blkio" (v1) and "unified" (v2)."""
    mounts = {}
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            f = line.split()
            fs, opts = f[f.index("-") + 1], f[-1].split(",")
            if fs == "cgroup2":
                mounts.setdefault("unified", f[4])
            elif fs == "cgroup" and "blkio" in opts:
                mounts.setdefault("blkio", f[4])
    out = {}
    with open(f"/proc/{pid}/cgroup") as fh:
        for line in fh:
            _, ctls, path = line.rstrip("\n").split(":", 2)
            key = "unified" if ctls == "" else "blkio" if "blkio" in ctls.split(",") else None
            if key in mounts:
                out[key] = mounts[key] + path
    return out


def throttle_and_open_gate():
    """Limits the gated I/O job's writes to its home's loop device to
    IO_WRITE_BYTES_PER_S, with the cgroup knob the sandbox library writes for that
    limit (sandbox/cgbox.c: v1 blkio.throttle.write_bps_device, v2 io.max wbps=),
    then opens its gate: every fsync of the job waits on the device, so that the I/O
    pressure it is judged on cannot fall below the threshold because a loaded host
    left the job waiting for a CPU instead."""
    pid = wait_until(gated_job_pid, 60 * SLOW, "the I/O job to wait at its gate")
    out = f"/proc/{pid}/root/opt/ml/output"
    st = os.stat(out)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    assert os.major(st.st_dev) == 7, f"the job's output folder is not on its home ({dev})"
    dirs = cgroup_knob_dirs(pid)
    done = []
    # the job's own cgroup, or its sandbox's (one above) when only that has the knob
    for key, knob, line in (("blkio", "blkio.throttle.write_bps_device", f"{dev} {IO_WRITE_BYTES_PER_S}"),
                            ("unified", "io.max", f"{dev} wbps={IO_WRITE_BYTES_PER_S}")):
        d = dirs.get(key)
        if d and not os.path.exists(os.path.join(d, knob)):
            d = os.path.dirname(d)
        if d and os.path.exists(os.path.join(d, knob)):
            with open(os.path.join(d, knob), "w") as fh:
                fh.write(line)
            done.append(f"{d}/{knob}")
    assert done, f"no write limit could be set on the I/O job's cgroups {dirs}"
    with open(os.path.join(out, GATE), "w"):
        pass
    return done


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
    print(f"\nthe I/O job's writes limited through {throttle_and_open_gate()}")

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
