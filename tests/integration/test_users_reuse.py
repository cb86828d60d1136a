"""A deleted user's home never reaches a new user of the same name (docs/security.md,
finding 5 of the December review): user A's job writes ~/secret.txt and keeps its
pool warm; the admin deletes A and creates A again at once; the new A's first job
and runtime cannot see secret.txt, and the old pool is gone, its home unmounted.

Before the fix the warm pool lived on (deletion ended runtimes only) and held
<state>/homes/<name>/mnt mounted; the new A's pool found that mount point taken and
used it: the old image, archived meanwhile."""

import glob
import os

import pytest

from jobs_lib import jobs_daemon, log_text, new_user, run_job
from labd_harness import (
    SLOW,
    STRONG,
    assert_status,
    mounts_under,
    sandbox_records,
    start_runtime,
    stop_runtime,
    user_id,
    wait_until,
)

SECRET = "only-the-old-owner-may-read-this"


@pytest.fixture(scope="module")
def rd(runtime_daemon_factory):
    return jobs_daemon(runtime_daemon_factory, "users-reuse")


def boxes_of(d, name):
    return [kv for _, kv in sandbox_records(d.state_dir) if kv.get("user") == name]


def test_recreated_name_never_sees_the_deleted_users_home(rd):
    name, c = new_user(rd, "reuse")
    old_id = user_id(rd, name)
    first = run_job(c, ["/bin/sh", "-c", f"echo {SECRET} > ~/secret.txt; chmod 644 ~/secret.txt"],
                    keep_alive_s=600)
    assert first["status"] == "Completed", (first, log_text(c, first["id"]))
    assert first["warm_pool"]["status"] == "Available", first["warm_pool"]
    old_boxes = boxes_of(rd, name)
    assert len(old_boxes) == 1, old_boxes
    homes = os.path.join(rd.state_dir, "homes")
    old_mounts = [m.split()[0] for m in mounts_under(homes)]
    assert old_mounts, "the warm pool holds the home mounted"

    admin = rd.admin()
    assert_status(admin.delete(f"/api/v1/users/{name}"), 204)
    # the same name again, at once: the old pool may still be ending
    pw = f"{STRONG}-{name}-2"
    assert_status(admin.post("/api/v1/users", json={"name": name, "password": pw}), 201)
    again = rd.client()
    again.login(name, pw)
    new_id = user_id(rd, name)
    assert new_id != old_id

    peek = run_job(again, ["/bin/sh", "-c", "ls -ln ~; cat ~/secret.txt || echo no-secret"])
    text = log_text(again, peek["id"])
    assert SECRET not in text, text
    assert "no-secret" in text, text

    # the deleted user's pool ended with the account, its home unmounted and archived
    ids = {kv["id"] for kv in old_boxes}
    wait_until(lambda: not ids & {kv["id"] for _, kv in sandbox_records(rd.state_dir)},
               20 * SLOW, "the deleted user's warm pool to end")
    wait_until(lambda: not set(old_mounts) & {m.split()[0] for m in mounts_under(homes)},
               20 * SLOW, "the deleted user's home unmounted")
    wait_until(lambda: glob.glob(os.path.join(rd.state_dir, "archive", f"{old_id}-{name}-*.img")),
               20 * SLOW, "the deleted user's home archived")
    assert "account deleted" in rd.log(), rd.log_tail()

    # the new user's runtime: a home of its own
    start_runtime(again)
    r = again.get(f"/user/{name}/api/contents/secret.txt")
    assert r.status == 404, r
    stop_runtime(again)
    # keyed by id: the home's directory (an unbindable bind of itself) and its mount
    key_dir = os.path.join(os.path.realpath(homes), str(old_id))
    assert old_mounts == [key_dir, os.path.join(key_dir, "mnt")], old_mounts
    assert not os.path.exists(os.path.join(homes, name)), "no mount point is keyed by a user name"
