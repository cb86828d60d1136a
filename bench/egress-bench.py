#!/usr/bin/python3
"""egress-bench.py - throughput out of a runtime's sandbox (pasta + labd's nft rules)
against the same transfer from the host, to a test host (tests/integration/testnet.py:
a network namespace on a veth pair, 198.18.0.0/15; nothing else is addressed).

The sandbox is the one a labd runtime gets (`labbox run --net egress`: the same
libsandbox start, nft ruleset and pasta), without Jupyter around the client.  Each
direction moves BYTES over one TCP connection: "upload" from the client to a sink on the
test host, "download" from a source there.  Best of RUNS per side and direction.

Usage: egress-bench.py --workdir DIR [--summary FILE] [--mbytes 200] [--runs 3]
"""

import argparse
import os
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
        b += c.recv(1)
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


def client_argv(where, workdir, host, port, mode, n):
    py = ["/usr/bin/python3", "-c", CLIENT, host, str(port), mode, str(n)]
    if where == "host":
        return py
    labbox = os.path.join(ROOT, os.environ.get("BUILD", "build"), "labbox")
    return [labbox, "run", "--user", "egressbench", "--user-id", "9", "--state-dir",
            os.path.join(workdir, "state"), "--net", "egress", "--mem", "2G", "--", *py]


def measure(where, workdir, host, mode, n, runs):
    """Best MB/s of runs, and how many runs failed (a connection reset by pasta counts
    here instead of ending the benchmark)."""
    best, failed = 0.0, 0
    for _ in range(runs):
        port = SINK if mode == "upload" else SOURCE
        r = subprocess.run(client_argv(where, workdir, host, port, mode, n),
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            failed += 1
            last = (r.stderr.strip().splitlines() or ["?"])[-1]
            print(f"egress-bench: {where} {mode} failed: {last}", file=sys.stderr)
            continue
        best = max(best, float(r.stdout.strip()))
    return best, failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--summary")
    ap.add_argument("--mbytes", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(os.path.join(a.workdir, "state"), exist_ok=True)
    n = a.mbytes * 1000 * 1000
    rows = []
    with TestHost() as h:
        h.spawn(["python3", "-c", SERVER, str(SINK), str(SOURCE)])
        h.wait_port(SINK)
        h.wait_port(SOURCE)
        for mode in ("upload", "download"):
            host_mbs, _ = measure("host", a.workdir, h.addr, mode, n, a.runs)
            box_mbs, box_failed = measure("sandbox", a.workdir, h.addr, mode, n, a.runs)
            rows.append((mode, box_mbs, host_mbs, box_failed))
    subprocess.run([os.path.join(ROOT, os.environ.get("BUILD", "build"), "labbox"), "gc", "--all",
                    "--state-dir", os.path.join(a.workdir, "state")], capture_output=True)
    print(f"{a.mbytes} MB over one TCP connection to a test host (veth), best of {a.runs}:")
    print(f"{'direction':<10} {'sandbox MB/s':>13} {'host MB/s':>10} {'ratio':>7}  sandbox runs failed")
    for mode, box, host, failed in rows:
        print(f"{mode:<10} {box:>13.0f} {host:>10.0f} {box / host:>6.2f}x  {failed} of {a.runs}")
    if a.summary:
        with open(a.summary, "a") as fh:
            for mode, box, host, _ in rows:
                ratio = box / host
                fh.write(f"egress {mode}\tMB/s\t{box:.0f}\thost\t{host:.0f}\t{ratio:.2f}x\t>=0.5x\t"
                         f"{'yes' if ratio >= 0.5 else 'no'}\n")


if __name__ == "__main__":
    main()
