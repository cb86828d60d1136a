"""What training jobs keep on the state file system, and when it goes
(docs/jobs.md "Retention"; security review finding 2): each user's kept job
data (specs, logs, metric points) in GET /api/v1/me/quota and limited by
job_storage_bytes (a submit past it is refused naming the limit), DELETE
/api/v1/jobs/{id} for an ended job, the retention sweep by age ([jobs]
retention) and by count ([jobs] max_kept_per_user), and a deleted user's jobs
going with them: rows, metric points, samples and the log files on disk."""

import os
import sqlite3
import time

import pytest

from jobs_lib import jobs_daemon, log_text, new_user, run_job, submit, wait_job
from labd_harness import SLOW, assert_error, assert_status, audit_entries, wait_until

POINTS = 40
METRIC = [{"name": "loss", "regex": r"loss=(\d+)"}]
PRINT_POINTS = ["/bin/sh", "-c", f"i=0; while [ $i -lt {POINTS} ]; do i=$((i+1)); "
                                 f"echo loss=$i; done"]
TABLES = (("jobs", "id"), ("job_transitions", "job_id"), ("job_metrics", "job_id"),
          ("job_samples", "job_id"), ("job_findings", "job_id"), ("job_observe", "job_id"),
          ("job_storage", "job_id"))


@pytest.fixture(scope="module")
def rd(runtime_daemon_factory):
    return jobs_daemon(runtime_daemon_factory, "jobs-retention",
                       jobs={"max_kept_per_user": "3", "retention_sweep": "1s"})


@pytest.fixture(scope="module")
def aged(runtime_daemon_factory):
    """A daemon whose ended jobs go 3 s after their end."""
    return jobs_daemon(runtime_daemon_factory, "jobs-retention-age",
                       jobs={"retention": "3s", "retention_sweep": "1s"})


def log_file(d, job_id):
    return os.path.join(d.state_dir, "joblogs", f"{job_id}.log")


def rows(d, job_id):
    """{table: rows of job_id} in labd's database, read as root."""
    db = sqlite3.connect(f"file:{d.db_file}?mode=ro", uri=True, timeout=10)
    try:
        return {t: db.execute(f"SELECT count(*) FROM {t} WHERE {col} = ?", (job_id,)).fetchone()[0]
                for t, col in TABLES}
    finally:
        db.close()


def spec_bytes(d, job_id):
    db = sqlite3.connect(f"file:{d.db_file}?mode=ro", uri=True, timeout=10)
    try:
        return db.execute("SELECT length(CAST(spec AS BLOB)) FROM jobs WHERE id = ?",
                          (job_id,)).fetchone()[0]
    finally:
        db.close()


def metric_job(d, c):
    """An ended job with POINTS metric points, all extracted."""
    j = run_job(c, PRINT_POINTS, metric_definitions=METRIC)
    assert j["status"] == "Completed", j
    wait_until(lambda: rows(d, j["id"])["job_metrics"] == POINTS, 30 * SLOW,
               "the job's metric points")
    return j


def gone(d, c, job_id):
    """True once the job, every row of it and its log file are gone."""
    return (c.get(f"/api/v1/jobs/{job_id}").status == 404 and not os.path.exists(log_file(d, job_id))
            and not any(rows(d, job_id).values()))


def test_kept_job_data_is_in_me_quota(rd):
    _, c = new_user(rd, "rq")
    q = c.get("/api/v1/me/quota").json["job_storage"]
    assert q == {"used_bytes": 0, "quota_bytes": 5 << 30, "jobs": 0, "spec_bytes": 0,
                 "log_bytes": 0, "metric_bytes": 0}, q
    j = metric_job(rd, c)
    log = log_text(c, j["id"]).encode()
    assert os.path.getsize(log_file(rd, j["id"])) == len(log) > 0
    q = c.get("/api/v1/me/quota").json["job_storage"]
    # two bytes a point at least per name byte and its number: 48 + 9/4 of the name's
    want_metric = POINTS * 48 + POINTS * len("loss") * 9 // 4
    assert q == {"used_bytes": spec_bytes(rd, j["id"]) + len(log) + want_metric,
                 "quota_bytes": 5 << 30, "jobs": 1, "spec_bytes": spec_bytes(rd, j["id"]),
                 "log_bytes": len(log), "metric_bytes": want_metric}, q
    admin_view = rd.admin().get(f"/api/v1/users/{c.name}/quota").json["job_storage"]
    assert admin_view == q, admin_view
    # the limit is a plan's or an override's like any other
    assert c.get("/api/v1/me/quota").json["limits"]["job_storage_bytes"] == {
        "value": 5 << 30, "source": "default"}


def test_a_submit_past_job_storage_bytes_is_refused_naming_it(rd):
    _, c = new_user(rd, "rl", overrides={"job_storage_bytes": 1 << 20})
    j = run_job(c, ["/bin/sh", "-c", "head -c 1200000 /dev/zero | tr '\\0' a; echo"])
    assert j["status"] == "Completed", j
    r = submit(c, ["true"], expect=None)
    assert r.status == 403, r
    e = r.json["error"]
    assert e["code"] == "quota_exceeded" and e["limit"] == "job_storage_bytes", e
    assert e["limit_value"] == 1 << 20 and "job_storage_bytes" in e["message"], e
    q = c.get("/api/v1/me/quota").json["job_storage"]
    assert q["used_bytes"] > q["quota_bytes"] == 1 << 20, q
    # deleting the ended job makes room again
    assert_status(c.delete(f"/api/v1/jobs/{j['id']}"), 204)
    wait_job(c, submit(c, ["true"])["id"])


def test_delete_an_ended_job_and_everything_it_keeps(rd):
    _, c = new_user(rd, "rd", overrides={"concurrent_jobs": 4})
    _, other = new_user(rd, "ro")
    live = submit(c, ["sleep", "60"])
    e = assert_error(c.delete(f"/api/v1/jobs/{live['id']}"), 409, "job_not_ended")
    assert "stop" in e["message"], e
    assert_error(other.delete(f"/api/v1/jobs/{live['id']}"), 404, "not_found")
    assert_status(c.post(f"/api/v1/jobs/{live['id']}/stop", json={"grace_s": 1}), 202)
    wait_job(c, live["id"])
    assert_status(c.delete(f"/api/v1/jobs/{live['id']}"), 204)
    j = metric_job(rd, c)
    assert os.path.exists(log_file(rd, j["id"])) and all(
        rows(rd, j["id"])[t] for t in ("jobs", "job_transitions", "job_metrics", "job_storage"))
    assert_error(other.delete(f"/api/v1/jobs/{j['id']}"), 404, "not_found")
    assert_status(c.delete(f"/api/v1/jobs/{j['id']}"), 204)
    # at once: its rows, and its log through the supervisor (joblogs/ is root's)
    assert gone(rd, c, j["id"]), rows(rd, j["id"])
    assert_error(c.delete(f"/api/v1/jobs/{j['id']}"), 404, "not_found")
    assert c.get("/api/v1/me/quota").json["job_storage"]["jobs"] == 0
    assert audit_entries(rd.admin(), "job.delete", c.name), "job.delete not audited"


def admin_token(d, scopes):
    """A bearer client of the bootstrap administrator holding scopes."""
    t = d.admin().post("/api/v1/me/tokens", json={
        "name": "rt-" + "-".join(s.replace(":", "_") for s in scopes),
        "password": d.admin_password, "scopes": scopes})
    assert_status(t, 201)
    b = d.client()
    b.bearer = t.json["token"]
    return b


def test_an_admin_deletes_another_users_job_only_with_admin_jobs(rd):
    _, c = new_user(rd, "ra")
    j = run_job(c, ["echo", "hi"])
    assert_error(admin_token(rd, ["jobs"]).delete(f"/api/v1/jobs/{j['id']}"), 404, "not_found")
    assert c.get(f"/api/v1/jobs/{j['id']}").status == 200
    assert_status(admin_token(rd, ["jobs", "admin:jobs"]).delete(f"/api/v1/jobs/{j['id']}"), 204)
    assert gone(rd, c, j["id"])


def test_the_sweep_keeps_each_users_newest_max_kept_per_user(rd):
    _, c = new_user(rd, "rk", overrides={"concurrent_jobs": 4})
    _, bystander = new_user(rd, "rb")
    theirs = run_job(bystander, ["echo", "mine"])
    oldest = run_job(c, ["echo", "oldest"])
    assert os.path.exists(log_file(rd, oldest["id"]))
    time.sleep(1.1)  # ends are kept to the second: the next ones end later
    newer = []
    for _ in range(3):  # ended at once: stopped before they start
        j = submit(c, ["sleep", "60"])
        c.post(f"/api/v1/jobs/{j['id']}/stop", json={"grace_s": 1})
        newer.append(wait_job(c, j["id"]))
    # [jobs] max_kept_per_user = 3: the oldest goes, rows and log, by the next sweep
    wait_until(lambda: gone(rd, c, oldest["id"]), 20 * SLOW, "the oldest job to be swept")
    assert [c.get(f"/api/v1/jobs/{j['id']}").status for j in newer] == [200] * 3
    assert c.get("/api/v1/jobs").json["total"] == 3
    # another user's one job is theirs to keep
    assert bystander.get(f"/api/v1/jobs/{theirs['id']}").status == 200
    assert os.path.exists(log_file(rd, theirs["id"]))


def test_deleting_a_user_deletes_their_jobs_points_and_logs(rd):
    name, c = new_user(rd, "rx")
    j = metric_job(rd, c)
    assert os.path.exists(log_file(rd, j["id"])) and rows(rd, j["id"])["job_metrics"] == POINTS
    assert_status(rd.admin().delete(f"/api/v1/users/{name}"), 204)
    wait_until(lambda: not os.path.exists(log_file(rd, j["id"])), 10 * SLOW,
               "the deleted user's job log to be removed")
    assert not any(rows(rd, j["id"]).values()), rows(rd, j["id"])


def test_ended_jobs_go_after_retention(aged):
    _, c = new_user(aged, "rr")
    j = metric_job(aged, c)
    assert os.path.exists(log_file(aged, j["id"]))
    # [jobs] retention = 3s, swept each second
    wait_until(lambda: gone(aged, c, j["id"]), 20 * SLOW, "the ended job to be swept")


def test_an_orphaned_log_is_swept(rd):
    """A log whose row is gone (a crash between the two steps) is removed by the
    next sweep; a log whose job is kept is not touched."""
    _, c = new_user(rd, "rp")
    j = run_job(c, ["echo", "kept"])
    orphan = log_file(rd, 10 ** 9)  # no job has this id
    with open(orphan, "w") as fh:
        fh.write("left over\n")
    wait_until(lambda: not os.path.exists(orphan), 20 * SLOW, "the orphaned log to be swept")
    assert os.path.exists(log_file(rd, j["id"]))
    assert log_text(c, j["id"]) == "kept\n"
