"""Test hosts for network tests: a network namespace joined to the host by a veth
pair, with addresses from 198.18.0.0/15 (the benchmarking range, RFC 2544), serving
what the test asks for. Nothing here sends traffic anywhere but these hosts.

Each test process takes its own /24 (from its pid), so suites run side by side on
one machine (several checkouts at once) do not collide.

    with TestHost() as h:                    # 198.18.N.2, host side 198.18.N.1
        h.serve_http(directory)              # python3 -m http.server on port 80
        h.run(["sh", "-c", "..."])           # any command inside the test host
    with TestHost(subnet="198.19") as d:     # a host in a range labd is told to deny
        ...
"""

import itertools
import os
import subprocess
import time

_serial = itertools.count()


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def _third_octet():
    return os.getpid() % 250 + 1


class TestHost:
    """A network namespace with one veth to the host: host side <prefix>.1/24,
    test host <prefix>.2/24 where prefix is "<subnet>.<N>". extra_addrs are more
    addresses (e.g. a link-local one, "169.254.77.7") put on the test host and
    routed to it from the host, so a probe that escapes a filter lands here and
    never on a real machine."""

    __test__ = False  # not a pytest class

    def __init__(self, subnet="198.18", extra_addrs=()):
        n = next(_serial)
        third = _third_octet()
        self.tag = f"ltn{os.getpid() % 100000}x{n}"
        self.netns = self.tag
        self.prefix = f"{subnet}.{(third + 50 * n) % 250 + 1}"
        self.addr = f"{self.prefix}.2"
        self.host_addr = f"{self.prefix}.1"
        self.extra_addrs = list(extra_addrs)
        self.host_if = f"{self.tag}h"
        self.procs = []

    def __enter__(self):
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def _create(self):
        ns_if = f"{self.tag}n"
        _ip("netns", "add", self.netns)
        _ip("link", "add", self.host_if, "type", "veth", "peer", "name", ns_if)
        _ip("link", "set", ns_if, "netns", self.netns)
        _ip("addr", "add", f"{self.host_addr}/24", "dev", self.host_if)
        _ip("link", "set", self.host_if, "up")
        self.run_ip("addr", "add", f"{self.addr}/24", "dev", ns_if)
        self.run_ip("link", "set", ns_if, "up")
        self.run_ip("link", "set", "lo", "up")
        self.run_ip("route", "add", "default", "via", self.host_addr)
        for a in self.extra_addrs:
            self.run_ip("addr", "add", f"{a}/32", "dev", ns_if)
            _ip("route", "add", f"{a}/32", "via", self.addr, "dev", self.host_if)

    def run_ip(self, *args):
        return _ip("-n", self.netns, *args)

    def _enter(self, argv):
        """argv in the test host's network namespace and the host's mount namespace
        (nsenter, not `ip netns exec`: that one unshares a mount namespace, a copy of
        every mount there is at that moment, the homes of the labd daemons running
        side by side included, and holds their loop devices attached for as long as
        the command runs)."""
        return ["nsenter", f"--net=/run/netns/{self.netns}", "--", *argv]

    def run(self, argv, **kw):
        """Runs argv inside the test host and waits (subprocess.run arguments)."""
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        return subprocess.run(self._enter(argv), **kw)

    def spawn(self, argv, **kw):
        """Starts argv inside the test host; stopped by close()."""
        kw.setdefault("stdout", subprocess.DEVNULL)
        kw.setdefault("stderr", subprocess.DEVNULL)
        p = subprocess.Popen(self._enter(argv), **kw)
        self.procs.append(p)
        return p

    def serve_http(self, directory, port=80):
        """Serves directory over plain HTTP on every address of the test host and
        waits until it answers."""
        self.spawn(["python3", "-m", "http.server", str(port), "--bind", "0.0.0.0",
                    "--directory", directory])
        self.wait_port(port)

    def wait_port(self, port, timeout=10):
        deadline = time.time() + timeout
        probe = ["python3", "-c",
                 "import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 1)",
                 self.addr, str(port)]
        while time.time() < deadline:
            if self.run(probe).returncode == 0:
                return
            time.sleep(0.1)
        raise AssertionError(f"test host {self.addr}:{port} never answered")

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = []
        for a in self.extra_addrs:
            _ip("route", "del", f"{a}/32", check=False)
        _ip("link", "del", self.host_if, check=False)
        _ip("netns", "del", self.netns, check=False)
