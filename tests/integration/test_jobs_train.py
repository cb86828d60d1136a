"""Training jobs, the real thing: a PyTorch CNN on the CPU walks every phase, its
loss is extracted by a metric definition, served by /metrics and falls, its model
lands in the home's output folder; a script written only for the managed-training
layout (/opt/ml, SM_*) runs unchanged; bad submissions are 400s naming the field."""

import json
import time

import pytest

from jobs_lib import (
    at,
    PY,
    get_job,
    home_run,
    jobs_daemon,
    log_text,
    metric_values,
    new_user,
    put_files,
    script,
    secondaries,
    submit,
    wait_job,
)
from labd_harness import assert_error


@pytest.fixture(scope="module")
def jd(runtime_daemon_factory):
    return jobs_daemon(runtime_daemon_factory, "jobs-train")


@pytest.fixture(scope="module")
def trainer(jd):
    name, c = new_user(jd, "jt")
    put_files(c, {"code/cnn.py": script("cnn.py"), "code/sm_script.py": script("sm_script.py"),
                  "data/train/part-0.csv": "".join(f"{x},{3 * x + 1}\n" for x in range(-5, 6)),
                  "data/train/part-1.csv": "".join(f"{x / 2},{1.5 * x + 1}\n" for x in range(4))})
    return c


def test_pytorch_cnn_walks_every_phase_and_its_loss_falls(trainer):
    c = trainer
    t_submit = time.time()
    j = submit(c, [PY, "code/cnn.py"], name="cnn",
               hyperparameters={"epochs": 2, "lr": 0.05, "steps_per_epoch": 10},
               metric_definitions=[{"name": "loss", "regex": r"loss=([0-9.eE+-]+)"}])
    assert j["status"] == "InProgress" and j["output_path"] == "jobs/cnn", j
    assert j["checkpoint_path"] == "jobs/cnn/checkpoints" and j["attempt"] >= 0, j
    j = wait_job(c, j["id"])
    log = log_text(c, j["id"])
    assert j["status"] == "Completed", f"{j}\n{log}"
    assert (j["secondary_status"], j["failure_reason"], j["exit_code"]) == ("Completed", None, 0), j

    # every phase, in order, each closed by the next, with times and messages
    phases = [s for s in secondaries(j) if s != "Pending"]
    assert phases == ["Starting", "Downloading", "Training", "Uploading", "Completed"], j["transitions"]
    ts = [t for t in j["transitions"] if t["status"] != "Pending"]
    for a, b in zip(ts, ts[1:]):
        assert a["end_at"] == b["start_at"], (a, b)
        assert at(a["start_at"]) <= at(a["end_at"]), a
    assert ts[-1]["end_at"] is None or ts[-1]["end_at"] == ts[-1]["start_at"], ts[-1]
    assert all(isinstance(t["message"], str) for t in ts), ts
    assert all(t["message"] for t in ts[:-1]), f"a phase without a message: {ts}"
    assert int(t_submit) - 1 <= at(ts[0]["start_at"]) <= time.time() + 1, ts
    started, ended = at(j["started_at"]), at(j["ended_at"])
    assert 0 <= j["billable_s"] <= ended - started + 1, j
    assert 0 <= j["training_s"] <= j["billable_s"], j
    assert j["log_bytes"] == len(log.encode()), (j["log_bytes"], len(log))

    # 20 steps printed, the loss extracted, served, falling; the final value kept
    assert [ln for ln in log.splitlines() if ln.startswith("step=")][-1].startswith("step=20 "), log
    loss = metric_values(c, j["id"], "loss")
    assert len(loss) == 20, loss
    assert loss[-1] < loss[0] / 4 and sum(loss[-5:]) < sum(loss[:5]), loss
    final = {m["name"]: m["value"] for m in j["final_metrics"]}
    assert final.get("loss") == pytest.approx(loss[-1]), j["final_metrics"]
    r = c.get(f"/api/v1/jobs/{j['id']}/metrics")
    assert {m["name"] for m in r.json["final"]} == {"loss"}, r.json

    # the model is in the home, where the job was told, and loads
    _, out = home_run(c, f"ls jobs/cnn/model && cat jobs/cnn/log.txt | tail -n 1 && "
                         f"{PY} -c \"import torch; print(sorted(torch.load('jobs/cnn/model/model.pt')))\"")
    assert "model.pt" in out and "saved /opt/ml/model/model.pt" in out, out
    assert "'0.weight'" in out and "'7.bias'" in out, out


def test_managed_training_script_runs_unchanged(trainer):
    c = trainer
    j = submit(c, [PY, "/home/" + c.name + "/code/sm_script.py"], name="sm-linear",
               hyperparameters={"epochs": "200", "learning-rate": "0.05"},
               input_channels=[{"name": "train", "path": "data/train"}],
               output_path="out/sm-linear")
    j = wait_job(c, j["id"])
    log = log_text(c, j["id"])
    assert j["status"] == "Completed", f"{j}\n{log}"
    assert "train: 15 rows from /opt/ml/input/data/train, epochs=200 lr=0.05 hosts=['algo-1']" in log, log
    assert "model saved" in log, log
    _, out = home_run(c, "cat out/sm-linear/model/model.json; echo; "
                         "cat out/sm-linear/output/data/metrics.json")
    model = json.loads(out.splitlines()[0])
    assert model["a"] == pytest.approx(3, abs=0.2) and model["b"] == pytest.approx(1, abs=0.3), out
    assert json.loads(out.splitlines()[1])["rows"] == 15, out


def test_layout_and_environment_inside_the_job(trainer):
    """The documented layout: config files, read-only channels, the variables."""
    c = trainer
    sh = ("cat /opt/ml/input/config/hyperparameters.json; echo; "
          "cat /opt/ml/input/config/resourceconfig.json; echo; "
          "cat /opt/ml/input/config/inputdataconfig.json; echo; "
          "touch /opt/ml/input/data/train/x 2>/dev/null && echo channel-writable || echo channel-ro; "
          "echo model=$SM_MODEL_DIR/$LABD_MODEL_DIR out=$SM_OUTPUT_DATA_DIR ch=$SM_CHANNEL_TRAIN "
          "chs=$SM_CHANNELS hp=$SM_HP_LR hps=$SM_HPS host=$SM_CURRENT_HOST gpus=$SM_NUM_GPUS "
          "name=$TRAINING_JOB_NAME id=$LABD_JOB_ID mine=$MINE pwd=$(pwd)")
    j = submit(c, ["/bin/sh", "-c", sh], name="layout", environment={"MINE": "yes"},
               hyperparameters={"lr": 0.5, "tag": "x"}, working_dir="code",
               input_channels=[{"name": "train", "path": "data/train"}])
    j = wait_job(c, j["id"])
    out = log_text(c, j["id"])
    assert j["status"] == "Completed", f"{j}\n{out}"
    lines = out.splitlines()
    assert json.loads(lines[0]) == {"lr": 0.5, "tag": "x"}, out
    assert json.loads(lines[1]) == {"current_host": "algo-1", "hosts": ["algo-1"],
                                    "network_interface_name": "eth0"}, out
    assert json.loads(lines[2])["train"]["TrainingInputMode"] == "File", out
    assert "channel-ro" in out, out
    for want in ("model=/opt/ml/model/", "out=/opt/ml/output/data", "ch=/opt/ml/input/data/train",
                 'chs=["train"]', "hp=0.5", "host=algo-1", "gpus=0", "name=layout",
                 f"id={j['id']}", "mine=yes", f"pwd=/home/{c.name}/code"):
        assert want in out, (want, out)


@pytest.mark.parametrize("body, field", [
    ({"name": "Bad Name", "command": ["true"]}, "name"),
    ({"name": "ok-1"}, "command"),
    ({"name": "ok-2", "command": []}, "command"),
    ({"name": "ok-3", "command": ["true"], "output_path": "../x"}, "output_path"),
    ({"name": "ok-4", "command": ["true"], "type": "tpu"}, "type"),
    ({"name": "ok-5", "command": ["true"], "keep_alive_s": 10 ** 6}, "keep_alive_s"),
    ({"name": "ok-6", "command": ["true"], "max_retries": 31}, "max_retries"),
    ({"name": "ok-7", "command": ["true"],
      "metric_definitions": [{"name": "loss", "regex": "loss=("}]}, "metric_definitions[0].regex"),
    ({"name": "ok-8", "command": ["true"], "surprise": 1}, "surprise"),
])
def test_bad_submission_is_a_400_naming_the_field(trainer, body, field):
    before = trainer.get("/api/v1/jobs").json["total"]
    assert_error(trainer.post("/api/v1/jobs", json=body), 400, field=field)
    assert trainer.get("/api/v1/jobs").json["total"] == before


def test_duplicate_name_is_409_and_list_filters(trainer):
    c = trainer
    assert_error(c.post("/api/v1/jobs", json={"name": "cnn", "command": ["true"]}), 409, "job_exists")
    r = c.get("/api/v1/jobs?status=Completed&limit=1")
    assert r.status == 200 and len(r.json["jobs"]) == 1 and r.json["total"] >= 3, r.json
    r = c.get("/api/v1/jobs?name=cnn")
    assert [j["name"] for j in r.json["jobs"]] == ["cnn"], r.json
    assert "transitions" not in r.json["jobs"][0], r.json
    assert get_job(c, r.json["jobs"][0]["id"])["name"] == "cnn"
