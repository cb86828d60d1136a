#!/usr/bin/env python3
"""node-link.py - what the Slurm node link costs (docs/slurm.md, "Nodes"), as root, on one
machine over loopback: a real `labd node` and the head stand-in of the tests
(build/tests/test_link --head).

  link RTT       a `ping` from the head through the TLS link to the node's supervisor and
                 its reply back, N times, p50/p99 (the channel's own cost included)
  relink         the link process killed until the head reads the new hello
  data connect   a fresh data-port connection: connect, the signed line, the node's check,
                 its connect to the runtime's socket, one small echo; beside the same echo
                 on the Unix socket directly
  data stream    MiB/s of one connection's bytes through the data port, beside the Unix
                 socket directly

Not in run.sh (it needs no peers). Usage: bench/node-link.py [--n 500] [--mib 256]"""

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
import test_node_link as t  # noqa: E402

SINK = r"""
import os, socket, sys
os.umask(0)
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(64)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    mode = c.recv(1)
    if mode == b"e":          # echo one line
        data = b""
        while not data.endswith(b"\n"):
            chunk = c.recv(4096)
            if not chunk:
                break
            data += chunk
        c.sendall(data)
    else:                     # count bytes until EOF, answer the count
        n = 0
        while True:
            chunk = c.recv(1 << 20)
            if not chunk:
                break
            n += len(chunk)
        c.sendall(str(n).encode())
    c.close()
"""


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


def ms(x):
    return f"{x * 1000:.2f} ms"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--mib", type=int, default=256)
    a = ap.parse_args()

    d = t.tempfile.mkdtemp(prefix="labd-bench-head-")
    secret_file = os.path.join(d, "secret")
    with open(secret_file, "wb") as fh:
        fh.write(t.SECRET)
    os.chmod(secret_file, 0o600)
    head = t.Head(secret_file)
    node = t.Node("bench", head.port, t.SECRET).start()
    sink = None
    try:
        hello = head.read(30)
        assert head.request({"v": 2, "type": "hello", "id": 1,
                             "version": hello["version"]})["ok"]
        rtt = []
        for i in range(a.n):
            t0 = time.perf_counter()
            head.request({"v": 2, "type": "ping", "id": 10 + i})
            rtt.append(time.perf_counter() - t0)
        print(f"link RTT (ping, {a.n}): p50 {ms(pct(rtt, 50))}, p99 {ms(pct(rtt, 99))}")

        pid = t.wait_until(node.link_pid, 10, "the link process")
        t0 = time.perf_counter()
        os.kill(pid, signal.SIGKILL)
        while "type" not in (m := head.read(30)):
            pass
        print(f"relink (link killed -> new hello): {ms(time.perf_counter() - t0)}")

        run = t.make_run_dir(node, "alice", t.SANDBOX_UID)
        sock = os.path.join(run, "jupyter.sock")

        def drop():
            os.chdir(run)
            os.setgid(t.SANDBOX_UID)
            os.setuid(t.SANDBOX_UID)
        sink = subprocess.Popen([t.PYTHON, "-c", SINK, "jupyter.sock"],
                                stdout=subprocess.PIPE, preexec_fn=drop)
        assert sink.stdout.readline() == b"ready\n"
        path = "runtimes/alice/run/jupyter.sock"

        def via_port(payload):
            with socket.create_connection(("127.0.0.1", node.data_port)) as s:
                s.sendall(t.data_line(path) + payload)
                return s.recv(4096)

        def direct(payload):
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(sock)
                s.sendall(payload)
                return s.recv(4096)

        for name, fn in (("data port", via_port), ("unix socket", direct)):
            lat = []
            for _ in range(a.n):
                t0 = time.perf_counter()
                assert fn(b"eping\n") == b"ping\n"
                lat.append(time.perf_counter() - t0)
            print(f"connect + echo via {name} ({a.n}): p50 {ms(pct(lat, 50))}, "
                  f"p99 {ms(pct(lat, 99))}")

        chunk = os.urandom(1 << 20)
        for name in ("data port", "unix socket"):
            if name == "data port":
                s = socket.create_connection(("127.0.0.1", node.data_port))
                s.sendall(t.data_line(path))
            else:
                s = socket.socket(socket.AF_UNIX)
                s.connect(sock)
            t0 = time.perf_counter()
            s.sendall(b"c")
            for _ in range(a.mib):
                s.sendall(chunk)
            s.shutdown(socket.SHUT_WR)
            n = int(s.recv(64))
            dt = time.perf_counter() - t0
            s.close()
            assert n == a.mib << 20, n
            print(f"stream via {name}: {a.mib / dt:.0f} MiB/s ({a.mib} MiB in {dt:.2f} s)")
    finally:
        if sink:
            sink.kill()
        node.cleanup()
        head.stop()
        t.shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
