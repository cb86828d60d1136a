"""Egress on the veth path ([network] path = veth; docs/sandbox.md, "Network"): what is
the veth path's own. The rules that hold on both paths are test_egress.py's (run it with
LABD_EGRESS_PATH=veth for this path). Here: the host's side of the rules holds by
itself (the namespace's ruleset flushed by root, a spoofed source), a sandbox never
reaches another, the watchdog makes a deleted veth again (a runtime's and a job's), and the veth, the host's
table and the claim go when the runtime stops, also after a restart of labd, and a
claim of a sandbox that is gone is swept at start-up. Every address used belongs to a
test host of testnet.py (198.18.0.0/15) or to this machine."""

import json
import os
import subprocess
import tempfile

import pytest

from jobs_lib import new_user, submit, wait_job
from labd_harness import (
    assert_status,
    egress_daemon,
    remember_sandboxes,
    SLOW,
    stop_runtime,
    STRONG,
    teardown_runtime_daemon,
    wait_until,
)
from test_egress import DNS_RESPONDER, HostListener, Runtime
from testnet import TestHost

CLAIMS = "/run/labd-veth"
UDP_PORT = 9999
# On the test host: writes each datagram's source address to a file, a line each.
UDP_RECORDER = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", int(sys.argv[1])))
while True:
    _, peer = s.recvfrom(64)
    with open(sys.argv[2], "a") as fh:
        fh.write(peer[0] + "\n")
"""


def udp_seen(net):
    with open(net["seen"]) as fh:
        return fh.read().split()


@pytest.fixture(scope="module")
def net():
    files = "/tmp"
    with TestHost() as host, TestHost(subnet="198.19") as denied:
        host.serve_http(files)
        denied.serve_http(files)
        host.spawn(["python3", "-c", DNS_RESPONDER, host.addr])
        seen = tempfile.NamedTemporaryFile(prefix="labd-veth-udp-", delete=False).name
        host.spawn(["python3", "-c", UDP_RECORDER, str(UDP_PORT), seen])
        listener = HostListener()
        d = egress_daemon("egressveth", network={"dns": host.addr, "path": "veth"},
                          runtime={"keep_on_shutdown": "true"})
        try:
            d.start()
            yield {"d": d, "host": host, "denied": denied, "listener": listener, "seen": seen}
        finally:
            listener.close()
            os.unlink(seen)
            teardown_runtime_daemon(d)


def claim_of(d, sid):
    """(slot, sandbox address) of sandbox sid's claim, or None."""
    for name in os.listdir(CLAIMS) if os.path.isdir(CLAIMS) else []:
        if not name.isdigit():
            continue
        with open(os.path.join(CLAIMS, name)) as fh:
            f = fh.read().split()
        if len(f) == 4 and f[0] == sid and f[3] == d.state_dir:
            return int(name), f[1]
    return None


def host_side(slot):
    """Whether the host holds slot's veth and table."""
    link = os.path.exists(f"/sys/class/net/lbv{slot}")
    table = subprocess.run(["nft", "list", "table", "inet", f"labd_veth_{slot}"],
                           capture_output=True).returncode == 0
    return link, table


def in_netns(rt, argv):
    """argv as root in the runtime's network namespace (what no user can do: the
    stand-in for a namespace whose own ruleset is lost or whose user is root)."""
    def cgroup(p):
        try:  # a process of another sandbox may end while /proc is read
            with open(f"/proc/{p}/cgroup") as fh:
                return fh.read()
        except OSError:
            return ""
    pid = [p for p in os.listdir("/proc") if p.isdigit() and rt.sandbox_id() in cgroup(p)][0]
    return subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", *argv],
                          capture_output=True, text=True, check=True)


def probe(rt, targets, source=None):
    code = ("import json, socket, time\n"
            "def probe(h, p):\n"
            "    t = time.monotonic()\n"
            "    try:\n"
            f"        socket.create_connection((h, p), timeout=3, source_address={(source, 0) if source else None!r}).close()\n"
            "        w = 'connected'\n"
            "    except OSError as e:\n"
            "        w = type(e).__name__\n"
            "    return [w, round(time.monotonic() - t, 3)]\n"
            f"print(json.dumps({{f'{{h}}:{{p}}': probe(h, p) for h, p in {targets!r}}}))\n")
    return json.loads(rt.run(code))


@pytest.fixture(scope="module")
def rt(net):
    r = Runtime(net["d"], "ev")
    yield r
    r.close()
    # stopped here too when the restart test did not run (keep_on_shutdown keeps it)
    c = net["d"].client()
    c.login(r.name, f"{STRONG}-{r.name}")
    stop_runtime(c)


def test_reaches_test_host_and_dns_and_nothing_of_the_host(net, rt):
    host, port = net["host"], net["listener"].port
    slot, addr = claim_of(net["d"], rt.sandbox_id())
    assert host_side(slot) == (True, True)
    out = rt.run("import socket, urllib.request\n"
                 "print(socket.gethostbyname('files.labd-test.example'))\n"
                 f"print(open('/proc/net/route').read().count('eth0') > 0)\n")
    assert out.split("\n")[:2] == [host.addr, "True"], out
    gateway = addr.rsplit(".", 1)[0] + "." + str(int(addr.rsplit(".", 1)[1]) - 1)
    got = probe(rt, [(host.host_addr, port), (gateway, port), ("127.0.0.1", net["d"].port),
                     (net["denied"].addr, 80), (host.addr, 80)])
    assert got[f"{host.addr}:80"][0] == "connected", got
    for k, (what, seconds) in got.items():
        if k != f"{host.addr}:80":
            assert what == "ConnectionRefusedError" and seconds < 1.0, got
    assert net["listener"].accepted == 0


def test_another_sandbox_is_never_reached(net, rt):
    other = Runtime(net["d"], "ev2")
    try:
        _, addr = claim_of(net["d"], other.sandbox_id())
        other.run("import socket, threading\n"
                  "s = socket.socket(); s.bind(('0.0.0.0', 7777)); s.listen(4)\n"
                  "threading.Thread(target=lambda: [s.accept()[0].close() for _ in iter(int, 1)], daemon=True).start()\n")
        assert other.run("import socket\nsocket.create_connection(('127.0.0.1', 7777), timeout=3).close()\n"
                         "print('ok')").strip() == "ok"
        got = probe(rt, [(addr, 7777)])
        assert got[f"{addr}:7777"][0] == "ConnectionRefusedError", got
    finally:
        other.close()
        stop_runtime(other.c)


def test_host_side_holds_without_the_namespaces_rules_and_against_spoofing(net):
    r = Runtime(net["d"], "evh")
    try:
        sid = r.sandbox_id()
        slot, addr = claim_of(net["d"], sid)
        in_netns(r, ["nft", "flush", "ruleset"])
        got = probe(r, [(net["denied"].addr, 80), (net["host"].host_addr, net["listener"].port),
                        (net["host"].addr, 80)])
        assert got[f"{net['host'].addr}:80"][0] == "connected", got
        assert got[f"{net['denied'].addr}:80"][0] == "ConnectionRefusedError", got
        assert got[f"{net['host'].host_addr}:{net['listener'].port}"][0] == "ConnectionRefusedError", got
        # a source that is not the sandbox's own address is dropped on the host: a
        # datagram from it never reaches the test host, one from the real address does
        spoof = "198.18.0.77"  # on no host: the tests' range
        in_netns(r, ["ip", "addr", "add", f"{spoof}/32", "dev", "eth0"])
        r.run("import socket\n"
              f"for src in ('{spoof}', '{addr}'):\n"
              "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((src, 0))\n"
              f"    s.sendto(src.encode(), ('{net['host'].addr}', {UDP_PORT})); s.close()\n")
        # (the real one masqueraded: from the host's address on the test host's link)
        wait_until(lambda: net["host"].host_addr in udp_seen(net), 10 * SLOW,
                   "the datagram from the real address")
        assert spoof not in udp_seen(net)
        assert net["listener"].accepted == 0
    finally:
        r.close()
        stop_runtime(r.c)
    wait_until(lambda: host_side(slot) == (False, False) and not claim_of(net["d"], sid),
               20 * SLOW, "the veth, host table and claim gone with the runtime")


def guard():
    return subprocess.run(["nft", "list", "table", "inet", "labd_veth"],
                          capture_output=True, text=True).stdout


def test_watchdog_makes_a_deleted_veth_again(net, rt):
    slot, _ = claim_of(net["d"], rt.sandbox_id())
    assert f'iifname "{net["host"].host_if}" oifname != "lbv*" drop' in guard()
    made = net["d"].log().count("ended and was restarted")
    subprocess.run(["ip", "link", "del", f"lbv{slot}"], check=True)
    # the log line comes once the sandbox's end is configured too
    wait_until(lambda: host_side(slot) == (True, True)
               and net["d"].log().count("ended and was restarted") > made,
               15 * SLOW, "the veth made again, and the log line")
    # a firewall reload that flushes the ruleset takes labd's tables: both come back
    subprocess.run(["nft", "delete", "table", "inet", "labd_veth"], check=True)
    subprocess.run(["nft", "delete", "table", "inet", f"labd_veth_{slot}"], check=True)
    wait_until(lambda: host_side(slot) == (True, True) and net["host"].host_if in guard()
               and net["d"].log().count("ended and was restarted") > made + 1,
               15 * SLOW, "the host table and the uplinks' guard made again")
    got = probe(rt, [(net["host"].addr, 80), (net["denied"].addr, 80)])
    assert got[f"{net['host'].addr}:80"][0] == "connected", got
    assert got[f"{net['denied'].addr}:80"][0] == "ConnectionRefusedError", got


def claims(d):
    """{sandbox id: slot} of daemon d's claims."""
    out = {}
    for name in os.listdir(CLAIMS) if os.path.isdir(CLAIMS) else []:
        if name.isdigit():
            with open(os.path.join(CLAIMS, name)) as fh:
                f = fh.read().split()
            if len(f) == 4 and f[3] == d.state_dir:
                out[f[0]] = int(name)
    return out


def test_watchdog_makes_a_job_sandboxs_deleted_veth_again(net):
    """A job's sandbox (its pool) is under the runtimes' 2 s network watchdog too."""
    d = net["d"]
    before = claims(d)
    user, c = new_user(d, "jv")
    j = submit(c, ["/bin/sleep", "300"])
    wait_job(c, j["id"], "InProgress", secondary="Training")
    new = {sid: slot for sid, slot in claims(d).items() if sid not in before}
    assert len(new) == 1, (before, claims(d))
    (sid, slot), = new.items()

    def said():
        return sum(1 for ln in d.log().splitlines() if ln.find(f"pool ") >= 0
                   and f"of {user}: its network path" in ln and "ended and was restarted" in ln)
    subprocess.run(["ip", "link", "del", f"lbv{slot}"], check=True)
    wait_until(lambda: host_side(slot) == (True, True) and said() == 1, 15 * SLOW,
               lambda: f"the job's veth made again, and the log line\n{d.log_tail()}")
    assert_status(c.post(f"/api/v1/jobs/{j['id']}/stop", json={"grace_s": 1}), 202)
    wait_job(c, j["id"])
    wait_until(lambda: sid not in claims(d), 20 * SLOW, "the job's veth gone with its pool")


def test_restart_keeps_adopted_veth_sweeps_orphans_and_stop_removes(net, rt):
    d = net["d"]
    sid = rt.sandbox_id()
    slot, _ = claim_of(d, sid)
    # an orphan: a claim of this labd for a sandbox that is not running, with its table
    orphan = next(n for n in range(60000, 61000) if not os.path.exists(f"{CLAIMS}/{n}"))
    with open(f"{CLAIMS}/{orphan}", "w") as fh:
        fh.write(f"gone-000000000000 10.254.255.254 10.254.255.253 {d.state_dir}\n")
    subprocess.run(["nft", "add", "table", "inet", f"labd_veth_{orphan}"], check=True)
    assert d.stop() == 0, d.log_tail()
    r = d.run_cli("doctor")
    assert "1 veth(s), host table(s) or claim(s) of sandboxes not running" in r.stdout, r.stdout
    d.start(expect_admin_password=False)
    remember_sandboxes(d)
    assert not os.path.exists(f"{CLAIMS}/{orphan}")
    assert host_side(orphan) == (False, False)
    assert host_side(slot) == (True, True)
    c = d.client()
    c.login(rt.name, f"{STRONG}-{rt.name}")
    stop_runtime(c)
    wait_until(lambda: host_side(slot) == (False, False) and not claim_of(d, sid),
               20 * SLOW, "the veth, host table and claim gone after restart and stop")
