#!/usr/bin/python3
"""egress-bench.py - throughput out of a runtime's sandbox (labd's nft rules, and pasta or veth)
against the same transfer from the host, to a test host (tests/integration/testnet.py:
a network namespace on a veth pair, 198.18.0.0/15; nothing else is addressed).

The sandbox is the one a labd runtime gets (`labbox run --net egress`: the same
libsandbox start, nft ruleset and pasta), without Jupyter around the client.  Each
direction moves BYTES over one TCP connection: "upload" from the client to a sink on the
test host, "download" from a source there.  Best of RUNS per side and direction.

Arms (--arms, comma-separated; each a sandbox path measured against the same host):
  pasta       labd's network path as it is (the default arm)
  pasta-mNNN  the same pasta with its MTU set to NNN (`-m NNN`, e.g. pasta-m9000)
  veth        labd's other path ([network] path = veth, `labbox --net-path veth`): a
              veth pair to the host, forwarded and masqueraded by root's nft rules in
              the host's namespace (sandbox/netveth.c), labd's ruleset inside unchanged
The arms take turns run by run; an arm's failed runs are counted, not fatal.

Usage: egress-bench.py --workdir DIR [--summary FILE] [--mbytes 200] [--runs 3]
                       [--arms pasta,pasta-m9000,veth]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from testnet import TestHost  # noqa: E402

SINK, SOURCE = 5001, 5002

# On the test host: a sink that reads everything and answers with the count, and a
# source that sends the number of bytes asked for.
SERVER = r"""
import socket, sys, threading
def line(c):
    b = b""
    while not b.endswith(b"\n"):
        k = c.recv(1)
        if not k:  # a probe that only connects
            return 0
        b += k
    return int(b)
def sink(c):
    want, n, buf = line(c), 0, bytearray(1 << 20)
    while n < want:
        k = c.recv_into(buf, min(len(buf), want - n))
        if not k:
            break
        n += k
    c.sendall(b"%d\n" % n); c.recv(1); c.close()
def source(c):
    want = line(c); block = b"x" * (1 << 20)
    while want > 0:
        c.sendall(block[:min(want, len(block))]); want -= len(block)
    c.close()
def serve(port, fn):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(4)
    while True:
        threading.Thread(target=fn, args=(s.accept()[0],), daemon=True).start()
threading.Thread(target=serve, args=(int(sys.argv[1]), sink), daemon=True).start()
serve(int(sys.argv[2]), source)
"""

# The client, on the host or in the sandbox: prints the rate in MB/s.
CLIENT = r"""
import socket, sys, time
host, port, mode, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
s = socket.create_connection((host, port), timeout=60)
t = time.monotonic()
# lengths go first and nothing is half-closed: pasta 0.0~git20230309 repeated the
# answer after a shutdown(SHUT_WR) and never passed the peer's FIN on
s.sendall(b"%d\n" % n)
if mode == "upload":
    block = b"x" * (1 << 20); left = n
    while left > 0:
        s.sendall(block[:min(left, len(block))]); left -= len(block)
    answer = b""
    while not answer.endswith(b"\n"):
        answer += s.recv(1)
    got = int(answer)
else:
    got, buf = 0, bytearray(1 << 20)
    while got < n:
        k = s.recv_into(buf, min(len(buf), n - got))
        if not k:
            break
        got += k
assert got == n, (got, n)
print(n / (time.monotonic() - t) / 1e6)
"""


def pasta_program(arm, workdir):
    """The program labbox starts as pasta for an arm."""
    if arm in ("pasta", "veth"):
        return "/usr/bin/pasta"
    path = os.path.join(workdir, f"{arm}.sh")
    if arm.startswith("pasta-m") and arm[7:].isdigit():
        text = f'#!/bin/sh\nexec /usr/bin/pasta "$@" -m {arm[7:]}\n'
    else:
        sys.exit(f"egress-bench: no arm {arm}")
    with open(path, "w") as fh:
        fh.write(text)
    os.chmod(path, 0o755)
    return path


def client_argv(where, workdir, host, port, mode, n):
    py = ["/usr/bin/python3", "-c", CLIENT, host, str(port), mode, str(n)]
    if where == "host":
        return py
    labbox = os.path.join(ROOT, os.environ.get("BUILD", "build"), "labbox")
    return [labbox, "run", "--user", "egressbench", "--user-id", "9", "--state-dir",
            os.path.join(workdir, "state"), "--net", "egress", "--mem", "2G",
            "--pasta", pasta_program(where, workdir),
            "--net-path", "veth" if where == "veth" else "pasta", "--", *py]


def measure_once(where, workdir, host, mode, n):
    """MB/s of one run, or None when it failed (a connection reset by pasta counts
    instead of ending the benchmark)."""
    port = SINK if mode == "upload" else SOURCE
    r = subprocess.run(client_argv(where, workdir, host, port, mode, n),
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        print(f"egress-bench: {where} {mode} failed: {last}", file=sys.stderr)
        return None
    return float(r.stdout.strip())


# Tries one TCP connection: prints "connected", "refused" or "timeout". The address
# "gateway" is the namespace's default gateway (/proc/net/route).
PROBE = r"""
import socket, struct, sys
addr = sys.argv[1]
if addr == "gateway":
    for line in open("/proc/net/route").read().splitlines()[1:]:
        f = line.split()
        if f[1] == "00000000":
            addr = socket.inet_ntoa(struct.pack("<I", int(f[2], 16)))
try:
    socket.create_connection((addr, int(sys.argv[2])), timeout=3).close()
    print("connected")
except ConnectionRefusedError:
    print("refused")
except OSError as e:
    print("timeout" if isinstance(e, TimeoutError) else f"error {e.errno}")
"""


def probe(arm, workdir, addr, port):
    argv = client_argv(arm, workdir, addr, port, "upload", 0)
    argv[argv.index("-c") + 1:] = [PROBE, addr, str(port)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    return r.stdout.strip() or f"failed: {r.stderr.strip()[-200:]}"


def rules_hold(arm, workdir, h):
    """What an arm's sandbox reaches: the test host (a transfer's peer) must answer; the
    host, through its address on the test host's link and through the arm's gateway
    (pasta's or the veth's host end), must refuse, though a listener on 0.0.0.0 of the
    host waits there. One line per probe; False when any differs."""
    import socket
    lst = socket.socket()
    lst.bind(("0.0.0.0", 0))
    lst.listen(8)
    port = lst.getsockname()[1]
    want = [(h.addr, SINK, "connected"), (h.host_addr, port, "refused")]
    if arm == "veth":  # its gateway is the host (pasta's, with --no-map-gw, is not)
        want.append(("gateway", port, "refused"))
    ok = True
    try:
        for addr, p, expect in want:
            got = probe(arm, workdir, addr, p)
            ok &= got == expect
            print(f"{arm}: {addr}:{p} {got} (want {expect})")
    finally:
        lst.close()
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--summary")
    ap.add_argument("--mbytes", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--arms", default="pasta")
    a = ap.parse_args()
    os.makedirs(os.path.join(a.workdir, "state"), exist_ok=True)
    n = a.mbytes * 1000 * 1000
    arms = a.arms.split(",")
    for arm in arms:
        pasta_program(arm, a.workdir)  # an unknown arm fails before anything runs
    got = {(w, m): [] for w in ["host", *arms] for m in ("upload", "download")}
    try:
        with TestHost() as h:
            h.spawn(["python3", "-c", SERVER, str(SINK), str(SOURCE)])
            h.wait_port(SINK)
            h.wait_port(SOURCE)
            for mode in ("upload", "download"):
                for run in range(a.runs):
                    order = ["host", *arms]
                    k = run % len(order)
                    for where in order[k:] + order[:k]:
                        got[(where, mode)].append(measure_once(where, a.workdir, h.addr, mode, n))
            held = all([rules_hold(arm, a.workdir, h) for arm in arms])
    finally:
        subprocess.run([os.path.join(ROOT, os.environ.get("BUILD", "build"), "labbox"), "gc",
                        "--all", "--state-dir", os.path.join(a.workdir, "state")],
                       capture_output=True)
    print(f"{a.mbytes} MB over one TCP connection to a test host (veth), best of {a.runs}; "
          "paired = median over the rounds of (arm / host in the same round), a failed run 0:")
    print(f"{'arm':<12} {'direction':<10} {'sandbox MB/s':>13} {'host MB/s':>10} {'ratio':>7}"
          f" {'paired':>7}  runs failed")
    rows = []
    for arm in arms:
        for mode in ("upload", "download"):
            hosts, runs = got[("host", mode)], got[(arm, mode)]
            host = max([x for x in hosts if x] or [0.0])
            box = max([x for x in runs if x] or [0.0])
            failed = sum(x is None for x in runs)
            ratio = box / host if host else 0.0
            pairs = [(b or 0.0) / h for b, h in zip(runs, hosts) if h]
            paired = statistics.median(pairs) if pairs else 0.0
            rows.append((arm, mode, box, host, ratio))
            print(f"{arm:<12} {mode:<10} {box:>13.0f} {host:>10.0f} {ratio:>6.2f}x {paired:>6.2f}x"
                  f"  {failed} of {a.runs}")
    print("rules: " + ("every arm reached the test host and none the host" if held else
                       "NOT HELD on some arm (lines above)"))
    if a.summary:
        with open(a.summary, "a") as fh:
            for arm, mode, box, host, ratio in rows:
                # labd's path as before; a candidate by its arm's name (fits the column)
                name = f"egress {mode}" if arm == "pasta" else f"{arm} {mode}"
                fh.write(f"{name}\tMB/s\t{box:.0f}\thost\t{host:.0f}\t{ratio:.2f}x\t>=0.5x\t"
                         f"{'yes' if ratio >= 0.5 else 'no'}\n")


if __name__ == "__main__":
    main()
