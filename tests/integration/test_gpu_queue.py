"""The GPU pool and its fair, visible queue, with real runtimes on stand-in
GPUs ([gpu] stand_in: pool entries with no device node).

Two users and one GPU: the second start is queued (position 1, an estimate
from the holder's deadline), its event stream announces queued -> starting
when the first stops, and it runs on the freed GPU; a queued start is
cancelled with DELETE; the queue survives a restart of labd; the order is
fair (less GPU time in the last 24 h first, then arrival; seeded ledger);
a start queued longer than [gpu] queue_max_wait fails saying so; GET
/api/v1/gpus hides holders and other users' queue details from users; the
inventory comes from device nodes (devices = auto) without NVML."""

import os
import sqlite3
import stat
import time

import pytest

from labd_harness import (
    RUNTIME_START_TIMEOUT,
    SLOW,
    STRONG,
    audit_entries,
    runtime_daemon,
    start_runtime,
    stop_runtime,
    teardown_daemon,
    unique_name,
    user_id,
    wait_runtime,
    wait_until,
)
from test_runtime_events import EventStream, cookie_headers

QUEUE_KEYS = {"position", "queued_at", "estimate_start_at", "expires_at", "gpu_kind"}


@pytest.fixture(scope="module")
def gd(runtime_daemon_factory):
    return runtime_daemon_factory("gpuq", gpu={"stand_in": "1"})


def new_user(d, tag):
    name = unique_name(tag)
    pw = f"{STRONG}-{name}"
    assert d.admin().post("/api/v1/users", json={"name": name, "password": pw}).status == 201
    c = d.client()
    c.login(name, pw)
    c.name = name
    return c


def queue_gpu(c):
    """POST a GPU start that must be queued; returns the runtime."""
    r = c.post("/api/v1/me/runtime", json={"type": "gpu"})
    assert r.status == 202, f"queueing a GPU start: {r!r}"
    rt = r.json["runtime"]
    assert rt["state"] == "queued", rt
    assert set(rt["queue"]) == QUEUE_KEYS, rt
    assert rt["gpus"] == [] and rt["ready_at"] is None, rt
    return rt


def current(c):
    r = c.get("/api/v1/me/runtime")
    assert r.status == 200, r
    return r.json["runtime"]


def cleanup(*clients):
    for c in clients:
        rt = current(c)
        if rt and rt["state"] in ("queued", "starting", "running"):
            c.delete("/api/v1/me/runtime")
    for c in clients:
        wait_runtime(c, ("stopped", "failed"), timeout=30 * SLOW)


def metrics(d):
    """The admin's scrape of /metrics as {series: value}."""
    r = d.admin().get("/metrics")
    assert r.status == 200, r
    out = {}
    for line in r.body.decode().splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            out[k] = float(v)
    return out


def test_second_user_queues_and_starts_when_the_first_stops(gd):
    a, b = new_user(gd, "gqa"), new_user(gd, "gqb")
    try:
        _, held = start_runtime(a, "gpu")
        assert held["gpus"] == [0] and held["queue"] is None, held
        stream = EventStream(gd.port, cookie_headers(b), source=b.source)
        assert stream.status == 200
        assert stream.next_runtime()[1] is None  # no runtime yet
        q = queue_gpu(b)
        assert q["queue"]["position"] == 1, q
        # the estimate is when the holder's runtime must end
        assert q["queue"]["estimate_start_at"] == held["deadline"], (q, held)
        assert q["seconds_left"] > 0, q
        _, ev = stream.next_runtime()
        assert ev["state"] == "queued" and ev["queue"]["position"] == 1, ev
        want = {"labd_gpus": 1, "labd_gpus_allocated": 1, "labd_gpu_queue_length": 1}
        wait_until(lambda: all(metrics(gd).get(k) == v for k, v in want.items()), 10 * SLOW,
                   lambda: f"pool metrics {want}: {metrics(gd)}")
        waits = metrics(gd)["labd_gpu_queue_wait_seconds_count"]
        # the holder stops: the queued start takes the GPU, and its stream says so
        a.delete("/api/v1/me/runtime")
        _, ev = stream.next_runtime(timeout=30 * SLOW)
        while ev["state"] == "queued":
            _, ev = stream.next_runtime(timeout=30 * SLOW)
        assert ev["state"] in ("starting", "running"), ev
        assert ev["id"] == q["id"] and ev["gpus"] == [0] and ev["queue"] is None, ev
        running = wait_runtime(b, "running")
        assert running["gpus"] == [0], running
        assert wait_runtime(a, "stopped")["gpus"] == [0]
        m = metrics(gd)
        assert m["labd_gpu_queue_length"] == 0 and m["labd_gpus_allocated"] == 1, m
        assert m["labd_gpu_queue_wait_seconds_count"] == waits + 1, m
        entries = audit_entries(gd.admin(), "runtime.dequeue", b.name)
        assert entries and "gpu 0 after" in entries[0]["detail"], entries
    finally:
        cleanup(a, b)


def test_a_queued_start_is_cancelled_with_delete(gd):
    a, b = new_user(gd, "gca"), new_user(gd, "gcb")
    try:
        start_runtime(a, "gpu")
        q = queue_gpu(b)
        r = b.delete("/api/v1/me/runtime")
        assert r.status == 202, r
        rt = r.json["runtime"]
        assert (rt["id"], rt["state"], rt["reason"]) == (q["id"], "stopped", "cancelled while queued")
        assert rt["queue"] is None, rt
        assert gd.admin().get("/api/v1/gpus").json["queue"] == []
        # the GPU freeing later starts nothing for b
        stop_runtime(a)
        assert current(b)["state"] == "stopped"
        assert b.post("/api/v1/me/runtime", json={"type": "cpu"}).status == 202
        wait_runtime(b, "running")
    finally:
        cleanup(a, b)


def seed_gpu_use(d, name, seconds, ago_s):
    """A closed GPU ledger entry of name that ended ago_s seconds ago."""
    end = int(time.time()) - ago_s
    db = sqlite3.connect(d.db_file, timeout=10)
    try:
        db.execute("INSERT INTO ledger (user_id, user_name, kind, plan, start_at, end_at,"
                   " billable_s, end_reason, last_heartbeat) VALUES (?, ?, 'gpu', 'default',"
                   " ?, ?, ?, 'seeded', ?)",
                   (user_id(d, name), name, end - seconds, end, seconds, end))
        db.commit()
    finally:
        db.close()


def positions(c):
    return {e["user"]: e["position"] for e in c.get("/api/v1/gpus").json["queue"]}


def test_less_gpu_time_in_24h_goes_first(gd):
    h, x, y, z = (new_user(gd, t) for t in ("gfh", "gfx", "gfy", "gfz"))
    seed_gpu_use(gd, x.name, 3600, 600)           # an hour, within the last 24 h
    seed_gpu_use(gd, y.name, 3 * 3600, 2 * 86400)  # three hours, two days ago: not counted
    admin = gd.admin()
    try:
        start_runtime(h, "gpu")
        qx = queue_gpu(x)
        assert qx["queue"]["position"] == 1, qx
        stream = EventStream(gd.port, cookie_headers(x), source=x.source)
        assert stream.next_runtime()[1]["queue"]["position"] == 1
        queue_gpu(y)
        # y used no GPU in the window: ahead of x, who queued first
        assert positions(admin) == {x.name: 2, y.name: 1}
        queue_gpu(z)  # z ties with y on usage and came later
        assert positions(admin) == {x.name: 3, y.name: 1, z.name: 2}
        assert current(x)["queue"]["position"] == 3
        # x's dashboard hears each move back, without its state changing
        heard = [stream.next_runtime()[1]["queue"]["position"] for _ in range(2)]
        assert heard == [2, 3], heard
        # estimates follow the order: one GPU, each holds it for its length
        est = {e["user"]: e["estimate_start_at"] for e in admin.get("/api/v1/gpus").json["queue"]}
        assert est[y.name] < est[z.name] < est[x.name], est
        h.delete("/api/v1/me/runtime")
        assert wait_runtime(y, ("running", "failed"))["state"] == "running"
        assert current(x)["state"] == current(z)["state"] == "queued"
        wait_until(lambda: positions(admin) == {x.name: 2, z.name: 1}, 10 * SLOW,
                   lambda: f"positions after y started: {positions(admin)}")
        assert current(z)["queue"]["position"] == 1
    finally:
        cleanup(h, x, y, z)


def test_gpus_api_hides_holders_and_others_queue_details(gd):
    a, b, c = new_user(gd, "gha"), new_user(gd, "ghb"), new_user(gd, "ghc")
    admin = gd.admin()
    try:
        _, held = start_runtime(a, "gpu")
        qb, qc = queue_gpu(b), queue_gpu(c)
        j = admin.get("/api/v1/gpus").json
        assert j["queue_length"] == 2, j
        (g,) = j["gpus"]
        assert (g["id"], g["state"], g["source"]) == (0, "busy", "stand-in"), g
        assert g["holder"] == {"user": a.name, "runtime_id": held["id"]}, g
        for k in ("name", "memory_bytes", "memory_used_bytes", "utilization_percent",
                  "temperature_c"):
            assert g[k] is None, g  # a stand-in has no numbers
        assert [e["user"] for e in j["queue"]] == [b.name, c.name], j
        assert j["queue"][0]["runtime_id"] == qb["id"], j

        r = b.get("/api/v1/gpus")
        assert r.status == 200, r
        j = r.json
        (g,) = j["gpus"]
        assert "holder" not in g and g["state"] == "busy", g
        mine, theirs = j["queue"]
        assert mine == {"position": 1, "queued_at": qb["queue"]["queued_at"],
                        "runtime_id": qb["id"], "user": b.name, "gpu_kind": "whole",
                        "estimate_start_at": held["deadline"], "you": True}, mine
        assert theirs == {"position": 2, "queued_at": qc["queue"]["queued_at"],
                          "gpu_kind": "whole"}, theirs
        assert "you" not in admin.get("/api/v1/gpus").json["queue"][1]
        # anonymous: no
        assert gd.client().get("/api/v1/gpus").status == 401
    finally:
        cleanup(a, b, c)


def test_a_start_queued_past_queue_max_wait_fails(runtime_daemon_factory):
    d = runtime_daemon_factory("gpuq-exp", gpu={"stand_in": "1", "queue_max_wait": "2s"})
    a, b = new_user(d, "gea"), new_user(d, "geb")
    try:
        start_runtime(a, "gpu")
        q = queue_gpu(b)
        rt = wait_runtime(b, ("failed", "stopped", "starting", "running"), timeout=20 * SLOW)
        assert rt["id"] == q["id"] and rt["state"] == "failed", rt
        assert rt["reason"] == ("waited too long for a GPU: none became free within 2 s "
                                "([gpu] queue_max_wait)"), rt
        assert d.admin().get("/api/v1/gpus").json["queue"] == []
        assert current(a)["state"] == "running"
    finally:
        cleanup(a, b)


def test_the_queue_survives_a_restart_of_labd(runtime_daemon_factory):
    d = runtime_daemon_factory("gpuq-rst", gpu={"stand_in": "1"},
                               runtime={"keep_on_shutdown": "true"})
    a, b = new_user(d, "gra"), new_user(d, "grb")
    try:
        _, held = start_runtime(a, "gpu")
        q = queue_gpu(b)
        rc = d.stop(15)
        assert rc == 0, f"labd exit status {rc}\n" + d.log_tail()
        d.start(expect_admin_password=False)
        again = wait_until(lambda: current(b), 10 * SLOW, "b's runtime after the restart")
        assert again["state"] == "queued" and again["id"] == q["id"], again
        assert again["queue"]["queued_at"] == q["queue"]["queued_at"], (q, again)
        assert again["queue"]["position"] == 1, again
        assert current(a)["state"] == "running" and current(a)["id"] == held["id"]
        a.delete("/api/v1/me/runtime")
        rt = wait_runtime(b, ("running", "failed"))
        assert rt["state"] == "running" and rt["id"] == q["id"] and rt["gpus"] == [0], rt
    finally:
        cleanup(a, b)


def make_gpu_nodes(base):
    """Device nodes as the driver names them; nothing answers behind them."""
    os.makedirs(base, exist_ok=True)
    for name, major, minor in (("nvidia0", 195, 0), ("nvidia3", 195, 3),
                               ("nvidiactl", 195, 255), ("nvidia-uvm", 235, 0)):
        os.mknod(os.path.join(base, name), 0o666 | stat.S_IFCHR, os.makedev(major, minor))


def test_inventory_from_device_nodes_without_nvml():
    d = runtime_daemon("gpu-inv", gpu={"devices": "auto", "nvml_library": "/nonexistent/libnvidia-ml.so.1"})
    nodes = os.path.join(d.dir, "gpudev")
    make_gpu_nodes(nodes)
    d.sections["gpu"]["dev_prefix"] = nodes
    d.write_config()
    try:
        d.start()
        j = d.admin().get("/api/v1/gpus").json
        assert [(g["id"], g["source"], g["state"], g["name"], g["holder"]) for g in j["gpus"]] == \
            [(0, "device", "free", None, None), (3, "device", "free", None, None)], j
        assert j["queue"] == [] and j["queue_length"] == 0, j
        assert "NVML not used: /nonexistent/libnvidia-ml.so.1 cannot be loaded" in d.log(), \
            d.log_tail()
    finally:
        teardown_daemon(d)


def test_stand_in_and_devices_exclude_each_other():
    d = runtime_daemon("gpu-both", gpu={"devices": "0", "stand_in": "1"})
    try:
        with pytest.raises(AssertionError) as e:
            d.start()
        assert "[gpu] stand_in and [gpu] devices exclude each other" in str(e.value)
    finally:
        teardown_daemon(d)


def test_a_gpu_still_held_by_root_sends_the_start_back_to_the_queue(runtime_daemon_factory):
    """A start that timed out is failed in the store at once while root
    still tears its sandbox down: the GPU looks free to the web process but
    the supervisor refuses it (gpu_busy). The queued start goes back to the
    queue, keeping its place, and starts once root has let the GPU go."""
    slow = unique_name("gsl")
    d = runtime_daemon_factory("gpuq-held", gpu={"stand_in": "1"},
                               # long enough for JupyterLab to answer on a busy machine
                               # (the queued start must make it), and the slow build
                               # outlasts it by a margin
                               runtime={"start_timeout": "12s"},
                               env={"LABD_FAULT_SLOW_START": f"{slow}:18000"})
    pw = f"{STRONG}-{slow}"
    assert d.admin().post("/api/v1/users", json={"name": slow, "password": pw}).status == 201
    a = d.client()
    a.login(slow, pw)
    b = new_user(d, "gsb")
    try:
        assert a.post("/api/v1/me/runtime", json={"type": "gpu"}).status == 202
        q = queue_gpu(b)
        failed = wait_runtime(a, ("failed", "stopped", "running"), timeout=30 * SLOW)
        assert failed["state"] == "failed" and "did not answer" in failed["reason"], failed
        wait_until(lambda: "is still held; queued again" in d.log(), 20 * SLOW,
                   lambda: "the refused start going back to the queue\n" + d.log_tail())
        rt = wait_runtime(b, ("running", "failed", "stopped"))
        assert rt["state"] == "running" and rt["id"] == q["id"] and rt["gpus"] == [0], rt
    finally:
        cleanup(a, b)
