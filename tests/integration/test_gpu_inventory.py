"""The GPU pool as devices (docs/gpu.md, "Inventory"), with the stand-in NVML of
tests/standin/ loaded through [gpu] nvml_library: one labd whose host has two cards as
device nodes made here with mknod (nothing answers behind them); the stand-in says card
0 has MIG on with 7 x 1g.18gb and card 1 MIG off, and [gpu] shares hands card 1 out 4
ways with a 20 GiB budget each. The stand-in reads its JSON file on every call, so the
test changes the readings (and the MIG layout) while labd runs.

- GET /api/v1/gpus lists 7 + 4 devices with their kind, profile, card, uuid and
  memory; a user sees no holders;
- labd reads the layout at start and again on POST /api/v1/gpus/rescan (admin only):
  an admin's new MIG instances appear then, not before;
- /metrics has utilisation and memory per device, labelled card, device, kind and
  profile, and promtool accepts it;
- a share whose holder's processes use more GPU memory than its budget gets a warning,
  and past [gpu] share_grace those processes are ended (root checks each pid's cgroup),
  after a restart of labd as before it (the job kept, its processes found anew),
  and the job's samples read the share: the card's utilisation, its own processes' memory,
  said on the job's page (the job's JSON) and, for a runtime, on the dashboard (GET
  /api/v1/me/runtime); a process outside any sandbox is never counted nor ended."""

import json
import os
import re
import stat
import subprocess
import time

import pytest

from labd_harness import SLOW, audit_entries, build_dir, make_user, runtime_daemon, \
    teardown_runtime_daemon, wait_until

GIB = 1024 ** 3
CARD_MEMORY = 150754820096
MIG_MEMORY = 19327352832


def standin_library():
    return os.path.join(build_dir(), "tests", "standin", "libnvml-standin.so")


def mig_card(profiles, first_gi=1, utilization=None):
    devices = []
    for i, (profile, memory) in enumerate(profiles):
        gi = first_gi + i
        d = {"gi": gi, "ci": 0, "profile": profile, "memory_total": memory,
             "memory_used": 0, "uuid": f"MIG-5d8e6f2a-0c1b-5e3d-9a7f-0000000000{gi:02d}"}
        if utilization is not None:
            d["utilization"] = utilization + gi
        devices.append(d)
    return {"minor": 0, "name": "NVIDIA H200", "memory_total": CARD_MEMORY, "memory_used": 0,
            "utilization": 0, "temperature": 30, "mig": True, "mig_devices": devices}


def shared_card(processes=()):
    return {"minor": 1, "name": "NVIDIA H200", "memory_total": CARD_MEMORY,
            "memory_used": sum(p["bytes"] for p in processes), "utilization": 64,
            "temperature": 44, "processes": list(processes)}


SEVEN = [("1g.18gb", MIG_MEMORY)] * 7


def write_cards(path, cards):
    tmp = path + ".new"
    with open(tmp, "w") as fh:
        json.dump({"cards": cards}, fh)
    os.rename(tmp, path)  # the stand-in never reads half a file


def make_nodes(base):
    os.makedirs(base, exist_ok=True)
    for name, major, minor in (("nvidia0", 195, 0), ("nvidia1", 195, 1),
                               ("nvidiactl", 195, 255), ("nvidia-uvm", 235, 0)):
        os.mknod(os.path.join(base, name), 0o666 | stat.S_IFCHR, os.makedev(major, minor))


@pytest.fixture(scope="module")
def gd():
    d = runtime_daemon("gpu-inventory",
                       gpu={"devices": "0,1", "shares": "1:4:20G", "refresh": "1s",
                            "share_grace": "3s", "nvml_library": standin_library()},
                       runtime={"keep_on_shutdown": "true"},  # a restart keeps the jobs
                       sections={"quota": {"concurrent_jobs": "4"}})
    nodes = os.path.join(d.dir, "gpudev")
    make_nodes(nodes)
    d.sections["gpu"]["dev_prefix"] = nodes
    # no MIG capability files: root is not asked for an instance here
    d.sections["gpu"]["caps_dir"] = os.path.join(d.dir, "caps")
    os.makedirs(d.sections["gpu"]["caps_dir"])
    d.write_config()
    d.cards = os.path.join(d.dir, "cards.json")
    write_cards(d.cards, [mig_card(SEVEN, utilization=10), shared_card()])
    d.env = dict(d.env or {}, LABD_NVML_STANDIN=d.cards)
    try:
        d.start()
        yield d
    finally:
        teardown_runtime_daemon(d)


def devices(c):
    r = c.get("/api/v1/gpus")
    assert r.status == 200, r
    return r.json["gpus"]


def test_gpus_lists_each_mig_instance_and_share(gd):
    got = devices(gd.admin())
    assert [(g["device"], g["kind"], g["profile"], g["card"]) for g in got] == \
        [(f"0/gi{gi}/ci0", "mig", "1g.18gb", 0) for gi in range(1, 8)] + \
        [(f"1/share{s}", "share", "share", 1) for s in range(4)], got
    mig = got[0]
    assert mig["id"] == 0x10000 | 1 << 3, mig  # the device id, as rows carry it
    assert mig["uuid"] == "MIG-5d8e6f2a-0c1b-5e3d-9a7f-000000000001", mig
    assert mig["memory_bytes"] == MIG_MEMORY and mig["name"] == "NVIDIA H200", mig
    assert mig["source"] == "nvml" and mig["state"] == "free" and mig["holder"] is None, mig
    assert mig["fraction"] == 0.128 and mig["budget_bytes"] is None, mig
    share = got[7]
    assert share["id"] == 0x20000 | 1 << 8, share
    assert share["uuid"] is None and share["budget_bytes"] == 20 * GIB, share
    assert share["memory_bytes"] == 20 * GIB and share["fraction"] == 0.25, share
    assert share["utilization_percent"] == 64, share  # time-slicing: the card's
    # a user sees the devices, never who holds them
    u = make_user(gd, prefix="gvu")
    mine = devices(u)
    assert len(mine) == 11 and all("holder" not in g for g in mine), mine


def test_a_rescan_reads_the_instances_an_admin_made(gd):
    write_cards(gd.cards, [mig_card([("3g.71gb", 76235669504), ("2g.35gb", 37580963840),
                                     ("2g.35gb", 37580963840)], first_gi=1), shared_card()])
    u = make_user(gd, prefix="grs")
    r = u.post("/api/v1/gpus/rescan", json={})
    assert r.status == 403, r
    # the readings refresh every second; which devices there are waits for the rescan
    old = wait_until(lambda: (lambda g: g if g[3]["memory_bytes"] is None else None)(
        devices(gd.admin())), 10 * SLOW, "gi4's reading gone (the layout unchanged)")
    assert len(old) == 11 and old[0]["profile"] == "1g.18gb", old
    assert old[0]["memory_bytes"] == 76235669504, old  # gi1 read anew all the same
    r = gd.admin().post("/api/v1/gpus/rescan", json={})
    assert r.status == 200 and r.json == {"nvml": True}, r
    got = devices(gd.admin())
    assert [(g["device"], g["profile"]) for g in got[:3]] == \
        [("0/gi1/ci0", "3g.71gb"), ("0/gi2/ci0", "2g.35gb"), ("0/gi3/ci0", "2g.35gb")], got
    assert len(got) == 3 + 4 and got[0]["memory_bytes"] == 76235669504, got
    assert "gpus: read again at the request of admin" in gd.log(), gd.log_tail()
    # back to the seven the other tests expect
    write_cards(gd.cards, [mig_card(SEVEN, utilization=10), shared_card()])
    assert gd.admin().post("/api/v1/gpus/rescan", json={}).status == 200
    assert len(devices(gd.admin())) == 11


SAMPLE = re.compile(r'^(labd_gpu_device_[a-z_]+)\{card="(\d+)",device="([^"]+)",'
                    r'kind="([a-z]+)",profile="([^"]*)"\} (\S+)$')


def test_metrics_per_device(gd):
    def scrape():
        r = gd.admin().get("/metrics")
        assert r.status == 200, r
        return r.body

    body = wait_until(lambda: (lambda b: b if b'device="0/gi7/ci0"' in b else None)(scrape()),
                      10 * SLOW, "the devices in /metrics")
    p = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True,
                       timeout=30)
    assert p.returncode == 0, f"promtool: {p.stdout.decode()} {p.stderr.decode()}"
    series = {}
    for line in body.decode().splitlines():
        m = SAMPLE.match(line)
        if m:
            series[m.group(1, 3)] = (m.group(2, 4, 5), float(m.group(6)))
    assert series[("labd_gpu_device_utilization_ratio", "0/gi3/ci0")] == \
        (("0", "mig", "1g.18gb"), 0.13), series
    assert series[("labd_gpu_device_memory_bytes", "0/gi3/ci0")] == \
        (("0", "mig", "1g.18gb"), MIG_MEMORY), series
    assert series[("labd_gpu_device_utilization_ratio", "1/share2")] == \
        (("1", "share", "share"), 0.64), series
    assert series[("labd_gpu_device_memory_bytes", "1/share2")] == \
        (("1", "share", "share"), 20 * GIB), series
    assert series[("labd_gpu_device_memory_used_bytes", "1/share2")] == \
        (("1", "share", "share"), 0), series
    assert sum(1 for k in series if k[0] == "labd_gpu_device_memory_bytes") == 11, series


def sandbox_pid(user, marker):
    """The host pid of the process in user's sandbox whose command line is marker."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read()
            with open(f"/proc/{pid}/cgroup") as fh:
                cgroup = fh.read()
        except OSError:
            continue
        if cmd == marker and f"/labd/{user}-" in cgroup:
            return int(pid)
    return None


def test_a_share_over_its_budget_is_warned_then_its_processes_ended(gd):
    from jobs_lib import get_job, new_user, submit, wait_job
    a = gd.admin()
    plan = "share-plan"
    assert a.post("/api/v1/plans", json={"name": plan, "gpu": "share"}).status == 201
    name, c = new_user(gd, prefix="gsh", plan=plan)
    # a process outside any sandbox with more than the budget: never counted, never ended
    outside = subprocess.Popen(["sleep", "300"])
    try:
        j = submit(c, ["sleep", "617"], type="gpu", gpu_count=1)
        j = wait_job(c, j["id"], statuses=("InProgress",), secondary="Training")
        held = [g for g in devices(a) if g["state"] == "busy"]
        assert [(g["device"], g["holder"]["user"]) for g in held] == [("1/share0", name)], held
        pid = wait_until(lambda: sandbox_pid(name, b"sleep\x00617\x00"), 30 * SLOW,
                         "the job's process")
        # under its budget: nothing said
        write_cards(gd.cards, [mig_card(SEVEN), shared_card(
            [{"pid": pid, "bytes": 19 * GIB}, {"pid": outside.pid, "bytes": 30 * GIB}])])
        share = wait_until(lambda: (lambda g: g if g["memory_used_bytes"] == 19 * GIB else None)(
            devices(a)[7]), 10 * SLOW, "the share's use read")
        assert "notice" not in share and get_job(c, j["id"])["gpu_notice"] is None, share
        # the job's samples read its share: the card's utilisation (time-slicing shares
        # it), and of memory what its own processes use (19 GiB), not the card's 49
        last = wait_until(lambda: (lambda s: s and s[-1]["gpu_memory_bytes"] == 19 * GIB and s[-1])(
            c.get(f"/api/v1/jobs/{j['id']}/samples").json["samples"]), 10 * SLOW,
            lambda: c.get(f"/api/v1/jobs/{j['id']}/samples").json["samples"][-3:])
        assert last["gpu_percent"] == 64, last
        # a restart of labd: the watcher keeps nothing in memory that it needs, it
        # finds the job's processes by their cgroup at each reading, so it still
        # enforces the budget on the job the new web process adopted
        rc = gd.stop(15)
        assert rc == 0, f"labd exit status {rc}\n" + gd.log_tail()
        gd.start(expect_admin_password=False)
        wait_until(lambda: c.get(f"/api/v1/jobs/{j['id']}").status == 200, 10 * SLOW,
                   "labd back")
        assert get_job(c, j["id"])["secondary_status"] == "Training"
        assert sandbox_pid(name, b"sleep\x00617\x00") == pid  # the same process
        # over it: warned, then past the grace (3 s) its processes end
        write_cards(gd.cards, [mig_card(SEVEN), shared_card(
            [{"pid": pid, "bytes": 25 * GIB}, {"pid": outside.pid, "bytes": 30 * GIB}])])
        warned = wait_until(lambda: get_job(c, j["id"])["gpu_notice"], 10 * SLOW,
                            "the warning on the job")
        assert warned.startswith("GPU memory over the share's budget: 25.0 GiB in use of "
                                 "20.0 GiB; its GPU processes are ended at "), warned
        mine = [g for g in devices(c) if g.get("you")]
        assert len(mine) == 1 and mine[0]["notice"] == warned, mine
        ended = wait_until(lambda: (lambda t: t if "were ended" in t else None)(
            get_job(c, j["id"])["gpu_notice"] or ""), 15 * SLOW, "the processes ended")
        assert ended.startswith("GPU memory over the share's budget for longer than 3s: its "
                                "GPU processes were ended at "), ended
        assert ended.endswith("(1 of them)"), ended
        j = wait_job(c, j["id"])
        assert j["status"] == "Failed", j
        assert "were ended" in (j["gpu_notice"] or ""), j  # kept on the ended job's page
        assert outside.poll() is None  # the process outside the sandbox lives
        assert f"gpu_processes_end: 1 of 1 processes of {name}'s sandbox" in gd.log(), \
            gd.log_tail()
        # the ending outlives the notice (memory only): the audit log keeps it
        audit = audit_entries(a, "gpu.share_ended", name)
        assert len(audit) == 1 and audit[0]["actor"] is None, audit
        assert audit[0]["detail"].startswith("share 1/share0: GPU memory over the share's "
                                             "budget for longer than 3s"), audit
    finally:
        outside.kill()
        outside.wait()
        write_cards(gd.cards, [mig_card(SEVEN, utilization=10), shared_card()])


def jupyter_pid(user):
    """The host pid of the Jupyter server in user's runtime sandbox."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read()
            with open(f"/proc/{pid}/cgroup") as fh:
                cgroup = fh.read()
        except OSError:
            continue
        if b"jupyter" in cmd and f"/labd/{user}-" in cgroup:
            return int(pid)
    return None


def test_a_runtime_on_a_share_hears_of_its_budget_on_the_dashboard(gd):
    from jobs_lib import new_user
    from labd_harness import start_runtime, wait_runtime
    a = gd.admin()
    plan = "share-rt-plan"
    assert a.post("/api/v1/plans", json={"name": plan, "gpu": "share"}).status == 201
    name, c = new_user(gd, prefix="gsr", plan=plan)
    try:
        _, rt = start_runtime(c, "gpu")
        assert len(rt["gpus"]) == 1 and rt["gpus"][0] >> 16 == 2, rt  # a share's id
        assert rt["gpu_notice"] is None, rt
        pid = wait_until(lambda: jupyter_pid(name), 30 * SLOW, "the runtime's Jupyter")
        write_cards(gd.cards, [mig_card(SEVEN), shared_card([{"pid": pid, "bytes": 21 * GIB}])])
        warned = wait_until(lambda: c.get("/api/v1/me/runtime").json["runtime"]["gpu_notice"],
                            10 * SLOW, "the warning on the dashboard's runtime")
        assert warned.startswith("GPU memory over the share's budget: 21.0 GiB in use of "
                                 "20.0 GiB"), warned
        ended = wait_until(lambda: (lambda t: t if "were ended" in t else None)(
            c.get("/api/v1/me/runtime").json["runtime"]["gpu_notice"] or ""), 15 * SLOW,
            "the processes ended, said on the dashboard")
        assert ended.endswith("(1 of them)"), ended
        # its Jupyter was the process: the runtime ends, and the notice stays with it
        gone = wait_runtime(c, ("stopped", "failed"), timeout=30 * SLOW)
        assert "were ended" in (gone["gpu_notice"] or ""), gone
    finally:
        c.delete("/api/v1/me/runtime")
        write_cards(gd.cards, [mig_card(SEVEN, utilization=10), shared_card()])
