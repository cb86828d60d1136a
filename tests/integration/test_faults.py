"""Crashes at named fault points (include/labd/fault.h), then labd's normal restart.

labd is built once more with its fault points compiled in (`make faults`,
$(BUILD)-faults/: only the dozen objects that hold a point are compiled again). For
each point, labd is started with LABD_FAULT=<point>:group, the step is driven
through the API until the point kills labd's whole process group (supervisor, web
process, workers; keepers and sandboxes have their own sessions and live on, as
after a real crash; the web process has a group of its own, so the test kills the
supervisor's group at once after a point there), `labd doctor` shows what the crash left, and labd is started
again as usual. Then: the user's runtime ends up running or ended (never stuck),
it stops cleanly, no mount, loop device, cgroup, pasta or sandbox process is left
under the state dir (labd doctor agrees), no ledger entry is open or counted twice,
the file written to the home before the crash is still there, and the user can
start again. One daemon and one user serve every point, one after another."""

import fcntl
import os
import sqlite3
import subprocess
import time

import pytest

from labd_harness import (
    ASAN,
    REPO,
    SLOW,
    _pid_start_time,
    STRONG,
    assert_status,
    build_dir,
    loops_under,
    mount_holders,
    mounts_under,
    pid_alive,
    processes_in_cgroups,
    remember_sandboxes,
    runtime_daemon,
    sandbox_records,
    teardown_runtime_daemon,
    unique_name,
    wait_runtime,
    wait_until,
)

FAULT_LABD = build_dir() + "-faults/labd"  # make faults: $(BUILD)-faults
KEEP = "written before the crash"

# (point, how it is reached): "start" a runtime, "stop" a running one.
POINTS = [
    ("runtime.start.send.before", "start"),   # web: about to ask the supervisor
    ("sandbox.start.home", "start"),          # start worker: home mounted, no cgroup yet
    ("sandbox.start.cgroups", "start"),       # start worker: cgroups made, no clone yet
    ("sandbox.start.go", "start"),            # start worker: the sandbox is up, unreported
    ("host.started.runtime", "start"),        # supervisor: up, before its keeper
    ("runtime.start.keeper", "start"),        # supervisor: keeper started, unrecorded
    ("runtime.start.send.after", "start"),    # web: the supervisor answered the start
    ("ledger.open.runtime", "start"),         # web: opening the ledger, uncommitted
    ("runtime.state.committed.running", "start"),  # web: running and its entry committed
    ("host.teardown.before.runtime", "stop"),  # supervisor: init gone, no teardown yet
    ("sandbox.teardown.cgroups", "stop"),     # teardown worker: cgroups gone, home mounted
    ("host.teardown.after.runtime", "stop"),  # supervisor: torn down, record not removed
    ("ledger.close.runtime", "stop"),         # web: closing the ledger, uncommitted
    ("runtime.state.committed.stopped", "stop"),  # web: stopped and its entry closed
]


@pytest.fixture(scope="module")
def fault_build():
    """$(BUILD)-faults/labd, made from $(BUILD)'s objects (a few seconds)."""
    san = ["SAN=1"] if ASAN else []
    # one build at a time: test_faults_jobs.py asks for it too, side by side; and
    # once: a second `make faults` relinks the binary (removed first) under the
    # other file's daemon, whose restart would then find none
    with open(os.path.join(build_dir(), ".faults.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        prod = os.path.join(build_dir(), "labd")
        if (os.path.exists(FAULT_LABD) and
                os.path.getmtime(FAULT_LABD) >= os.path.getmtime(prod)):
            return FAULT_LABD
        r = subprocess.run(["make", "--no-print-directory", "-s", f"BUILD={build_dir()}", *san,
                            "faults"], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return FAULT_LABD


def test_production_build_has_no_fault_code(fault_build):
    """The fault points are ((void)0) outside the fault build: nothing of them is
    linked into $(BUILD)/labd, while build-faults/labd has them."""
    def symbols(binary):
        return subprocess.run(["nm", binary], capture_output=True, text=True).stdout
    def has_text(binary, text):
        with open(binary, "rb") as fh:
            return text.encode() in fh.read()
    prod = os.path.join(build_dir(), "labd")
    assert "fault_point" in symbols(fault_build)
    assert has_text(fault_build, "fault point %s armed")
    assert "fault_point" not in symbols(prod)
    assert not has_text(prod, "fault point %s armed")
    assert not has_text(prod, "runtime.start.send.before")


def leftovers(d):
    """What is left of d's sandboxes: state files, processes (theirs, in their
    cgroups, pasta in "<id>.net"), mounts and loop devices under the state dir (a loop
    device that a mount namespace of another process still holds is that process's:
    a sandbox of any labd cloned while the home was mounted keeps a copy)."""
    remember_sandboxes(d)
    ids = list(d.sandbox_ids)
    left = [f"state file {f}" for f, _ in sandbox_records(d.state_dir)]
    left += [f"sandbox process {pid}" for pid, start in d.sandbox_pids
             if pid_alive(pid) and _pid_start_time(pid) == start]
    left += [f"process {pid} in the cgroup {i}"
             for pid, i in processes_in_cgroups(ids + [f"{i}.net" for i in ids])]
    left += [f"mount {m}" for m in mounts_under(d.state_dir)]
    loops = loops_under(d.state_dir)
    if loops and not mount_holders(d.state_dir):
        left += [f"loop device {lp}" for lp in loops]
    return left


def doctor(d, *args):
    r = d.run_cli("doctor", *args)
    print(f"\n$ labd doctor {' '.join(args)}  (exit {r.returncode})\n{r.stdout}{r.stderr}")
    return r


def ledger_rows(d, user):
    db = sqlite3.connect(f"file:{d.db_file}?mode=ro", uri=True, timeout=10)
    try:
        return db.execute("SELECT runtime_id, start_at, end_at, billable_s FROM ledger"
                          " WHERE user_name = ? ORDER BY id", (user,)).fetchall()
    finally:
        db.close()


def check_ledger(d, user):
    rows = ledger_rows(d, user)
    assert all(end is not None for _, _, end, _ in rows), f"an entry is left open: {rows}"
    ids = [rid for rid, _, _, _ in rows]
    assert len(ids) == len(set(ids)), f"a runtime is counted twice: {rows}"
    for rid, start, end, billable in rows:
        assert billable == end - start >= 0, rows
    spans = sorted((start, end) for _, start, end, _ in rows)
    for (s1, e1), (s2, _) in zip(spans, spans[1:]):
        assert s2 >= e1, f"two entries of one user overlap: {rows}"


def settle_and_stop(d, c):
    """After the restart: the runtime ends up running or ended, then stops."""
    s = wait_runtime(c, ("running", "stopped", "failed"), timeout=90 * SLOW)
    if s["state"] == "running":
        r = c.delete("/api/v1/me/runtime")
        assert r.status in (202, 409), r
        s = wait_runtime(c, ("stopped", "failed"), timeout=60 * SLOW)
    return s


def home_file(c):
    r = c.get(f"/user/{c.user}/api/contents/keep.txt")
    assert_status(r, 200)
    return r.json["content"]


@pytest.fixture(scope="module")
def fd(fault_build):
    d = runtime_daemon("faults", runtime={"cpu_limit": "1h", "stop_grace": "1s",
                                                "start_timeout": "30s"})
    d.start(binary=fault_build)
    name = unique_name("flt")
    pw = f"{STRONG}-{name}"
    assert_status(d.admin().post("/api/v1/users", json={"name": name, "password": pw}), 201)
    c = d.client()
    c.login(name, pw)
    c.password = pw
    assert_status(c.post("/api/v1/me/runtime", json={"type": "cpu"}), 202)
    assert wait_runtime(c, ("running", "failed"))["state"] == "running"
    r = c.put(f"/user/{name}/api/contents/keep.txt",
              json={"type": "file", "format": "text", "content": KEEP})
    assert_status(r, 201)
    assert settle_and_stop(d, c)["state"] == "stopped"
    d.fault_client = c
    yield d
    teardown_runtime_daemon(d, stop_timeout=60)


def restart(d, fault=None):
    """labd again on the same state dir (the fault build), with fault armed or not."""
    if d.proc and d.proc.poll() is None:
        d.stop(30)
    d.env.pop("LABD_FAULT", None)
    if fault:
        d.env["LABD_FAULT"] = f"{fault}:group"
    d.start(expect_admin_password=False, binary=FAULT_LABD)


def may_die(request):
    """A request whose handler may reach the point: 202, or no answer at all."""
    try:
        r = request()
    except OSError:
        return
    assert r.status in (202, 502, 503), r


def crashed(d, point):
    """Waits for the point's SIGKILL of its process group, then kills the rest of
    labd's (the web process has a group of its own: its point kills only it)."""
    wait_until(lambda: f"fault point {point}: SIGKILL" in d.log(), 90 * SLOW,
               lambda: f"fault point {point} to be reached\n" + d.log_tail(), interval=0.02)
    d.kill()


@pytest.mark.parametrize("point,step", POINTS, ids=[p for p, _ in POINTS])
def test_crash_at_point_leaves_nothing(fd, point, step):
    c = fd.fault_client
    if step == "stop":
        restart(fd)
        c.login(c.user, c.password)
        assert_status(c.post("/api/v1/me/runtime", json={"type": "cpu"}), 202)
        assert wait_runtime(c, ("running", "failed"))["state"] == "running"
        fd.stop(30)  # keep_on_shutdown = false: the runtime stops with labd
    restart(fd, point)
    try:
        c.login(c.user, c.password)
        if step == "start":
            may_die(lambda: c.post("/api/v1/me/runtime", json={"type": "cpu"}))
        else:
            assert_status(c.post("/api/v1/me/runtime", json={"type": "cpu"}), 202)
            assert wait_runtime(c, ("running", "failed"))["state"] == "running"
            remember_sandboxes(fd)
            may_die(lambda: c.delete("/api/v1/me/runtime"))
    except (OSError, AssertionError) as e:
        # reached before the step: the start-up's own recovery passes the point too
        # (a ledger close of what the last stop left); crashed() says if it was not
        print(f"\n{point}: labd died before the step was done: {e!r}")
    remember_sandboxes(fd)
    crashed(fd, point)
    remember_sandboxes(fd)
    doctor(fd)  # what the crash left, before labd cleans it up

    # the next second: a start asked before it is then known to be one a dead web
    # process asked (runtime/reconcile.c), ended at once rather than at start_timeout
    time.sleep(1.05 - time.time() % 1)
    restart(fd)
    c.login(c.user, c.password)
    t0 = time.monotonic()
    s = settle_and_stop(fd, c)
    print(f"\n{point}: after the restart the runtime was {s['state']} "
          f"({s.get('reason')}) within {time.monotonic() - t0:.1f} s")
    wait_until(lambda: not leftovers(fd), 20 * SLOW, lambda: f"no leftovers: {leftovers(fd)}",
               interval=0.2)
    # a home's loop device detaches itself a moment after its last unmount
    wait_until(lambda: "LEFT" not in doctor(fd).stdout, 20 * SLOW,
               lambda: f"doctor to find nothing left:\n{doctor(fd).stdout}", interval=0.5)
    check_ledger(fd, c.user)

    # the user starts again, and the home kept what was written before
    assert_status(c.post("/api/v1/me/runtime", json={"type": "cpu"}), 202)
    s = wait_runtime(c, ("running", "failed"))
    assert s["state"] == "running", s
    assert home_file(c) == KEEP
    assert settle_and_stop(fd, c)["state"] == "stopped"
    check_ledger(fd, c.user)


def test_crash_in_a_migration_keeps_a_whole_schema(fault_build, runtime_daemon_factory, fd):
    """A crash before the last migration's commit: the next start migrates again
    from the last whole version, and the database is sound."""
    with sqlite3.connect(f"file:{fd.db_file}?mode=ro", uri=True) as db:
        latest = db.execute("PRAGMA user_version").fetchone()[0]
    d = runtime_daemon("faults-mig", env={"LABD_FAULT": f"migration.commit.{latest}:group"})
    try:
        d.proc = subprocess.Popen([fault_build, "--config", d.config_path],
                                  stdout=open(os.path.join(d.dir, "labd.0.log"), "wb"),
                                  stderr=subprocess.STDOUT, start_new_session=True,
                                  env=dict(os.environ, **d.env), cwd=d.dir)
        d.log_path = os.path.join(d.dir, "labd.0.log")
        crashed(d, f"migration.commit.{latest}")
        with sqlite3.connect(f"file:{d.db_file}?mode=ro", uri=True) as db:
            assert db.execute("PRAGMA user_version").fetchone()[0] == latest - 1
        d.env.pop("LABD_FAULT")
        d.start(binary=fault_build)
        with sqlite3.connect(f"file:{d.db_file}?mode=ro", uri=True) as db:
            assert db.execute("PRAGMA user_version").fetchone()[0] == latest
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        assert_status(d.admin().get("/api/v1/users"), 200)
    finally:
        teardown_runtime_daemon(d)
