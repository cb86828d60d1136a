"""A training job on several hosts (docs/jobs.md "Several hosts", docs/slurm.md "Jobs on
several nodes") on the private cluster (cluster.py) with labd on it (labd_slurm.py).

- `instance_count` above `[slurm] max_instances` is refused at submit, naming the field;
- a job with `instance_count` 2 is one Slurm job over both nodes (`--nodes=2
  --ntasks-per-node=1`): Slurm allocates two nodes to `labd-pool-<id>`;
- this build does not yet build the job's sandboxes on several nodes: the start fails
  with that reason (the job Failed, the allocation cancelled, no sandbox on any node)
  rather than running on one host as if it were the whole job.
"""

import subprocess

import pytest

from cluster import Cluster, wait_until
from labd_slurm import LabOnSlurm
from labd_harness import SLOW

START = 90 * SLOW


@pytest.fixture(scope="module")
def lab():
    c = Cluster()
    c.start()
    try:
        with LabOnSlurm(c, head_sections={"slurm": {"max_instances": "2"}}) as lab:
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


def test_instance_count_above_the_limit_is_refused(lab):
    u = lab.user("sd")
    r = u.post("/api/v1/jobs", json={"name": "too-many", "command": ["true"],
                                     "instance_count": 3})
    assert r.status == 400, r
    assert r.json["error"]["field"] == "instance_count", r.json
    assert "from 1 to 2" in r.json["error"]["message"], r.json
    assert pool_jobs(lab) == {}


def test_two_instances_get_two_nodes_from_one_slurm_job(lab):
    u = lab.user("sd")
    r = u.post("/api/v1/jobs", json={"name": "two-hosts", "command": ["true"],
                                     "instance_count": 2, "max_retries": 0})
    assert r.status == 201, r

    def ended():
        j = u.get(f"/api/v1/jobs/{r.json['id']}").json
        return j if j["status"] in ("Completed", "Failed", "Stopped") else None

    job = wait_until(ended, START, "the two-host job to end")
    assert job["status"] == "Failed", job
    assert "several nodes" in (job["failure_reason"] or ""), job
    # labd let the allocation go; once it has (a COMPLETING job lists only the nodes
    # still completing), Slurm shows both nodes were given to the one job
    pools = wait_until(lambda: (lambda p: p if all(s in ("CANCELLED", "COMPLETED")
                                                   for v in p.values() for s, _, _ in v)
                                else None)(pool_jobs(lab)),
                       30 * SLOW, "the pool's Slurm job to end")
    assert len(pools) == 1, pools
    (name, [(state, count, nodes)]), = pools.items()
    assert count == 2, pools
    for n in lab.nodes.values():
        assert n.sandbox_pids() == set(), n.log()[-2000:]
