"""Class 1 of docs/security.md, in a real runtime: nothing the user's code writes lands
on the host's disk outside its home image and its size-limited tmpfs mounts.

- Jupyter's stdout and stderr (inherited by every kernel and subprocess) are a pipe the
  supervisor drains into runtimes/<user>/jupyter.log, capped at [runtime] log_size with
  one rotated copy: printing without end costs the state disk at most twice the cap.
- No process in the sandbox holds a host file open for writing (the old log file was
  exactly that).
- The run dir (Jupyter's socket) is a small tmpfs that root mounted on the host path:
  labd-web still reaches the socket there; filling it gives ENOSPC; it is gone after
  the runtime ends (the fixture's teardown checks no mount is left under the state dir).
"""

import json
import os

import pytest

from labd_harness import (
    STRONG,
    SLOW,
    jupyter_execute,
    open_kernel_channel,
    remember_sandboxes,
    start_runtime,
    stop_runtime,
    unique_name,
    wait_until,
)

LOG_CAP = 64 * 1024  # the smallest [runtime] log_size
WRITTEN = 1024 * 1024  # 16 times the cap, through each of fd 1 and fd 2


@pytest.fixture(scope="module")
def hd(runtime_daemon_factory):
    return runtime_daemon_factory("rt-host", runtime={"log_size": "64K"})


def new_user(d):
    admin = d.admin()
    name = unique_name("hr")
    pw = f"{STRONG}-{name}"
    r = admin.post("/api/v1/users", json={"name": name, "password": pw})
    assert r.status == 201, r
    c = d.client()
    c.login(name, pw)
    return c


# Runs in the kernel: every descriptor any process of the sandbox holds open for
# writing, with what it points at, except the places the user may fill (the home, the
# tmpfs mounts), pipes, sockets and devices (the sandbox's /dev is a minimal set).
WRITABLE_FDS = r'''
import json, os, stat
# the file systems the user may fill, by device: paths alone could mislead (a host
# file under the host's /tmp reads as "/tmp/...")
mine = {os.stat(p).st_dev for p in (os.path.expanduser("~"), "/tmp", "/dev/shm", "/run/labd")}
found = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            flags = int(open(f"/proc/{pid}/fdinfo/{fd}").read().split("flags:")[1].split()[0], 8)
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except (OSError, IndexError, ValueError):
            continue
        if not flags & (os.O_WRONLY | os.O_RDWR):
            continue
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)) or st.st_dev in mine:
            continue  # a pipe, socket, device (/dev/null, a pty), or the user's own places
        found.append(f"pid {pid} fd {fd} -> {target}")
jupyter = os.getppid()
print(json.dumps({"found": found, "out": os.readlink(f"/proc/{jupyter}/fd/1"),
                  "err": os.readlink(f"/proc/{jupyter}/fd/2")}))
'''

# The kernel's fd 1 and 2 are ipykernel's capture pipes (their output goes to the
# browser); ipykernel keeps a copy of the ones it inherited from Jupyter, which
# sys.stdout.fileno() returns: flood those.  (Reopening Jupyter's through
# /proc/<pid>/fd is EACCES: the pipe's inode is root's, mode 0600.)
FLOOD = r'''
import os, sys
chunk = b"y" * 4095 + b"\n"
jupyter = os.getppid()
fds = (sys.stdout.fileno(), sys.stderr.fileno())
same = [os.readlink(f"/proc/self/fd/{fd}") == os.readlink(f"/proc/{jupyter}/fd/{n}")
        for n, fd in zip((1, 2), fds)]
print("inherited from jupyter:", same)
for fd in fds:
    left = %d
    while left > 0:
        left -= os.write(fd, chunk[:left])
os.write(fds[1], b"LABD-END-OF-FLOOD\n")
try:
    with open("/run/labd/fill", "wb") as f:
        for _ in range(64):
            f.write(b"z" * (1 << 20))
            f.flush()
    print("run dir took 64 MiB")
except OSError as e:
    print("run dir:", e.strerror)
finally:
    if os.path.exists("/run/labd/fill"):
        os.unlink("/run/labd/fill")
''' % WRITTEN


def mount_of(path):
    """The mountinfo line whose mount point is path, split, or None."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == path:
                return fields
    return None


def test_runtime_output_is_a_capped_pipe_and_no_host_file_is_writable(hd):
    c = new_user(hd)
    start_runtime(c)
    remember_sandboxes(hd)
    rdir = os.path.join(hd.state_dir, "runtimes", c.user)
    log, rotated = os.path.join(rdir, "jupyter.log"), os.path.join(rdir, "jupyter.log.1")

    # the run dir is root's tmpfs on the host path, and labd-web reached Jupyter's
    # socket through it (the runtime is running)
    m = mount_of(os.path.join(rdir, "run"))
    assert m is not None and m[m.index("-") + 1] == "tmpfs", \
        f"{rdir}/run is not a tmpfs mount point: {m}"
    assert os.path.exists(os.path.join(rdir, "run", "jupyter.sock"))

    kid, ws = open_kernel_channel(hd, c)
    try:
        _, out, msgs = jupyter_execute(ws, WRITABLE_FDS)
        fds = json.loads(out)
        assert fds["found"] == [], \
            f"sandbox processes hold host files open for writing: {fds['found']}"
        assert fds["out"].startswith("pipe:") and fds["err"].startswith("pipe:"), \
            f"Jupyter's stdout/stderr are not pipes: {fds}"

        _, out, msgs = jupyter_execute(ws, FLOOD, timeout=120 * SLOW)
        errors = [m["content"] for m in msgs if m.get("msg_type") == "error"]
        assert "inherited from jupyter: [True, True]" in out, (out, errors)
        assert "run dir: No space left on device" in out, (out, errors)
    finally:
        ws.close()

    def flood_logged():
        try:
            with open(log, "rb") as f:
                return b"LABD-END-OF-FLOOD" in f.read()
        except FileNotFoundError:
            return False
    wait_until(flood_logged, 30 * SLOW, "the end of the flood in jupyter.log")
    sizes = {p: os.path.getsize(p) for p in (log, rotated)}
    assert all(s <= LOG_CAP for s in sizes.values()), \
        f"a log file is past log_size ({LOG_CAP} bytes): {sizes}"
    assert sizes[rotated] > LOG_CAP // 2, f"no rotated copy near the cap: {sizes}"
    assert not os.path.exists(log + ".2"), "more than one rotated copy"
    st = os.stat(log)
    assert (st.st_uid, st.st_mode & 0o777) == (0, 0o640), (st.st_uid, oct(st.st_mode))

    stop_runtime(c)
    wait_until(lambda: mount_of(os.path.join(rdir, "run")) is None, 30 * SLOW,
               "the run dir's tmpfs to be unmounted")


# ------------------------------------------------------------------ host warnings

GAP = "cgroup v1: no memory.memsw (stand-in for this test)"


@pytest.fixture(scope="module")
def wd(runtime_daemon_factory):
    # LABD_FAULT_HOST_WARNING adds one sentence to what the supervisor detects, as a
    # host without memsw would (the detection itself: tests/sandbox/test_cgroup.c)
    return runtime_daemon_factory("rt-warn", env={"LABD_FAULT_HOST_WARNING": GAP})


def test_cgroup_gaps_are_logged_and_shown_to_admins_only(wd):
    wait_until(lambda: GAP in wd.log(), 10 * SLOW, "the start-up warning in the log")
    assert any("warn" in ln and GAP in ln for ln in wd.log().splitlines()), wd.log_tail()
    r = wd.admin().get("/api/v1/health")
    assert r.status == 200, r
    assert GAP in r.json["warnings"], r.json
    assert "warnings" not in wd.client().get("/api/v1/health").json, "shown to anonymous"
    assert "warnings" not in new_user(wd).get("/api/v1/health").json, "shown to a user"
