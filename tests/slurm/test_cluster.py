"""The private cluster itself: what the Slurm backend's tests stand on.

Two nodes, each in its own network namespace with its own 198.18.N.x address, their
jobs placed by Slurm, stand-in GPUs handed out per node, a killed node noticed within
seconds (SlurmdTimeout), and nothing left behind after teardown."""

import os
import stat
import subprocess
import time

from cluster import Cluster, wait_until


def test_two_nodes_each_in_its_own_network_namespace(cluster):
    states = cluster.node_states()
    assert sorted(states) == sorted(n.name for n in cluster.nodes), states
    assert set(states.values()) == {"idle"}, states
    n1, n2 = cluster.nodes
    assert n1.addr != n2.addr and n1.addr.startswith("198.18.") and n2.addr.startswith("198.18.")
    # each node sees its own address and not the other's; the head is reachable
    a1 = n1.run(["ip", "-4", "-o", "addr", "show"]).stdout
    assert f" {n1.addr}/" in a1 and f" {n2.addr}/" not in a1 and cluster.head_addr not in a1
    ping = n1.run(["ping", "-c1", "-W2", cluster.head_addr]) if os.path.exists("/bin/ping") else None
    assert ping is None or ping.returncode == 0, ping.stderr
    # slurmd listens in the node's namespace, not in the host's
    ss = n1.run(["ss", "-Htln"]).stdout
    assert ":6818" in ss, ss
    assert ":6818 " not in subprocess.run(["ss", "-Htln"], capture_output=True, text=True).stdout


def test_stand_in_gpus_are_character_devices_slurm_hands_out(cluster, tmp_path):
    n1, n2 = cluster.nodes
    for path in n1.gpus + n2.gpus:
        st = os.stat(path)
        assert stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 195, path
    assert {os.minor(os.stat(p).st_rdev) for p in n1.gpus}.isdisjoint(
        {os.minor(os.stat(p).st_rdev) for p in n2.gpus})
    os.chmod(tmp_path, 0o777)
    jobs = []
    for n in cluster.nodes:
        out = tmp_path / f"{n.short}.out"
        jid = cluster.sbatch("--mem=20M", "--gres=gpu:2", "-w", n.name, f"--output={out}",
                             "--wrap", "echo CUDA=$CUDA_VISIBLE_DEVICES; sleep 1")
        jobs.append((n, jid, out))
    for n, jid, out in jobs:
        j = cluster.wait_state(jid, "RUNNING")
        # each node's indices start at 0 (multiple slurmd): the backend maps them
        # through the node's own gres.conf order
        assert j["BatchHost"] == n.name and j.get("GRES", "").startswith("gpu:2(IDX:0-1)"), j
    for n, jid, out in jobs:
        wait_until(lambda jid=jid: cluster.job(jid).get("JobState") == "COMPLETED", 30,
                   f"job {jid} to complete", interval=0.1)
        assert out.read_text().strip() == "CUDA=0,1"
    # three GPUs on a two-GPU node: refused at submit, as on a real cluster
    r = subprocess.run(["sbatch", "--parsable", "--mem=20M", "--gres=gpu:3", "--wrap", "true"],
                       env=cluster.env, capture_output=True, text=True)
    assert r.returncode != 0 and "not available" in r.stderr, r


def test_a_killed_node_goes_down_and_its_job_ends_node_fail(cluster):
    n1, n2 = cluster.nodes
    jid = cluster.sbatch("--mem=20M", "-w", n1.name, "--wrap", "sleep 300")
    cluster.wait_state(jid, "RUNNING")
    t = time.monotonic()
    cluster.kill_node("n1")
    wait_until(lambda: cluster.node_states().get(n1.name, "").startswith("down"), 60,
               f"{n1.name} to be down", interval=0.2)
    took = time.monotonic() - t
    j = cluster.wait_state(jid, "NODE_FAIL")
    assert j["Reason"] == "NodeDown", j
    assert took < 40, f"node noticed down after {took:.1f} s (SlurmdTimeout={cluster.slurmd_timeout})"
    # the other node still takes work; n1 comes back when its slurmd does
    jid2 = cluster.sbatch("--mem=20M", "--wrap", "sleep 1")
    assert cluster.wait_state(jid2, "RUNNING")["BatchHost"] == n2.name
    cluster.start_node("n1")
    cluster.wait_nodes_idle(timeout=30)


def test_teardown_leaves_nothing_behind():
    c = Cluster(nodes=2, gpus_per_node=1)
    c.start()
    d, names, bridge = c.dir, [n.name for n in c.nodes], c.bridge
    pids = [c.munged.pid, c.slurmctld.pid] + [n.proc.pid for n in c.nodes]
    jid = c.sbatch("--mem=20M", "--wrap", "sleep 3017")
    c.wait_state(jid, "RUNNING")
    c.close()
    assert not os.path.exists(d)
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    for name in names:
        assert name not in netns and f"{name}h" not in links
        for ctrl in os.listdir("/sys/fs/cgroup"):
            assert not os.path.exists(f"/sys/fs/cgroup/{ctrl}/slurm_{name}"), ctrl
    assert bridge not in links
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or \
            open(f"/proc/{pid}/stat").read().split()[2] == "Z", pid
    # the job's sleep went with its node's cgroups
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "sleep 3017" not in ps
