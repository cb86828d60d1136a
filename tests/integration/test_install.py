"""`make install` (docs/install.md) into a DESTDIR: the files and modes it installs,
the config it never overwrites, PREFIX reaching the unit and the config; the systemd
unit passes `systemd-analyze verify` and keeps to its rules; and the installed labd,
with the installed config (only its address and state dir changed), starts, serves the
installed web UI, finds its installed job agent and runs a job, and under a cgroup
standing for its systemd unit keeps every sandbox outside that cgroup, so that a
`systemctl restart` (SIGTERM to labd, then SIGKILL to what is left in the unit,
KillMode=mixed) leaves a runtime running for the next labd to re-adopt."""

import configparser
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import tempfile

import pytest

from jobs_lib import new_user, submit, wait_job
from labd_harness import (
    REPO,
    SLOW,
    Daemon,
    assert_status,
    build_dir,
    free_port,
    remember_sandboxes,
    sandbox_records,
    start_runtime,
    teardown_runtime_daemon,
    wait_runtime,
    wait_until,
)

UNIT = "etc/systemd/system/labd.service"
CONFIG = "etc/labd/labd.ini"


def make_install(destdir, *extra):
    # the same flags as the build under test, so that make finds it up to date
    san = ["SAN=1"] if os.environ.get("LABD_ASAN") else []
    p = subprocess.run(["make", "--no-print-directory", "-C", REPO, "install",
                        f"DESTDIR={destdir}", f"BUILD={build_dir()}", *san, *extra],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]


@pytest.fixture(scope="module")
def dest():
    d = tempfile.mkdtemp(prefix="labd-it-install-")
    os.chmod(d, 0o755)  # the web process (user labd) reads the web UI below it
    make_install(d)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def files_under(root):
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, root)] = stat.S_IMODE(os.lstat(p).st_mode)
    return out


def repo_files(sub, pattern=None):
    out = []
    top = os.path.join(REPO, sub)
    for dirpath, _, names in os.walk(top):
        for n in names:
            rel = os.path.relpath(os.path.join(dirpath, n), top)
            if pattern is None or re.fullmatch(pattern, rel):
                out.append(rel)
    return out


def test_installs_the_usual_places(dest):
    got = files_under(dest)
    want = {"usr/local/sbin/labd": 0o755, "usr/local/sbin/labbox": 0o755,
            "usr/local/libexec/labd/labd-jobagent": 0o755, CONFIG: 0o640, UNIT: 0o644}
    web = repo_files("web", r"[^/]+\.html|static/.*")
    assert "static/vendor/uplot/uPlot.iife.min.js" in web, "run make deps (vendor-web)"
    for rel in web:
        want[f"usr/local/share/labd/web/{rel}"] = 0o644
    for rel in repo_files("docs", r"[^/]+\.md"):
        want[f"usr/local/share/doc/labd/{rel}"] = 0o644
    assert set(got) == set(want), (sorted(set(got) - set(want)), sorted(set(want) - set(got)))
    bad = {p: oct(m) for p, m in got.items() if m != want[p]}
    assert not bad, bad
    for built, f in (("labd", "usr/local/sbin/labd"), ("labbox", "usr/local/sbin/labbox"),
                     ("libexec/labd/labd-jobagent", "usr/local/libexec/labd/labd-jobagent")):
        with open(os.path.join(REPO, build_dir(), built), "rb") as a, \
                open(os.path.join(dest, f), "rb") as b:
            assert a.read() == b.read(), f"{f} is not the build's"


def test_the_config_is_never_overwritten(dest):
    path = os.path.join(dest, CONFIG)
    with open(path, "a") as fh:
        fh.write("; the admin's own line\n")
    with open(path) as fh:
        mine = fh.read()
    unit = os.path.join(dest, UNIT)
    with open(unit, "a") as fh:
        fh.write("# stale\n")
    make_install(dest)  # an upgrade
    with open(path) as fh:
        assert fh.read() == mine, "make install overwrote /etc/labd/labd.ini"
    with open(unit) as fh:
        assert "# stale" not in fh.read(), "the unit was not refreshed"


def test_prefix_reaches_the_unit_and_the_config():
    d = tempfile.mkdtemp(prefix="labd-it-install-opt-")
    try:
        make_install(d, "PREFIX=/opt/labd", "SYSTEMD_UNIT_DIR=/usr/lib/systemd/system")
        assert os.access(os.path.join(d, "opt/labd/sbin/labd"), os.X_OK)
        assert os.access(os.path.join(d, "opt/labd/libexec/labd/labd-jobagent"), os.X_OK)
        with open(os.path.join(d, "usr/lib/systemd/system/labd.service")) as fh:
            unit = fh.read()
        with open(os.path.join(d, CONFIG)) as fh:
            cfg = fh.read()
        assert "ExecStart=/opt/labd/sbin/labd --config /etc/labd/labd.ini" in unit, unit
        assert re.search(r"^web_root = /opt/labd/share/labd/web$", cfg, re.M), cfg
        assert "/usr/local" not in unit + cfg
    finally:
        shutil.rmtree(d)


def unit_keys(text):
    """[(section, key, value)] of a unit file."""
    out, section = [], None
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        k, _, v = line.partition("=")
        out.append((section, k.strip(), v.strip()))
    return out


# Each of these puts labd in a mount namespace of its own (the unit says why not).
NAMESPACING = {"ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices", "ReadWritePaths",
               "ReadOnlyPaths", "InaccessiblePaths", "ProtectKernelTunables",
               "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups",
               "ProtectProc", "PrivateMounts", "TemporaryFileSystem", "BindPaths",
               "BindReadOnlyPaths", "RootDirectory", "RootImage", "MountFlags",
               "ProtectHostname", "ProtectClock", "PrivateNetwork", "PrivateUsers",
               "DynamicUser"}
# Inherited by every sandbox, i.e. by users' code.
INHERITED = {"SystemCallFilter", "MemoryDenyWriteExecute", "RestrictSUIDSGID",
             "LockPersonality", "RestrictRealtime", "RestrictNamespaces",
             "SystemCallArchitectures", "CapabilityBoundingSet", "AmbientCapabilities",
             "Delegate"}


def test_the_unit_verifies_and_keeps_its_rules(dest):
    with open(os.path.join(dest, UNIT)) as fh:
        text = fh.read()
    keys = unit_keys(text)
    service = {k: v for s, k, v in keys if s == "Service"}
    assert service["ExecStart"] == "/usr/local/sbin/labd --config /etc/labd/labd.ini"
    assert service["KillMode"] == "mixed" and service["KillSignal"] == "SIGTERM"
    assert service["NoNewPrivileges"] == "yes"
    assert int(service["LimitNOFILE"]) >= 65536 and service["TasksMax"] == "infinity"
    # labd's own stop takes up to 2 x 10 s (keep_on_shutdown) before systemd's SIGKILL
    assert int(service["TimeoutStopSec"]) > 20
    bad = sorted((NAMESPACING | INHERITED) & set(service))
    assert not bad, f"the unit sets {bad}: see its comments for why labd cannot have them"
    sa = shutil.which("systemd-analyze")
    if sa is None:
        # no systemd here: every key must at least be one systemd knows for its section
        known = {"Unit": {"Description", "Documentation", "After", "RequiresMountsFor"},
                 "Install": {"WantedBy"},
                 "Service": {"Type", "ExecStart", "SyslogIdentifier", "KillMode",
                             "KillSignal", "TimeoutStopSec", "Restart", "RestartSec",
                             "NoNewPrivileges", "LimitNOFILE", "TasksMax"}}
        unknown = [(s, k) for s, k, _ in keys if k not in known.get(s, ())]
        assert not unknown, unknown
        return
    # verify wants ExecStart's program to exist: point it at the installed one
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "labd.service")
        with open(copy, "w") as fh:
            fh.write(text.replace("/usr/local/sbin/labd",
                                  os.path.join(dest, "usr/local/sbin/labd")))
        p = subprocess.run([sa, "verify", copy], capture_output=True, text=True, timeout=60)
        # verify exits 0 on unknown keys and bad values: it only says so
        assert p.returncode == 0 and not p.stderr.strip() and not p.stdout.strip(), \
            p.stdout + p.stderr


def unit_service_keys(dest):
    with open(os.path.join(dest, UNIT)) as fh:
        return {k: v for s, k, v in unit_keys(fh.read()) if s == "Service"}


def installed_daemon(dest, name, unit_cg=None):
    """A Daemon (not started) running the installed labd on the installed config, with
    only the listening port, the state dir and the web root's DESTDIR changed, and
    the runtime's small test limits. It starts through a wrapper that gives labd what
    the unit gives it: no_new_privs, the unit's LimitNOFILE, and (unit_cg) the unit's
    cgroup, which the main process starts in."""
    d = Daemon(name)
    with open(os.path.join(dest, CONFIG)) as fh:
        text = fh.read()
    cp = configparser.ConfigParser(interpolation=None, comment_prefixes=(";", "#"),
                                   inline_comment_prefixes=None)
    cp.read_string(text)
    assert cp["server"]["web_root"] == "/usr/local/share/labd/web"
    for key, value in (("listen", f"127.0.0.1:{d.port}"), ("state_dir", d.state_dir),
                       ("web_root", os.path.join(dest, "usr/local/share/labd/web"))):
        text, n = re.subn(rf"^{key} = .*$", f"{key} = {value}", text, count=1, flags=re.M)
        assert n == 1, f"no {key} in the installed config"
    # the tests' small homes; scrypt cheap enough for a loaded machine
    text += "\n[runtime]\nhome_size = 1G\nmemory = 2G\nstop_grace = 3s\ncpu_limit = 1h\n"
    text = text.replace("[auth]\n", "[auth]\nscrypt_n = 1024\n", 1)
    with open(d.config_path, "w") as fh:
        fh.write(text)
    unit = unit_service_keys(dest)
    assert unit["NoNewPrivileges"] == "yes"
    # as far as this machine lets root raise it (a container may not grant
    # CAP_SYS_RESOURCE)
    nofile = min(int(unit["LimitNOFILE"]), resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    d.binary = os.path.join(d.dir, "as-the-unit")
    with open(d.binary, "w") as fh:
        fh.write("#!/bin/sh\n"
                 + (f"echo $$ > {unit_cg}/cgroup.procs || exit 99\n" if unit_cg else "")
                 + f"ulimit -n {nofile} || exit 98\n"
                 + f"exec setpriv --no-new-privs {os.path.join(dest, 'usr/local/sbin/labd')} \"$@\"\n")
    os.chmod(d.binary, 0o755)
    return d


def no_new_privs(pid):
    with open(f"/proc/{pid}/status") as fh:
        return re.search(r"^NoNewPrivs:\s*1$", fh.read(), re.M) is not None


def test_installed_labd_serves_its_ui_and_runs_a_job(dest):
    d = installed_daemon(dest, "installed")
    try:
        d.start(binary=d.binary)
        assert no_new_privs(d.proc.pid)
        r = d.client().get("/login")
        assert_status(r, 200)
        assert b"<form" in r.body, r.body[:300]
        r = d.client().get("/static/vendor/uplot/uPlot.iife.min.js")
        assert_status(r, 200)
        # the job agent is found where make install put it (libexec/labd/ one folder
        # above sbin/): a job runs in a pool sandbox it drives, and sees labd's own
        # folder only, never other software in $(PREFIX)/libexec
        other = os.path.join(dest, "usr/local/libexec/other-software")
        with open(other, "w") as fh:
            fh.write("not a job's\n")
        _, c = new_user(d, "inst")
        j = submit(c, ["sh", "-c", "echo installed-agent-ran; echo bound=$(ls /opt/labd/libexec)"])
        j = wait_job(c, j["id"])
        assert j["status"] == "Completed", j
        r = c.get(f"/api/v1/jobs/{j['id']}/logs")
        assert_status(r, 200)
        assert b"installed-agent-ran" in r.body, r.body[-500:]
        assert b"bound=labd-jobagent\n" in r.body, r.body[-500:]
        os.remove(other)
        for rel in ("db", "homes"):
            assert os.path.isdir(os.path.join(d.state_dir, rel)), rel
    finally:
        teardown_runtime_daemon(d)


# ------------------------------------------------------------ under a systemd unit


def tracking_root():
    """The cgroup v2 tree systemd tracks a unit's processes in: /sys/fs/cgroup on a
    pure v2 host, its unified/ on a hybrid one."""
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        with open("/proc/self/mountinfo") as fh:
            if any(ln.split(" - ")[1].startswith("cgroup2 ") and ln.split()[4] == root
                   for ln in fh):
                return root
    return None


def procs(cg):
    """Every pid in cgroup dir cg and below it."""
    out = []
    for dirpath, _, names in os.walk(cg):
        if "cgroup.procs" in names:
            with open(os.path.join(dirpath, "cgroup.procs")) as fh:
                out += [int(x) for x in fh.read().split()]
    return out


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return "?"


def systemd_stop(d, unit_cg):
    """What systemd does to the unit on stop with KillMode=mixed: SIGTERM to the main
    process, and once it has exited SIGKILL to every process left in the unit."""
    rc = d.stop(30)
    assert rc == 0, f"labd exited {rc} on SIGTERM\n" + d.log_tail()
    left = procs(unit_cg)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


def test_sandboxes_live_outside_the_unit_and_survive_its_restart(dest):
    root = tracking_root()
    assert root, "no cgroup v2 tree: neither pure v2 nor hybrid"
    unit_cg = os.path.join(root, f"labd-it-{os.getpid()}.service")
    os.mkdir(unit_cg)
    d = installed_daemon(dest, "unit", unit_cg)
    try:
        d.start(binary=d.binary)
        assert d.proc.pid in procs(unit_cg)
        # as the unit runs it: no_new_privs, and a runtime with egress (pasta, nft) starts
        assert no_new_privs(d.proc.pid)
        _, c = new_user(d, "unit")
        _, before = start_runtime(c)
        remember_sandboxes(d)
        (_, box), = sandbox_records(d.state_dir)
        init = int(box["pid"])
        # the sandbox's processes are in labd's own cgroups, not the unit's
        # (once the start's worker, forked in the unit, has gone)
        seen = {}

        def only_labd():
            seen["now"] = inside = {p: comm(p) for p in procs(unit_cg)}
            return init not in inside and all(n in ("labd", "labd-web") for n in inside.values())
        wait_until(only_labd, 10 * SLOW,
                   lambda: f"the unit's cgroup to hold only labd and labd-web: {seen}")
        with open(f"/proc/{init}/cgroup") as fh:
            cg = [ln for ln in fh if ln.startswith("0::")][0].split("::")[1].strip()
        assert cg.startswith("/labd/"), cg

        # systemctl restart labd
        killed = systemd_stop(d, unit_cg)
        assert all(comm(p) in ("labd", "labd-web", "?") for p in killed), killed
        assert os.path.exists(f"/proc/{init}"), "the runtime died with the unit"
        d.start(binary=d.binary, expect_admin_password=False)
        after = wait_runtime(c, ("running", "stopping", "stopped", "failed"), timeout=10 * SLOW)
        assert after["state"] == "running" and after["id"] == before["id"], after
        assert_status(c.get(f"/user/{c.name}/api/status"), 200)
        r = c.delete("/api/v1/me/runtime")
        assert_status(r, 202)
        wait_runtime(c, ("stopped", "failed"), timeout=20 * SLOW)
    finally:
        teardown_runtime_daemon(d)
        for pid in procs(unit_cg):
            os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not procs(unit_cg), 10, "the test unit's cgroup to empty")
        os.rmdir(unit_cg)


# ------------------------------------------------------------ deploy/install-deps.sh


def deps(*args, os_id=None):
    env = dict(os.environ)
    if os_id:
        fd, path = tempfile.mkstemp(prefix="labd-it-os-release-")
        with os.fdopen(fd, "w") as fh:
            fh.write(f'ID={os_id}\nVERSION_ID="test"\n')
        env["LABD_OS_RELEASE"] = path
    try:
        return subprocess.run(["bash", os.path.join(REPO, "deploy", "install-deps.sh"), *args],
                              capture_output=True, text=True, timeout=60, env=env)
    finally:
        if os_id:
            os.unlink(path)


def test_install_deps_names_the_packages_of_each_os():
    debian = deps("--print", os_id="debian")
    ubuntu = deps("--print", os_id="ubuntu")
    assert debian.returncode == 0 and ubuntu.returncode == 0, debian.stderr + ubuntu.stderr
    d, u = debian.stdout.split(), ubuntu.stdout.split()
    assert "libclang-rt-14-dev" in d and "chromium" in d
    assert "libclang-rt-18-dev" in u and "chromium-browser" in u
    assert "libclang-rt-14-dev" not in u and "chromium" not in u
    assert len(d) == len(u) and set(d) - {"libclang-rt-14-dev", "chromium"} == \
        set(u) - {"libclang-rt-18-dev", "chromium-browser"}
    # the libraries labd links on either
    for lib in ("libmicrohttpd-dev", "libcgroup-dev", "libinih-dev", "libhttp-parser-dev"):
        assert lib in d and lib in u, lib
    # a server gets what labd builds and runs with, no test tools
    server = deps("--print", "--server", os_id="ubuntu").stdout.split()
    assert "passt" in server and "nftables" in server and "python3-venv" in server
    assert not {"chromium-browser", "python3-pytest", "prometheus", "python3-torch"} & set(server)
    other = deps("--print", os_id="fedora")
    assert other.returncode == 1 and "fedora is not Debian or Ubuntu" in other.stderr, other
    assert deps("--bogus").returncode == 2
