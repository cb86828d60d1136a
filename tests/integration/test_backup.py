"""labd backup / restore / restore-home over a real daemon: a backup taken while a
runtime writes to its home restores into a fresh state dir that a new labd serves
(the login, the ledger, the files, a clean image); the manifest's checksums catch
a changed byte; restore refuses a state dir in use; one user's home is swapped
back from the backup. One daemon and one backup serve every case."""

import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from labd_harness import (SLOW, labd_binary, loops_under, make_user, runtime_daemon,
                          start_runtime, stop_runtime, teardown_runtime_daemon, user_id,
                          wait_until)
from runtime_shell import sh

BEFORE = "written before the backup\n" * 1000
HOME = {"home_size": "256M"}  # every copy and checksum reads the whole image: keep it small


def e2fsck_clean(image):
    return subprocess.run(["e2fsck", "-fn", image], capture_output=True, text=True).returncode == 0


def image_ls(image):
    """The names in the image's root directory, read without mounting it."""
    r = subprocess.run(["debugfs", "-R", "ls -l /", image], capture_output=True, text=True)
    return r.stdout


def owner(image, path):
    """The host uid owning path in the unmounted image."""
    r = subprocess.run(["debugfs", "-R", f"stat {path}", image], capture_output=True, text=True)
    return int(r.stdout.split("User:")[1].split()[0])


def held(homes):
    """What still holds a home: its loop device and the mounts of the state dir."""
    mounts = [ln for ln in open("/proc/self/mountinfo") if os.path.dirname(homes) in ln]
    return f"the loop device of the home: {loops_under(homes)}; mounts: {mounts}"


def usage(c):
    now = int(time.time())
    r = c.get(f"/api/v1/me/usage?from={now - 86400}&to={now + 3600}")
    assert r.status == 200, r
    return [e["runtime_id"] for e in r.json["entries"]]


def backup_cli(d, *args, frozen_ms):
    """labd backup with the freeze held frozen_ms before the copy (failure injection)."""
    env = dict(os.environ, LABD_FAULT_BACKUP_FROZEN_MS=str(frozen_ms))
    return subprocess.Popen([labd_binary(), "--config", d.config_path, "backup", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)


def freeze_bounds(d, c):
    """A freeze past --freeze-max is thawed and the backup fails; a backup killed
    while the home is frozen leaves it thawed (its watchdog)."""
    with tempfile.TemporaryDirectory() as tmp:
        p = backup_cli(d, "--freeze-max", "1", f"{tmp}/a", frozen_ms=2500)
        _, err = p.communicate(timeout=60 * SLOW)
        assert p.returncode != 0 and "thawed before its copy ended" in err, err
        sh(d, c, "echo one > thawed.txt; sync", timeout=20)
        # (--freeze-max: the watchdog's deadline, should its thaw on our kill fail)
        p = backup_cli(d, "--freeze-max", "30", f"{tmp}/b", frozen_ms=60000)
        try:
            line = p.stderr.readline()
            while line and "frozen for its copy" not in line:
                line = p.stderr.readline()
            assert "frozen for its copy" in line, line
        finally:
            p.kill()
            p.wait()
        sh(d, c, "echo two >> thawed.txt; sync", timeout=20)  # would hang while frozen


@pytest.fixture(scope="module")
def bk(runtime_daemon_factory, request):
    """A daemon, a user whose runtime writes continuously while labd backup runs,
    and the backup: (daemon, client, backup dir, usage ids at the backup)."""
    d = runtime_daemon_factory("backup", runtime=HOME)
    c = make_user(d, prefix="bk")
    start_runtime(c)
    sh(d, c, f"printf %s '{BEFORE}' > before.txt; sync")
    # a writer that never pauses: its file must come back whole up to some line
    sh(d, c, "nohup sh -c 'i=0; while :; do echo $i >> stream.txt; i=$((i+1)); done' "
             ">/dev/null 2>&1 &")
    wait_until(lambda: "stream" in sh(d, c, "ls"), 10 * SLOW, "the writer starts")
    ids = usage(c)
    # a home of the old layout (by user name, moved to its id at the next start)
    subprocess.run(["truncate", "-s", "1M", os.path.join(d.state_dir, "homes", "oldname.img")],
                   check=True)
    out = tempfile.mkdtemp(prefix="labd-backup-")
    request.addfinalizer(lambda: shutil.rmtree(out, ignore_errors=True))
    os.rmdir(out)
    r = d.run_cli("backup", out, timeout=120)
    assert r.returncode == 0, f"backup: {r.stdout}\n{r.stderr}"
    assert "was frozen for" in r.stderr, r.stderr  # the running home was frozen
    freeze_bounds(d, c)
    # refused while the user's runtime holds the home
    r = d.run_cli("restore-home", c.user, "--from", f"{out}/homes/{user_id(d, c.user)}.img")
    assert r.returncode != 0 and "in use" in r.stderr, r.stderr
    assert "stream" in sh(d, c, "ls")  # the home was thawed: it still writes
    sh(d, c, "rm before.txt; echo later > after.txt; sync")
    stop_runtime(c)
    # the teardown unmounts the home a moment after the runtime reads stopped
    homes = os.path.join(d.state_dir, "homes")
    wait_until(lambda: not loops_under(homes), 30 * SLOW, lambda: held(homes))
    return d, c, out, ids


def test_backup_verifies(bk):
    d, c, out, _ = bk
    r = d.run_cli("backup", "--verify", out)
    assert r.returncode == 0, r.stderr
    names = sorted(os.listdir(out))
    assert names == ["SHA256SUMS", "db", "homes", "manifest.json", "uids.json"] or \
        names == ["SHA256SUMS", "db", "homes", "joblogs", "manifest.json", "uids.json"], names
    with open(os.path.join(out, "manifest.json")) as fh:
        m = json.load(fh)
    assert m["format"] == 1 and m["schema_version"] > 0 and m["labd_version"], m
    assert "homes/oldname.img" in [f["path"] for f in m["files"]], m
    with open(os.path.join(out, "SHA256SUMS")) as fh:
        sums = fh.read()
    assert sums == "".join(f"{f['sha256']}  {f['path']}\n" for f in m["files"]), sums
    # the store's line checked by sha256sum itself (the images' would take seconds)
    r = subprocess.run(["sha256sum", "-c", "--quiet", "--ignore-missing", "-"], cwd=out,
                       input=[ln for ln in sums.splitlines() if "db/" in ln][0] + "\n",
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_restore_into_fresh_state_dir(bk):
    d, c, out, ids = bk
    d2 = runtime_daemon("restored", runtime=HOME)
    try:
        r = d2.run_cli("restore", out, "--state-dir", d2.state_dir)
        assert r.returncode == 0, f"restore: {r.stdout}\n{r.stderr}"
        image = os.path.join(d2.state_dir, "homes", f"{user_id(d2, c.user)}.img")
        assert e2fsck_clean(image), "the restored image is not fsck-clean"
        d2.start(expect_admin_password=False)  # the admin came back with the store
        c2 = d2.client()
        c2.login(c.user, c.password)
        assert usage(c2) == ids  # the ledger's rows
        start_runtime(c2)
        assert sh(d2, c2, "cat before.txt") == BEFORE
        lines = sh(d2, c2, "cat stream.txt").split("\n")
        assert lines[-1] == "" and len(lines) > 2, lines[-3:]
        # whole up to the last complete line: the copy is the frozen file system
        assert lines[:-1] == [str(i) for i in range(len(lines) - 1)], lines[-3:]
        assert "after" not in sh(d2, c2, "ls")
        stop_runtime(c2)
        # a backup with labd stopped: the -wal/-shm its read makes stay
        # labd's, and labd starts and writes its store again (a login)
        d2.stop()
        # the teardown unmounts the home a moment after the runtime reads stopped
        homes2 = os.path.join(d2.state_dir, "homes")
        wait_until(lambda: not loops_under(homes2), 30 * SLOW, lambda: held(homes2))
        with tempfile.TemporaryDirectory() as tmp:
            r = d2.run_cli("backup", f"{tmp}/stopped")
            assert r.returncode == 0, r.stderr
        db = os.path.join(d2.state_dir, "db")
        owners = {f: os.stat(os.path.join(db, f)).st_uid for f in os.listdir(db)}
        assert len(set(owners.values())) == 1 and 0 not in owners.values(), owners
        d2.start(expect_admin_password=False)
        d2.client().login(c.user, c.password)
    finally:
        teardown_runtime_daemon(d2)
        d2.cleanup()


def test_restore_refuses_a_state_dir_in_use(bk):
    d, _, out, _ = bk
    r = d.run_cli("restore", out, "--state-dir", d.state_dir)
    assert r.returncode != 0 and "not empty" in r.stderr, r.stderr
    other = tempfile.mkdtemp(prefix="labd-restore-")
    try:
        with open(os.path.join(other, "keep"), "w") as fh:
            fh.write("mine")
        r = d.run_cli("restore", out, "--state-dir", other)
        assert r.returncode != 0 and "not empty" in r.stderr, r.stderr
        assert os.listdir(other) == ["keep"]
    finally:
        shutil.rmtree(other)


def test_restore_home_of_one_user(bk):
    d, c, out, _ = bk
    uid = user_id(d, c.user)
    image = os.path.join(d.state_dir, "homes", f"{uid}.img")
    assert "after.txt" in image_ls(image)
    archive = os.path.join(d.state_dir, "archive")
    before = set(os.listdir(archive))
    os.utime(image, (1, 1))  # a home last written long ago
    r = d.run_cli("restore-home", c.user, "--from", f"{out}/homes/{uid}.img", timeout=60)
    assert r.returncode == 0, f"restore-home: {r.stdout}\n{r.stderr}"
    listing = image_ls(image)
    assert "before.txt" in listing and "after.txt" not in listing, listing
    kept = set(os.listdir(archive)) - before
    assert len(kept) == 1 and list(kept)[0].startswith(f"{uid}-{c.user}-"), kept
    aside = os.path.join(archive, kept.pop())
    # kept for archive_retention from now: the sweep goes by the file's time
    assert os.stat(aside).st_mtime > time.time() - 60
    # another user id's image (here the archived one) is refused: its files belong
    # to another host uid; --reown gives them to the new owner
    other = make_user(d, prefix="bko")
    r = d.run_cli("restore-home", other.user, "--from", aside)
    assert r.returncode != 0 and "another user" in r.stderr, r.stderr
    r = d.run_cli("restore-home", other.user, "--from", aside, "--reown", timeout=60)
    assert r.returncode == 0, f"restore-home --reown: {r.stdout}\n{r.stderr}"
    mine = os.path.join(d.state_dir, "homes", f"{user_id(d, other.user)}.img")
    old, new = owner(aside, "/after.txt"), owner(mine, "/after.txt")
    assert new - old == user_id(d, other.user) - uid and owner(mine, "/") == new, (old, new)
    assert e2fsck_clean(mine)


def test_a_changed_byte_is_detected(bk):
    d, c, out, _ = bk  # last: it spoils the backup
    image = f"{out}/homes/{user_id(d, c.user)}.img"
    with open(image, "r+b") as fh:
        fh.seek(os.path.getsize(image) // 2)
        fh.write(b"\x01")
    r = d.run_cli("backup", "--verify", out)
    assert r.returncode != 0 and "checksum mismatch" in r.stderr, r.stderr
    target = tempfile.mkdtemp(prefix="labd-restore-")
    os.rmdir(target)
    r = d.run_cli("restore", out, "--state-dir", target)
    assert r.returncode != 0 and not os.path.exists(target), r.stderr
