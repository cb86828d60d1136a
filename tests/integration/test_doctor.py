"""`labd doctor`: the host's prerequisites, one line each with a remedy; what a
crash left under the state dir, and `--fix`, refused while labd runs.

The leftovers here are made by hand, one of each kind a crash can leave (a state
file whose init is gone, its run dir still mounted, its cgroup with nothing in
it, its record and its keeper socket); test_faults.py shows doctor on what real
crashes leave."""

import glob
import json
import os
import re
import subprocess

import pytest

from labd_harness import Daemon, labd_binary, mounts_under, teardown_daemon

LINE = re.compile(r"^(OK|WARN|FAIL|LEFT|FIXED) +\S")
PREREQUISITES = ("kernel", "user namespaces", "cgroups", "loop devices", "mkfs.ext4",
                 "resize2fs", "(egress)", "GPUs", "state dir space")
SANDBOX_ID = "ghost-0123456789ab"


@pytest.fixture
def stopped():
    """A daemon started once (its state dir made) and stopped again."""
    d = Daemon("doctor")
    d.start()
    assert d.stop() == 0
    yield d
    for mp in reversed(mounts_under(d.state_dir)):
        subprocess.run(["umount", "-l", mp], check=False)
    for cg in glob.glob(f"/sys/fs/cgroup/*/labd/{SANDBOX_ID}") + \
            glob.glob(f"/sys/fs/cgroup/labd/{SANDBOX_ID}"):
        os.rmdir(cg)
    d.cleanup()


def doctor(d, *args, env=None):
    r = d.run_cli("doctor", *args, env=env)
    print(f"$ labd doctor {' '.join(args)} (exit {r.returncode})\n{r.stdout}{r.stderr}")
    return r


def report(r):
    lines = r.stdout.splitlines()
    assert lines[0].startswith("labd doctor: state dir "), lines[0]
    for ln in lines[1:]:
        assert LINE.match(ln), f"not a report line: {ln!r}"
        if not ln.startswith(("OK", "FIXED")):
            assert " -- " in ln, f"no remedy: {ln!r}"
    return lines[1:]


def test_prerequisites_each_say_ok_warn_or_fail(stopped):
    r = doctor(stopped)
    lines = report(r)
    for what in PREREQUISITES:
        assert any(what in ln for ln in lines), f"no line about {what}:\n{r.stdout}"
    assert "OK    leftovers: none" in lines
    assert r.returncode == (1 if any(ln.startswith("FAIL") for ln in lines) else 0)


def test_a_missing_prerequisite_fails_with_its_remedy(stopped):
    stopped.sections["gpu"] = {"devices": "3", "dev_prefix": stopped.dir,
                               "nvml_library": "/nonexistent/libnvidia-ml.so.1"}
    stopped.sections["network"] = {"pasta": "/nonexistent/pasta"}
    stopped.write_config()
    r = doctor(stopped)
    lines = report(r)
    assert r.returncode == 1, r.stdout
    assert f"FAIL  GPU device missing: {stopped.dir}/nvidia3 -- load the NVIDIA driver" \
        in "\n".join(lines), r.stdout
    assert any(ln.startswith("WARN  NVML") for ln in lines), r.stdout
    assert any(ln.startswith("WARN  /nonexistent/pasta (egress): not found -- apt-get install")
               for ln in lines), r.stdout


def test_driver_libraries_only_on_ld_library_path_name_the_remedy(stopped):
    """A host whose libcuda.so.1 only LD_LIBRARY_PATH reaches (as on the GPU server
    measured, /usr/local/nvidia/lib64): sandboxes do not inherit that variable, so
    doctor names the folder for [gpu] driver_lib_dir; once set, it is OK."""
    libs = os.path.join(stopped.dir, "nvidia-lib64")
    os.makedirs(libs)
    open(os.path.join(libs, "libcuda.so.1"), "w").close()
    open(os.path.join(stopped.dir, "nvidia0"), "w").close()
    stopped.sections["gpu"] = {"devices": "0", "dev_prefix": stopped.dir}
    stopped.write_config()
    r = doctor(stopped, env={"LD_LIBRARY_PATH": f"/nonexistent:{libs}"})
    lines = report(r)
    with open("/etc/ld.so.cache", "rb") as fh:
        cached = b"libcuda.so.1" in fh.read()
    if cached:  # a host with the driver installed: the loader finds it for everyone
        assert "OK    GPU driver libraries: in the loader's cache (ld.so.cache)" in lines
    else:
        assert (f"FAIL  GPU driver libraries only through LD_LIBRARY_PATH: sandboxes do not "
                f"inherit it -- set [gpu] driver_lib_dir = {libs}") in lines, r.stdout
    stopped.sections["gpu"]["driver_lib_dir"] = libs
    stopped.write_config()
    lines = report(doctor(stopped, env={"LD_LIBRARY_PATH": libs}))
    assert f"OK    GPU driver libraries: {libs}" in lines


def test_veth_path_warns_of_a_firewall_that_drops_forwarding(stopped):
    """[network] path = veth forwards through the host: a forward chain whose policy
    drops (Docker, ufw, firewalld) would leave sandboxes without a network. Doctor is
    run in a network namespace of the test's own, whose nftables it reads."""
    ns = f"labd-doctor-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        def run(*args):
            r = subprocess.run(["ip", "netns", "exec", ns, labd_binary(), "--config",
                                stopped.config_path, "doctor"], capture_output=True, text=True,
                               timeout=60, cwd=stopped.dir)
            print(r.stdout, r.stderr)
            return report(r)
        lines = run()
        assert not any("forwarding (veth path)" in ln for ln in lines)  # auto: not asked
        stopped.sections["network"] = {"path": "veth"}
        stopped.write_config()
        assert "OK    forwarding (veth path): no forward chain drops by default" in run()
        subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], check=True, text=True,
                       input="table inet fw {\n chain towards {\n  type filter hook forward"
                             " priority 0; policy drop;\n }\n}\n")
        warn = [ln for ln in run() if "forwarding (veth path)" in ln]
        assert warn and warn[0].startswith("WARN") and "inet fw/towards" in warn[0], warn
        assert "lbv+" in warn[0], warn  # the remedy
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


# The host's nft, but listing its chains as a host with Docker (iptables-nft) has them.
DOCKER_NFT = """#!/bin/sh
if [ "$*" = "-j list chains" ]; then
  echo '{"nftables": [{"chain": {"family": "ip", "table": "filter", "name": "FORWARD",\
 "handle": 2, "type": "filter", "hook": "forward", "prio": 0, "policy": "drop"}}]}'
  exit 0
fi
exec nft "$@"
"""


def network_path_line(lines):
    found = [ln for ln in lines if ln.startswith("OK    network path: ")]
    assert len(found) == 1, lines
    return found[0]


def health_network_path(d):
    """The daemon's own answer, as doctor's line would say it; and the log's once."""
    d.start(expect_admin_password=False)
    try:
        assert "network_path" not in d.client().get("/api/v1/health").json  # admins only
        h = d.admin().get("/api/v1/health").json["network_path"]
        said = [ln for ln in d.log().splitlines() if "sandbox network path:" in ln]
        assert len(said) == 1 and said[0].endswith(f"{h['path']} ({h['why']})"), said
        return f"OK    network path: {h['path']} ({h['why']})"
    finally:
        assert d.stop() == 0


def test_auto_path_is_veth_where_the_host_forwards_else_pasta(stopped):
    """[network] path = auto (the default) is settled once at the start: veth when no
    forward chain drops and no firewalld runs, else pasta. Doctor in a network
    namespace of the test's own (whose nftables it reads) shows both; the daemon
    settles it as doctor does (its log says it once, admins' health names it), on
    this host and on one whose nft lists Docker's forward chain."""
    ns = f"labd-auto-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        def run():
            r = subprocess.run(["ip", "netns", "exec", ns, labd_binary(), "--config",
                                stopped.config_path, "doctor"], capture_output=True, text=True,
                               timeout=60, cwd=stopped.dir)
            print(r.stdout, r.stderr)
            return report(r)
        assert network_path_line(run()) == ("OK    network path: veth (auto: the host forwards "
                                            "(no forward chain drops by default, no firewalld))")
        subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], check=True, text=True,
                       input="table inet fw {\n chain towards {\n  type filter hook forward"
                             " priority 0; policy drop;\n }\n}\n")
        assert network_path_line(run()) == ("OK    network path: pasta (auto: chain inet "
                                            "fw/towards drops forwarded packets by default)")
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
    # this host, whichever path it gets: the daemon and doctor agree
    assert health_network_path(stopped) == network_path_line(report(doctor(stopped)))
    nft = os.path.join(stopped.dir, "docker-nft")
    with open(nft, "w") as fh:
        fh.write(DOCKER_NFT)
    os.chmod(nft, 0o755)
    stopped.sections["network"] = {"nft": nft}
    stopped.write_config()
    assert health_network_path(stopped) == ("OK    network path: pasta (auto: chain ip "
                                            "filter/FORWARD drops forwarded packets by default)")


def plant_leftovers(d):
    """What a supervisor killed mid-start leaves: the state file of a sandbox whose
    init is gone, its run dir mounted, its cgroup, its record and keeper socket."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    run_dir = os.path.join(d.state_dir, "runtimes", "ghost", "run")
    os.makedirs(run_dir)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "ghost", run_dir], check=True)
    # a home's directory bind (unbindable, sandbox/home.c) with a mount inside (a
    # tmpfs stands in for the home's ext4), no reference left
    home_dir = os.path.join(d.state_dir, "homes", "99")
    os.makedirs(os.path.join(home_dir, "mnt"), exist_ok=True)
    subprocess.run(["mount", "--bind", home_dir, home_dir], check=True)
    subprocess.run(["mount", "--make-unbindable", home_dir], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "ghost-home",
                    os.path.join(home_dir, "mnt")], check=True)
    with open(os.path.join(d.state_dir, "sandboxes", f"{SANDBOX_ID}.state"), "w") as fh:
        fh.write(f"version=1\nid={SANDBOX_ID}\nuser=ghost\npid={dead.pid}\nstart_time=1\n"
                 f"home_image=\nrun_dir={run_dir}\ncgroup_parent=labd\n")
    with open(os.path.join(d.state_dir, "boxes", "ghost.json"), "w") as fh:
        json.dump({"user": "ghost", "id": SANDBOX_ID, "purpose": "runtime"}, fh)
    open(os.path.join(d.state_dir, "keepers", f"{SANDBOX_ID}.sock"), "w").close()
    cgroups = []
    for base in ["/sys/fs/cgroup/pids", "/sys/fs/cgroup"]:
        if os.path.isdir(os.path.join(base, "labd")):
            cgroups.append(os.path.join(base, "labd", SANDBOX_ID))
            os.mkdir(cgroups[-1])
            break
    return run_dir, cgroups


def test_leftovers_are_listed_and_fixed_only_while_labd_is_stopped(stopped):
    d = stopped
    run_dir, cgroups = plant_leftovers(d)
    r = doctor(d)
    left = [ln for ln in report(r) if ln.startswith("LEFT")]
    assert r.returncode == 1
    text = "\n".join(left)
    assert f"sandbox {SANDBOX_ID} of ghost: its init is gone" in text, r.stdout
    assert f"mount {run_dir}" in text, r.stdout
    home_dir = os.path.join(d.state_dir, "homes", "99")
    assert f"mount {home_dir} --" in text, r.stdout
    assert f"mount {home_dir}/mnt" in text, r.stdout
    assert f"boxes/ghost.json names sandbox {SANDBOX_ID}" in text, r.stdout
    assert f"keepers/{SANDBOX_ID}.sock names sandbox {SANDBOX_ID}" in text, r.stdout
    for cg in cgroups:
        assert f"cgroup {cg}" in text, r.stdout

    # labd running: --fix is refused; labd's own start cleaned up what was left
    d.start(expect_admin_password=False)
    r = doctor(d, "--fix")
    assert r.returncode == 2, r.stdout
    assert re.search(r"labd \(pid \d+\) runs on .*; --fix repairs only while it is stopped",
                     r.stderr), r.stderr
    r = doctor(d)
    assert "labd running" in r.stdout
    assert "OK    leftovers: none" in r.stdout, r.stdout
    assert d.stop() == 0

    # labd stopped: --fix removes them
    run_dir, cgroups = plant_leftovers(d)
    r = doctor(d, "--fix")
    fixed = "\n".join(ln for ln in report(r) if ln.startswith("FIXED"))
    assert r.returncode == 0, r.stdout
    assert "tore down 1 sandbox(es) whose init was gone" in fixed, r.stdout
    assert "OK    leftovers: none" in r.stdout
    assert not mounts_under(d.state_dir), mounts_under(d.state_dir)
    assert not os.path.exists(os.path.join(d.state_dir, "boxes", "ghost.json"))
    assert not os.path.exists(os.path.join(d.state_dir, "keepers", f"{SANDBOX_ID}.sock"))
    assert not any(os.path.exists(cg) for cg in cgroups)
    r = doctor(d)
    assert r.returncode == 0 and "OK    leftovers: none" in r.stdout, r.stdout


def test_a_nodes_leftover_cgroups_are_looked_for_under_its_own_parent(stopped):
    """With a `labd node` config (docs/slurm.md), the sandboxes' cgroups live under
    labd-<name>: a crashed sandbox's (its state file names the parent) and one only a
    record names (the config's parent) are both reported there, and --fix removes them."""
    d = stopped
    d.sections["node"] = {"name": "dn1"}
    d.write_config()
    dead = subprocess.Popen(["true"])
    dead.wait()
    with open(os.path.join(d.state_dir, "sandboxes", f"{SANDBOX_ID}.state"), "w") as fh:
        fh.write(f"version=1\nid={SANDBOX_ID}\nuser=ghost\npid={dead.pid}\nstart_time=1\n"
                 f"home_image=\nrun_dir=\ncgroup_parent=labd-dn1\n")
    with open(os.path.join(d.state_dir, "boxes", "ghost.json"), "w") as fh:
        json.dump({"user": "ghost", "id": SANDBOX_ID, "purpose": "runtime"}, fh)
    recorded = "ghost2-0123456789ab"
    with open(os.path.join(d.state_dir, "boxes", "ghost2.json"), "w") as fh:
        json.dump({"user": "ghost2", "id": recorded, "purpose": "runtime"}, fh)
    base = next(b for b in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")
                if os.path.isdir(os.path.join(b, "labd")))
    parent = os.path.join(base, "labd-dn1")
    made_parent = not os.path.isdir(parent)
    cgroups = [os.path.join(parent, SANDBOX_ID), os.path.join(parent, recorded)]
    os.makedirs(cgroups[0])
    os.mkdir(cgroups[1])
    try:
        r = doctor(d)
        text = "\n".join(ln for ln in report(r) if ln.startswith("LEFT"))
        assert r.returncode == 1
        for cg in cgroups:
            assert f"cgroup {cg}" in text, r.stdout
        r = doctor(d, "--fix")
        assert r.returncode == 0 and "OK    leftovers: none" in r.stdout, r.stdout
        assert not any(os.path.exists(cg) for cg in cgroups)
    finally:
        for cg in cgroups + ([parent] if made_parent else []):
            if os.path.isdir(cg):
                os.rmdir(cg)
