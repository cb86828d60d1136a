"""Shared GPUs on the root side: the supervisor checks each GPU device id it is asked
for against its own records and binds what it grants (docs/sandbox.md, "GPUs"). One
labd whose host has three cards as device nodes made here with mknod (nothing answers
behind them): card 0 split into MIG instances 0/gi1/ci0 and 0/gi2/ci0 (the driver's
capability files in a [gpu] caps_dir made here, their nvidia-cap nodes under
<dev_prefix>/nvidia-caps), card 1 handed out as two time-sliced shares ([gpu] shares),
card 2 whole. The web process hands out whole cards only until it reads MIG instances
and shares, so the starts are sent to the supervisor as raw pool_start messages (the
test hook LABD_FAULT_BAD_MESSAGE, as test_root_trust.py does):

- a pool given 0/gi1/ci0 and its uuid sees exactly /dev/nvidia0, its two cap nodes
  (not the other instance's) and CUDA_VISIBLE_DEVICES=MIG-<uuid>;
- a pool given 0/gi2/ci0 runs at the same time (two holders of one card);
- a share gets the whole card's node; a second holder of the same share is refused,
  and a whole card that is shared or has MIG on is refused ("ask for ...");
- a whole card is refused while an instance of it is held, and an instance while its
  whole card is held (gpu_busy), even when the capability files change under them;
- gpu_processes_end with a pid outside the sandbox ends nothing (and the pid lives)."""

import json
import os
import signal
import subprocess
import time

import pytest

from gpu_standin import add_instance, cap_node, card_nodes, free_major
from labd_harness import SLOW, runtime_daemon, sandbox_records, teardown_runtime_daemon, \
    wait_until, web_process

UUID = "MIG-5d8e6f2a-0c1b-5e3d-9a7f-1234567890ab"
MIG_01 = 0x10000 | 0 << 8 | 1 << 3 | 0  # 0/gi1/ci0
MIG_02 = 0x10000 | 0 << 8 | 2 << 3 | 0  # 0/gi2/ci0
MIG_21 = 0x10000 | 2 << 8 | 1 << 3 | 0  # 2/gi1/ci0
SHARE_10 = 0x20000 | 1 << 8 | 0        # 1/share0


def pool_start(msg_id, user, gpus, uuids=None):
    m = {"v": 2, "id": msg_id, "type": "pool_start", "user": user, "user_id": 400 + msg_id,
         "pool_id": 910000 + msg_id, "deadline": int(time.time()) + 3600, "gpus": gpus}
    if uuids:
        m["gpu_uuids"] = uuids
    return json.dumps(m)


# every SIGUSR1 sends them all again, in this order (a pool already there is refused
# as pool_exists, before any GPU check)
MESSAGES = [
    pool_start(1, "migone", [MIG_01], [UUID]),
    pool_start(2, "migtwo", [MIG_02]),
    pool_start(3, "wholezero", [0]),
    pool_start(4, "shareone", [SHARE_10]),
    pool_start(5, "sharetwo", [SHARE_10]),
    pool_start(6, "wholeone", [1]),
    pool_start(7, "wholetwo", [2]),
    pool_start(8, "migtwoone", [MIG_21]),
]
END_OUTSIDE = json.dumps({"v": 2, "id": 20, "type": "gpu_processes_end", "user": "migone",
                          "pool_id": 910001, "pids": [os.getpid()]})


@pytest.fixture(scope="module")
def mig(tmp_path_factory):
    base = tmp_path_factory.mktemp("migdev")
    nodes, caps = str(base / "dev"), str(base / "caps")
    capmaj = free_major()
    card_nodes(nodes, (0, 1, 2))
    for n in (21, 22, 30, 31, 40, 41):
        cap_node(nodes, capmaj, n)
    add_instance(caps, 0, 1, 0, 21, 22)
    add_instance(caps, 0, 2, 0, 30, 31)
    os.chmod(base, 0o755)
    d = runtime_daemon("gpu-mig", gpu={"devices": "0,1,2", "dev_prefix": nodes,
                                       "caps_dir": caps, "shares": "1:2:1G",
                                       "nvml_library": "/nonexistent/libnvidia-ml.so.1"},
                       env={"LABD_FAULT_BAD_MESSAGE": "\n".join(MESSAGES + [END_OUTSIDE])})
    d.start()
    d.caps, d.capmaj = caps, capmaj
    try:
        yield d
    finally:
        teardown_runtime_daemon(d)


def signal_web(d, expect):
    os.kill(web_process(d), signal.SIGUSR1)
    for line in expect:
        wait_until(lambda: line in d.log(), 20 * SLOW, f"log line {line!r}")


def pool_agent(d, user):
    """The host pid of the command (pid 2 inside) of user's pool sandbox, once ready."""
    wait_until(lambda: f"of {user} is ready" in d.log(), 30 * SLOW, f"{user}'s pool ready")
    rec = [kv for _, kv in sandbox_records(d.state_dir) if kv.get("user") == user]
    assert len(rec) == 1, rec
    init = int(rec[0]["pid"])
    with open(f"/proc/{init}/task/{init}/children") as fh:
        return int(fh.read().split()[0])


def inside_view(pid):
    """What the process sees of the GPU nodes, and its GPU environment."""
    root = f"/proc/{pid}/root/dev"
    nodes = sorted(n for n in os.listdir(root) if n.startswith("nvidia"))
    caps = sorted(os.listdir(os.path.join(root, "nvidia-caps"))) \
        if os.path.isdir(os.path.join(root, "nvidia-caps")) else None
    with open(f"/proc/{pid}/environ", "rb") as fh:
        env = dict(e.split("=", 1) for e in fh.read().decode().split("\0") if "=" in e)
    return nodes, caps, env.get("CUDA_VISIBLE_DEVICES"), env.get("NVIDIA_VISIBLE_DEVICES")


def test_instances_shares_and_whole_cards_bound_and_held_by_conflict(mig):
    d = mig
    signal_web(d, [
        "building pool 910001 of migone",
        "building pool 910002 of migtwo",
        "refused pool_start for wholezero: gpu 0 has MIG on: ask for an instance",
        "building pool 910004 of shareone",
        "pool_start for sharetwo waits: gpu is held by another sandbox (gpu 1/share0)",
        "refused pool_start for wholeone: gpu 1 is shared ([gpu] shares): ask for a share",
        "building pool 910007 of wholetwo",
        "refused pool_start for migtwoone: no MIG instance 2/gi1/ci0 in [gpu] caps_dir",
    ])
    # two instances of card 0 at once, each with its own cap nodes only
    one, two = pool_agent(d, "migone"), pool_agent(d, "migtwo")
    assert inside_view(one) == (["nvidia-caps", "nvidia-uvm", "nvidia0", "nvidiactl"],
                                ["nvidia-cap21", "nvidia-cap22"], UUID, "0/gi1/ci0")
    assert inside_view(two) == (["nvidia-caps", "nvidia-uvm", "nvidia0", "nvidiactl"],
                                ["nvidia-cap30", "nvidia-cap31"], "0", "0/gi2/ci0")
    # a share is its card's node, as a whole card is
    assert inside_view(pool_agent(d, "shareone")) == (
        ["nvidia-uvm", "nvidia1", "nvidiactl"], None, "0", "1/share0")
    assert inside_view(pool_agent(d, "wholetwo"))[:2] == (
        ["nvidia-uvm", "nvidia2", "nvidiactl"], None)

    # the capability files change under the holders: root's hold still decides.
    # Card 0 loses its instances (MIG off): whole card 0 is held by conflict with
    # 0/gi1/ci0; card 2 gains one while held whole: 2/gi1/ci0 is held by conflict.
    # gpu_processes_end naming a pid outside migone's pool ends nothing.
    subprocess.run(["rm", "-rf", os.path.join(d.caps, "gpu0")], check=True)
    add_instance(d.caps, 2, 1, 0, 40, 41)
    signal_web(d, [
        "pool_start for wholezero waits: gpu is held by another sandbox (gpu 0)",
        "pool_start for migtwoone waits: gpu is held by another sandbox (gpu 2/gi1/ci0)",
        f"pid {os.getpid()} not ended: not one of its processes",
        "gpu_processes_end: 0 of 1 processes of migone's sandbox",
    ])
    assert "building pool 910003" not in d.log() and "building pool 910008" not in d.log()
    assert "building pool 910005" not in d.log() and "building pool 910006" not in d.log()
