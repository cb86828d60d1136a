"""Crashes of labd at each phase of a training job (include/labd/fault.h), then the
normal restart: the job ends (in its first attempt, or retried as an
infrastructure failure), its pool is taken over or torn down with nothing left
(mounts, loop devices, cgroups, sandbox processes; `labd doctor` shows no LEFT),
no ledger entry is left open or counted twice, and the user's next job runs.
Beside test_faults.py (runtimes), as its own file so that the two run side by side."""

import sqlite3
import time

import pytest

from jobs_lib import JOBS_DEFAULTS, new_user, submit, wait_job
from labd_harness import SLOW, remember_sandboxes, runtime_daemon, teardown_runtime_daemon, wait_until
from test_faults import crashed, doctor, fault_build, leftovers, restart  # noqa: F401 (fixture)

POINTS = [
    "job.dispatch",          # web: about to ask for the job's pool
    "job.pool.start",        # supervisor: the pool's start worker forked
    "job.phase.training",    # supervisor: the command runs
    "job.phase.uploading",   # supervisor: the command ended, outputs going home
    "job.end",               # supervisor: the job's end reported
]
COMMAND = ["/bin/sh", "-c", "sleep 1; echo done"]


@pytest.fixture(scope="module")
def jd(fault_build):  # noqa: F811
    d = runtime_daemon("faults-jobs", runtime={"cpu_limit": "1h", "stop_grace": "1s"},
                       sections={"jobs": dict(JOBS_DEFAULTS, keep_alive_max="0s")})
    d.start(binary=fault_build)
    _, c = new_user(d, prefix="fj")
    c.user = c.name
    d.job_client = c
    yield d
    teardown_runtime_daemon(d, stop_timeout=60)


def check_ledger(d, user):
    db = sqlite3.connect(f"file:{d.db_file}?mode=ro", uri=True, timeout=10)
    try:
        rows = db.execute("SELECT source, job_id, pool_id, start_at, end_at, billable_s"
                          " FROM ledger WHERE user_name = ? ORDER BY id", (user,)).fetchall()
    finally:
        db.close()
    assert all(r[4] is not None for r in rows), f"an entry is left open: {rows}"
    for r in rows:
        assert r[5] == r[4] - r[3] >= 0, rows
    # one entry per attempt (docs/jobs.md, "Billing and quotas"), one after another
    for job_id in {r[1] for r in rows if r[0] == "job"}:
        spans = sorted((r[3], r[4]) for r in rows if r[0] == "job" and r[1] == job_id)
        assert len(spans) <= 2, f"job {job_id}: more entries than attempts: {rows}"
        for (s1, e1), (s2, _) in zip(spans, spans[1:]):
            assert s2 >= e1, f"job {job_id} is counted twice (its entries overlap): {rows}"


def ledger_first_billed(d, user, job_id):
    """billable_s of the job's first ledger entry, None when it has none."""
    db = sqlite3.connect(f"file:{d.db_file}?mode=ro", uri=True, timeout=10)
    try:
        row = db.execute("SELECT billable_s FROM ledger WHERE user_name = ? AND job_id = ?"
                         " ORDER BY id LIMIT 1", (user, job_id)).fetchone()
    finally:
        db.close()
    return row[0] if row else None


@pytest.mark.parametrize("point", POINTS)
def test_crash_in_a_job_phase_leaves_nothing(jd, point):
    c = jd.job_client
    restart(jd, point)
    c.login(c.user, c.password)
    try:
        job = submit(c, COMMAND, max_retries=1)
    except OSError:
        job = None  # the web process died in the handler (job.dispatch runs there)
    crashed(jd, point)
    remember_sandboxes(jd)
    doctor(jd)
    time.sleep(1.05 - time.time() % 1)
    restart(jd)
    c.login(c.user, c.password)
    if job is None:
        r = c.get("/api/v1/jobs")
        assert r.status == 200, r
        job = r.json["jobs"][0]
    j = wait_job(c, job["id"], timeout=120 * SLOW)
    print(f"\n{point}: job {j['status']} after {j.get('attempt')} attempt(s): "
          f"{j.get('secondary_status')}")
    assert j["status"] in ("Completed", "Failed"), j
    if point in ("job.dispatch", "job.pool.start"):
        # a start lost with the web process or the supervisor is ended at the
        # first reconciliation, not billed until the next full pass (~60 s)
        billed = ledger_first_billed(jd, c.user, job["id"])
        assert billed is None or billed <= 15, (point, billed, j.get("transitions"))
    wait_until(lambda: not leftovers(jd), 30 * SLOW, lambda: f"no leftovers: {leftovers(jd)}",
               interval=0.2)
    # the pool's record goes when its teardown ends, a moment after its sandbox
    wait_until(lambda: "LEFT" not in doctor(jd).stdout, 30 * SLOW,
               lambda: f"doctor to find nothing left:\n{doctor(jd).stdout}", interval=0.5)
    check_ledger(jd, c.user)
    again = wait_job(c, submit(c, COMMAND)["id"], timeout=120 * SLOW)
    assert again["status"] == "Completed", again
    check_ledger(jd, c.user)
