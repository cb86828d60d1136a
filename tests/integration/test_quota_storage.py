"""The storage quota against the real home image: raising a user's storage_bytes
grows the image (online while a runtime holds it mounted, else at the next start,
and the response says which); the quota API shows what the home holds; lowering it
below that is refused naming both sizes, and nothing changes."""

import os

import pytest

from labd_harness import (
    STRONG,
    assert_error,
    assert_status,
    home_image,
    jupyter_execute,
    open_kernel_channel,
    start_runtime,
    stop_runtime,
    unique_name,
    wait_loops_released,
)

G = 1 << 30
M = 1 << 20
FS_SIZE = "import os; s = os.statvfs(os.path.expanduser('~')); print(s.f_blocks * s.f_frsize)"


@pytest.fixture(scope="module")
def sd(runtime_daemon_factory):
    # RUNTIME_DEFAULTS: home_size 1G, the default plan's storage_bytes
    return runtime_daemon_factory("quota-storage")


def new_user(d):
    name = unique_name("qs")
    pw = f"{STRONG}-{name}"
    assert_status(d.admin().post("/api/v1/users", json={"name": name, "password": pw}), 201)
    c = d.client()
    c.login(name, pw)
    return name, c


def set_storage(d, name, size):
    return d.admin().put(f"/api/v1/users/{name}/quota",
                         json={"overrides": {"storage_bytes": size}})


def released(d):
    """Waits until no loop device holds a home of d: only then does a start grow a
    home offline (a live file system is never resized from outside)."""
    # long: a sandbox of another daemon on this host, started while the home was
    # mounted, holds a copy of the mount until it ends
    loops, holders = wait_loops_released(d.state_dir, timeout=120)
    assert not loops, (loops, holders)


def fs_size_inside(d, c):
    """The home's file system size as df inside the runtime sees it."""
    _, ws = open_kernel_channel(d, c)
    try:
        _, out, _ = jupyter_execute(ws, FS_SIZE)
    finally:
        ws.close()
    return int(out.strip())


def test_grow_at_next_start_then_online(sd):
    name, c = new_user(sd)
    start_runtime(c)
    stop_runtime(c)
    img = home_image(sd, name)
    assert os.path.getsize(img) == G
    # not mounted: grown at the next start
    r = set_storage(sd, name, 2 * G)
    assert_status(r, 200)
    assert r.json["storage"]["applied"] == "next_start", r.json
    assert r.json["storage"]["quota_bytes"] == 2 * G, r.json
    assert os.path.getsize(img) == G
    released(sd)
    start_runtime(c)
    assert os.path.getsize(img) == 2 * G
    assert fs_size_inside(sd, c) > 1.9 * G
    # mounted: grown online, visible inside the running runtime at once
    r = set_storage(sd, name, 3 * G)
    assert_status(r, 200)
    applied = r.json["storage"]["applied"]
    if applied == "online":
        assert os.path.getsize(img) == 3 * G
        assert fs_size_inside(sd, c) > 2.9 * G
        stop_runtime(c)
        return
    # Some kernels (VMs that withhold CAP_SYS_RESOURCE, as the escape suite's
    # allowed skip says) refuse EXT4_IOC_RESIZE_FS: then the response says
    # next_start, and the next start grows the file system offline.
    assert applied == "next_start", r.json
    log = sd.log()
    assert f"online growth of {name}'s home to {3 * G} bytes failed" in log, sd.log_tail()
    assert "Permission denied to resize filesystem" in log, sd.log_tail()
    stop_runtime(c)
    released(sd)
    start_runtime(c)
    assert os.path.getsize(img) == 3 * G
    assert fs_size_inside(sd, c) > 2.9 * G
    stop_runtime(c)


def test_lowering_below_use_is_refused_and_changes_nothing(sd):
    name, c = new_user(sd)
    assert_status(set_storage(sd, name, 2 * G), 200)
    start_runtime(c)
    _, ws = open_kernel_channel(sd, c)
    try:
        jupyter_execute(ws, "import os; open(os.path.expanduser('~/blob'), 'wb')"
                        ".write(os.urandom(200 << 20))")
    finally:
        ws.close()
    q = c.get("/api/v1/me/quota").json
    used = q["storage"]["used_bytes"]
    assert 200 * M <= used < 400 * M, q["storage"]
    assert q["used"]["storage_bytes"] == used
    assert q["remaining"]["storage_bytes"] == 2 * G - used, q["remaining"]
    before = sd.admin().get(f"/api/v1/users/{name}/quota").json
    e = assert_error(set_storage(sd, name, 128 * M), 409, "storage_below_use")
    # both sizes and the user (the use read again by the server: about the same)
    assert str(128 * M) in e["message"] and name in e["message"], e
    said = int(e["message"].split(" bytes their home")[0].split()[-1])
    assert 200 * M <= said < 400 * M, e
    after = sd.admin().get(f"/api/v1/users/{name}/quota").json
    assert after["overrides"] == before["overrides"], (before, after)
    assert after["limits"]["storage_bytes"] == before["limits"]["storage_bytes"]
    # lowering, but not below use: accepted; the image never shrinks
    r = set_storage(sd, name, G)
    assert_status(r, 200)
    assert r.json["storage"]["applied"] == "unchanged", r.json
    assert os.path.getsize(home_image(sd, name)) == 2 * G
    stop_runtime(c)


def test_plan_change_below_a_members_use_is_refused_naming_the_user(sd):
    a = sd.admin()
    plan = unique_name("pl")
    assert_status(a.post("/api/v1/plans", json={"name": plan, "limits": {
        "storage_bytes": 2 * G}}), 201)
    name, c = new_user(sd)
    assert_status(a.put(f"/api/v1/users/{name}/quota", json={"plan": plan}), 200)
    start_runtime(c)
    _, ws = open_kernel_channel(sd, c)
    try:
        jupyter_execute(ws, "import os; open(os.path.expanduser('~/blob'), 'wb')"
                        ".write(os.urandom(200 << 20))")
    finally:
        ws.close()
    e = assert_error(a.put(f"/api/v1/plans/{plan}", json={"limits": {
        "storage_bytes": 128 * M}}), 409, "storage_below_use")
    assert name in e["message"] and str(128 * M) in e["message"], e
    assert a.get(f"/api/v1/plans/{plan}").json["plan"]["limits"]["storage_bytes"] == 2 * G
    assert c.get("/api/v1/me/quota").json["storage"]["quota_bytes"] == 2 * G
    # raising the plan grows the member's home (mounted: the image grows now;
    # its file system too unless the kernel refuses online growth)
    assert_status(a.put(f"/api/v1/plans/{plan}", json={"limits": {
        "storage_bytes": 3 * G}}), 200)
    assert os.path.getsize(home_image(sd, name)) == 3 * G
    stop_runtime(c)
