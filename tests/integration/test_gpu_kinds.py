"""Plans, the queue and the ledger per kind of GPU device (docs/gpu.md, "Sharing one
card"), on one labd whose host has three cards as device nodes made here with mknod
(nothing answers behind them) and the stand-in NVML of tests/standin/: card 0 has MIG on
with two 1g.18gb instances (their capability files in a [gpu] caps_dir made here), card
1 is handed out as two time-sliced shares ([gpu] shares), card 2 is whole. A plan
"mig" gives 1g.18gb instances, a plan "shr" shares, users without a plan whole cards.
GPU training jobs hold their devices (a sandbox each, `sleep`):

- each plan's users get a device of its kind: 0/gi1/ci0, then 0/gi2/ci0; 1/share0,
  1/share1; card 2;
- the queue is kept per kind: with every kind busy, a whole-card job waits while a
  1g.18gb job submitted after it starts on an instance, and a share job starts on a
  share; a queued GPU runtime's place counts only entries of its own kind; an instance
  that frees goes to the next 1g.18gb job, not to the whole-card job that waited
  longer;
- a restart of labd keeps every kind's queue and places (the kinds are stored);
- a waiting share job never preempts a preemptible job on a whole card;
- the ledger charges each entry its device's fraction of a card exactly: 128
  thousandths for a 1g.18gb instance (its memory over the card's), 500 for one of two
  shares, 1000 for a whole card, in the usage view, its CSV and the quota window."""

import csv
import io
import json
import os
import shutil
import tempfile
import time

import pytest

from gpu_standin import add_instance, card_nodes, free_major
from labd_harness import SLOW, assert_status, build_dir, wait_until
from jobs_lib import jobs_daemon, log_text, new_user, submit, wait_job

CARD_MEMORY = 150754820096
MIG_MEMORY = 19327352832
MIG_MILLI = MIG_MEMORY * 1000 // CARD_MEMORY  # 128
MIG_01 = 0x10000 | 0 << 8 | 1 << 3 | 0  # 0/gi1/ci0
MIG_02 = 0x10000 | 0 << 8 | 2 << 3 | 0  # 0/gi2/ci0
SHARE_10 = 0x20000 | 1 << 8 | 0        # 1/share0
SHARE_11 = 0x20000 | 1 << 8 | 1        # 1/share1
HOLD = ["/bin/sh", "-c", "echo cvd=$CUDA_VISIBLE_DEVICES; exec sleep 300"]


def make_host(base):
    """Three cards' nodes, the driver's control nodes, two MIG instances' capability
    files and nodes; the stand-in NVML's cards. Returns (dev_prefix, caps_dir, cards)."""
    nodes, caps = os.path.join(base, "dev"), os.path.join(base, "caps")
    card_nodes(nodes, (0, 1, 2))
    capmaj = free_major()
    for gi, (gi_minor, ci_minor) in ((1, (21, 22)), (2, (30, 31))):
        add_instance(caps, 0, gi, 0, gi_minor, ci_minor, nodes, capmaj)
    card = {"name": "NVIDIA H200", "memory_total": CARD_MEMORY, "memory_used": 0,
            "utilization": 0, "temperature": 30}
    mig = [{"gi": gi, "ci": 0, "profile": "1g.18gb", "memory_total": MIG_MEMORY,
            "memory_used": 0, "uuid": f"MIG-5d8e6f2a-0c1b-5e3d-9a7f-0000000000{gi:02d}"}
           for gi in (1, 2)]
    # the web process (user labd) reads it: a folder of its own, not pytest's (0700)
    readable = tempfile.mkdtemp(prefix="labd-gpukinds-")
    os.chmod(readable, 0o755)
    cards = os.path.join(readable, "cards.json")
    with open(cards, "w") as fh:
        json.dump({"cards": [dict(card, minor=0, mig=True, mig_devices=mig),
                             dict(card, minor=1), dict(card, minor=2)]}, fh)
    os.chmod(cards, 0o644)
    return nodes, caps, cards


@pytest.fixture(scope="module")
def kd(runtime_daemon_factory, tmp_path_factory):
    nodes, caps, cards = make_host(str(tmp_path_factory.mktemp("gpukinds")))
    try:
        yield started(runtime_daemon_factory, nodes, caps, cards)
    finally:
        shutil.rmtree(os.path.dirname(cards), ignore_errors=True)


def started(runtime_daemon_factory, nodes, caps, cards):
    d = jobs_daemon(runtime_daemon_factory, "gpu-kinds",
                    gpu={"devices": "0,1,2", "dev_prefix": nodes, "caps_dir": caps,
                         "shares": "1:2:20G",
                         "nvml_library": os.path.join(build_dir(), "tests", "standin",
                                                      "libnvml-standin.so")},
                    runtime={"keep_on_shutdown": "true"},
                    quota={"gpus_per_runtime": "1", "concurrent_jobs": "4"},
                    env={"LABD_NVML_STANDIN": cards})
    a = d.admin()
    assert_status(a.post("/api/v1/plans", json={"name": "mig", "gpu": "1g.18gb"}), 201)
    assert_status(a.post("/api/v1/plans", json={"name": "shr", "gpu": "share"}), 201)
    return d


def training(c, job_id):
    return wait_job(c, job_id, statuses="InProgress", secondary="Training")


def hold(c, **fields):
    """A GPU job that holds its device until stopped, once it trains."""
    j = submit(c, HOLD, type="gpu", **fields)
    return training(c, j["id"])


def pending_for(c, job_id, seconds):
    """The job stays Pending, holding nothing, for the seconds given."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        j = c.get(f"/api/v1/jobs/{job_id}").json
        assert j["secondary_status"] == "Pending" and j["gpus"] == [], j
        time.sleep(0.2)


def stop(c, job_id):
    assert_status(c.post(f"/api/v1/jobs/{job_id}/stop", json={"grace_s": 1}), 202)
    return wait_job(c, job_id)


def stop_all(pairs):
    """Stops every (client, job) at once, then waits for each to end."""
    for c, j in pairs:
        assert_status(c.post(f"/api/v1/jobs/{j['id']}/stop", json={"grace_s": 1}), 202)
    for c, j in pairs:
        wait_job(c, j["id"])


def queued_place(c):
    rt = c.get("/api/v1/me/runtime").json["runtime"]
    assert rt["state"] == "queued", rt
    return rt["queue"]["position"]


def test_kinds_queues_restart_and_ledger(kd):
    (_, m1), (_, m2), (_, m3) = (new_user(kd, p, plan="mig") for p in ("km1", "km2", "km3"))
    (_, s1), (_, s2) = (new_user(kd, p, plan="shr") for p in ("ks1", "ks2"))
    (_, w1), (_, w2) = new_user(kd, "kw1"), new_user(kd, "kw2")
    (_, rm), (_, rw) = new_user(kd, "krm", plan="mig"), new_user(kd, "krw")

    # each plan's kind of device
    jm1 = hold(m1)
    assert jm1["gpus"] == [MIG_01] and jm1["gpu_kind"] == "1g.18gb", jm1
    # CUDA is shown the instance by its uuid, as NVML names it
    wait_until(lambda: "cvd=MIG-5d8e6f2a-0c1b-5e3d-9a7f-000000000001" in log_text(m1, jm1["id"]),
               10 * SLOW, lambda: f"the instance's uuid in the log: {log_text(m1, jm1['id'])!r}")
    js1 = hold(s1)
    assert js1["gpus"] == [SHARE_10] and js1["gpu_kind"] == "share", js1
    jw1 = hold(w1)
    assert jw1["gpus"] == [2] and jw1["gpu_kind"] == "whole", jw1
    # a job asks within its plan only: a share plan gives no instance
    r = submit(s2, HOLD, expect=None, type="gpu", gpu_kind="1g.18gb")
    assert r.status == 400 and r.json["error"]["field"] == "gpu_kind", r.json
    # a kind the lab has no device of is refused, not queued for ever
    r = submit(w2, HOLD, expect=None, type="gpu", gpu_kind="3g.71gb")
    assert r.status == 400 and r.json["error"]["field"] == "gpu_kind", r.json
    assert '0 GPU devices of kind "3g.71gb"' in r.json["error"]["message"], r.json
    assert_status(kd.admin().post("/api/v1/plans", json={"name": "big", "gpu": "3g.71gb"}), 201)
    _, big = new_user(kd, "kbg", plan="big")
    r = big.post("/api/v1/me/runtime", json={"type": "gpu"})
    assert r.status == 409 and r.json["error"]["code"] == "no_gpu_available", r.json
    assert '"3g.71gb"' in r.json["error"]["message"], r.json
    assert big.get("/api/v1/me/runtime").json["runtime"] is None  # nothing made or queued

    # the whole card is busy: w2 waits; m2 (later) and s2 start on their kinds
    jw2 = submit(w2, HOLD, type="gpu")
    jm2 = hold(m2)
    assert jm2["gpus"] == [MIG_02], jm2
    js2 = hold(s2)
    assert js2["gpus"] == [SHARE_11], js2
    # every instance busy: m3 waits too, in the queue of 1g.18gb instances
    jm3 = submit(m3, HOLD, type="gpu")
    pending_for(w2, jw2["id"], 1.5)
    pending_for(m3, jm3["id"], 0.5)
    # runtimes queue per kind: each is second in its own kind, not fourth in one queue
    q = rm.post("/api/v1/me/runtime", json={"type": "gpu"})
    assert q.status == 202 and q.json["runtime"]["state"] == "queued", q.json
    q = rw.post("/api/v1/me/runtime", json={"type": "gpu"})
    assert q.status == 202 and q.json["runtime"]["state"] == "queued", q.json
    for c in (rm, rw):
        wait_until(lambda c=c: queued_place(c) == 2, 10 * SLOW,
                   lambda c=c: f"place of {c.name}: {c.get('/api/v1/me/runtime').json}")
    assert rm.get("/api/v1/me/runtime").json["runtime"]["queue"]["gpu_kind"] == "1g.18gb"
    q = kd.admin().get("/api/v1/gpus").json["queue"]
    assert [(e["gpu_kind"], e["position"], e["user"]) for e in q] == \
        [("1g.18gb", 2, rm.name), ("whole", 2, rw.name)], q

    # a restart keeps every kind's queue and places
    rc = kd.stop(15)
    assert rc == 0, f"labd exit status {rc}\n" + kd.log_tail()
    kd.start(expect_admin_password=False)
    for c in (rm, rw):
        wait_until(lambda c=c: c.get("/api/v1/me/runtime").status == 200 and
                   queued_place(c) == 2, 10 * SLOW, f"{c.name}'s place after the restart")
    pending_for(w2, jw2["id"], 1)

    # the runtimes leave (their places were the point: a job whose sandbox start meets
    # the teardown of the device's last holder is billed while it waits again, and a
    # runtime of no use would then go first, by the fair rule)
    for c in (rm, rw):
        assert c.delete("/api/v1/me/runtime").status in (200, 202, 204)
    # the instance m1 frees goes to m3, the next 1g.18gb job; w2 still waits
    stop(m1, jm1["id"])
    got = training(m3, jm3["id"])
    assert got["gpus"] == [MIG_01], got
    pending_for(w2, jw2["id"], 1)
    # the whole card frees: w2 takes it
    stop(w1, jw1["id"])
    assert training(w2, jw2["id"])["gpus"] == [2]

    stop_all(((m2, jm2), (m3, jm3), (s1, js1), (s2, js2), (w2, jw2)))

    # preemption per kind: a share job waiting never preempts a preemptible job on a
    # whole card (it frees nothing a share job could use); a share that frees is its
    pw = submit(w1, HOLD, type="gpu", capacity="preemptible")
    assert training(w1, pw["id"])["gpus"] == [2]
    h1, h2 = hold(s1), hold(s2)
    _, s3 = new_user(kd, "ks3", plan="shr")
    j3 = submit(s3, HOLD, type="gpu")
    pending_for(s3, j3["id"], 2)
    p = w1.get(f"/api/v1/jobs/{pw['id']}").json
    assert p["secondary_status"] == "Training" and p["preemptions"] == 0, p
    stop(s1, h1["id"])
    assert training(s3, j3["id"])["gpus"] == [SHARE_10]
    stop_all(((s2, h2), (s3, j3), (w1, pw)))

    # the ledger: each entry its device's fraction of a card, exactly
    for c, milli in ((m1, MIG_MILLI), (s1, 500), (w1, 1000), (m3, MIG_MILLI)):
        entries = [e for e in c.get("/api/v1/me/usage").json["entries"] if e["kind"] == "gpu"]
        assert entries and all(e["end_s"] for e in entries), entries
        for e in entries:
            assert e["gpu_fraction_milli"] == milli, e
            assert e["seconds_in_window"] == e["billable_s"] * milli // 1000, e
        assert any(e["billable_s"] > 0 for e in entries), entries
        used = c.get("/api/v1/me/quota").json["used"]["gpu_s_per_24h"]
        assert used == sum(e["seconds_in_window"] for e in entries), (used, entries)
        rows = list(csv.DictReader(io.StringIO(c.get(
            "/api/v1/me/usage", headers={"Accept": "text/csv"}).text)))
        assert {int(r["gpu_fraction_milli"]) for r in rows if r["kind"] == "gpu"} == {milli}
