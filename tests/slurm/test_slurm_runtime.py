"""labd on Slurm end to end (docs/slurm.md): the private cluster (cluster.py), a head
with the Slurm backend and a `labd node` on each Slurm node (labd_slurm.py).

- a runtime is a Slurm job on a node, JupyterLab answers through the head's proxy (the
  data port, a kernel over a WebSocket); stopped, its Slurm job ends and the home is
  unmounted; the ledger entry and the quota's use are exact to the second; the user
  deleted, a node archives the image in the shared folder;
- a job and its warm pool run on a node as a Slurm job of their own, the next job reuses
  the pool;
- a shell into a job on a node: the terminal's WebSocket on the head crosses to the node's
  data port, takes keystrokes and a resize;
- a GPU runtime sees exactly the device Slurm allocated on its node (GRES index mapped
  through the node's gres.conf order to the device's minor);
- slurmctld restarted right after a start request: the start goes on, one Slurm job;
- a node that dies: its runtime ends with the node named; a start that Slurm places on
  the other node while the dead node still holds the home is refused with the reason
  (never mounted twice); once the node has let go, the user starts on the other node
  with the same home.
"""

import json
import os
import subprocess
import time

import pytest

from cluster import Cluster, wait_until
from labd_slurm import LabOnSlurm
from labd_harness import (SLOW, WebSocket, jupyter_execute, open_kernel_channel, parse_api_time,
                          stop_runtime, wait_runtime)
from runtime_shell import job_shell_run
from jobs_lib import usage_entries

START = 90 * SLOW


def leftovers(dirs, cgroups):
    """Mounts, loop devices and cgroups the module's nodes left behind."""
    left = []
    with open("/proc/self/mountinfo") as f:
        left += [ln.split()[4] for ln in f if any(d in ln.split()[4] for d in dirs)]
    for dev in os.listdir("/sys/block"):
        try:
            with open(f"/sys/block/{dev}/loop/backing_file") as f:
                backing = f.read().strip()
        except OSError:
            continue
        left += [f"/dev/{dev}: {backing}" for d in dirs if backing.startswith(d)]
    for ctrl in os.listdir("/sys/fs/cgroup"):
        left += [f"{ctrl}/{cg}" for cg in cgroups
                 if os.path.isdir(os.path.join("/sys/fs/cgroup", ctrl, cg))]
    return left


@pytest.fixture(scope="module")
def lab():
    c = Cluster()
    c.start()
    dirs, cgroups = [c.dir], []
    try:
        # the head's GPU count: the cluster's (its queue admits GPU starts; which GPU
        # is Slurm's choice, on the node)
        with LabOnSlurm(c, head_sections={"gpu": {"stand_in": "4"}}) as lab:
            dirs += [n.dir for n in lab.nodes.values()]
            cgroups += [n.cgroup_parent() for n in lab.nodes.values()]
            yield lab
    finally:
        c.close()
    # torn down completely, also after a dead node: no mount, loop device or cgroup left
    assert leftovers(dirs, cgroups) == []


def start(u):
    r = u.post("/api/v1/me/runtime", json={"type": "cpu"})
    assert r.status == 202, r
    return r.json["runtime"]


def image_has_mmp(path):
    with open(path, "rb") as f:
        f.seek(1024 + 0x60)
        return int.from_bytes(f.read(4), "little") & 0x0100 != 0


def put_file(u, name, text):
    r = u.put(f"/user/{u.user}/api/contents/{name}",
              json={"type": "file", "format": "text", "content": text})
    assert r.status in (200, 201), r
    r = u.get(f"/user/{u.user}/api/contents/{name}")
    assert r.status == 200 and r.json["content"] == text, r


def test_runtime_runs_on_a_node_and_jupyterlab_answers_through_the_proxy(lab):
    u = lab.user()
    first = start(u)
    assert first["state"] == "starting", first
    rt = wait_runtime(u, "running", timeout=START)
    jid, state, host = lab.runtime_job(rt["id"])
    assert state == "RUNNING", (jid, state, host)
    short = lab.node_short(host)
    assert short in lab.nodes, host
    other = next(s for s in lab.nodes if s != short)
    # the proxy reaches Jupyter on the node through its data port, HTTP and WebSocket
    r = u.get(f"/user/{u.user}/api/status")
    assert r.status == 200 and "started" in r.json, r
    kid, ws = open_kernel_channel(lab.head, u)
    try:
        result, _, _ = jupyter_execute(ws, "import socket; 6 * 7")
        assert result == "42", result
    finally:
        ws.close()
    put_file(u, "hello.txt", "from " + short)
    # the home: in the shared folder, with multiple-mount protection, mounted on that
    # node only
    images = [f for f in os.listdir(lab.homes) if f.endswith(".img")]
    assert len(images) == 1, images
    assert image_has_mmp(os.path.join(lab.homes, images[0]))
    assert len(lab.nodes[short].home_mounts()) == 1
    assert lab.nodes[other].home_mounts() == []
    # the node's doctor takes the running runtime's home, cgroups and run dir for its own
    rc, out = lab.nodes[short].doctor()
    assert rc == 0 and "LEFT" not in out, f"{host}: {rc}\n{out}"

    stopped = stop_runtime(u, 60 * SLOW)
    assert stopped["state"] == "stopped", stopped
    wait_until(lambda: lab.runtime_job(rt["id"])[1] in ("CANCELLED", "COMPLETED"), 20 * SLOW,
               "the runtime's Slurm job to end")
    wait_until(lambda: lab.nodes[short].home_mounts() == [], 20 * SLOW,
               "the home to be unmounted on the node")
    # the ledger bills ready to end, to the second; the quota counts the same seconds
    es = usage_entries(u)
    assert len(es) == 1, es
    e = es[0]
    ready, ended = parse_api_time(stopped["ready_at"]), parse_api_time(stopped["ended_at"])
    assert (e["start_s"], e["end_s"], e["billable_s"]) == (ready, ended, ended - ready), (e, stopped)
    q = u.get("/api/v1/me/quota").json
    assert q["used"]["cpu_s_per_24h"] == e["billable_s"], (q, e)
    # the storage use is the node's answer about the shared image (the file written on
    # the node is in it)
    assert q["storage"]["used_bytes"] and q["storage"]["used_bytes"] > 0, q
    # the user deleted: a node archives the image beside the shared ones
    assert lab.admin().delete(f"/api/v1/users/{u.user}").status == 204
    archive = os.path.join(lab.homes, "archive")
    wait_until(lambda: images[0] not in os.listdir(lab.homes) and os.path.isdir(archive) and
               any(f.startswith(images[0][:-4] + "-" + u.user) for f in os.listdir(archive)),
               20 * SLOW, "the deleted user's image in the shared archive")


def test_a_job_and_its_warm_pool_run_on_a_node(lab):
    u = lab.user("sj")
    stamp = ["/bin/sh", "-c", "hostname; echo ran"]
    r = u.post("/api/v1/jobs", json={"name": "on-slurm-1", "command": stamp, "keep_alive_s": 60})
    assert r.status == 201, r
    job = r.json

    def ended(jid):
        j = u.get(f"/api/v1/jobs/{jid}").json
        return j if j["status"] in ("Completed", "Failed", "Stopped") else None

    first = wait_until(lambda: ended(job["id"]), START, "the first job to end")
    assert first["status"] == "Completed", first
    pools = {n: v for n, v in lab.slurm_jobs().items() if n.startswith("labd-pool-")}
    assert len(pools) == 1, pools
    (pool_name, [(pjid, pstate, phost)]), = pools.items()
    assert pstate == "RUNNING" and lab.node_short(phost), pools
    wp = first["warm_pool"]
    assert wp and wp["status"] == "Available", first
    # the next job with the same criteria runs in the same sandbox on the same node
    r = u.post("/api/v1/jobs", json={"name": "on-slurm-2", "command": stamp, "keep_alive_s": 60})
    assert r.status == 201, r
    second = wait_until(lambda: ended(r.json["id"]), START, "the second job to end")
    assert second["status"] == "Completed", second
    assert second["warm_pool"]["reused"] is True and second["warm_pool"]["id"] == wp["id"], second
    assert lab.slurm_jobs()[pool_name] == [(pjid, "RUNNING", phost)]
    # the warm pool between jobs is the node's own, not a crash's leftover
    rc, out = lab.nodes[lab.node_short(phost)].doctor()
    assert rc == 0 and "LEFT" not in out, f"{phost}: {rc}\n{out}"
    # each job's log is on the head, whole by the time the job reads as ended (pulled
    # from its node's data port; docs/slurm.md "Job logs")
    for jid in (job["id"], r.json["id"]):
        log = u.get(f"/api/v1/jobs/{jid}/logs")
        assert log.status == 200 and b"ran\n" in log.body, (jid, log)
    # the head's copy is labd-web's in a folder it may write (root:labd 0770), and goes
    # with its job
    head_log = os.path.join(lab.head.state_dir, "joblogs", f"{job['id']}.log")
    st, dst = os.stat(head_log), os.stat(os.path.dirname(head_log))
    assert (st.st_uid != 0, st.st_mode & 0o777, dst.st_uid, dst.st_mode & 0o777) == \
        (True, 0o640, 0, 0o770)
    assert u.delete(f"/api/v1/jobs/{job['id']}").status == 204
    wait_until(lambda: not os.path.exists(head_log), 10 * SLOW, "the head's copy to go")
    # released: the pool's Slurm job ends too
    assert u.delete(f"/api/v1/warm-pools/{wp['id']}").status == 204
    wait_until(lambda: lab.slurm_jobs()[pool_name][0][1] in ("CANCELLED", "COMPLETED"),
               30 * SLOW, "the pool's Slurm job to end")


def test_a_shell_into_a_job_on_a_node(lab):
    """The job's terminal WebSocket on the head reaches the pty on the node (the data
    port, a one-time token); keystrokes and a resize cross."""
    u = lab.user("sh")
    r = u.post("/api/v1/jobs", json={"name": "shell-on-slurm",
                                     "command": ["/bin/sh", "-c", "exec sleep 300"]})
    assert r.status == 201, r
    jid = r.json["id"]
    wait_until(lambda: u.get(f"/api/v1/jobs/{jid}").json["secondary_status"] == "Training",
               START, "the job to train on its node")
    r = u.post("/api/v1/me/tokens", json={"name": "shell", "password": u.password,
                                          "scopes": ["jobs"]})
    assert r.status == 201, r
    ws = WebSocket(lab.head.port, f"/api/v1/jobs/{jid}/shell?cols=80&rows=24",
                   headers={"Authorization": f"Bearer {r.json['token']}"}).expect_open()
    try:
        assert "\n42\n" in job_shell_run(ws, "echo $((6*7))")
        ws.send_text(json.dumps({"type": "resize", "cols": 91, "rows": 33}))
        assert "33 91" in job_shell_run(ws, "stty size")
    finally:
        ws.close()
    assert u.post(f"/api/v1/jobs/{jid}/stop", json={}).status == 202
    wait_until(lambda: u.get(f"/api/v1/jobs/{jid}").json["status"] in ("Stopped", "Failed"),
               30 * SLOW, "the job to stop")


def test_a_gpu_runtime_gets_the_device_slurm_allocated(lab):
    # another Slurm user holds both of n1's GPUs: labd's runtime goes to n2, where
    # Slurm's GRES index 0 is the device of minor 2, not 0
    n1, n2 = lab.nodes["n1"].node, lab.nodes["n2"].node
    other = lab.cluster.sbatch("--mem=20M", "--gres=gpu:2", "-w", n1.name, "--wrap", "sleep 300")
    lab.cluster.wait_state(other, "RUNNING")
    u = lab.user("sg")
    try:
        r = u.post("/api/v1/me/runtime", json={"type": "gpu"})
        assert r.status == 202, r
        rt = wait_runtime(u, "running", timeout=START)
    finally:
        lab.cluster.scancel(other)
    jid, state, host = lab.runtime_job(rt["id"])
    node = lab.nodes[lab.node_short(host)].node
    assert node.name == n2.name, host
    gres = lab.cluster.job(jid)["GRES"]  # gpu:1(IDX:i): i in the node's gres.conf order
    idx = int(gres.split("IDX:")[1].rstrip(")"))
    minor = int(node.gpus[idx].rsplit("nvidia", 1)[1])
    kid, ws = open_kernel_channel(lab.head, u)
    try:
        seen, _, _ = jupyter_execute(
            ws, "import os; ' '.join(sorted(d for d in os.listdir('/dev') if d[6:].isdigit() "
                "and d.startswith('nvidia')))")
    finally:
        ws.close()
    assert seen == repr(f"nvidia{minor}"), (seen, gres, node.name)
    assert stop_runtime(u, 60 * SLOW)["state"] == "stopped"


def test_the_controller_restarted_mid_start(lab):
    """slurmctld is away when the start request comes and back with its state a moment
    later: the start goes on (a refused or unanswered submit is retried or reconciled by
    the job's name), exactly one Slurm job holds the runtime."""
    u = lab.user("sc")
    lab.cluster.stop_slurmctld()
    try:
        first = start(u)
        time.sleep(2)  # the backend's submit meets no controller
        assert u.get("/api/v1/me/runtime").json["runtime"]["state"] == "starting"
    finally:
        lab.cluster.start_slurmctld()
    rt = wait_runtime(u, "running", timeout=START)
    assert rt["id"] == first["id"]
    jobs = lab.slurm_jobs().get(f"labd-rt-{rt['id']}", [])
    assert [s for _, s, _ in jobs].count("RUNNING") == 1, jobs
    assert u.get(f"/user/{u.user}/api/status").status == 200
    assert stop_runtime(u, 60 * SLOW)["state"] == "stopped"


def test_a_dead_node_ends_its_runtime_and_the_home_is_never_mounted_twice(lab):
    cluster = lab.cluster
    u = lab.user("sn")
    start(u)
    rt = wait_runtime(u, "running", timeout=START)
    _, _, host = lab.runtime_job(rt["id"])
    dead = lab.node_short(host)
    alive = next(s for s in lab.nodes if s != dead)
    put_file(u, "notes.txt", "written on " + dead)

    # the node drops off the network: slurmd and labd node gone, its sandbox (and the
    # home's mount) still there, as on a machine that lost only its network
    cluster.kill_node(dead)
    lab.nodes[dead].kill()
    t0 = time.monotonic()
    ended = wait_runtime(u, ("stopped", "failed"), timeout=90 * SLOW)
    took = time.monotonic() - t0
    assert lab.nodes[dead].node.name in (ended["reason"] or ""), ended
    assert "fail" in ended["reason"], ended
    print(f"\nrun ended {took:.1f} s after its node died: {ended['reason']}")
    # billed to the end labd recorded, with that reason
    e = next(x for x in usage_entries(u) if x["runtime_id"] == ended["id"])
    ready, end = parse_api_time(ended["ready_at"]), parse_api_time(ended["ended_at"])
    assert (e["end_s"], e["billable_s"], e["end_reason"]) == \
        (end, end - ready, ended["reason"]), (e, ended)
    assert len(lab.nodes[dead].home_mounts()) == 1

    # Slurm places the next start on the other node: the home is still held there
    start(u)
    refused = wait_runtime(u, ("failed", "stopped", "running"), timeout=START)
    assert refused["state"] == "failed", refused
    assert "mounted on another node" in (refused["reason"] or ""), refused
    _, _, host2 = lab.runtime_job(refused["id"])
    assert lab.node_short(host2) == alive, (host2, refused)
    assert lab.nodes[alive].home_mounts() == []

    # the dead node really goes (its mounts with it): the user starts on the other node
    lab.nodes[dead].die()
    start(u)
    rt = wait_runtime(u, "running", timeout=START)
    _, _, host3 = lab.runtime_job(rt["id"])
    assert lab.node_short(host3) == alive
    r = u.get(f"/user/{u.user}/api/contents/notes.txt")
    assert r.status == 200 and r.json["content"] == "written on " + dead, r
    assert len(lab.nodes[alive].home_mounts()) == 1
    assert stop_runtime(u, 60 * SLOW)["state"] == "stopped"
