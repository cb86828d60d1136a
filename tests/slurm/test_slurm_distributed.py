"""A training job on several hosts (docs/jobs.md "Several hosts", docs/slurm.md "Jobs on
several nodes") on the private cluster (cluster.py) with labd on it (labd_slurm.py).

The head keeps [slurm] job_addresses, a part of the cluster's /24 no node uses, for the
hosts' peer addresses (peer0 in each sandbox).

- `instance_count` above `[slurm] max_instances` is refused at submit, naming the field;
- a two-node CPU job with torch's gloo completes: one Slurm job over both nodes, each
  rank joins the process group through the environment labd sets (MASTER_ADDR,
  MASTER_PORT, NODE_RANK, NNODES, GLOO_SOCKET_IFNAME), an all_reduce sums both ranks'
  numbers; the job's one log holds each host's lines with its prefix; the ledger
  charges two seconds for each of its seconds;
- the same through torchrun's static rendezvous: each host's worker knows its host from
  SM_CURRENT_HOST and resourceconfig.json;
- a shell into each host of a running two-node job (`?host=algo-K`) is in that host's
  sandbox, also after a restart of the head; a host the job does not have is refused,
  naming `host`;
- the working folder and the input channels, in the home that only algo-1 mounts, reach
  algo-2 before the command: the same script runs on the same data on both;
- a two-node job whose rank 1 exits 3 is Failed with that code, and algo-1's command,
  still running, is stopped (its TERM handler's line reaches the log);
- a head backed up while a job prints and restored into a new state dir goes on with that
  job, and the job's log on it has every line.
"""

import glob
import json
import os
import subprocess

import pytest

from cluster import Cluster, wait_until
from labd_slurm import LabOnSlurm
from labd_harness import SLOW, WebSocket
from runtime_shell import job_shell_run

START = 120 * SLOW
PYTHON = "/usr/bin/python3"  # the host's, with python3-torch; the sandbox sees /usr

GLOO = r"""
import os, torch, torch.distributed as dist
rank, world = int(os.environ["NODE_RANK"]), int(os.environ["NNODES"])
print(f"rank {rank} joins {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)
dist.init_process_group("gloo", rank=rank, world_size=world)
print(f"rank {rank} joined", flush=True)
t = torch.tensor([rank + 1.0])
dist.all_reduce(t)
print(f"rank {rank} of {world}: sum {int(t.item())} via {os.environ['GLOO_SOCKET_IFNAME']}",
      flush=True)
dist.destroy_process_group()
"""

# torchrun's own rendezvous (static, at MASTER_ADDR:MASTER_PORT) starts one worker per
# host; each worker joins through what torchrun hands it, and says which host it is by
# the managed training conventions. Debian's torch 1.13 needs the --redirects/--tee
# mappings (docs/jobs.md "Several GPUs").
DDP = r"""
import json, os, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([rank + 1.0])
dist.all_reduce(t)
with open("/opt/ml/input/config/resourceconfig.json") as fh:
    rc = json.load(fh)
print(f"worker {rank} of {world} on {os.environ['SM_CURRENT_HOST']} "
      f"({rc['current_host']} of {','.join(rc['hosts'])}): sum {int(t.item())}", flush=True)
dist.destroy_process_group()
"""
TORCHRUN = ("cat >/tmp/ddp.py <<'EOF'\n" + DDP + "EOF\n"
            "exec torchrun --nnodes=$NNODES --node_rank=$NODE_RANK --nproc_per_node=1 "
            "--master_addr=$MASTER_ADDR --master_port=$MASTER_PORT "
            "--redirects 9:1 --tee 9:1 /tmp/ddp.py")

# rank 1 fails at once; rank 0 runs until labd stops it, and says so
FAILS = ('trap \'echo "rank $NODE_RANK stopped"; exit 143\' TERM; '
         'if [ "$NODE_RANK" = 1 ]; then echo "rank 1 fails"; exit 3; fi; '
         'echo "rank 0 waits"; sleep 300 & wait')


@pytest.fixture(scope="module")
def lab():
    c = Cluster()
    c.start()
    try:
        with LabOnSlurm(c, head_sections={"slurm": {
                "max_instances": "2", "job_addresses": f"{c.subnet}.192/26"}}) as lab:
            yield lab
    finally:
        c.close()


def pool_jobs(lab):
    """{job name: [(state, node count, node list)]} of labd's pool jobs, all states."""
    r = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%j|%T|%D|%N"],
                       env=lab.cluster.env, capture_output=True, text=True)
    out = {}
    for line in r.stdout.splitlines():
        name, state, count, nodes = line.split("|")
        if name.startswith("labd-pool-"):
            out.setdefault(name, []).append((state, int(count), nodes))
    return out


def ended(u, jid):
    j = u.get(f"/api/v1/jobs/{jid}").json
    return j if j["status"] in ("Completed", "Failed", "Stopped") else None


def job_log(u, jid):
    r = u.get(f"/api/v1/jobs/{jid}/logs")
    assert r.status == 200, r
    return r.body.decode()


def node_logs(lab, jid):
    """The job's log as each node wrote it (its own state dir)."""
    out = ""
    for short, n in lab.nodes.items():
        for path in glob.glob(f"{n.dir}/**/joblogs/{jid}.log", recursive=True):
            with open(path, errors="replace") as fh:
                out += f"\n--- {short}: {path}\n{fh.read()[-2000:]}"
    return out


def peer_state(lab):
    """peer0, the neighbours and the addresses as each node's sandboxes see them."""
    out = ""
    for short, n in lab.nodes.items():
        for pid in sorted(n.sandbox_pids())[:1]:
            for argv in (["ip", "-br", "addr"], ["ip", "neigh"], ["ip", "-s", "link", "show",
                                                                  "peer0"]):
                r = subprocess.run(["nsenter", "-t", str(pid), "-n", *argv],
                                   capture_output=True, text=True)
                out += f"\n--- {short} sandbox {pid}: {' '.join(argv)}\n{r.stdout}{r.stderr}"
    return out


def failure(lab, u, jid):
    return (f"job {jid}: {u.get(f'/api/v1/jobs/{jid}').json}\n--- its log\n"
            + u.get(f"/api/v1/jobs/{jid}/logs").body.decode(errors="replace")
            + node_logs(lab, jid) + peer_state(lab) + "\n--- head\n"
            + lab.head.log_tail(60) + "".join(f"\n--- {s}\n{n.log()[-3000:]}"
                                             for s, n in lab.nodes.items()))


def test_instance_count_above_the_limit_is_refused(lab):
    u = lab.user("sd")
    r = u.post("/api/v1/jobs", json={"name": "too-many", "command": ["true"],
                                     "instance_count": 3})
    assert r.status == 400, r
    assert r.json["error"]["field"] == "instance_count", r.json
    assert "from 1 to 2" in r.json["error"]["message"], r.json


def run_on_two(lab, u, name, command, **fields):
    """Submits command as a job on two hosts and waits for its end: (id, job); a
    timeout shows each node's log and peer0 (failure())."""
    r = u.post("/api/v1/jobs", json={"name": name, "command": command,
                                     "instance_count": 2, "max_retries": 0, **fields})
    assert r.status == 201, r
    jid = r.json["id"]
    try:
        return jid, wait_until(lambda: ended(u, jid), START, f"the two-host job {name} to end")
    except AssertionError:
        raise AssertionError(failure(lab, u, jid))


def test_a_two_node_gloo_job_completes(lab):
    # torch's files read once here (the sandboxes share the host's page cache): a cold
    # import on a loaded machine takes minutes, which is not what this test measures
    subprocess.run([PYTHON, "-c", "import torch.distributed"], check=True, timeout=600)
    u = lab.user("sd")
    jid, job = run_on_two(lab, u, "gloo", [PYTHON, "-c", GLOO])
    assert job["status"] == "Completed", failure(lab, u, jid)
    # both ranks took part (1 + 2), each over peer0, and the one log has both hosts
    log = job_log(u, jid)
    assert "[algo-1] rank 0 of 2: sum 3 via peer0\n" in log, log
    assert "[algo-2] rank 1 of 2: sum 3 via peer0\n" in log, log
    # one Slurm job held both nodes; once labd let it go (a COMPLETING job lists only
    # the nodes still completing), Slurm shows both were given to it
    pools = wait_until(lambda: (lambda p: p if p and all(
        s in ("CANCELLED", "COMPLETED") for v in p.values() for s, _, _ in v) else None)(
            pool_jobs(lab)), 30 * SLOW, "the pool's Slurm job to end")
    assert [count for v in pools.values() for _, count, _ in v] == [2], pools
    # two hosts: each second is charged twice
    assert job["billable_s"] >= 1, job
    assert job["charged_s"] == 2 * job["billable_s"], job


# written into the home by a one-host job, then run from it on both hosts
TRAIN = (
    "import os, sys\n"
    "sys.path.insert(0, '.')\n"
    "from pkg.mod import V\n"
    "data = open(os.environ['SM_CHANNEL_TRAIN'] + '/part/x.txt').read().strip()\n"
    "print(os.environ['SM_CURRENT_HOST'], 'runs train.py: data', data, 'V', V, flush=True)\n")
WRITE = ("mkdir -p ddp/pkg data/train/part && cat > ddp/train.py <<'EOF'\n" + TRAIN + "EOF\n"
         "echo 'V = 7' > ddp/pkg/mod.py && echo 42 > data/train/part/x.txt")


def test_the_working_folder_and_inputs_reach_every_host(lab):
    """Only algo-1 mounts the home: before the command starts, it sends the working
    folder and the input channels to algo-2, which runs the same script on the same
    data (docs/jobs.md "Several hosts")."""
    u = lab.user("sd")
    r = u.post("/api/v1/jobs", json={"name": "write", "command": ["sh", "-c", WRITE]})
    assert r.status == 201, r
    wid = r.json["id"]
    job = wait_until(lambda: ended(u, wid), START, "the job that writes the files")
    assert job["status"] == "Completed", failure(lab, u, wid)
    jid, job = run_on_two(lab, u, "shared", [PYTHON, "train.py"], working_dir="ddp",
                          input_channels=[{"name": "train", "path": "data/train"}])
    assert job["status"] == "Completed", failure(lab, u, jid)
    log = job_log(u, jid)
    for k in (1, 2):
        assert f"[algo-{k}] algo-{k} runs train.py: data 42 V 7\n" in log, log
    assert "[algo-1] labd: sent 3 files (" in log, log
    assert "[algo-2] labd: fetched 3 files (" in log, log


def test_a_two_node_torchrun_job_completes(lab):
    subprocess.run([PYTHON, "-c", "import torch.distributed.run"], check=True, timeout=600)
    u = lab.user("sd")
    jid, job = run_on_two(lab, u, "torchrun", ["sh", "-c", TORCHRUN])
    assert job["status"] == "Completed", failure(lab, u, jid)
    log = job_log(u, jid)
    for k in (1, 2):
        line = f"[algo-{k}] worker {k - 1} of 2 on algo-{k} (algo-{k} of algo-1,algo-2): sum 3\n"
        assert line in log, log


def test_a_failed_rank_fails_the_job_and_stops_the_other(lab):
    u = lab.user("sd")
    jid, job = run_on_two(lab, u, "rank-fails", ["sh", "-c", FAILS])
    assert job["status"] == "Failed", failure(lab, u, jid)
    assert job["exit_code"] == 3, job
    # algo-1's command was still running: it was stopped, and its last words are in the
    # log (pulled whole when its own end came)
    wait_until(lambda: "[algo-1] rank 0 stopped\n" in job_log(u, jid), 60 * SLOW,
               "algo-1's job to be stopped")
    log = job_log(u, jid)
    assert "[algo-2] rank 1 fails\n" in log, log
    assert "[algo-1] rank 0 waits\n" in log, log


def shell(lab, u, jid, host):
    token = u.post("/api/v1/me/tokens", json={"name": f"shell-{host}-{os.urandom(3).hex()}",
                                              "password": u.password,
                                              "scopes": ["jobs"]})
    assert token.status == 201, token
    return WebSocket(lab.head.port, f"/api/v1/jobs/{jid}/shell?host={host}",
                     headers={"Authorization": f"Bearer {token.json['token']}"})


def refused_body(ws, status):
    """The JSON body of a refused WebSocket handshake with that status."""
    try:
        assert ws.status == status, ws.raw_head
        want = int(ws.header("Content-Length") or 0)
        while len(ws.buf) < want:
            more = ws.sock.recv(65536)
            assert more, ws.buf
            ws.buf += more
        return json.loads(ws.buf[:want])
    finally:
        ws.sock.close()


def test_a_shell_opens_on_each_host(lab):
    u = lab.user("sd")
    r = u.post("/api/v1/jobs", json={"name": "two-shells", "instance_count": 2,
                                     "command": ["sh", "-c", "exec sleep 300"]})
    assert r.status == 201, r
    jid = r.json["id"]
    try:
        wait_until(lambda: u.get(f"/api/v1/jobs/{jid}").json["secondary_status"] == "Training",
                   START, "the two-host job to train")
        for k in (1, 2):
            ws = shell(lab, u, jid, f"algo-{k}").expect_open()
            try:
                out = job_shell_run(ws, 'echo "on $SM_CURRENT_HOST: $(cat ~/.h 2>/dev/null)"; '
                                        f"echo {k} >~/.h")
                # each host's own sandbox: its name, and its own home (algo-2's is scratch)
                assert f"\non algo-{k}: \n" in out, out
            finally:
                ws.close()
        # neither node's doctor takes the running hosts' homes (algo-2's scratch home
        # included) for a crash's leftovers
        for n in lab.nodes.values():
            rc, out = n.doctor()
            assert rc == 0 and "LEFT" not in out, f"{n.node.name}: {rc}\n{out}"
        # a head restarted under the running job (an upgrade) takes its hosts back: the
        # shell on algo-2 reaches the same sandbox, which kept what was written there
        lab.restart_head()
        ws = shell(lab, u, jid, "algo-2").expect_open()
        try:
            out = job_shell_run(ws, 'echo "on $SM_CURRENT_HOST: $(cat ~/.h)"')
            assert "\non algo-2: 2\n" in out, out
        finally:
            ws.close()
        for bad in ("algo-3", "algo-0", "n1", "algo-"):
            body = refused_body(shell(lab, u, jid, bad), 400)
            assert body["error"]["field"] == "host", (bad, body)
            assert "algo-1 to algo-2" in body["error"]["message"], body
    finally:
        assert u.post(f"/api/v1/jobs/{jid}/stop", json={}).status == 202
        wait_until(lambda: ended(u, jid), 60 * SLOW, "the two-host job to stop")
    # and the job's end left nothing on them
    for n in lab.nodes.values():
        wait_until(lambda: n.doctor()[0] == 0, 30 * SLOW, f"{n.node.name}'s doctor to be clean")


def test_a_restored_head_goes_on_with_a_running_jobs_log(lab):
    """The head backed up while a job prints, stopped, its state dir restored from that
    backup (as onto a new machine) and started: the job runs on, and the head's log of
    it has every line, none lost across the restore (docs/slurm.md "Job logs"). Last in
    this module: the head runs on its restored state from here."""
    u = lab.user("rs")
    n = 40
    cmd = ["sh", "-c", f"i=0; while [ $i -lt {n} ]; do echo line=$i; i=$((i+1)); "
                       "sleep 0.25; done"]
    r = u.post("/api/v1/jobs", json={"name": "restored", "command": cmd})
    assert r.status == 201, r
    jid = r.json["id"]
    wait_until(lambda: "line=3\n" in job_log(u, jid), START, "the job's first lines on the head")
    out = os.path.join(lab.dir, "head-backup")
    r = lab.head.run_cli("backup", out)
    assert r.returncode == 0, f"backup: {r.stdout}\n{r.stderr}"
    state = lab.head.state_dir

    def restore():
        os.rename(state, state + ".lost")
        r = lab.head.run_cli("restore", out, "--state-dir", state)
        assert r.returncode == 0, f"restore: {r.stdout}\n{r.stderr}"

    lab.restart_head(meanwhile=restore)
    job = wait_until(lambda: ended(u, jid), START, "the job to end on the restored head")
    assert job["status"] == "Completed", failure(lab, u, jid)
    lines = [ln for ln in job_log(u, jid).splitlines() if ln.startswith("line=")]
    # a line pulled between the copies of the offset and of the log may be there twice
    assert sorted(set(lines), key=lambda ln: int(ln[5:])) == [f"line={i}" for i in range(n)], \
        lines
    # the restored copy is labd-web's, which goes on writing it
    assert os.stat(os.path.join(state, "joblogs", f"{jid}.log")).st_uid != 0
