"""An upgrade: the previous release's labd runs a user's runtime (a kernel with a
variable in it), stops on SIGTERM ([runtime] keep_on_shutdown = true), and this
build's labd starts on the same state dir and config.  The database opens (at the
new schema) and the user logs in, the runtime is re-adopted, its old kernel kept
its variable, and -- although the old release's supervisor was the only reader of
Jupyter's output pipe -- a NEW kernel starts and answers and a terminal works:
the new supervisor gave the runtime a keeper on that pipe.

The previous release is built from git (commit RELEASE) once per machine into
LABD_TEST_CACHE (default /var/cache/labd-test) and reused while that commit's
build is there."""

import fcntl
import os
import sqlite3
import subprocess
import time

import pytest

from labd_harness import (
    REPO,
    SLOW,
    STRONG,
    WebSocket,
    jupyter_execute,
    mounts_under,
    open_kernel_channel,
    remember_sandboxes,
    runtime_daemon,
    sandbox_records,
    start_runtime,
    teardown_runtime_daemon,
    unique_name,
    user_id,
    wait_runtime,
    wait_until,
    ws_cookie_headers,
)
from runtime_shell import kernel_run, terminal_run

RELEASE = "9de25bd"  # the last release commit before keepers
CACHE = os.environ.get("LABD_TEST_CACHE", "/var/cache/labd-test")
BUILD_TIMEOUT_S = 1800


def git(*args, **kw):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, **kw)


def previous_release():
    """The previous release's labd, built once (under a lock: test files run side
    by side) from `git archive RELEASE` with its own BUILD."""
    if git("cat-file", "-e", f"{RELEASE}^{{commit}}").returncode != 0:
        pytest.skip(f"the previous release (commit {RELEASE}) is not in this repository")
    full = git("rev-parse", f"{RELEASE}^{{commit}}", text=True).stdout.strip()
    root = os.path.join(CACHE, f"release-{full[:12]}")
    src, build = os.path.join(root, "src"), os.path.join(root, "build")
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = os.path.join(root, ".built")
        if not os.path.exists(done):
            subprocess.run(["rm", "-rf", src, build], check=True)
            os.makedirs(src)
            archive = subprocess.Popen(["git", "-C", REPO, "archive", full],
                                       stdout=subprocess.PIPE)
            subprocess.run(["tar", "-x", "-C", src], stdin=archive.stdout, check=True)
            assert archive.wait() == 0, "git archive failed"
            r = subprocess.run(["make", "-j2", "all", f"BUILD={build}"], cwd=src,
                               capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
            assert r.returncode == 0, f"building {RELEASE} failed:\n{r.stdout[-3000:]}" \
                f"\n{r.stderr[-3000:]}"
            with open(done, "w") as fh:
                fh.write(full + "\n")
    binary = os.path.join(build, "labd")
    assert os.access(binary, os.X_OK), binary
    return binary


def logged(path):
    with open(path, "rb") as fh:
        return fh.read()


def schema_version(d):
    db = sqlite3.connect(f"file:{d.db_file}?mode=ro", uri=True)
    try:
        return db.execute("PRAGMA user_version").fetchone()[0]
    finally:
        db.close()


@pytest.fixture(scope="module")
def old_labd():
    return previous_release()


def test_upgrade_keeps_runtime(old_labd):
    d = runtime_daemon("upgrade", runtime={"keep_on_shutdown": "true", "cpu_limit": "1h"})
    try:
        upgrade(d, old_labd)
    finally:
        teardown_runtime_daemon(d)


def upgrade(d, old_labd):
    d.start(binary=old_labd)
    admin = d.admin()
    name = unique_name("upg")
    pw = f"{STRONG}-{name}"
    assert admin.post("/api/v1/users", json={"name": name, "password": pw}).status == 201
    c = d.client()
    c.login(name, pw)
    _, before = start_runtime(c)
    remember_sandboxes(d)
    r = c.put(f"/user/{name}/api/contents/saved.txt",
              json={"type": "file", "format": "text", "content": "saved before the upgrade"})
    assert r.status in (200, 201), r
    kid, ws = open_kernel_channel(d, c)
    try:
        assert jupyter_execute(ws, "kept = 'from the old release'; kept")[0] == \
            "'from the old release'"
    finally:
        ws.close()
    boxes = {kv["id"]: kv["pid"] for _, kv in sandbox_records(d.state_dir)}
    assert len(boxes) == 1, boxes
    old_schema = schema_version(d)
    rc = d.stop(15)
    assert rc == 0, f"the old labd's exit status {rc} on SIGTERM\n" + d.log_tail()
    assert {kv["id"]: kv["pid"] for _, kv in sandbox_records(d.state_dir)} == boxes

    # this build on the same state and config
    t0 = time.monotonic()
    d.start(expect_admin_password=False)
    assert schema_version(d) >= old_schema
    c = d.client()
    c.login(name, pw)  # the database opened, its users are there
    after = wait_runtime(c, ("running", "stopping", "stopped", "failed"), timeout=10 * SLOW)
    assert after["state"] == "running" and after["id"] == before["id"], \
        f"after the upgrade: {after}\n" + d.log_tail()
    assert {kv["id"]: kv["pid"] for _, kv in sandbox_records(d.state_dir)} == boxes
    base = f"/user/{name}/"
    ws = WebSocket(d.port, base + f"api/kernels/{kid}/channels",
                   headers=dict(ws_cookie_headers(c), Origin=c.runtime_origin()),
                   source=c.source).expect_open()
    try:
        assert jupyter_execute(ws, "kept")[0] == "'from the old release'"
    finally:
        ws.close()
    log = os.path.join(d.state_dir, "runtimes", name, "jupyter.log")
    started = logged(log).count(b"Kernel started")
    result, _ = kernel_run(d, c, "6 * 7", timeout=30 * SLOW)
    assert result == "42", result
    assert "upgraded" in terminal_run(d, c, "echo upgraded", timeout=30 * SLOW)
    print(f"\nupgrade: a new kernel and a terminal answered "
          f"{time.monotonic() - t0:.1f}s after the new labd started")
    # the old release left no keeper: the new supervisor gave the runtime one
    assert f"runtime of {name} had no output keeper" in d.log(), d.log_tail()
    # and Jupyter's output goes on into its log
    wait_until(lambda: logged(log).count(b"Kernel started") > started, 10 * SLOW,
               "the new kernel's start in jupyter.log")

    r = c.delete("/api/v1/me/runtime")
    assert r.status == 202, r
    s = wait_runtime(c, ("stopped", "failed"), timeout=20 * SLOW)
    assert s["state"] == "stopped", s

    # the old release mounted the home by user name: its teardown found that
    # mount (the state file has no home_key), and the next start mounts the same
    # image by user id, with everything saved before
    homes = os.path.join(d.state_dir, "homes")
    wait_until(lambda: not mounts_under(os.path.join(homes, name)), 10 * SLOW,
               "the name-keyed mount of the old release to go")
    start_runtime(c)
    r = c.get(f"/user/{name}/api/contents/saved.txt")
    assert r.status == 200 and r.json["content"] == "saved before the upgrade", r
    assert mounts_under(os.path.join(homes, str(user_id(d, name)), "mnt")), \
        mounts_under(homes)
    r = c.delete("/api/v1/me/runtime")
    assert r.status == 202, r
    assert wait_runtime(c, ("stopped", "failed"), timeout=20 * SLOW)["state"] == "stopped"
