"""Group changes against members' real homes: a group's plan set or changed,
members added or removed, that would put a member's effective storage_bytes below
what their home holds is refused naming the member and both sizes, and changes
nothing (the group, its members, the audit log); a group change that raises a
member's storage grows the image and the answer says how, per member."""

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


@pytest.fixture(scope="module")
def sd(runtime_daemon_factory):
    # RUNTIME_DEFAULTS: home_size 1G, the default storage_bytes
    return runtime_daemon_factory("quota-storage-groups")


def new_user(d):
    name = unique_name("qg")
    pw = f"{STRONG}-{name}"
    assert_status(d.admin().post("/api/v1/users", json={"name": name, "password": pw}), 201)
    c = d.client()
    c.login(name, pw)
    return name, c


def new_plan(d, storage_bytes):
    plan = unique_name("gp")
    assert_status(d.admin().post("/api/v1/plans", json={"name": plan, "limits": {
        "storage_bytes": storage_bytes}}), 201)
    return plan


def new_group(d, plan=None, members=()):
    group = unique_name("gg")
    assert_status(d.admin().post("/api/v1/groups", json={
        "name": group, "plan": plan, "members": list(members)}), 201)
    return group


def start_and_fill(d, c, size):
    """Starts c's runtime and writes size bytes into its home."""
    start_runtime(c)
    _, ws = open_kernel_channel(d, c)
    try:
        jupyter_execute(ws, "import os; open(os.path.expanduser('~/blob'), 'wb')"
                        f".write(os.urandom({size}))")
    finally:
        ws.close()
    used = c.get("/api/v1/me/quota").json["storage"]["used_bytes"]
    assert size <= used < size + 200 * M, used


def assert_below_use(r, name, size):
    e = assert_error(r, 409, "storage_below_use")
    assert name in e["message"] and f"storage_bytes {size} " in e["message"], e
    said = int(e["message"].split(" bytes their home")[0].split()[-1])
    assert 200 * M <= said < 400 * M, e


def group_updates(d, group):
    entries = d.admin().get("/api/v1/audit?action=group.update&limit=500").json["entries"]
    return [e for e in entries if e["target"] == group]


def test_group_plan_change_below_a_members_use_is_refused_naming_them(sd):
    a = sd.admin()
    name, c = new_user(sd)
    other, _ = new_user(sd)  # an empty home: fits anything
    group = new_group(sd, members=[other, name])
    small = new_plan(sd, 128 * M)
    start_and_fill(sd, c, 200 * M)
    assert_below_use(a.put(f"/api/v1/groups/{group}", json={"plan": small}), name, 128 * M)
    g = a.get(f"/api/v1/groups/{group}").json["group"]
    assert g["plan"] is None and sorted(g["members"]) == sorted([other, name]), g
    assert c.get("/api/v1/me/quota").json["storage"]["quota_bytes"] == G
    assert group_updates(sd, group) == []
    # a plan that still fits the member's use is accepted: the quota is lower,
    # the image never shrinks
    fits = new_plan(sd, 512 * M)
    r = a.put(f"/api/v1/groups/{group}", json={"plan": fits})
    assert_status(r, 200)
    assert {"user": name, "quota_bytes": 512 * M, "applied": "unchanged"} in r.json["storage"]
    assert c.get("/api/v1/me/quota").json["storage"]["quota_bytes"] == 512 * M
    assert os.path.getsize(home_image(sd, name)) == G
    assert len(group_updates(sd, group)) == 1
    stop_runtime(c)


def test_adding_a_member_whose_home_the_plan_would_not_hold_is_refused(sd):
    a = sd.admin()
    name, c = new_user(sd)
    small = new_plan(sd, 128 * M)
    group = new_group(sd, plan=small)
    start_and_fill(sd, c, 200 * M)
    assert_below_use(a.put(f"/api/v1/groups/{group}", json={"add_members": [name]}),
                     name, 128 * M)
    assert a.get(f"/api/v1/groups/{group}").json["group"]["members"] == []
    assert a.get(f"/api/v1/users/{name}/quota").json["groups"] == []
    assert group_updates(sd, group) == []
    # creating a group with that plan and member is refused whole: no group
    other = unique_name("gg")
    assert_below_use(a.post("/api/v1/groups", json={
        "name": other, "plan": small, "members": [name]}), name, 128 * M)
    assert_error(a.get(f"/api/v1/groups/{other}"), 404, "not_found")
    entries = a.get("/api/v1/audit?action=group.create&limit=500").json["entries"]
    assert [e for e in entries if e["target"] == other] == []
    stop_runtime(c)


def test_removing_a_member_from_the_group_that_gave_them_room_is_refused(sd):
    a = sd.admin()
    name, c = new_user(sd)
    big = new_group(sd, plan=new_plan(sd, 2 * G), members=[name])
    small = new_group(sd, plan=new_plan(sd, 128 * M), members=[name])
    start_and_fill(sd, c, 200 * M)
    assert c.get("/api/v1/me/quota").json["storage"]["quota_bytes"] == 2 * G
    r = a.put(f"/api/v1/groups/{big}", json={"remove_members": [name]})
    assert_below_use(r, name, 128 * M)
    assert a.get(f"/api/v1/groups/{big}").json["group"]["members"] == [name]
    assert sorted(a.get(f"/api/v1/users/{name}/quota").json["groups"]) == sorted([big, small])
    assert c.get("/api/v1/me/quota").json["storage"]["quota_bytes"] == 2 * G
    assert group_updates(sd, big) == []
    # leaving the small group is fine: the big one still holds them
    r = a.put(f"/api/v1/groups/{small}", json={"remove_members": [name]})
    assert_status(r, 200)
    assert r.json["storage"] == [], r.json
    stop_runtime(c)


def test_a_raise_through_a_group_grows_the_members_home(sd):
    a = sd.admin()
    name, c = new_user(sd)
    start_runtime(c)
    stop_runtime(c)
    img = home_image(sd, name)
    assert os.path.getsize(img) == G
    # not mounted: a new group's plan raises the member, grown at the next start
    plan = new_plan(sd, 2 * G)
    group = unique_name("gg")
    r = a.post("/api/v1/groups", json={"name": group, "plan": plan, "members": [name]})
    assert_status(r, 201)
    assert r.json["storage"] == [
        {"user": name, "quota_bytes": 2 * G, "applied": "next_start"}], r.json
    assert os.path.getsize(img) == G
    loops, holders = wait_loops_released(sd.state_dir, timeout=120)
    assert not loops, (loops, holders)
    start_runtime(c)
    assert os.path.getsize(img) == 2 * G
    # mounted: a bigger plan for the group grows the image now
    bigger = new_plan(sd, 3 * G)
    r = a.put(f"/api/v1/groups/{group}", json={"plan": bigger})
    assert_status(r, 200)
    (one,) = r.json["storage"]
    assert one["user"] == name and one["quota_bytes"] == 3 * G, r.json
    assert one["applied"] in ("online", "next_start"), r.json
    if one["applied"] == "online":
        assert os.path.getsize(img) == 3 * G
    assert c.get("/api/v1/me/quota").json["storage"]["quota_bytes"] == 3 * G
    stop_runtime(c)
