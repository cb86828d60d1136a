"""Account lifecycle, data side (docs/security.md section 5): disabling or
deleting a user stops their runtime at once; homes and host uids are keyed on
user ids that are never reused, so a new user with an old name never sees the
old home or gets the old uid; a deleted user's home is archived where the
docs say, and archives past their retention are swept."""

import glob
import os
import time

from labd_harness import (
    SLOW,
    STRONG,
    assert_status,
    runtime_daemon,
    start_runtime,
    stop_runtime,
    teardown_daemon,
    uid_base,
    unique_name,
    user_id,
    wait_until,
)


def create(d, admin, name):
    pw = f"{STRONG}-{name}"
    r = admin.post("/api/v1/users", json={"name": name, "password": pw})
    assert r.status == 201, r
    c = d.client()
    c.login(name, pw)
    return c


def box_gone(d, name):
    return not os.path.exists(os.path.join(d.state_dir, "boxes", f"{name}.json"))


def socket_uid(d, name):
    return os.stat(os.path.join(d.state_dir, "runtimes", name, "run", "jupyter.sock")).st_uid


def test_deleted_users_home_is_archived_and_a_new_same_name_user_starts_clean(
        runtime_daemon_factory):
    d = runtime_daemon_factory("lifecycle-delete")
    admin = d.admin()
    name = unique_name("del")
    c = create(d, admin, name)
    start_runtime(c)
    old_id = user_id(d, name)
    base = uid_base(d)  # [runtime] uid_base = auto, chosen at the first start
    assert socket_uid(d, name) == base + old_id
    r = c.put(f"/user/{name}/api/contents/secret.txt",
              json={"type": "file", "format": "text", "content": "only mine"})
    assert r.status in (200, 201), r
    assert os.path.exists(os.path.join(d.state_dir, "homes", f"{old_id}.img"))

    t0 = time.monotonic()
    assert_status(admin.delete(f"/api/v1/users/{name}"), 204)
    # stopped at once: the supervisor ends the sandbox (grace period included)
    wait_until(lambda: box_gone(d, name), 15 * SLOW, "the deleted user's sandbox ended")
    assert time.monotonic() - t0 < 15 * SLOW
    archived = wait_until(
        lambda: glob.glob(os.path.join(d.state_dir, "archive", f"{old_id}-{name}-*.img")),
        10 * SLOW, "the home archived")
    assert len(archived) == 1 and os.path.getsize(archived[0]) > 0, archived
    assert not os.path.exists(os.path.join(d.state_dir, "homes", f"{old_id}.img"))
    assert f"home of deleted user {name} (id {old_id}) archived" in d.log()

    again = create(d, admin, name)
    new_id = user_id(d, name)
    assert new_id != old_id
    start_runtime(again)
    assert socket_uid(d, name) == base + new_id != base + old_id
    r = again.get(f"/user/{name}/api/contents/secret.txt")
    assert r.status == 404, r
    stop_runtime(again)


def test_disabling_a_user_stops_their_runtime_at_once(runtime_daemon_factory):
    d = runtime_daemon_factory("lifecycle-disable")
    admin = d.admin()
    name = unique_name("dis")
    c = create(d, admin, name)
    start_runtime(c)
    assert not box_gone(d, name)
    r = admin.patch(f"/api/v1/users/{name}", json={"disabled": True})
    assert r.status == 200, r
    wait_until(lambda: box_gone(d, name), 15 * SLOW, "the disabled user's sandbox ended")
    assert "account disabled" in d.log(), d.log_tail()
    # the home stays (the account may be enabled again)
    assert os.path.exists(os.path.join(d.state_dir, "homes", f"{user_id(d, name)}.img"))


def test_archives_past_retention_are_swept():
    d = runtime_daemon("lifecycle-sweep", runtime={"archive_retention": "1h"})
    try:
        archive = os.path.join(d.state_dir, "archive")
        os.makedirs(archive, mode=0o700)
        old = os.path.join(archive, "7-gone-1.img")
        fresh = os.path.join(archive, "8-recent-2.img")
        for f in (old, fresh):
            with open(f, "w") as fh:
                fh.write("x")
        past = time.time() - 2 * 3600
        os.utime(old, (past, past))
        d.start()
        wait_until(lambda: not os.path.exists(old), 10 * SLOW, "the old archive swept")
        assert os.path.exists(fresh)
        assert "7-gone-1.img is past archive_retention" in d.log()
    finally:
        teardown_daemon(d)


def test_home_named_by_user_name_moves_to_its_id_without_loss(runtime_daemon_factory):
    d = runtime_daemon_factory("lifecycle-rename")
    admin = d.admin()
    name = unique_name("old")
    c = create(d, admin, name)
    start_runtime(c)
    r = c.put(f"/user/{name}/api/contents/kept.txt",
              json={"type": "file", "format": "text", "content": "from before"})
    assert r.status in (200, 201), r
    stop_runtime(c)
    # the layout before homes were keyed on ids
    by_id = os.path.join(d.state_dir, "homes", f"{user_id(d, name)}.img")
    by_name = os.path.join(d.state_dir, "homes", f"{name}.img")
    os.rename(by_id, by_name)
    start_runtime(c)
    assert os.path.exists(by_id) and not os.path.exists(by_name)
    r = c.get(f"/user/{name}/api/contents/kept.txt")
    assert r.status == 200 and r.json["content"] == "from before", r
    assert f"home of {name} moved to homes/" in d.log()
    stop_runtime(c)
