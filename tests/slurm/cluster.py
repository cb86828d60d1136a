"""A private Slurm cluster on this one machine, started and torn down by the tests.

    with Cluster() as c:             # munged, slurmctld, two slurmd, ~0.2 s
        jid = c.sbatch("--mem=50M", "--wrap", "sleep 30")
        c.wait_state(jid, "RUNNING")
        c.kill_node("n1")            # SIGKILL its slurmd: down after SlurmdTimeout

Everything lives in one temp dir: its own munge key and socket (the machine's
/etc/munge is not used), slurm.conf, cgroup.conf, gres.conf, state, spool, logs, pid
files. Processes:

- munged as user munge (`--socket`, `--key-file`, ...); slurm.conf names its socket
  (AuthInfo=socket=...), so every client and daemon here talks to it only;
- slurmctld -D in the host's network namespace, listening on the head address
  (198.18.N.1, the host's end of a veth pair into the cluster's switch);
- one `slurmd -D -N <node>` per node, each in its own network namespace joined to the
  switch by a veth pair (198.18.N.2, .3, ...), as separate machines would be.
  The switch is a bridge in a network namespace of its own: what the nodes send one
  another (the peers of a job on several nodes) is bridged there, never through the
  host's firewall, which this machine's bridge netfilter
  (net.bridge.bridge-nf-call-iptables) would apply to a bridge in the host's namespace
  and which other tests change while they run. Debian
  builds slurmd with multiple-slurmd, so two run on one host; each has its own spool,
  pid and log file (%n) and its cgroup prefix is /slurm_<node>.

Stand-in GPUs: `mknod c 195 M` character devices in <dir>/dev (Slurm refuses regular
files: "is not a valid character or block device"), named in gres.conf with
AutoDetect=off; node i gets minors 2i, 2i+1, so no two nodes share a device. Major 195
is the NVIDIA driver's: with no driver loaded, opening one gives ENXIO.

cgroups: this host is cgroup v1 (hybrid: /sys/fs/cgroup is a tmpfs of v1 controllers).
proctrack/cgroup + task/cgroup works there (ConstrainRAMSpace, ConstrainDevices);
`proctrack="linuxproc"` gives linuxproc + task/none (no limits) for hosts where it
does not. slurmd makes /sys/fs/cgroup/<controller>/slurm_<node> either way (it always
initialises its cgroup plugin); teardown removes those directories.

Node names carry the cluster's tag ("s<tag>n1") so two clusters on one machine (two
checkouts testing at once) never share a cgroup prefix, a network namespace or a /24:
the /24 is the first of 198.18.200-249.0/24 that no interface here uses.

Teardown (close(), also when a test failed or start() failed half way): SIGTERM then
SIGKILL to every daemon started here and to anything left in the nodes' cgroups, the
namespaces and the bridge deleted, device nodes and the temp dir removed.
"""

import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

SLURM_BINS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel")
CGROUP_V1 = "/sys/fs/cgroup"
SLURMD_PORT = 6818  # inside each node's own network namespace: no clash between nodes
_serial = itertools.count()


def missing_programs():
    """The programs a cluster needs that this machine lacks (deploy/install-deps.sh)."""
    return [b for b in SLURM_BINS if shutil.which(b) is None
            and not os.path.exists(f"/usr/sbin/{b}")]


def _ip(*args, check=True):
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r


def _free_tcp_port(addr="0.0.0.0"):
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def _free_subnet():
    """198.18.N for the first N in 200..249 that no address on this machine uses."""
    used = _ip("-4", "-o", "addr", "show").stdout
    for n in range(200, 250):
        if f" 198.18.{n}." not in used:
            return f"198.18.{n}"
    raise RuntimeError("no free /24 in 198.18.200-249.0/24")


def wait_until(pred, timeout, what, interval=0.02):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


class Node:
    def __init__(self, cluster, index):
        self.index = index
        self.short = f"n{index + 1}"  # what tests call it
        self.name = f"s{cluster.tag}{self.short}"  # what Slurm and labd call it
        self.netns = f"{self.name}"
        self.addr = f"{cluster.subnet}.{index + 2}"
        self.host_if = f"{self.name}h"
        self.ns_if = f"{self.name}n"
        self.gpus = [os.path.join(cluster.dir, "dev", f"nvidia{2 * index + k}")
                     for k in range(cluster.gpus_per_node)]
        self.proc = None

    def run(self, argv, **kw):
        """Runs argv inside the node's network namespace (subprocess.run arguments)."""
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        return subprocess.run(self.enter(argv), **kw)

    def popen(self, argv, **kw):
        """Starts argv inside the node's network namespace."""
        return subprocess.Popen(self.enter(argv), **kw)

    def enter(self, argv):
        """argv run in the node's network namespace only. Not `ip netns exec`: that
        also unshares the mount namespace and mounts a fresh /sys, which hides
        /sys/fs/cgroup (slurmd: "No filesystem mounted on /sys/fs/cgroup") and
        would hide the mounts a node's labd makes from the rest of the machine."""
        return ["nsenter", f"--net=/run/netns/{self.netns}", "--", *argv]


class Cluster:
    def __init__(self, nodes=2, gpus_per_node=2, cpus=None, memory_mb=None,
                 slurmd_timeout=6, proctrack="cgroup"):
        self.tag = f"{os.getpid() % 100000}x{next(_serial)}"
        self.dir = None
        self.subnet = None
        self.head_addr = None
        self.bridge = f"s{self.tag}br"
        self.switch = f"s{self.tag}sw"   # the bridge's own network namespace
        self.head_if = f"s{self.tag}hd"  # the host's end, with the head address
        self.gpus_per_node = gpus_per_node
        self.cpus = cpus or os.cpu_count() or 1
        self.memory_mb = memory_mb or 2048
        self.slurmd_timeout = slurmd_timeout
        self.proctrack = proctrack
        self.node_count = nodes
        self.nodes = []
        self.munged = None
        self.slurmctld = None
        self.ctld_port = None
        self.env = None
        self._made_netns = []
        self._bridge_made = False

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    def start(self):
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self):
        if missing_programs():
            raise RuntimeError(f"Slurm is not installed ({', '.join(missing_programs())} "
                               "missing): deploy/install-deps.sh")
        self.dir = tempfile.mkdtemp(prefix="labd-slurm-")
        os.chmod(self.dir, 0o755)  # munged wants every directory above its socket executable
        for sub in ("etc", "state", "spool", "run", "log", "dev", "homes"):
            os.makedirs(os.path.join(self.dir, sub))
        self.subnet = _free_subnet()
        self.head_addr = f"{self.subnet}.1"
        self.nodes = [Node(self, i) for i in range(self.node_count)]
        self.ctld_port = _free_tcp_port()
        self.conf = os.path.join(self.dir, "etc", "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self._make_network()
        self._make_gpus()
        self._write_config()
        self._start_munged()
        for attempt in range(3):
            try:
                self._start_slurmctld()
                break
            except RuntimeError as e:
                # the free port was taken between the probe and slurmctld's bind
                if "Address already in use" not in str(e) or attempt == 2:
                    raise
                self.ctld_port = _free_tcp_port()
                self._write_config()
        for n in self.nodes:
            self.start_node(n.short)
        self.wait_nodes_idle()

    def close(self):
        """Tears down everything start() made; safe to call twice and after a half start."""
        for n in self.nodes:
            self._stop(n.proc)
            n.proc = None
        self._stop(self.slurmctld)
        self.slurmctld = None
        self._kill_cgroups()
        self._stop(self.munged)
        self.munged = None
        for ns in self._made_netns:
            _ip("netns", "del", ns, check=False)
        self._made_netns = []
        if self._bridge_made:  # the switch's namespace went above: its ends with it
            _ip("link", "del", self.head_if, check=False)
            self._bridge_made = False
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)  # the device nodes with it
            self.dir = None

    @staticmethod
    def _stop(proc, grace=10):
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _node_cgroups(self):
        """Every cgroup directory slurmd made for this cluster's nodes, deepest first."""
        found = []
        if not os.path.isdir(CGROUP_V1):
            return found
        for ctrl in os.listdir(CGROUP_V1):
            for n in self.nodes:
                top = os.path.join(CGROUP_V1, ctrl, f"slurm_{n.name}")
                if os.path.isdir(top) and not os.path.islink(os.path.join(CGROUP_V1, ctrl)):
                    for root, dirs, _ in os.walk(top, topdown=False):
                        found.append(root)
        return found

    def _kill_cgroups(self):
        """Whatever is left in the nodes' cgroups (slurmstepd, job processes) is
        killed, then the directories go."""
        cgs = self._node_cgroups()
        for cg in cgs:
            try:
                with open(os.path.join(cg, "cgroup.procs")) as f:
                    for pid in f.read().split():
                        try:
                            os.kill(int(pid), signal.SIGKILL)
                        except ProcessLookupError:
                            pass
            except OSError:
                pass
        for cg in cgs:
            try:
                wait_until(lambda cg=cg: not open(os.path.join(cg, "cgroup.procs")).read().strip()
                           if os.path.isdir(cg) else True, 5, f"{cg} to empty")
                os.rmdir(cg)
            except (OSError, AssertionError):
                pass

    # ------------------------------------------------------------------ the pieces

    def _make_network(self):
        sw = self.switch
        _ip("netns", "add", sw)
        self._made_netns.append(sw)
        _ip("-n", sw, "link", "add", self.bridge, "type", "bridge")
        _ip("-n", sw, "link", "set", self.bridge, "up")
        self._bridge_made = True
        self._plug(self.head_if, f"s{self.tag}hp")
        _ip("addr", "add", f"{self.head_addr}/24", "dev", self.head_if)
        _ip("link", "set", self.head_if, "up")
        for n in self.nodes:
            _ip("netns", "add", n.netns)
            self._made_netns.append(n.netns)
            self._plug(n.ns_if, n.host_if)
            _ip("link", "set", n.ns_if, "netns", n.netns)
            _ip("-n", n.netns, "addr", "add", f"{n.addr}/24", "dev", n.ns_if)
            _ip("-n", n.netns, "link", "set", n.ns_if, "up")
            _ip("-n", n.netns, "link", "set", "lo", "up")

    def _plug(self, end, port):
        """A veth pair: end stays here, port becomes a port of the switch's bridge."""
        _ip("link", "add", end, "type", "veth", "peer", "name", port)
        _ip("link", "set", port, "netns", self.switch)
        _ip("-n", self.switch, "link", "set", port, "master", self.bridge)
        _ip("-n", self.switch, "link", "set", port, "up")

    def _make_gpus(self):
        for n in self.nodes:
            for path in n.gpus:
                minor = int(re.search(r"(\d+)$", path).group(1))
                os.mknod(path, 0o666 | 0o020000, os.makedev(195, minor))

    def _write_config(self):
        d = self.dir
        host = socket.gethostname().split(".")[0]
        cg = self.proctrack == "cgroup"
        lines = [
            "ClusterName=labdtest",
            f"SlurmctldHost={host}({self.head_addr})",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"SlurmctldPort={self.ctld_port}",
            f"SlurmdPort={SLURMD_PORT}",
            f"SlurmctldParameters=",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={d}/munge/munge.socket",
            f"StateSaveLocation={d}/state",
            f"SlurmdSpoolDir={d}/spool/%n",
            f"SlurmctldPidFile={d}/run/slurmctld.pid",
            f"SlurmdPidFile={d}/run/slurmd-%n.pid",
            f"SlurmctldLogFile={d}/log/slurmctld.log",
            f"SlurmdLogFile={d}/log/slurmd-%n.log",
            "ProctrackType=proctrack/cgroup" if cg else "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/cgroup" if cg else "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "SchedulerType=sched/backfill",
            "SchedulerParameters=sched_interval=1",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "GresTypes=gpu",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/filetxt",
            f"JobCompLoc={d}/log/jobcomp.txt",
            "MpiDefault=none",
            "ReturnToService=2",
            f"SlurmdTimeout={self.slurmd_timeout}",
            "SlurmctldTimeout=10",
            "MessageTimeout=5",
            "MinJobAge=300",
            "KillWait=2",
            "InactiveLimit=0",
            "SwitchType=switch/none",
        ]
        for n in self.nodes:
            lines.append(f"NodeName={n.name} NodeAddr={n.addr} NodeHostname={host} "
                         f"CPUs={self.cpus} RealMemory={self.memory_mb} "
                         f"Gres=gpu:{self.gpus_per_node} State=UNKNOWN")
        lines.append("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        with open(self.conf, "w") as f:
            f.write("\n".join(l for l in lines if not l.endswith("=")) + "\n")
        with open(os.path.join(d, "etc", "cgroup.conf"), "w") as f:
            f.write("CgroupPlugin=autodetect\nIgnoreSystemd=yes\nConstrainCores=no\n"
                    f"ConstrainRAMSpace={'yes' if cg else 'no'}\n"
                    f"ConstrainDevices={'yes' if cg else 'no'}\n")
        with open(os.path.join(d, "etc", "gres.conf"), "w") as f:
            f.write("AutoDetect=off\n")
            for n in self.nodes:
                for path in n.gpus:
                    f.write(f"NodeName={n.name} Name=gpu File={path}\n")

    def _start_munged(self):
        md = os.path.join(self.dir, "munge")
        os.makedirs(md)
        key = os.path.join(md, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        import pwd
        m = pwd.getpwnam("munge")
        os.chown(md, m.pw_uid, m.pw_gid)
        os.chmod(md, 0o755)
        os.chown(key, m.pw_uid, m.pw_gid)
        os.chmod(key, 0o400)
        self.munge_socket = os.path.join(md, "munge.socket")
        self.munged = subprocess.Popen(
            ["runuser", "-u", "munge", "--", "munged", "-F", "--force",
             f"--socket={self.munge_socket}", f"--key-file={key}",
             f"--log-file={md}/munged.log", f"--pid-file={md}/munged.pid",
             f"--seed-file={md}/munged.seed"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.dir, "log", "munged.err"), "w"))

        def answers():
            if self.munged.poll() is not None:
                raise RuntimeError(f"munged exited: {self._tail('log/munged.err')}")
            r = subprocess.run(f"munge -n -S {self.munge_socket} | unmunge -S {self.munge_socket}",
                               shell=True, capture_output=True)
            return r.returncode == 0

        wait_until(answers, 10, "munged to answer")

    def _start_slurmctld(self):
        self.slurmctld = subprocess.Popen(
            ["slurmctld", "-D", "-c", "-i", "-f", self.conf],
            env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def up():
            if self.slurmctld.poll() is not None:
                raise RuntimeError(f"slurmctld exited: {self._tail('log/slurmctld.log')}")
            return "is UP" in self.scontrol("ping", check=False).stdout

        wait_until(up, 15, "slurmctld to answer scontrol ping")

    def restart_slurmctld(self):
        """SIGTERM and start again with its saved state (running jobs stay)."""
        self.stop_slurmctld()
        self.start_slurmctld()

    def stop_slurmctld(self):
        """SIGTERM, waited for: clients then fail ("Unable to contact slurm controller")."""
        self._stop(self.slurmctld)

    def start_slurmctld(self):
        """Starts it again on its saved state (after stop_slurmctld)."""
        self.slurmctld = subprocess.Popen(
            ["slurmctld", "-D", "-i", "-f", self.conf],
            env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: "is UP" in self.scontrol("ping", check=False).stdout, 15,
                   "slurmctld to answer again")

    def node(self, short):
        for n in self.nodes:
            if short in (n.short, n.name):
                return n
        raise KeyError(short)

    def start_node(self, short):
        n = self.node(short)
        os.makedirs(os.path.join(self.dir, "spool", n.name), exist_ok=True)
        n.proc = n.popen(["slurmd", "-D", "-N", n.name, "-f", self.conf],
                         env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return n

    def kill_node(self, short):
        """SIGKILL the node's slurmd, as a machine that died: slurmctld marks it down
        after SlurmdTimeout. What runs in its job cgroups keeps running (as on a node
        that lost only its network) until kill_node_jobs() or close()."""
        n = self.node(short)
        if n.proc and n.proc.poll() is None:
            n.proc.kill()
            n.proc.wait()
        return n

    def wait_nodes_idle(self, timeout=20):
        names = {n.name for n in self.nodes if n.proc is not None}

        def idle():
            for n in self.nodes:
                if n.proc is not None and n.proc.poll() is not None:
                    raise RuntimeError(f"slurmd {n.name} exited: "
                                       f"{self._tail(f'log/slurmd-{n.name}.log')}")
            states = self.node_states()
            return all(states.get(x) == "idle" for x in names)

        wait_until(idle, timeout, f"nodes {sorted(names)} to be idle")

    # ------------------------------------------------------------------ clients

    def _run(self, argv, check=True, timeout=30):
        r = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: rc {r.returncode}: {r.stderr.strip()}")
        return r

    def scontrol(self, *args, check=True):
        return self._run(["scontrol", *args], check=check)

    def sbatch(self, *args):
        """Submits; returns the job id."""
        return int(self._run(["sbatch", "--parsable", "--no-requeue", "--output=/dev/null",
                              *args]).stdout.strip().split(";")[0])

    def scancel(self, jid):
        self._run(["scancel", str(jid)])

    def node_states(self):
        """{node name: state} as sinfo -N says (idle, alloc, mix, down*, ...)."""
        r = self._run(["sinfo", "-h", "-N", "-o", "%N %T"], check=False)
        out = {}
        for line in r.stdout.splitlines():
            parts = line.split()
            if len(parts) == 2:
                out[parts[0]] = parts[1]
        return out

    def job(self, jid):
        """scontrol show job -d -o as a dict (JobState, Reason, BatchHost, GRES ...)."""
        r = self.scontrol("show", "job", "-d", "-o", str(jid), check=False)
        out = {}
        for tok in r.stdout.split():
            if "=" in tok:
                k, v = tok.split("=", 1)
                out.setdefault(k, v)
        return out

    def wait_state(self, jid, state, timeout=20):
        return wait_until(lambda: (j := self.job(jid)).get("JobState") == state and j,
                          timeout, f"job {jid} to be {state}", interval=0.05)

    def _tail(self, rel, n=15):
        try:
            with open(os.path.join(self.dir, rel), errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError as e:
            return f"({rel}: {e})"

    def log(self, which):
        """A daemon's log text: 'slurmctld', 'munged' or a node's short name."""
        if which == "slurmctld":
            return self._tail("log/slurmctld.log", 10000)
        if which == "munged":
            return self._tail("munge/munged.log", 10000)
        return self._tail(f"log/slurmd-{self.node(which).name}.log", 10000)
