"""labd on the private Slurm cluster: a head (labd with [backend] kind = slurm) on the
cluster's head address and one `labd node` per Slurm node, each in its node's network
namespace, sharing one folder of home images (docs/slurm.md).

    with Cluster() as c, LabOnSlurm(c) as lab:
        user = lab.user()                    # a client logged in as a fresh user
        rt = lab.start_runtime(user)         # running, JupyterLab answers through the proxy
        lab.node_of_runtime(user)            # which node runs it ("n1" / "n2")

What it sets up, all in temp dirs removed at close():
- one secret (64 random bytes, root 0600) for the head's [slurm] secret_file and every
  node's [node] secret_file;
- the head: labd listening on 127.0.0.1 for HTTP and on <head addr>:<port> for the nodes'
  links; SLURM_CONF in its environment names the cluster's slurm.conf, and labd-web runs
  sbatch/squeue/scontrol/scancel as user labd;
- node n1/n2: `labd --config node.ini node` entered into the node's network namespace
  only (nsenter --net: the mount namespace stays the machine's, as on a real node),
  data port on the node's own address, [storage] home_images = the shared folder,
  mmp = yes, [gpu] devices = the node's stand-in minors under the cluster's dev folder.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from labd_harness import (  # noqa: E402
    RUNTIME_DEFAULTS,
    SLOW,
    STRONG,
    Daemon,
    free_port,
    labd_binary,
    unique_name,
    wait_until,
)

LINK_PORT_TRIES = 20


class LabdNode:
    """One `labd node` in a Slurm node's network namespace."""

    def __init__(self, lab, node):
        self.lab = lab
        self.node = node
        self.dir = tempfile.mkdtemp(prefix=f"labd-slurm-{node.short}-")
        os.chmod(self.dir, 0o755)
        self.state_dir = os.path.join(self.dir, "state")
        self.data_port = 7444
        self.config = os.path.join(self.dir, "node.ini")
        minors = [int(p.rsplit("nvidia", 1)[1]) for p in node.gpus]
        rt = "".join(f"{k} = {v}\n" for k, v in RUNTIME_DEFAULTS.items())
        with open(self.config, "w") as fh:
            fh.write(f"[server]\nstate_dir = {self.state_dir}\n\n"
                     f"[runtime]\n{rt}\n"
                     f"[gpu]\ndevices = {','.join(map(str, minors))}\n"
                     f"dev_prefix = {os.path.dirname(node.gpus[0])}\n\n"
                     f"[storage]\nhome_images = {lab.homes}\nmmp = yes\n\n"
                     f"[node]\nname = {node.name}\nhead = {lab.link_addr}\n"
                     f"secret_file = {lab.secret_file}\n"
                     f"data_listen = {node.addr}:{self.data_port}\n")
        self.log_path = os.path.join(self.dir, "node.log")
        self.proc = None

    def start(self):
        with open(self.log_path, "ab") as logf:
            self.proc = subprocess.Popen(
                self.node.enter([labd_binary(), "--config", self.config, "node"]),
                stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                start_new_session=True)
        return self

    def doctor(self):
        """`labd --config node.ini doctor` on this node, as an admin would run it: (exit
        status, output)."""
        r = subprocess.run([labd_binary(), "--config", self.config, "doctor"],
                           capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout + r.stderr

    def log(self):
        try:
            with open(self.log_path, "rb") as fh:
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self, timeout=20):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout * SLOW)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self):
        """SIGKILL the node's supervisor and link (its sandboxes and their keepers live
        on, as on a node that lost only its network)."""
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                self.proc.kill()
            self.proc.wait(10)

    def cgroup_parent(self):
        return f"labd-{self.node.name}"

    def sandbox_pids(self):
        pids = set()
        for ctrl in ("pids", "memory", "cpu", "freezer"):
            top = os.path.join("/sys/fs/cgroup", ctrl, self.cgroup_parent())
            for root, _, files in os.walk(top):
                if "cgroup.procs" in files:
                    try:
                        with open(os.path.join(root, "cgroup.procs")) as f:
                            pids.update(int(p) for p in f.read().split())
                    except OSError:
                        pass
        return pids

    def home_mounts(self):
        """Mount points of homes under this node's state dir (the machine's table)."""
        out = []
        with open("/proc/self/mountinfo") as f:
            for line in f:
                mp = line.split()[4]
                if mp.startswith(self.state_dir + "/homes/") and mp.endswith("/mnt"):
                    out.append(mp)
        return out

    def die(self):
        """The machine goes: every process of the node (supervisor, link, keepers,
        sandboxes) killed and its mounts gone, as a power cut would leave it."""
        self.kill()
        for _ in range(3):
            for pid in self.sandbox_pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.2)
        self.release_mounts()

    def release_mounts(self):
        with open("/proc/self/mountinfo") as f:
            mps = [line.split()[4] for line in f]
        for mp in sorted((m for m in mps if m.startswith(self.state_dir + "/")),
                         key=len, reverse=True):
            subprocess.run(["umount", "-l", mp], capture_output=True)

    def _cgroup_dirs(self):
        found = []
        for ctrl in os.listdir("/sys/fs/cgroup"):
            top = os.path.join("/sys/fs/cgroup", ctrl, self.cgroup_parent())
            if os.path.isdir(top) and not os.path.islink(os.path.join("/sys/fs/cgroup", ctrl)):
                found += [root for root, _, _ in os.walk(top, topdown=False)]
        return found

    def cleanup(self):
        self.stop()
        self.die()
        # the killed processes leave their cgroups a moment later: rmdir until none is left
        deadline = time.monotonic() + 15
        while self._cgroup_dirs() and time.monotonic() < deadline:
            for pid in self.sandbox_pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for d in self._cgroup_dirs():
                try:
                    os.rmdir(d)
                except OSError:
                    pass
            time.sleep(0.1)
        shutil.rmtree(self.dir, ignore_errors=True)


class LabOnSlurm:
    def __init__(self, cluster, head_sections=None):
        self.cluster = cluster
        self.dir = tempfile.mkdtemp(prefix="labd-slurm-lab-")
        os.chmod(self.dir, 0o755)
        self.secret_file = os.path.join(self.dir, "link.key")
        with open(self.secret_file, "wb") as fh:
            fh.write(os.urandom(64))
        os.chmod(self.secret_file, 0o600)
        self.homes = os.path.join(cluster.dir, "homes")  # "shared storage"
        os.chmod(self.homes, 0o700)
        self.link_addr = f"{cluster.head_addr}:{free_port()}"
        sections = {
            "runtime": dict(RUNTIME_DEFAULTS),
            "backend": {"kind": "slurm"},
            # no egress: pasta wants a default route, and the nodes' namespaces reach
            # only the cluster's own /24
            "quota": {"network": "none"},
            "slurm": {"listen": self.link_addr, "secret_file": self.secret_file,
                      "poll_interval": "250ms", "timeout": "20s"},
        }
        for k, v in (head_sections or {}).items():
            sections.setdefault(k, {}).update(v)
        self.head = Daemon("slurm-head", sections=sections, env={"SLURM_CONF": cluster.conf})
        self.nodes = {n.short: LabdNode(self, n) for n in cluster.nodes}
        self._admin = None

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def start(self):
        self.head.start()
        for n in self.nodes.values():
            n.start()
        self.wait_nodes_linked()
        return self

    def linked_nodes(self):
        """Short names of the nodes whose link the head's log says is up (backend/nodes.c:
        "node N is up ...", "the link of node N ended")."""
        up = set()
        for line in self.head.log().splitlines():
            for short, n in self.nodes.items():
                if f"node {n.node.name} is up" in line:
                    up.add(short)
                elif f"link of node {n.node.name} ended" in line:
                    up.discard(short)
        return up

    def restart_head(self, away_s=0.0, meanwhile=None):
        """SIGTERM the head (as an upgrade does), optionally act while it is away, start
        it again on the same config and state and wait for the nodes' links."""
        assert self.head.stop(20) == 0, self.head.log_tail()
        if meanwhile:
            meanwhile()
        time.sleep(away_s)
        self.head.start(expect_admin_password=False)
        self.wait_nodes_linked()

    def wait_nodes_linked(self, timeout=30):
        def check():
            for n in self.nodes.values():
                if n.proc and n.proc.poll() is not None:
                    raise AssertionError(f"labd node {n.node.short} exited:\n{n.log()[-3000:]}")
            return self.linked_nodes() >= {s for s, n in self.nodes.items() if n.proc}
        try:
            wait_until(check, timeout * SLOW, "the nodes' links to come up")
        except AssertionError:
            raise AssertionError("nodes not linked\n" + self.head.log_tail(60) + "\n" +
                                 "\n".join(f"--- {s}\n{n.log()[-2000:]}"
                                           for s, n in self.nodes.items()))

    def close(self):
        for n in self.nodes.values():
            n.cleanup()
        try:
            self.head.stop(20)
        finally:
            self.head.cleanup()
        # jobs labd left in Slurm would hold the nodes for the next test
        r = subprocess.run(["squeue", "-h", "-o", "%i"], env=self.cluster.env,
                           capture_output=True, text=True)
        for jid in r.stdout.split():
            subprocess.run(["scancel", jid], env=self.cluster.env, capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    # users and runtimes ------------------------------------------------------------

    def admin(self):
        if self._admin is None:
            self._admin = self.head.admin()
        return self._admin

    def user(self, prefix="su"):
        name = unique_name(prefix)
        pw = f"{STRONG}-{name}"
        r = self.admin().post("/api/v1/users", json={"name": name, "password": pw})
        assert r.status == 201, r
        c = self.head.client()
        c.login(name, pw)
        c.password = pw
        return c

    def slurm_jobs(self):
        """{job name: (job id, state, batch host)} of every job in the cluster."""
        r = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%j|%i|%T|%B"],
                           env=self.cluster.env, capture_output=True, text=True)
        out = {}
        for line in r.stdout.splitlines():
            parts = line.split("|")
            if len(parts) == 4:
                out.setdefault(parts[0], []).append((int(parts[1]), parts[2], parts[3]))
        return out

    def runtime_job(self, runtime_id):
        """(job id, state, batch host) of the runtime's newest holder job, or None."""
        jobs = sorted(self.slurm_jobs().get(f"labd-rt-{runtime_id}", []))
        return jobs[-1] if jobs else None

    def node_short(self, host):
        for short, n in self.nodes.items():
            if n.node.name == host:
                return short
        return None
