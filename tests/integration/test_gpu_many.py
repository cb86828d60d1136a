"""A pool of more than 16 devices (docs/gpu.md, "Sharing one card"): one labd whose host
has three cards as device nodes made here with mknod (nothing answers behind them), each
with MIG on and seven 1g.18gb instances in the stand-in NVML of tests/standin/ and in a
[gpu] caps_dir made here: 21 devices. Every user has the plan "mig" (1g.18gb). GPU
training jobs hold their devices (a sandbox each, `sleep`):

- a job of 16 instances takes the first 16; a job of 2 then takes the 17th and 18th
  (card 2's gi3 and gi4), is held by its user in GET /api/v1/gpus, and a job of 3 the
  last three: nothing past the 16th device is lost or handed out twice;
- the job's samples read its own instances, not their card: the GPU memory in use is
  the sum of its two instances' and the utilisation their mean, while the card itself
  reads far more;
- a preemptible job on instances is preempted for an on-demand job waiting for a
  1g.18gb instance, which then takes one of the instances it freed."""

import json
import os
import shutil
import tempfile

import pytest

from gpu_standin import add_instance, card_nodes, free_major
from labd_harness import SLOW, assert_status, build_dir, wait_until
from jobs_lib import get_job, jobs_daemon, new_user, submit, wait_job

GIB = 1024 ** 3
CARD_MEMORY = 150754820096
MIG_MEMORY = 19327352832
CARDS, GIS = (0, 1, 2), range(1, 8)
IDS = [0x10000 | m << 8 | gi << 3 for m in CARDS for gi in GIS]  # m/gi<gi>/ci0, pool order
HOLD = ["/bin/sh", "-c", "exec sleep 300"]


def mig_card(minor, used=None):
    """Card minor's reading: seven instances; used maps a gi to (bytes, percent)."""
    used = used or {}
    devices = [{"gi": gi, "ci": 0, "profile": "1g.18gb", "memory_total": MIG_MEMORY,
                "memory_used": used.get(gi, (0, 0))[0], "utilization": used.get(gi, (0, 0))[1],
                "uuid": f"MIG-5d8e6f2a-0c1b-5e3d-9a7f-0000000{minor:03d}{gi:02d}"}
               for gi in GIS]
    busy = bool(used)
    return {"minor": minor, "name": "NVIDIA H200", "memory_total": CARD_MEMORY,
            "memory_used": 100 * GIB if busy else 0, "utilization": 97 if busy else 0,
            "temperature": 30, "mig": True, "mig_devices": devices}


def write_cards(path, used_on_2=None):
    tmp = path + ".new"
    with open(tmp, "w") as fh:
        json.dump({"cards": [mig_card(0), mig_card(1), mig_card(2, used_on_2)]}, fh)
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)  # the stand-in never reads half a file


def make_host(base):
    """Three cards' nodes, the driver's control nodes, 21 instances' capability files
    and nodes. Returns (dev_prefix, caps_dir)."""
    nodes, caps = os.path.join(base, "dev"), os.path.join(base, "caps")
    card_nodes(nodes, CARDS)
    capmaj = free_major()
    for m in CARDS:
        for gi in GIS:
            gi_minor = 100 * m + 2 * gi
            add_instance(caps, m, gi, 0, gi_minor, gi_minor + 1, nodes, capmaj)
    return nodes, caps


@pytest.fixture(scope="module")
def md(runtime_daemon_factory, tmp_path_factory):
    nodes, caps = make_host(str(tmp_path_factory.mktemp("gpumany")))
    # the web process (user labd) reads it: a folder of its own, not pytest's (0700)
    readable = tempfile.mkdtemp(prefix="labd-gpumany-")
    os.chmod(readable, 0o755)
    cards = os.path.join(readable, "cards.json")
    write_cards(cards)
    try:
        d = jobs_daemon(runtime_daemon_factory, "gpu-many",
                        gpu={"devices": "0,1,2", "dev_prefix": nodes, "caps_dir": caps,
                             "refresh": "1s",
                             "nvml_library": os.path.join(build_dir(), "tests", "standin",
                                                          "libnvml-standin.so")},
                        quota={"gpus_per_runtime": "16", "concurrent_jobs": "4"},
                        env={"LABD_NVML_STANDIN": cards})
        assert_status(d.admin().post("/api/v1/plans", json={"name": "mig", "gpu": "1g.18gb"}),
                      201)
        d.cards = cards
        yield d
    finally:
        shutil.rmtree(readable, ignore_errors=True)


def training(c, job_id):
    return wait_job(c, job_id, statuses="InProgress", secondary="Training")


def holders(a):
    return {g["device"]: (g["holder"] or {}).get("user") for g in a.get("/api/v1/gpus").json["gpus"]}


def test_past_sixteen_devices_held_sampled_and_preempted(md):
    a = md.admin()
    assert len(a.get("/api/v1/gpus").json["gpus"]) == 21
    (_, big), (nb, b), (_, pre), (_, od) = (new_user(md, p, plan="mig")
                                            for p in ("gmb", "gmh", "gmp", "gmo"))
    jbig = submit(big, HOLD, type="gpu", gpu_count=16)
    assert training(big, jbig["id"])["gpus"] == IDS[:16]
    jb = submit(b, HOLD, type="gpu", gpu_count=2)
    assert training(b, jb["id"])["gpus"] == IDS[16:18]
    held = holders(a)
    assert held["2/gi3/ci0"] == nb and held["2/gi4/ci0"] == nb, held
    assert held["2/gi5/ci0"] is None, held

    # its samples: its instances' memory (3 + 5 GiB) and their mean utilisation (40 %),
    # not the card's 100 GiB and 97 %
    write_cards(md.cards, {3: (3 * GIB, 30), 4: (5 * GIB, 50), 6: (7 * GIB, 90)})

    def sampled():
        s = b.get(f"/api/v1/jobs/{jb['id']}/samples").json["samples"]
        return s and s[-1]["gpu_memory_bytes"] == 8 * GIB and s[-1]

    last = wait_until(sampled, 15 * SLOW,
                      lambda: b.get(f"/api/v1/jobs/{jb['id']}/samples").json["samples"][-3:])
    assert last["gpu_percent"] == 40, last

    # the last three instances to a preemptible job; an on-demand job waiting for one
    # preempts it and takes one of those it frees
    jp = submit(pre, HOLD, type="gpu", gpu_count=3, capacity="preemptible")
    assert training(pre, jp["id"])["gpus"] == IDS[18:21]
    jo = submit(od, HOLD, type="gpu", gpu_count=1)
    wait_until(lambda: get_job(pre, jp["id"])["status_reason"] == "Preempted", 30 * SLOW,
               lambda: f"preempted: {get_job(pre, jp['id'])}")
    got = training(od, jo["id"])["gpus"]
    assert len(got) == 1 and got[0] in IDS[18:21], got
    assert get_job(pre, jp["id"])["preemptions"] == 1

    for c, j in ((big, jbig), (b, jb), (pre, jp), (od, jo)):
        assert_status(c.post(f"/api/v1/jobs/{j['id']}/stop", json={"grace_s": 1}), 202)
    for c, j in ((big, jbig), (b, jb), (pre, jp), (od, jo)):
        wait_job(c, j["id"])
