"""Training jobs API over the real daemon and store (docs/jobs.md):

- a bad submit is a 400 whose error.field names the field, and nothing is made;
- a good submit is 201 with every default filled in; a second job of the same name is
  409 job_exists;
- the list pages newest first with a total, filters by status and name;
- concurrent_jobs refuses with 429 quota_exceeded naming the limit;
- the scope `jobs`: a token without it is refused, another user's job is not found;
- an administrator reaches other users' jobs and warm pools only with `admin:jobs`: a
  `jobs`-only admin token sees and stops the admin's own jobs, nobody else's;
- the list reads a summary: no request fields (a job's environment holds secrets, its
  spec can be large), no metrics, findings or transitions; GET /jobs/{id} has them all;
- stop: a waiting job ends Stopped at once; a job already over is 409.

Runs without a GPU and without the supervisor's pools: a job that would need a pool is
held Pending by the user's pool cap ([jobs] max_pools_per_user = 1 and a pool row seeded
as in use), as test_quota_enforce.py seeds ledger rows."""

import sqlite3
import time

import pytest

from labd_harness import assert_error, make_user, user_id, wait_until


def assert_status(r, status):
    """The response r, after checking its status."""
    assert r.status == status, f"{r.method} {r.path}: expected {status}, got {r.status}: {r.body[:300]!r}"
    return r


@pytest.fixture(scope="module")
def jd(daemon_factory):
    return daemon_factory("jobs-api", sections={"jobs": {"max_pools_per_user": "1",
                                                          "keep_alive_max": "600"},
                                                 "quota": {"concurrent_jobs": "10"}})


def submit(c, **fields):
    body = {"name": fields.pop("name"), "command": fields.pop("command", ["sh", "-c", "true"])}
    body.update(fields)
    return c.post("/api/v1/jobs", json=body)


def count_jobs(d, uid):
    db = sqlite3.connect(f"file:{d.db_file}?mode=ro", uri=True, timeout=10)
    try:
        return db.execute("SELECT count(*) FROM jobs WHERE user_id = ?", (uid,)).fetchone()[0]
    finally:
        db.close()


def hold_pool(d, uid):
    """A pool row in use for user uid: with max_pools_per_user = 1 their jobs wait Pending
    (the row's sandbox does not exist; the next reconciliation, a minute away, ends it)."""
    db = sqlite3.connect(d.db_file, timeout=10)
    try:
        now = int(time.time())
        db.execute("INSERT INTO pools (user_id, state, created_at, deadline, ready)"
                   " VALUES (?, 'in_use', ?, ?, 1)", (uid, now, now + 3600))
        db.commit()
    finally:
        db.close()


def seed_live_job(d, uid, name):
    """A job in progress that no pool runs (concurrent_jobs counts it)."""
    db = sqlite3.connect(d.db_file, timeout=10)
    try:
        db.execute("INSERT INTO jobs (user_id, name, status, secondary, spec, kind,"
                   " max_runtime_s, max_wait_s, grace_s, created_at, run_sent)"
                   " VALUES (?, ?, 'InProgress', 'Training', '{}', 'cpu', 60, 60, 10, ?, 1)",
                   (uid, name, int(time.time())))
        db.commit()
    finally:
        db.close()


BAD = [
    ({"name": "Bad_Name"}, "name"),
    ({"command": []}, "command"),
    ({"command": ["sh", 7]}, "command[1]"),
    ({"working_dir": "/etc"}, "working_dir"),
    ({"output_path": "x/../../y"}, "output_path"),
    ({"checkpoint_path": ""}, "checkpoint_path"),
    ({"environment": {"9X": "v"}}, "environment.9X"),
    ({"hyperparameters": [1, 2]}, "hyperparameters"),
    ({"input_channels": [{"name": "train", "path": "/data"}]}, "input_channels[0].path"),
    ({"type": "tpu"}, "type"),
    ({"gpu_count": 2}, "gpu_count"),
    ({"type": "gpu"}, "gpu_count"),  # this lab has no GPU
    ({"image": "no-such-image"}, "image"),
    ({"max_runtime_s": 0}, "max_runtime_s"),
    ({"max_wait_s": -5}, "max_wait_s"),
    ({"keep_alive_s": 601}, "keep_alive_s"),
    ({"max_retries": 31}, "max_retries"),
    ({"metric_definitions": [{"name": "loss", "regex": "loss=(["}]},
     "metric_definitions[0].regex"),
    ({"metric_definitions": [{"name": "loss", "regex": "x" * 501}]},
     "metric_definitions[0].regex"),
    ({"memory_bytes": 1024}, "memory_bytes"),
    ({"cpus_milli": 1}, "cpus_milli"),
    ({"script": "echo both"}, "script"),  # command and script: one of them
    ({"instance_count": 2}, "instance_count"),  # one machine: one host
    ({"instance_count": 0}, "instance_count"),
    # each word within bounds, the whole over the 48 KiB the job runner takes
    ({"command": ["true"] + ["x" * 4000] * 13}, "command"),
]


def test_bad_fields_are_named_and_nothing_is_made(jd):
    c = make_user(jd, prefix="jv")
    uid = user_id(jd, c.user)
    for fields, field in BAD:
        body = {"name": "ok-name", "command": ["sh"]}
        body.update(fields)
        e = assert_error(c.post("/api/v1/jobs", json=body), 400, field=None)
        assert e.get("field") == field, f"{fields}: named {e.get('field')!r}, not {field!r}: {e}"
    assert_error(c.post("/api/v1/jobs", json={"name": "a", "command": ["sh"], "nope": 1}),
                 400, "bad_field")
    assert_error(c.post("/api/v1/jobs", body=b"{", content_type="application/json",
                        openapi=False), 400, "bad_json")
    assert count_jobs(jd, uid) == 0
    listed = assert_status(c.get("/api/v1/jobs"), 200).json
    assert listed == {"jobs": [], "total": 0}


def test_submit_fills_defaults_and_names_are_unique(jd):
    c = make_user(jd, prefix="js")
    hold_pool(jd, user_id(jd, c.user))
    j = assert_status(submit(c, name="train-1", hyperparameters={"lr": 0.01},
                             metric_definitions=[{"name": "loss", "regex": "loss=([0-9.]+)"}]),
                      201).json
    assert j["name"] == "train-1" and j["user"] == c.user
    assert j["status"] == "InProgress" and j["secondary_status"] == "Pending"
    assert j["type"] == "cpu" and j["gpu_count"] == 0
    assert j["output_path"] == "jobs/train-1"
    assert j["checkpoint_path"] == "jobs/train-1/checkpoints"
    assert j["working_dir"] == "" and j["environment"] == {}
    assert j["hyperparameters"] == {"lr": 0.01}
    assert j["max_runtime_s"] == 86400 and j["keep_alive_s"] == 0 and j["max_retries"] == 0
    assert j["attempt"] == 1 and j["exit_code"] is None and j["failure_reason"] is None
    assert j["billable_s"] == 0 and j["warm_pool"] is None
    assert [t["status"] for t in j["transitions"]] == ["Pending"]
    assert j["transitions"][0]["end_at"] is None
    got = assert_status(c.get(f"/api/v1/jobs/{j['id']}"), 200).json
    assert got["id"] == j["id"] and got["metric_definitions"] == j["metric_definitions"]
    e = assert_error(submit(c, name="train-1"), 409, "job_exists")
    assert "train-1" in e["message"]
    assert count_jobs(jd, user_id(jd, c.user)) == 1


def test_list_pages_and_filters(jd):
    c = make_user(jd, prefix="jl")
    hold_pool(jd, user_id(jd, c.user))
    ids = [assert_status(submit(c, name=f"run-{i}"), 201).json["id"] for i in range(3)]
    page = assert_status(c.get("/api/v1/jobs?limit=2"), 200).json
    assert page["total"] == 3 and [j["id"] for j in page["jobs"]] == ids[::-1][:2]
    assert "transitions" not in page["jobs"][0]
    rest = assert_status(c.get("/api/v1/jobs?limit=2&offset=2"), 200).json
    assert rest["total"] == 3 and [j["id"] for j in rest["jobs"]] == [ids[0]]
    named = assert_status(c.get("/api/v1/jobs?name=run-1"), 200).json
    assert named["total"] == 1 and named["jobs"][0]["id"] == ids[1]
    pending = assert_status(c.get("/api/v1/jobs?status=Pending"), 200).json
    assert pending["total"] == 3
    assert assert_status(c.get("/api/v1/jobs?status=Completed"), 200).json["total"] == 0
    e = assert_error(c.get("/api/v1/jobs?limit=201"), 400, field=None)
    assert e["field"] == "limit"
    assert assert_error(c.get("/api/v1/jobs?status=Sleeping"), 400, field=None)["field"] == "status"
    assert_error(c.get(f"/api/v1/jobs?user={c.user}"), 403, "forbidden")
    admin = jd.admin()
    assert assert_status(admin.get(f"/api/v1/jobs?user={c.user}"), 200).json["total"] == 3


def test_concurrent_jobs_refused_with_429(jd):
    c = make_user(jd, prefix="jq")
    uid = user_id(jd, c.user)
    admin = jd.admin()
    assert_status(admin.put(f"/api/v1/users/{c.user}/quota",
                            json={"overrides": {"concurrent_jobs": 1}}), 200)
    seed_live_job(jd, uid, "already-running")
    r = submit(c, name="one-too-many")
    assert r.status == 429, r
    e = r.json["error"]
    assert e["code"] == "quota_exceeded" and e["limit"] == "concurrent_jobs", e
    assert r.header("Retry-After")
    assert count_jobs(jd, uid) == 1


def test_scope_and_ownership(jd):
    c = make_user(jd, prefix="jo")
    other = make_user(jd, prefix="jx")
    hold_pool(jd, user_id(jd, c.user))
    j = assert_status(submit(c, name="mine"), 201).json
    assert_error(other.get(f"/api/v1/jobs/{j['id']}"), 404, "not_found")
    assert_error(other.post(f"/api/v1/jobs/{j['id']}/stop"), 404, "not_found")
    assert assert_status(other.get("/api/v1/jobs"), 200).json["total"] == 0
    t = assert_status(c.post("/api/v1/me/tokens", json={"name": "no-jobs", "password": c.password,
                                                          "scopes": ["read:usage"]}), 201).json
    b = jd.client()
    b.bearer = t["token"]
    e = assert_error(b.get("/api/v1/jobs"), 403, "insufficient_scope")
    assert '"jobs"' in e["message"]
    t = assert_status(c.post("/api/v1/me/tokens", json={"name": "jobs", "password": c.password,
                                                          "scopes": ["jobs"]}), 201).json
    b.bearer = t["token"]
    assert assert_status(b.get(f"/api/v1/jobs/{j['id']}"), 200).json["name"] == "mine"
    assert_status(b.get("/api/v1/warm-pools"), 200)


def admin_token(jd, scopes):
    """A bearer client of the bootstrap administrator holding scopes."""
    admin = jd.admin()
    t = assert_status(admin.post("/api/v1/me/tokens", json={
        "name": "ci-" + "-".join(s.replace(":", "_") for s in scopes),
        "password": jd.admin_password, "scopes": scopes}), 201).json
    b = jd.client()
    b.bearer = t["token"]
    return b


def test_admin_reach_needs_admin_jobs(jd):
    c = make_user(jd, prefix="ja")
    uid = user_id(jd, c.user)
    hold_pool(jd, uid)
    j = assert_status(submit(c, name="secret", environment={"HF_TOKEN": "hf_s3cret"}), 201).json
    db = sqlite3.connect(f"file:{jd.db_file}?mode=ro", uri=True, timeout=10)
    pool_id = db.execute("SELECT max(id) FROM pools WHERE user_id = ?", (uid,)).fetchone()[0]
    db.close()
    ci = admin_token(jd, ["jobs"])
    # the admin's own jobs: yes; another user's: as if they did not exist
    assert_status(ci.get("/api/v1/jobs"), 200)
    e = assert_error(ci.get(f"/api/v1/jobs?user={c.user}"), 403, "insufficient_scope")
    assert '"admin:jobs"' in e["message"], e
    for path in (f"/api/v1/jobs/{j['id']}", f"/api/v1/jobs/{j['id']}/logs",
                 f"/api/v1/jobs/{j['id']}/metrics"):
        assert_error(ci.get(path), 404, "not_found")
    assert_error(ci.post(f"/api/v1/jobs/{j['id']}/stop"), 404, "not_found")
    assert_error(ci.get(f"/api/v1/warm-pools?user={c.user}"), 403, "insufficient_scope")
    assert_error(ci.delete(f"/api/v1/warm-pools/{pool_id}"), 404, "not_found")
    assert assert_status(c.get(f"/api/v1/jobs/{j['id']}"), 200).json["status"] == "InProgress"
    # with admin:jobs (and jobs, which every job route needs) the admin reaches them
    ops = admin_token(jd, ["jobs", "admin:jobs"])
    assert assert_status(ops.get(f"/api/v1/jobs?user={c.user}"), 200).json["total"] == 1
    got = assert_status(ops.get(f"/api/v1/jobs/{j['id']}"), 200).json
    assert got["environment"] == {"HF_TOKEN": "hf_s3cret"}
    assert_error(admin_token(jd, ["admin:jobs"]).get(f"/api/v1/jobs/{j['id']}"), 403,
                 "insufficient_scope")
    # a user cannot hold it
    r = c.post("/api/v1/me/tokens", json={"name": "wide", "password": c.password,
                                          "scopes": ["jobs", "admin:jobs"]})
    assert_error(r, 403, "forbidden", field='"scopes"')


def test_list_is_a_summary(jd):
    c = make_user(jd, prefix="jm")
    hold_pool(jd, user_id(jd, c.user))
    j = assert_status(submit(c, name="big", environment={"HF_TOKEN": "hf_s3cret"},
                             command=["sh", "-c", "true"] + ["x" * 4000] * 8,
                             metric_definitions=[{"name": "loss", "regex": "loss=([0-9.]+)"}]),
                      201).json
    item = assert_status(c.get("/api/v1/jobs"), 200).json["jobs"][0]
    assert item["id"] == j["id"]
    for field in ("command", "environment", "hyperparameters", "input_channels",
                  "metric_definitions", "final_metrics", "findings", "log_bytes", "transitions"):
        assert field not in item, f"the list carries {field}: {item}"
    # what the dashboard's jobs card and toasts read
    for field in ("id", "name", "user", "status", "secondary_status", "failure_reason",
                  "created_at", "billable_s", "warm_pool", "type", "gpu_count", "attempt"):
        assert field in item, f"the list lacks {field}: {item}"
    assert "hf_s3cret" not in c.get("/api/v1/jobs").text
    full = assert_status(c.get(f"/api/v1/jobs/{j['id']}"), 200).json
    assert full["environment"] == {"HF_TOKEN": "hf_s3cret"} and len(full["command"]) == 11
    assert "transitions" in full and "final_metrics" in full


def test_stop_waiting_job_and_stop_twice(jd):
    c = make_user(jd, prefix="jt")
    hold_pool(jd, user_id(jd, c.user))
    j = assert_status(submit(c, name="waits"), 201).json
    assert_error(c.post(f"/api/v1/jobs/{j['id']}/stop", json={"grace_s": 0}), 400, field=None)
    s = assert_status(c.post(f"/api/v1/jobs/{j['id']}/stop"), 202).json
    assert s["status"] == "Stopped" and s["secondary_status"] == "Stopped"
    assert s["ended_at"] is not None
    assert [t["status"] for t in s["transitions"]] == ["Pending", "Stopped"]
    assert all(t["end_at"] for t in s["transitions"][:-1])
    assert_error(c.post(f"/api/v1/jobs/{j['id']}/stop"), 409, "job_not_running")
    assert_status(c.get("/api/v1/warm-pools"), 200)
    assert_error(c.delete("/api/v1/warm-pools/999999"), 404, "not_found")


def test_max_wait_ends_a_waiting_job(jd):
    c = make_user(jd, prefix="jw")
    hold_pool(jd, user_id(jd, c.user))
    j = assert_status(submit(c, name="impatient", max_wait_s=1), 201).json
    wait_until(lambda: c.get(f"/api/v1/jobs/{j['id']}").json["status"] != "InProgress",
               timeout=10, what="max_wait_s to end the job")
    got = c.get(f"/api/v1/jobs/{j['id']}").json
    assert got["status"] == "Stopped" and got["secondary_status"] == "MaxWaitTimeExceeded", got
    assert "max_wait_s" in got["failure_reason"]
