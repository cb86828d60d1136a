"""A training job with several GPUs (docs/jobs.md "Several GPUs"), on a labd whose host
has three GPUs as device nodes made here with mknod ([gpu] devices = 0,1,2 under a
dev_prefix; nothing answers behind them, so no CUDA runs, but the sandbox binds exactly
the nodes it would on a real host):

- a 2-GPU job waits while two of the three GPUs are held (by two 1-GPU jobs of others)
  and starts once one of them ends, on the two free GPUs (1 and 2);
- inside it sees exactly /dev/nvidia1 and /dev/nvidia2 of the GPUs, CUDA_VISIBLE_DEVICES
  0,1 (the driver numbers the GPUs a process can open from 0), NVIDIA_VISIBLE_DEVICES
  1,2, SM_NUM_GPUS 2, and the resource config managed-training scripts read;
- `torchrun --nproc_per_node=$SM_NUM_GPUS` starts two processes (gloo, CPU: no GPU
  here) that each see their LOCAL_RANK and all_reduce;
- the ledger counts its GPU seconds twice: the usage view and the GPU quota window;
- its warm pool is kept for 2-GPU jobs only: a 1-GPU job of the same user does not
  reuse it (it is released);
- a GPU runtime asked for while a 2-GPU job waits (one GPU free) does not take the
  free GPU: it waits behind the job in the fair order, and starts once the job is gone;
- more GPUs than the lab has is 400 naming gpu_count, and nothing is queued."""

import os
import re
import stat
import time

import pytest

from labd_harness import SLOW, assert_status, wait_until
from jobs_lib import jobs_daemon, log_text, new_user, submit, wait_job

DDP = r"""
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, local = dist.get_rank(), int(os.environ["LOCAL_RANK"])
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
# the device this rank would use: CUDA's index local, the host's node behind it
host = os.environ["NVIDIA_VISIBLE_DEVICES"].split(",")[local]
line = (f"rank={rank} local_rank={local} world={dist.get_world_size()} sum={t.item():g} "
        f"cuda_index={os.environ['CUDA_VISIBLE_DEVICES'].split(',')[local]} "
        f"node={os.path.exists('/dev/nvidia' + host)}\n")
os.write(1, line.encode())  # one write: the two ranks share the log's pipe

dist.destroy_process_group()
"""

# Debian 12's python3-torch (1.13) on Python 3.11 reads torchrun's default "--redirects 0
# --tee 0" as None (its Std.from_str finds no flag of value 0 and fails at launch); a mapping
# for a rank that does not exist leaves every real rank's streams alone, as "0" means.
# PyTorch 2 has no such flaw: a job there runs plain torchrun.
TORCHRUN = "torchrun --redirects 9:1 --tee 9:1"

PROBE = ("ls /dev | grep '^nvidia' | tr '\\n' ' '; echo; "
         "echo cvd=$CUDA_VISIBLE_DEVICES nvd=$NVIDIA_VISIBLE_DEVICES sm=$SM_NUM_GPUS "
         "hosts=$SM_HOSTS host=$SM_CURRENT_HOST; "
         "cat /opt/ml/input/config/resourceconfig.json; echo; "
         "printf %s \"$DDP_PY\" > /tmp/ddp.py && "
         f"{TORCHRUN} --standalone --nnodes=1 --nproc_per_node=$SM_NUM_GPUS /tmp/ddp.py")


def make_nodes(base):
    """Three GPUs and the driver's control nodes, as the driver names them."""
    os.makedirs(base, exist_ok=True)
    for name, major, minor in (("nvidia0", 195, 0), ("nvidia1", 195, 1), ("nvidia2", 195, 2),
                               ("nvidiactl", 195, 255), ("nvidia-uvm", 235, 0)):
        os.mknod(os.path.join(base, name), 0o666 | stat.S_IFCHR, os.makedev(major, minor))


@pytest.fixture(scope="module")
def md(runtime_daemon_factory, tmp_path_factory):
    nodes = str(tmp_path_factory.mktemp("gpudev"))
    make_nodes(nodes)
    return jobs_daemon(runtime_daemon_factory, "jobs-mgpu",
                       gpu={"devices": "0,1,2", "dev_prefix": nodes,
                            "nvml_library": "/nonexistent/libnvidia-ml.so.1"},
                       quota={"gpus_per_runtime": "4", "concurrent_jobs": "10"})


def training(c, job_id):
    return wait_job(c, job_id, statuses="InProgress", secondary="Training")


def test_two_gpu_job_waits_binds_two_and_torchrun_runs_one_process_each(md):
    (_, a), (_, b), (_, u) = new_user(md, "mga"), new_user(md, "mgb"), new_user(md, "mgu")
    hold = ["/bin/sh", "-c", "exec sleep 120"]
    first = submit(a, hold, type="gpu", gpu_count=1)
    assert training(a, first["id"])["gpus"] == [0]
    second = submit(b, hold, type="gpu", gpu_count=1)
    assert training(b, second["id"])["gpus"] == [1]
    # one GPU free of three: the 2-GPU job waits (for as long as the GPUs stay held)
    two = submit(u, ["/bin/sh", "-c", PROBE], type="gpu", gpu_count=2, keep_alive_s=60,
                 environment={"DDP_PY": DDP})
    end = time.monotonic() + 2 * SLOW
    while time.monotonic() < end:
        j = u.get(f"/api/v1/jobs/{two['id']}").json
        assert j["secondary_status"] == "Pending" and j["gpus"] == [], j
        time.sleep(0.2)
    assert_status(b.post(f"/api/v1/jobs/{second['id']}/stop", json={"grace_s": 1}), 202)
    try:
        done = wait_job(u, two["id"], timeout=60 * SLOW)
    finally:
        log = log_text(u, two["id"])
        print(log[-3000:])
    assert done["status"] == "Completed", (done["failure_reason"], log)
    assert done["gpus"] == [1, 2] and done["gpu_count"] == 2, done
    lines = log.splitlines()
    assert lines[0].split() == ["nvidia-uvm", "nvidia1", "nvidia2", "nvidiactl"], log
    assert "cvd=0,1 nvd=1,2 sm=2 hosts=[\"algo-1\"] host=algo-1" in lines, log
    assert ('{"current_host":"algo-1","hosts":["algo-1"],'
            '"network_interface_name":"eth0"}') in lines, log
    ranks = sorted(re.findall(r"rank=\d .*?node=(?:True|False)", log))
    assert ranks == ["rank=0 local_rank=0 world=2 sum=3 cuda_index=0 node=True",
                     "rank=1 local_rank=1 world=2 sum=3 cuda_index=1 node=True"], log
    assert_status(a.post(f"/api/v1/jobs/{first['id']}/stop", json={"grace_s": 1}), 202)

    # its warm pool is kept for 2-GPU jobs: a 1-GPU job does not reuse it, and it goes
    one = wait_job(u, submit(u, ["/bin/true"], type="gpu", gpu_count=1)["id"])
    assert one["status"] == "Completed" and not one["warm_pool"]["reused"], one
    assert u.get(f"/api/v1/jobs/{two['id']}").json["warm_pool"]["status"] == "Terminated"

    # the ledger (every entry of u closed now): the 2-GPU job's entry holds GPUs 1 and 2,
    # and its seconds count twice in the usage view and in the GPU quota's window
    entries = u.get("/api/v1/me/usage").json["entries"]
    assert all(e["end_s"] for e in entries), entries
    [entry] = [e for e in entries if e["job_id"] == two["id"] and e["source"] == "job"]
    assert entry["gpus"] == "1,2" and entry["kind"] == "gpu", entry
    assert entry["seconds_in_window"] == 2 * entry["billable_s"] > 0, entry
    gpu_s = sum(e["billable_s"] * len(e["gpus"].split(",")) for e in entries)
    assert u.get("/api/v1/me/quota").json["used"]["gpu_s_per_24h"] == gpu_s, entries


def test_a_gpu_runtime_waits_behind_a_waiting_two_gpu_job(md):
    (_, a), (_, b), (_, u), (_, r) = (new_user(md, p) for p in ("mwa", "mwb", "mwu", "mwr"))
    hold = ["/bin/sh", "-c", "exec sleep 120"]
    held = [(c, submit(c, hold, type="gpu", gpu_count=1)["id"]) for c in (a, b)]
    for c, j in held:
        training(c, j)
    two = submit(u, hold, type="gpu", gpu_count=2)
    # one GPU free; the job (no GPU time, the earlier request) is ahead of the runtime,
    # which must not take the GPU the job waits for beside the next one to free
    q = r.post("/api/v1/me/runtime", json={"type": "gpu"})
    assert q.status == 202 and q.json["runtime"]["state"] == "queued", q.json
    end = time.monotonic() + 2  # two passes of the GPU queue
    while time.monotonic() < end:
        rt = r.get("/api/v1/me/runtime").json["runtime"]
        assert rt["state"] == "queued" and rt["queue"]["position"] in (0, 2), rt
        assert u.get(f"/api/v1/jobs/{two['id']}").json["secondary_status"] == "Pending"
        time.sleep(0.2)
    # the job ahead goes: the runtime takes the free GPU
    assert_status(u.post(f"/api/v1/jobs/{two['id']}/stop", json={"grace_s": 1}), 202)
    wait_until(lambda: r.get("/api/v1/me/runtime").json["runtime"]["state"] != "queued",
               10 * SLOW, lambda: f"runtime: {r.get('/api/v1/me/runtime').json}")
    assert r.delete("/api/v1/me/runtime").status in (202, 404)
    for c, j in held:
        assert_status(c.post(f"/api/v1/jobs/{j}/stop", json={"grace_s": 1}), 202)
        wait_job(c, j)


def test_more_gpus_than_the_lab_has_is_refused(md):
    _, c = new_user(md, "mgr")
    r = submit(c, ["/bin/true"], expect=None, type="gpu", gpu_count=4)
    assert r.status == 400, r
    assert r.json["error"]["field"] == "gpu_count", r.json
    assert r.json["error"]["message"] == "this lab has 3 GPUs; the job asks for 4", r.json
    assert c.get("/api/v1/jobs").json["jobs"] == []
    # the plan's bound comes first: 5 is beyond gpus_per_runtime (4)
    r = submit(c, ["/bin/true"], expect=None, type="gpu", gpu_count=5)
    assert r.status == 400 and r.json["error"]["field"] == "gpu_count", r
    wait_until(lambda: md.admin().get("/api/v1/gpus").json["queue_length"] == 0, 5,
               "an empty GPU queue")
