"""What a GPU server's admin hits at once (docs/operations.md, "GPUs on a real server"),
with one labd whose host looks like such a server:

- its /opt is shown ([runtime] hidden_paths without it) and read-only, holds a vendor's
  stack and no /opt/labd or /opt/ml: labd runs in a private mount namespace whose /opt
  is a read-only tmpfs made here, so the job sandbox must make its own mount points
  (/opt/labd/libexec, /opt/ml); a job completes and sees both the host's /opt content
  and labd's libexec;
- [gpu] driver_lib_dir names a directory of driver libraries (a dummy .so built here):
  a GPU job (stand-in GPU) sees it at /run/nvidia/lib, on LD_LIBRARY_PATH, and the
  loader finds the library by name; a CPU job sees neither;
- [runtime] uid_base = auto (the default) with a subordinate range handed out far
  above the usual ones: the base chosen is the first multiple of 65536 above it,
  recorded in uids.json, and the jobs run under it; an explicit base that meets a
  second login account's range (Debian's 165536-231071) is named at start."""

import os
import subprocess

import pytest

from labd_harness import (
    labd_binary,
    make_user,
    runtime_daemon,
    teardown_daemon,
    teardown_runtime_daemon,
    uid_base,
    wait_until,
)
from jobs_lib import log_text, run_job

HIGH_RANGE = 1900000000  # a subordinate range above any login.defs' SUB_UID_MAX
EXPECTED_BASE = 28993 * 65536  # the first multiple of 65536 above HIGH_RANGE + 65536
# Debian's second login account
SUBUID = f"alice:100000:65536\nbob:165536:65536\nhigh:{HIGH_RANGE}:65536\n"

# labd in its own mount namespace, its /opt a read-only tmpfs holding only a vendor's
# stack: what a GPU server shows when /opt is not hidden (no /opt/labd, no /opt/ml).
# That namespace starts as a copy of every mount of the host, the homes of the labd
# daemons of other test files included (loop devices, major 7): their copies are
# detached at once, or they would keep those homes' loop devices attached as long
# as this daemon and its sandboxes run.
WRAPPER = """#!/bin/sh
exec unshare -m --propagation private -- sh -c '
awk "\\$3 ~ /^7:/ {{ print \\$5 }}" /proc/self/mountinfo | while read -r m; do
  umount -l "$m" 2>/dev/null; done
mount -t tmpfs -o mode=755,size=1m labd-test-opt /opt &&
mkdir /opt/vendor && echo vendor-stack-here > /opt/vendor/marker &&
mount -o remount,ro /opt && exec "$0" "$@"' {labd} "$@"
"""

PROBE = ("cat /opt/vendor/marker; echo libexec=$(ls /opt/labd/libexec | head -n 1); "
         "echo ld=$LD_LIBRARY_PATH; echo driver=$(ls /run/nvidia/lib 2>/dev/null); "
         "python3 -c 'import ctypes; ctypes.CDLL(\"libh13dummy.so\"); print(\"dlopen=ok\")' "
         "2>/dev/null || echo dlopen=no")


def lines(text):
    return [ln.strip() for ln in text.splitlines()]


@pytest.fixture(scope="module")
def gh():
    d = runtime_daemon("gpuhost",
                       runtime={"hidden_paths": "/srv,/mnt,/media", "cpu_limit": "1h"},
                       gpu={"stand_in": "1"},
                       sections={"quota": {"concurrent_jobs": "10"}})
    libs = os.path.join(d.dir, "nvlib")
    os.makedirs(libs)
    src = os.path.join(d.dir, "dummy.c")
    with open(src, "w") as fh:
        fh.write("int labd_dummy_driver(void) { return 580; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", os.path.join(libs, "libh13dummy.so"), src],
                   check=True)
    for name in ("subuid", "subgid"):
        with open(os.path.join(d.dir, name), "w") as fh:
            fh.write(SUBUID)
    d.sections["gpu"]["driver_lib_dir"] = libs
    d.sections["runtime"]["subuid_file"] = os.path.join(d.dir, "subuid")
    d.sections["runtime"]["subgid_file"] = os.path.join(d.dir, "subgid")
    d.write_config()
    wrapper = os.path.join(d.dir, "labd-gpuhost")
    with open(wrapper, "w") as fh:
        fh.write(WRAPPER.format(labd=os.path.abspath(labd_binary())))
    os.chmod(wrapper, 0o755)
    try:
        d.start(binary=wrapper)
        yield d
    finally:
        teardown_runtime_daemon(d)


def test_a_job_with_opt_shown_makes_its_own_mount_points(gh):
    c = make_user(gh, prefix="gho")
    j = run_job(c, ["/bin/sh", "-c", PROBE])
    log = log_text(c, j["id"])
    assert j["status"] == "Completed", (j["failure_reason"], log, gh.log_tail())
    out = lines(log)
    assert "vendor-stack-here" in out, log  # the host's /opt
    libexec = [ln for ln in out if ln.startswith("libexec=")]
    assert libexec and libexec[0] != "libexec=", log  # labd's agent at /opt/labd/libexec
    # a CPU job gets no driver libraries
    assert "ld=" in out and "driver=" in out and "dlopen=no" in out, log


def test_a_gpu_job_gets_the_driver_libraries_on_its_loader_path(gh):
    c = make_user(gh, prefix="ghg")
    j = run_job(c, ["/bin/sh", "-c", PROBE], type="gpu", gpu_count=1)
    log = log_text(c, j["id"])
    assert j["status"] == "Completed", (j["failure_reason"], log, gh.log_tail())
    out = lines(log)
    assert "vendor-stack-here" in out, log
    assert "ld=/run/nvidia/lib" in out, log
    assert "driver=libh13dummy.so" in out, log
    assert "dlopen=ok" in out, log


def test_uid_base_auto_clears_the_hosts_subordinate_ranges(gh):
    # chosen at the first start (the jobs above ran under it) and recorded
    assert uid_base(gh) == EXPECTED_BASE
    assert (f"sandbox uids {EXPECTED_BASE}-{EXPECTED_BASE + 65535} ([runtime] uid_base = auto: "
            "chosen now") in gh.log(1)


def test_an_explicit_base_meeting_a_login_accounts_range_is_named_at_start(tmp_path):
    subuid = tmp_path / "subuid"
    subuid.write_text("alice:100000:65536\nbob:165536:65536\n")
    os.chmod(tmp_path, 0o755)
    d = runtime_daemon("uidwarn", runtime={"uid_base": "200000", "subuid_file": str(subuid)})
    try:
        d.start()
        wait_until(lambda: "uid_base 200000" in d.log(), 10, "the start's uid range check")
        assert ("warning: [runtime] uid_base 200000: the sandbox uids 200000-265535 meet the "
                f"range 165536-231071 of bob in {subuid}") in d.log(), d.log_tail()
    finally:
        teardown_daemon(d)
