"""Tuning jobs (docs/jobs.md "Tuning jobs"): a search over a base job's
hyperparameters whose trials are ordinary jobs, on a small real training whose
optimum is known (jobs_scripts/tune_ridge.py: ridge regression by gradient descent
over a learning rate and a regularisation; the optimum over the box is found here by
a dense grid of the same code).

- random finds a validation loss within 10 % of the optimum in 16 trials, each trial's
  objective is the training's own value at its parameters (they reached it through
  hyperparameters.json), the trials reuse warm pools and are billed as jobs;
- grid runs every point of its grid once;
- hyperband stops the trials that trail at a rung (EarlyStopped, their jobs Stopped
  before their last point), never the best;
- stopping the tuning job stops its running trials and makes no more;
- trials wait in the user's concurrent_jobs like any job; a disabled account's search
  ends (Failed) without making more trials;
- a restart of labd mid-search goes on with the same search to its end, each trial's
  job made once;
- every bad request is a 400 naming the field, and nothing is made."""

import math
import os
import sys

import pytest

from jobs_lib import SCRIPTS, at, get_job, jobs_daemon, metric_values, new_user, script, usage_entries
from labd_harness import SLOW, assert_status, wait_until

sys.path.insert(0, SCRIPTS)
import tune_ridge  # noqa: E402  the training itself, to know its optimum

METRIC = [{"name": "val_loss", "regex": r"val_loss=([0-9.e+-]+)"}]
OBJECTIVE = {"metric": "val_loss", "type": "minimize"}
LR = {"name": "lr", "type": "continuous", "min": 0.001, "max": 1.0, "scaling": "log"}
REG = {"name": "reg", "type": "continuous", "min": 0.0, "max": 2.0}
ENDED = ("Completed", "Failed", "Stopped")
TIMEOUT = 120 * SLOW


@pytest.fixture(scope="module")
def td(runtime_daemon_factory):
    return jobs_daemon(runtime_daemon_factory, "tuning")


def base(max_retries=0, **hyperparameters):
    hp = {k: str(v) for k, v in hyperparameters.items()}
    return {"script": script("tune_ridge.py"), "metric_definitions": METRIC,
            "keep_alive_s": 10, "hyperparameters": hp, "max_retries": max_retries}


def create(c, expect=201, **body):
    r = c.post("/api/v1/tuning-jobs", json=body)
    assert r.status == expect, f"{body.get('name')}: {r!r}"
    return r.json


def get_tuning(c, tid):
    r = c.get(f"/api/v1/tuning-jobs/{tid}")
    assert_status(r, 200)
    return r.json


def wait_tuning(c, tid, statuses=ENDED, timeout=TIMEOUT, d=None):
    last = {}

    def done():
        last["t"] = t = get_tuning(c, tid)
        return t if t["status"] in statuses else None

    return wait_until(done, timeout, lambda: f"tuning job {tid} {statuses}: {last.get('t')}"
                      + (d.log_tail() if d else ""), interval=0.2)


def optimum():
    """The best validation loss of the training over LR x REG (a 21 x 21 grid)."""
    return min(tune_ridge.train(10 ** (-3 + 3 * i / 20), 2.0 * j / 20)[-1]
               for i in range(21) for j in range(21))


def in_range(r, v):
    return r["min"] <= v <= r["max"]


def test_random_finds_near_the_optimum_with_trials_as_jobs(td):
    _, c = new_user(td, "tr")
    t = create(c, name="rnd", job=base(), parameter_ranges=[LR, REG], objective=OBJECTIVE,
               strategy="random", max_trials=16, max_parallel=4, seed=11)
    assert t["status"] == "InProgress" and t["max_trials"] == 16 and t["seed"] == 11, t
    t = wait_tuning(c, t["id"])
    trials = t["trials"]
    assert t["status"] == "Completed" and len(trials) == 16, t
    assert all(tr["status"] == "Completed" for tr in trials), trials
    assert t["trial_counts"]["Completed"] == 16, t["trial_counts"]
    for tr in trials:
        p = tr["parameters"]
        assert in_range(LR, p["lr"]) and in_range(REG, p["reg"]), tr
        want = tune_ridge.train(p["lr"], p["reg"])[-1]
        assert math.isclose(tr["objective"], want, rel_tol=1e-5, abs_tol=1e-5), (tr, want)
    # log scaling: about as many learning rates below 0.03 as above (linear: 1 in 32)
    assert 3 <= sum(tr["parameters"]["lr"] < 0.0316 for tr in trials) <= 13, trials
    best = t["best_trial"]
    assert best["objective"] == min(tr["objective"] for tr in trials), best
    opt = optimum()
    assert best["objective"] <= opt * 1.10, (best, opt)
    # ordinary jobs: named after it, warm pools reused, billed in the ledger
    jobs = [get_job(c, tr["job_id"]) for tr in trials]
    assert [j["name"] for j in jobs] == [f"rnd-{i:03d}" for i in range(1, 17)], jobs
    assert sum(j["warm_pool"]["reused"] for j in jobs) >= 8, [j["warm_pool"] for j in jobs]
    billed = {e["job_id"] for e in usage_entries(c) if e["source"] == "job"}
    assert {j["id"] for j in jobs} <= billed, billed
    listed = c.get("/api/v1/tuning-jobs").json
    assert listed["total"] == 1 and listed["tuning_jobs"][0]["best_trial"]["index"] == \
        best["index"] and "trials" not in listed["tuning_jobs"][0], listed


def test_grid_runs_every_point_once(td):
    _, c = new_user(td, "tg")
    lr = {"name": "lr", "type": "continuous", "min": 0.01, "max": 1.0, "scaling": "log",
          "grid_points": 3}
    reg = {"name": "reg", "type": "categorical", "values": ["0", "0.5", "1"]}
    t = create(c, name="grid", job=base(), parameter_ranges=[lr, reg], objective=OBJECTIVE,
               strategy="grid", max_parallel=3)
    assert t["max_trials"] == 9, t
    t = wait_tuning(c, t["id"])
    assert t["status"] == "Completed" and len(t["trials"]) == 9, t
    got = sorted((round(tr["parameters"]["lr"], 9), tr["parameters"]["reg"]) for tr in t["trials"])
    want = sorted((round(a, 9), b) for a in (0.01, 0.1, 1.0) for b in ("0", "0.5", "1"))
    assert got == want, got
    objectives = {(round(tr["parameters"]["lr"], 9), tr["parameters"]["reg"]): tr["objective"]
                  for tr in t["trials"]}
    for (a, b), v in objectives.items():
        assert math.isclose(v, tune_ridge.train(a, float(b))[-1], rel_tol=1e-5, abs_tol=1e-5)
    assert t["best_trial"]["objective"] == min(objectives.values()), t["best_trial"]


def test_hyperband_stops_trailing_trials(td):
    _, c = new_user(td, "th")
    t = create(c, name="hb", job=base(pause=0.25), parameter_ranges=[LR, REG],
               objective=OBJECTIVE, strategy="hyperband", max_trials=9, max_parallel=3,
               hyperband={"min_points": 1, "reduction_factor": 3}, seed=5)
    t = wait_tuning(c, t["id"])
    assert t["status"] == "Completed", t
    stopped = [tr for tr in t["trials"] if tr["status"] == "EarlyStopped"]
    assert stopped, [(tr["status"], tr["objective"]) for tr in t["trials"]]
    best = t["best_trial"]
    assert best["status"] == "Completed", best
    series = {tr["index"]: metric_values(c, tr["job_id"], "val_loss") for tr in t["trials"]}
    for tr in stopped:
        j = get_job(c, tr["job_id"])
        assert j["status"] == "Stopped", j
        assert len(series[tr["index"]]) < 10, (tr, series[tr["index"]])
        assert tr["reason"].startswith("EarlyStopped: val_loss was"), tr
        point = int(tr["reason"].split(" at point ")[1].split(",")[0])
        mine = series[tr["index"]][point - 1]
        # it trailed: another trial was better at that same point
        others = [s[point - 1] for i, s in series.items() if i != tr["index"] and len(s) >= point]
        assert any(v < mine for v in others), (tr, others)


def test_stop_stops_its_trials(td):
    _, c = new_user(td, "ts")
    t = create(c, name="stp", job=base(pause=0.5), parameter_ranges=[LR, REG],
               objective=OBJECTIVE, max_trials=6, max_parallel=2, seed=3)

    def two_training():
        cur = get_tuning(c, t["id"])
        ids = [tr["job_id"] for tr in cur["trials"] if tr["job_id"]]
        return len(ids) == 2 and all(
            get_job(c, i)["secondary_status"] == "Training" for i in ids) and ids

    ids = wait_until(two_training, 60 * SLOW, "two trials training")
    r = c.post(f"/api/v1/tuning-jobs/{t['id']}/stop")
    assert r.status == 202 and r.json["status"] in ("Stopping", "Stopped"), r
    t = wait_tuning(c, t["id"], timeout=60 * SLOW)
    assert t["status"] == "Stopped" and t["reason"].startswith("stopped by"), t
    assert len(t["trials"]) == 2, t["trials"]  # none made after the stop
    assert all(tr["status"] == "Stopped" for tr in t["trials"]), t["trials"]
    for i in ids:
        assert get_job(c, i)["status"] == "Stopped"
    assert c.post(f"/api/v1/tuning-jobs/{t['id']}/stop").status == 409


def test_restart_of_labd_mid_search_goes_on(td):
    name, c = new_user(td, "tz")
    # the pools end with labd (keep_on_shutdown = false): the trial training across the
    # restart is retried, as any job with a retry left. Restarted while it trains: a job
    # whose sandbox was still being built waits for the jobs' minute reconcile instead.
    t = create(c, name="rst", job=base(max_retries=1, pause=0.3), parameter_ranges=[LR, REG],
               objective=OBJECTIVE, max_trials=3, max_parallel=1, seed=9)

    def training():
        trials = get_tuning(c, t["id"])["trials"]
        return trials and trials[0]["job_id"] and \
            get_job(c, trials[0]["job_id"])["secondary_status"] == "Training"

    wait_until(training, 60 * SLOW, "the first trial training")
    assert td.stop(15) == 0, td.log_tail()
    td.start(expect_admin_password=False)
    c.login(name, c.password)
    t = wait_tuning(c, t["id"], d=td)
    assert t["status"] == "Completed" and len(t["trials"]) == 3, t
    assert all(tr["status"] == "Completed" for tr in t["trials"]), t["trials"]
    assert get_job(c, t["trials"][0]["job_id"])["attempt"] == 2, "the first trial ran across it"
    ids = [tr["job_id"] for tr in t["trials"]]
    assert len(set(ids)) == 3, ids
    for i in range(1, 4):  # each trial's job made once
        r = c.get(f"/api/v1/jobs?name=rst-{i:03d}")
        assert r.json["total"] == 1, r.json


def test_trials_count_in_the_users_concurrent_jobs(td):
    _, c = new_user(td, "tq", overrides={"concurrent_jobs": 1})
    t = create(c, name="cq", job=base(pause=0.1), parameter_ranges=[LR, REG],
               objective=OBJECTIVE, max_trials=3, max_parallel=3, seed=2)
    waited = []

    def done():
        cur = get_tuning(c, t["id"])
        waited.extend(tr["index"] for tr in cur["trials"] if tr["status"] == "Pending"
                      and "concurrent_jobs" in (tr["reason"] or ""))
        return cur if cur["status"] in ENDED else None

    t = wait_until(done, TIMEOUT, "the tuning job to end", interval=0.05)
    assert t["status"] == "Completed" and t["trial_counts"]["Completed"] == 3, t
    assert waited, "no trial was seen waiting for concurrent_jobs"
    # one job at a time: each trial's job was made (Pending) after the one before ended
    spans = sorted((at(j["transitions"][0]["start_at"]), at(j["transitions"][-1]["start_at"]))
                   for j in (get_job(c, tr["job_id"]) for tr in t["trials"]))
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end, spans


def test_a_disabled_account_ends_its_search(td):
    name, c = new_user(td, "td")
    t = create(c, name="dis", job=base(pause=0.5), parameter_ranges=[LR, REG],
               objective=OBJECTIVE, max_trials=6, max_parallel=2, seed=4)
    wait_until(lambda: any(tr["status"] == "InProgress" for tr in get_tuning(c, t["id"])["trials"]),
               60 * SLOW, "a trial running")
    assert_status(td.admin().patch(f"/api/v1/users/{name}", json={"disabled": True}), 200)
    a = td.admin()
    t = wait_until(lambda: (lambda x: x if x["status"] in ENDED else None)(
        a.get(f"/api/v1/tuning-jobs/{t['id']}").json), 60 * SLOW, "the search to end")
    assert t["status"] == "Failed" and "disabled" in t["reason"], t
    assert len(t["trials"]) <= 2 and all(tr["status"] != "InProgress" for tr in t["trials"]), t


BAD = [
    ("name", lambda b: b.update(name="Bad Name")),
    ("name", lambda b: b.update(name="x" * 59)),
    ("job", lambda b: b.update(job="echo")),
    ("job.name", lambda b: b["job"].update(name="j")),
    ("job.command", lambda b: (b["job"].pop("script"))),
    ("job.metric_definitions[0].regex", lambda b: b["job"].update(
        metric_definitions=[{"name": "val_loss", "regex": "("}])),
    ("parameter_ranges", lambda b: b.update(parameter_ranges=[])),
    ("parameter_ranges[0].type", lambda b: b["parameter_ranges"][0].update(type="real")),
    ("parameter_ranges[0].min", lambda b: b["parameter_ranges"][0].update(min=0)),
    ("parameter_ranges[1].max", lambda b: b["parameter_ranges"][1].update(max=-1)),
    ("parameter_ranges[1].name", lambda b: b["parameter_ranges"][1].update(name="lr")),
    ("parameter_ranges[1].values", lambda b: b["parameter_ranges"].__setitem__(
        1, {"name": "opt", "type": "categorical", "values": []})),
    ("parameter_ranges[0].grid_points", lambda b: b.update(strategy="grid")),
    ("objective.metric", lambda b: b.update(objective={"metric": "acc", "type": "minimize"})),
    ("objective.type", lambda b: b.update(objective={"metric": "val_loss", "type": "min"})),
    ("strategy", lambda b: b.update(strategy="bayesian")),
    ("max_trials", lambda b: b.pop("max_trials")),
    ("max_trials", lambda b: b.update(max_trials=1000)),
    ("max_parallel", lambda b: b.update(max_parallel=5)),
    ("hyperband", lambda b: b.update(hyperband={"min_points": 1})),
    ("hyperband.reduction_factor", lambda b: b.update(
        strategy="hyperband", hyperband={"reduction_factor": 1})),
]


def test_every_bad_request_is_400_naming_the_field_and_makes_nothing(td):
    _, c = new_user(td, "tb")
    good = {"name": "ok", "job": base(), "parameter_ranges": [LR, REG],
            "objective": OBJECTIVE, "max_trials": 4}
    for field, spoil in BAD:
        body = {k: (dict(v) if isinstance(v, dict) else
                    [dict(x) for x in v] if isinstance(v, list) else v)
                for k, v in good.items()}
        body["job"] = dict(good["job"])
        spoil(body)
        r = c.post("/api/v1/tuning-jobs", json=body)
        assert r.status == 400 and r.json["error"]["field"] == field, (field, r)
    r = c.post("/api/v1/tuning-jobs", json=dict(good, bogus=1))
    assert r.status == 400 and r.json["error"]["code"] == "bad_field", r
    assert c.get("/api/v1/tuning-jobs").json["total"] == 0
    assert c.get("/api/v1/jobs").json["total"] == 0
    assert c.get("/api/v1/tuning-jobs/999999").status == 404
    # the good one passes, and its name is then taken
    t = create(c, **dict(good, max_trials=1))
    create(c, expect=409, **dict(good, max_trials=1))
    wait_tuning(c, t["id"], d=td, timeout=20)
