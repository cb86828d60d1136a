"""labd on Slurm across restarts (docs/slurm.md): the head and the nodes are stopped
and started again between steps, as an upgrade does, while runtimes and a warm pool
run on the Slurm nodes.

- a browser (real Chromium) logs in on the head's dashboard, starts a runtime that Slurm
  places on a node, runs a notebook cell in JupyterLab through the head's proxy;
- the head restarted (SIGTERM, the same config and state): the runtime is still
  running on the same node in the same Slurm job (no second one), JupyterLab answers
  through the head's proxy and a kernel's variable is still set; the ledger bills the
  runtime in one entry from ready to end, across the restart; the warm pool is still
  Available and the next job with its criteria reuses it; stopped, the Slurm job ends;
- a node's `labd node` restarted: its runtime lives on and is reachable again;
- the runtime's Slurm job cancelled while the head was stopped: once the head is back
  the runtime ends, its reason naming Slurm, and its sandbox on the node is gone.

One cluster and one lab for the module; each test ends what it started.
"""

import os
import subprocess

import pytest

from cluster import Cluster, wait_until
from labd_slurm import LabOnSlurm
from labd_harness import (KERNEL_V1, SLOW, WebSocket, jupyter_execute, open_kernel_channel,
                          parse_api_time, stop_runtime, wait_runtime, ws_cookie_headers)
from jobs_lib import usage_entries

START = 90 * SLOW
HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def lab():
    c = Cluster()
    c.start()
    try:
        lab = LabOnSlurm(c)
        # the nodes keep their sandboxes when stopped, as for an upgrade (the default;
        # the suites' own default is to stop them)
        for n in lab.nodes.values():
            with open(n.config) as f:
                text = f.read()
            assert "keep_on_shutdown = false" in text
            with open(n.config, "w") as f:
                f.write(text.replace("keep_on_shutdown = false", "keep_on_shutdown = true"))
        with lab:
            yield lab
    finally:
        c.close()


def start(u):
    r = u.post("/api/v1/me/runtime", json={"type": "cpu"})
    assert r.status == 202, r
    return wait_runtime(u, "running", timeout=START)


def kernel_channel(lab, u, kid):
    """The channels WebSocket of an existing kernel, through the head's proxy."""
    return WebSocket(lab.head.port, f"/user/{u.user}/api/kernels/{kid}/channels",
                     headers=dict(ws_cookie_headers(u), Origin=u.runtime_origin()),
                     source=u.source, protocols=(KERNEL_V1,)
                     ).expect_open()


def set_x(lab, u):
    """A kernel with x = 41 in it; its id."""
    kid, ws = open_kernel_channel(lab.head, u)
    try:
        jupyter_execute(ws, "x = 41")
    finally:
        ws.close()
    return kid


def read_x(lab, u, kid):
    ws = kernel_channel(lab, u, kid)
    try:
        result, _, _ = jupyter_execute(ws, "x + 1")
    finally:
        ws.close()
    return result


def jupyter_answers(u):
    r = u.get(f"/user/{u.user}/api/status")
    return r.status == 200 and "started" in r.json


def test_a_browser_runs_a_notebook_cell_on_a_slurm_node(lab):
    """Real Chromium (tests/e2e's, driven by lab_browser.mjs): the dashboard through the
    head, a runtime that Slurm places on a node, JupyterLab through the head's proxy, a
    notebook cell's output; stopped from the dashboard, its Slurm job ends."""
    env = dict(os.environ, LABD_URL=f"http://127.0.0.1:{lab.head.port}",
               LABD_ADMIN_PASSWORD=lab.head.admin_password,
               LABD_E2E_ARTIFACTS=os.environ.get("LABD_E2E_ARTIFACTS",
                                                 "/tmp/labd-e2e-artifacts"))
    r = subprocess.run(["node", os.path.join(HERE, "lab_browser.mjs")], env=env,
                       capture_output=True, text=True, timeout=600 * SLOW)
    print(r.stdout, r.stderr)
    assert r.returncode == 0 and r.stdout.splitlines()[-1:] == ["ok"], \
        f"{r.stdout}\n{r.stderr}\n{lab.head.log_tail()}\n" + \
        "\n".join(f"--- {s}\n{n.log()[-1500:]}" for s, n in lab.nodes.items())
    rid = int(next(ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("runtime ")))
    jid, state, host = lab.runtime_job(rid)
    assert lab.node_short(host) in lab.nodes, (jid, state, host)
    wait_until(lambda: lab.runtime_job(rid)[1] in ("CANCELLED", "COMPLETED"), 20 * SLOW,
               "the runtime's Slurm job to end")


def test_the_head_restarts_with_a_runtime_and_a_warm_pool_on_the_nodes(lab):
    u = lab.user("hr")
    rt = start(u)
    held = lab.runtime_job(rt["id"])
    assert held[1] == "RUNNING", held
    kid = set_x(lab, u)

    # a warm pool holding a finished job, of another user
    p = lab.user("hp")
    stamp = ["/bin/sh", "-c", "echo ran"]
    r = p.post("/api/v1/jobs", json={"name": "before", "command": stamp, "keep_alive_s": 300})
    assert r.status == 201, r

    def ended(jid):
        j = p.get(f"/api/v1/jobs/{jid}").json
        return j if j["status"] in ("Completed", "Failed", "Stopped") else None

    first = wait_until(lambda: ended(r.json["id"]), START, "the first job to end")
    assert first["status"] == "Completed", first
    wp = first["warm_pool"]
    assert wp and wp["status"] == "Available", first
    pools = {n: v for n, v in lab.slurm_jobs().items() if n.startswith("labd-pool-")}
    assert len(pools) == 1, pools
    pool_name, pool_jobs = next(iter(pools.items()))

    # away for a few seconds: a ledger that lost them would show a gap
    lab.restart_head(away_s=3)

    # the same runtime on the same node in the same Slurm job, reachable again
    again = wait_runtime(u, "running", timeout=30 * SLOW)
    assert again["id"] == rt["id"], (again, rt)
    wait_until(lambda: jupyter_answers(u), 30 * SLOW, "JupyterLab through the restarted head")
    assert lab.slurm_jobs()[f"labd-rt-{rt['id']}"] == [held], lab.slurm_jobs()
    assert read_x(lab, u, kid) == "42"
    assert "cancelling Slurm job" not in lab.head.log(), lab.head.log_tail()

    # the warm pool: still Available, the next job with its criteria reuses it
    j = p.get(f"/api/v1/jobs/{first['id']}").json
    assert j["warm_pool"]["status"] == "Available", j
    r = p.post("/api/v1/jobs", json={"name": "after", "command": stamp, "keep_alive_s": 300})
    assert r.status == 201, r
    second = wait_until(lambda: ended(r.json["id"]), START, "the job after the restart to end")
    assert second["status"] == "Completed", second
    assert second["warm_pool"]["reused"] is True and second["warm_pool"]["id"] == wp["id"], second
    assert lab.slurm_jobs()[pool_name] == pool_jobs, (lab.slurm_jobs(), pool_jobs)

    # stopped: the Slurm job ends; one ledger entry from ready to end, the restart in it
    stopped = stop_runtime(u, 60 * SLOW)
    assert stopped["state"] == "stopped", stopped
    wait_until(lambda: lab.runtime_job(rt["id"])[1] in ("CANCELLED", "COMPLETED"), 20 * SLOW,
               "the runtime's Slurm job to end")
    es = usage_entries(u)
    assert len(es) == 1, es
    ready, end = parse_api_time(stopped["ready_at"]), parse_api_time(stopped["ended_at"])
    assert (es[0]["start_s"], es[0]["end_s"], es[0]["billable_s"]) == \
        (ready, end, end - ready), (es, stopped)
    q = u.get("/api/v1/me/quota").json
    assert q["used"]["cpu_s_per_24h"] == end - ready, q
    assert p.delete(f"/api/v1/warm-pools/{wp['id']}").status == 204
    wait_until(lambda: lab.slurm_jobs()[pool_name][0][1] in ("CANCELLED", "COMPLETED"),
               30 * SLOW, "the pool's Slurm job to end")


def test_a_node_restarts_under_its_runtime(lab):
    u = lab.user("nr")
    rt = start(u)
    held = lab.runtime_job(rt["id"])
    node = lab.nodes[lab.node_short(held[2])]
    kid = set_x(lab, u)
    boxes = node.sandbox_pids()
    assert boxes, "no sandbox process in the node's cgroups"

    node.stop()
    assert node.proc.returncode == 0, node.log()[-3000:]
    assert node.sandbox_pids() >= boxes  # the sandbox outlives its supervisor
    node.start()
    lab.wait_nodes_linked()

    wait_until(lambda: jupyter_answers(u), 30 * SLOW, "JupyterLab after the node's restart")
    assert wait_runtime(u, "running")["id"] == rt["id"]
    assert read_x(lab, u, kid) == "42"
    assert lab.slurm_jobs()[f"labd-rt-{rt['id']}"] == [held], lab.slurm_jobs()
    assert stop_runtime(u, 60 * SLOW)["state"] == "stopped"
    wait_until(lambda: lab.runtime_job(rt["id"])[1] in ("CANCELLED", "COMPLETED"), 20 * SLOW,
               "the runtime's Slurm job to end")


def test_a_runtime_whose_slurm_job_ended_while_the_head_was_away_ends(lab):
    u = lab.user("hc")
    rt = start(u)
    jid, _, host = lab.runtime_job(rt["id"])
    node = lab.nodes[lab.node_short(host)]

    def cancel():
        lab.cluster.scancel(jid)
        wait_until(lambda: lab.runtime_job(rt["id"])[1] in ("CANCELLED", "COMPLETED"),
                   20 * SLOW, "the cancelled job to end in Slurm")

    lab.restart_head(meanwhile=cancel)
    ended = wait_runtime(u, ("stopped", "failed"), timeout=30 * SLOW)
    assert ended["id"] == rt["id"], ended
    assert "Slurm" in (ended["reason"] or ""), ended
    print(f"\nended after the restart: {ended['state']}: {ended['reason']}")
    wait_until(lambda: node.home_mounts() == [], 20 * SLOW, "the home to be unmounted")
    e = next(x for x in usage_entries(u) if x["runtime_id"] == rt["id"])
    assert e["end_s"] == parse_api_time(ended["ended_at"]), (e, ended)
