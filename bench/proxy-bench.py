#!/usr/bin/python3
"""proxy-bench.py - labd's runtime proxy against direct access,
configurable-http-proxy (CHP) and nginx, all in one run (HTTP and WebSocket).

Backends (each table names the one every row used):
  A  the runtime's Jupyter: labd starts a CPU runtime (full sandbox) and
     JupyterLab 4 (Jupyter Server 2, from /opt/labd/jupyter) listens on
     <state>/runtimes/bench/run/jupyter.sock.  labd can only proxy to this.
     nginx and configurable-http-proxy 5 can also proxy to a Unix socket, so
     "nginx-uds" and "chp-uds" are nginx and CHP in front of the very same
     Jupyter (token read from labd's database; nginx adds it, CHP's client
     sends it), and "direct-uds" (WebSocket only) is a client on it.
  B  the same JupyterLab from the same environment, same base_url
     /user/bench/, started outside labd on TCP 127.0.0.1.  "direct", "chp"
     and "nginx" rows use it.  B sets TCP_NODELAY on its WebSockets (a config
     file, see NODELAY_CONFIG): stock Tornado does not, and a kernel reply
     written right after the iopub "busy" message then waits for the client's
     delayed ACK (~40 ms), which would measure Tornado, not the proxies.
  F  a synthetic backend for the proxies' own capacity: nginx serving the
     same two responses (copied from Jupyter) as static files, listening on
     TCP and on the runtime's socket path (the real socket is renamed aside
     for that phase and put back after), so labd and nginx-uds reach it
     through the same socket path as always.  Jupyter tops out near 1-2k
     req/s here, which hides any proxy difference; F does not.

HTTP: wrk, keep-alive, DURATION s per run, CONNS connections, 1 thread;
ROUNDS rounds with the arms interleaved; medians of req/s, p50, p99, and the
proxy's CPU time per request (labd-web, nginx workers, node) from /proc.
Requests: GET /user/bench/api/status (~120 B JSON) and the JupyterLab static
file under /user/bench/static/lab/ whose size is closest to 100,000 B.

WebSocket: bench/ws-rtt.py --v1, kernel_info_request round trips on
/user/bench/api/kernels/<id>/channels in the v1.kernel.websocket.jupyter.org
subprotocol JupyterLab 4 uses (see that file).

Usage: proxy-bench.py --workdir DIR [--summary FILE] [--only http|synthetic|ws|hold]
(--only synthetic: just the HTTP phase on backend F, for quick iterations;
 --only hold: that set-up, then wait BENCH_HOLD_S seconds for a profiler run by hand)
Tunables (env): BENCH_DURATION (4), BENCH_ROUNDS (3), BENCH_CONNS (32),
BENCH_WS_N (1000), BENCH_WS_MSGS (2000), BENCH_WS_WINDOW (16).
"""

import argparse
import importlib.util
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in bench/
_spec = importlib.util.spec_from_file_location("proxylib", os.path.join(HERE, "proxy-lib.py"))
L = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(L)

USER = "bench"
BASE = f"/user/{USER}/"
# (name, path under BASE, label); the static file is picked in setup (L.lab_asset)
ENDPOINTS = [("status", "api/status", "/api/status (JSON, ~120 B)")]
NODELAY_CONFIG = """# bench: TCP_NODELAY on kernel WebSockets (see bench/proxy-bench.py)
from jupyter_server.services.kernels.websocket import KernelWebsocketHandler as _H
_orig_open = _H.open
def _open(self, *a, **k):
    self.set_nodelay(True)
    return _orig_open(self, *a, **k)
_H.open = _open
"""


def env_int(name, default):
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


class Bench:
    def __init__(self, args):
        self.w = os.path.abspath(args.workdir)
        os.makedirs(self.w, exist_ok=True)
        os.chmod(self.w, 0o755)
        self.summary = args.summary
        self.procs = L.Procs(os.path.join(self.w, "pids"))
        self.duration = env_int("BENCH_DURATION", 4)
        self.rounds = env_int("BENCH_ROUNDS", 3)
        self.conns = env_int("BENCH_CONNS", 32)
        self.swapped = None
        self.problems = []

    # ------------------------------------------------------------------ setup
    def setup(self):
        L.log("starting labd and a CPU runtime")
        self.labd = L.Labd(self.procs, os.path.join(self.w, "labd")).start()
        self.labd.setup_user(USER)
        t0 = time.monotonic()
        self.labd.runtime_start()
        s = self.labd.wait_state(("running", "failed", "stopped"), 120)
        if not s or s["state"] != "running":
            raise RuntimeError(f"the runtime did not reach running: {s}\n{self.labd.log_tail()}")
        L.log(f"runtime running after {time.monotonic() - t0:.1f} s (first start: creates the home)")
        self.tok_a = self.labd.runtime_token()
        self.sock_a = self.labd.socket_path()
        asset = L.lab_asset()
        size = os.path.getsize(os.path.join(L.JUPYTER_ENV, "share/jupyter/lab/static", asset))
        del ENDPOINTS[1:]
        ENDPOINTS.append(("static", f"static/lab/{asset}", f"static/lab/{asset} (JS, {size:,} B)"))

        L.log("starting the reference Jupyter (B) on TCP")
        self.tok_b = secrets.token_urlsafe(32)
        self.port_b = L.free_port()
        jdir = os.path.join(self.w, "jupyter-b")
        os.makedirs(jdir, exist_ok=True)
        cfg = os.path.join(jdir, "nodelay_config.py")
        with open(cfg, "w") as fh:
            fh.write(NODELAY_CONFIG)
        L.start_jupyter(self.procs, jdir, self.port_b, BASE, self.tok_b, extra=[f"--config={cfg}"])

        # the synthetic backend's files: the very bytes Jupyter serves
        self.fast_root = os.path.join(self.w, "fast", "root")
        for _, path, _ in ENDPOINTS:
            st, _, body = L.request(self.port_b, "GET", BASE + path,
                                    headers={"Authorization": f"token {self.tok_b}"})
            if st != 200:
                raise RuntimeError(f"reference Jupyter: GET {path}: {st}")
            dst = os.path.join(self.fast_root, BASE.strip("/"), path)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "wb") as fh:
                fh.write(body)
        os.chmod(os.path.join(self.w, "fast"), 0o755)

        L.log("starting nginx and configurable-http-proxy")
        self.port_fast = L.free_port()
        self.port_nx_a, self.port_nx_b, self.port_nx_f = L.free_port(), L.free_port(), L.free_port()
        servers = (L.nginx_proxy_server(self.port_nx_a, f"unix:{self.sock_a}",
                                        auth=f"token {self.tok_a}") +
                   L.nginx_proxy_server(self.port_nx_b, f"127.0.0.1:{self.port_b}") +
                   L.nginx_proxy_server(self.port_nx_f, f"127.0.0.1:{self.port_fast}"))
        self.nginx = L.start_nginx(self.procs, os.path.join(self.w, "nginx"), servers)
        self.port_chp_a, self.port_chp_b, self.port_chp_f = L.free_port(), L.free_port(), L.free_port()
        self.chp_a = L.start_chp(self.procs, os.path.join(self.w, "chp"), self.port_chp_a,
                                 "unix+http://" + urllib.parse.quote(self.sock_a, safe=""),
                                 name="chp-a")
        self.chp_b = L.start_chp(self.procs, os.path.join(self.w, "chp"), self.port_chp_b,
                                 f"http://127.0.0.1:{self.port_b}", name="chp-b")
        self.chp_f = L.start_chp(self.procs, os.path.join(self.w, "chp"), self.port_chp_f,
                                 f"http://127.0.0.1:{self.port_fast}", name="chp-f")

    def nginx_workers(self):
        return L.children(self.nginx.pid)

    # ------------------------------------------------------------------ arms
    def arms(self, phase):
        """(name, port, headers, pids-of-the-proxy-or-None, backend)."""
        la = (self.labd.port, self.labd.runtime_auth(), lambda: [self.labd.web_pid()])
        if phase == "jupyter":
            tb = {"Authorization": f"token {self.tok_b}"}
            return [
                ("direct", self.port_b, tb, None, "B"),
                ("labd", *la, "A"),
                ("nginx-uds", self.port_nx_a, {}, self.nginx_workers, "A"),
                ("chp-uds", self.port_chp_a, {"Authorization": f"token {self.tok_a}"},
                 lambda: [self.chp_a.pid], "A"),
                ("nginx", self.port_nx_b, tb, self.nginx_workers, "B"),
                ("chp", self.port_chp_b, tb, lambda: [self.chp_b.pid], "B"),
            ]
        return [
            ("direct", self.port_fast, {}, None, "F/tcp"),
            ("labd", *la, "F/uds"),
            ("nginx-uds", self.port_nx_a, {}, self.nginx_workers, "F/uds"),
            ("chp-uds", self.port_chp_a, {}, lambda: [self.chp_a.pid], "F/uds"),
            ("nginx", self.port_nx_f, {}, self.nginx_workers, "F/tcp"),
            ("chp", self.port_chp_f, {}, lambda: [self.chp_f.pid], "F/tcp"),
        ]

    def check_arms(self, phase, expect_fast):
        """Every arm answers 200 from the expected backend before timing."""
        for name, port, hdrs, _, _ in self.arms(phase):
            for _, path, _ in ENDPOINTS:
                st, h, body = L.request(port, "GET", BASE + path, headers=hdrs)
                fast = h.get("X-Bench-Backend") == "fast"
                if st != 200 or fast != expect_fast:
                    raise RuntimeError(f"{phase}/{name} GET {path}: {st}, fast backend={fast}: "
                                       f"{body[:200]!r}")

    # ------------------------------------------------------------------ fast backend
    def swap_in_fast(self):
        """The synthetic backend takes the runtime socket's path (the real
        socket is renamed aside); labd's pool is still empty at this point."""
        real = self.sock_a + ".bench-real"
        st = os.stat(self.sock_a)  # Jupyter's: the runtime's own uid
        os.rename(self.sock_a, real)
        self.swapped = real
        server = f"""  server {{
    listen unix:{os.path.basename(self.sock_a)} backlog=1024;
    listen 127.0.0.1:{self.port_fast} backlog=1024;
    root {self.fast_root};
    add_header X-Bench-Backend fast;
    location = {BASE}api/status {{ default_type application/json; }}
  }}
"""
        self.fast = L.start_nginx(self.procs, os.path.join(self.w, "fast"), server,
                                  name="fast-backend", workers=1, run_as=(st.st_uid, st.st_gid),
                                  cwd=os.path.dirname(self.sock_a))
        if not L.wait_until(lambda: os.path.exists(self.sock_a), 5):
            raise RuntimeError("the synthetic backend did not create its socket")
        os.chmod(self.sock_a, 0o666)

    def swap_back(self):
        if not self.swapped:
            return
        if getattr(self, "fast", None):
            self.procs.stop(self.fast)
        if os.path.exists(self.sock_a):
            os.unlink(self.sock_a)
        os.rename(self.swapped, self.sock_a)
        self.swapped = None

    # ------------------------------------------------------------------ HTTP
    def http_phase(self, phase, title):
        arms = self.arms(phase)
        res = {(a[0], e[0]): [] for a in arms for e in ENDPOINTS}
        for rnd in range(self.rounds):
            for ep, path, _ in ENDPOINTS:
                for name, port, hdrs, pids, _ in arms:
                    pl = pids() if pids else []
                    c0 = L.cpu_seconds(pl)
                    r = L.wrk(f"http://127.0.0.1:{port}{BASE}{path}", hdrs, self.duration,
                              self.conns)
                    r["cpu_us"] = (L.cpu_seconds(pl) - c0) * 1e6 / r["requests"] \
                        if pl and r["requests"] else None
                    res[(name, ep)].append(r)
                    if r["errors"]:
                        self.problems.append(f"http {phase} {ep} {name}: {r['errors']} errors "
                                             f"of {r['requests']} requests in round {rnd + 1}")
            L.log(f"http {phase}: round {rnd + 1}/{self.rounds} done")
        self.print_http(phase, title, arms, res)

    def print_http(self, phase, title, arms, res):
        print(f"\n### HTTP, backend {title}")
        print(f"wrk -t1 -c{self.conns} -d{self.duration}s, keep-alive; median of {self.rounds} "
              f"interleaved rounds; cpu = proxy CPU time per request")
        backends = {"A": "runtime Jupyter (sandbox, Unix socket)",
                    "B": "reference Jupyter (TCP)",
                    "F/tcp": "synthetic nginx static (TCP)",
                    "F/uds": "synthetic nginx static (runtime socket path)"}
        for ep, _, label in ENDPOINTS:
            print(f"\n{label}")
            print(f"{'path':<10} {'backend':<53} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
                  f"{'cpu us':>7} {'errors':>6}")
            med = {}
            for name, _, _, _, be in arms:
                rs = res[(name, ep)]
                med[name] = {k: L.median([r[k] for r in rs]) for k in ("rps", "p50", "p99", "cpu_us")}
                errs = sum(r["errors"] for r in rs)
                print(f"{name:<10} {be + ': ' + backends[be]:<53} {L.fmt(med[name]['rps']):>8} "
                      f"{L.fmt(med[name]['p50'], '.2f'):>8} {L.fmt(med[name]['p99'], '.2f'):>8} "
                      f"{L.fmt(med[name]['cpu_us']):>7} {errs:>6}")
            lab = med["labd"]
            line = []
            for peer in ("chp", "chp-uds", "nginx-uds", "nginx", "direct"):
                rr = L.ratio(lab["rps"], med[peer]["rps"])
                pr = L.ratio(lab["p99"], med[peer]["p99"])
                line.append(f"labd/{peer}: req/s {L.fmt(rr, '.2f')}x, p99 {L.fmt(pr, '.2f')}x")
            print("  " + "; ".join(line))
            chp_r = L.ratio(lab["rps"], med["chp"]["rps"])
            ngx_r = L.ratio(lab["rps"], med["nginx-uds"]["rps"])
            bench = f"http {'synthetic' if phase == 'fast' else phase} {ep}"
            L.summary(self.summary, bench, "req/s", lab["rps"], "chp", med["chp"]["rps"],
                      ">=3x", "yes" if chp_r and chp_r >= 3 else "NO")
            L.summary(self.summary, bench, "req/s", lab["rps"], "nginx-uds",
                      med["nginx-uds"]["rps"], ">=0.8x", "yes" if ngx_r and ngx_r >= 0.8 else "NO")
            L.summary(self.summary, bench, "p99 ms", lab["p99"], "nginx-uds",
                      med["nginx-uds"]["p99"], "-", "-")
            L.summary(self.summary, bench, "cpu us/req", lab["cpu_us"], "nginx-uds",
                      med["nginx-uds"]["cpu_us"], "-", "-")

    # ------------------------------------------------------------------ WebSocket
    def ws(self):
        n = env_int("BENCH_WS_N", 1000)
        msgs = env_int("BENCH_WS_MSGS", 2000)
        window = env_int("BENCH_WS_WINDOW", 16)
        tb = f"Authorization: token {self.tok_b}"
        st, _, raw = L.request(self.labd.port, "POST", BASE + "api/kernels", headers=self.labd.runtime_auth(),
                               body={})
        ka = (L.jbody(raw) or {}).get("id")
        st_b, _, raw = L.request(self.port_b, "POST", BASE + "api/kernels",
                                 headers={"Authorization": f"token {self.tok_b}"}, body={})
        kb = (L.jbody(raw) or {}).get("id")
        if not ka or not kb:
            raise RuntimeError(f"could not start kernels (labd {st}, reference {st_b})")
        arms = [
            ("direct-uds", ["--unix", self.sock_a], f"Authorization: token {self.tok_a}", ka, "A"),
            ("labd", ["--tcp", str(self.labd.port), "--host", self.labd.runtime_auth()["Host"]],
             f"Authorization: Bearer {self.labd.token}", ka, "A"),
            ("nginx-uds", ["--tcp", str(self.port_nx_a)], None, ka, "A"),
            ("chp-uds", ["--tcp", str(self.port_chp_a)], f"Authorization: token {self.tok_a}", ka, "A"),
            ("direct", ["--tcp", str(self.port_b)], tb, kb, "B"),
            ("chp", ["--tcp", str(self.port_chp_b)], tb, kb, "B"),
            ("nginx", ["--tcp", str(self.port_nx_b)], tb, kb, "B"),
        ]
        res = {}
        for name, where, hdr, kid, _ in arms:
            argv = [L.PY, os.path.join(HERE, "ws-rtt.py"), *where,
                    "--path", f"{BASE}api/kernels/{kid}/channels", "--n", str(n),
                    "--warmup", str(max(10, n // 10)), "--msgs", str(msgs), "--window", str(window),
                    "--limit", "90", "--v1"]
            if hdr:
                argv += ["--header", hdr]
            try:
                out = subprocess.run(argv, capture_output=True, text=True, timeout=120).stdout
                res[name] = json.loads(out.strip().splitlines()[-1])
            except (subprocess.TimeoutExpired, ValueError, IndexError) as e:
                res[name] = {"ok": False, "error": str(e)}
            r = res[name]
            if not r.get("ok") or r.get("truncated"):
                self.problems.append(f"ws {name}: {r.get('error') or 'stopped at the time limit'}")
            L.log(f"ws {name}: p50 {L.fmt(r.get('rtt_p50'), '.2f')} ms, "
                  f"{L.fmt(r.get('replies_per_s'))} replies/s")
        for path, kid, hdrs in ((self.labd.port, ka, self.labd.runtime_auth()),
                                (self.port_b, kb, {"Authorization": f"token {self.tok_b}"})):
            L.request(path, "DELETE", f"{BASE}api/kernels/{kid}", headers=hdrs)

        print("\n### WebSocket: kernel_info_request round trips on "
              "/user/bench/api/kernels/<id>/channels")
        print(f"latency: {n} round trips, one in flight, after {max(10, n // 10)} warm-up; "
              f"rate: {msgs} requests, {window} in flight (each answered by 3 frames: "
              f"busy, reply, idle)")
        print(f"{'path':<11} {'backend':<39} {'p50 ms':>8} {'p99 ms':>8} {'replies/s':>10} "
              f"{'frames/s':>9}  note")
        backends = {"A": "A: runtime Jupyter, Unix socket",
                    "B": "B: reference Jupyter, TCP (nodelay)"}
        for name, _, _, _, be in arms:
            r = res[name]
            note = ("" if r.get("ok") else r.get("error", "failed")) + \
                (" (time limit: partial)" if r.get("truncated") else "")
            print(f"{name:<11} {backends[be]:<39} {L.fmt(r.get('rtt_p50'), '.2f'):>8} "
                  f"{L.fmt(r.get('rtt_p99'), '.2f'):>8} {L.fmt(r.get('replies_per_s')):>10} "
                  f"{L.fmt(r.get('frames_per_s')):>9}  {note}")
        lab = res["labd"]
        for peer in ("chp", "chp-uds", "nginx-uds", "direct-uds", "direct"):
            p = res[peer]
            print(f"  labd/{peer}: p50 {L.fmt(L.ratio(lab.get('rtt_p50'), p.get('rtt_p50')), '.2f')}x, "
                  f"p99 {L.fmt(L.ratio(lab.get('rtt_p99'), p.get('rtt_p99')), '.2f')}x, replies/s "
                  f"{L.fmt(L.ratio(lab.get('replies_per_s'), p.get('replies_per_s')), '.2f')}x")
        for peer in ("chp", "chp-uds", "direct-uds"):
            p = res[peer]
            L.summary(self.summary, "ws kernel_info", "p50 ms", lab.get("rtt_p50"), peer,
                      p.get("rtt_p50"), "-", "-")
            L.summary(self.summary, "ws kernel_info", "p99 ms", lab.get("rtt_p99"), peer,
                      p.get("rtt_p99"), "-", "-")
            L.summary(self.summary, "ws kernel_info", "replies/s", lab.get("replies_per_s"), peer,
                      p.get("replies_per_s"), "-", "-")

    # ------------------------------------------------------------------ profiling
    def hold(self):
        """--only hold: the synthetic set-up, then wait (BENCH_HOLD_S, default 600 s, or
        until interrupted) so that labd-web can be profiled under a load run by hand."""
        self.swap_in_fast()
        self.check_arms("fast", True)
        auth = " ".join(f"-H '{k}: {v}'" for k, v in self.labd.runtime_auth().items())
        print(f"labd-web pid {self.labd.web_pid()}; nginx workers {self.nginx_workers()}\n"
              f"labd:      wrk -t1 -c{self.conns} -d{self.duration}s --latency {auth} "
              f"http://127.0.0.1:{self.labd.port}{BASE}api/status\n"
              f"nginx-uds: wrk -t1 -c{self.conns} -d{self.duration}s --latency "
              f"http://127.0.0.1:{self.port_nx_a}{BASE}api/status", flush=True)
        time.sleep(env_int("BENCH_HOLD_S", 600))
        self.swap_back()

    # ------------------------------------------------------------------ teardown
    def teardown(self):
        try:
            self.swap_back()
        except OSError as e:
            L.log(f"could not put the runtime socket back: {e}")
        try:
            if getattr(self, "labd", None):
                s = self.labd.runtime_stop(30)
                if s and s.get("state") not in ("stopped", "failed"):
                    L.log(f"runtime did not stop: {s}")
                self.labd.stop()
                for count, line in self.labd.log_problems():
                    self.problems.append(f"labd log ({count}x): {line}")
        finally:
            self.procs.stop_all()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--summary")
    ap.add_argument("--only", choices=("http", "synthetic", "ws", "hold"))
    args = ap.parse_args()
    L.install_signal_exit()
    b = Bench(args)
    rc = 0
    try:
        b.setup()
        if args.only == "hold":
            b.hold()
        if args.only in (None, "http", "synthetic"):
            # F first: neither labd nor nginx may hold pooled connections to A yet
            L.log("http: synthetic backend (F) on the runtime socket path")
            b.swap_in_fast()
            b.check_arms("fast", True)
            b.http_phase("fast", "F: synthetic nginx static backend (proxy capacity)")
            b.swap_back()
        if args.only in (None, "http"):
            # labd's pooled upstream connections now point at a closed backend:
            # the next request must still succeed (stale-pool retry)
            st, h, body = L.request(b.labd.port, "GET", BASE + "api/status", headers=b.labd.runtime_auth())
            if st != 200 or h.get("X-Bench-Backend"):
                b.problems.append(f"labd after its upstream restarted: {st} {body[:200]!r}")
            b.check_arms("jupyter", False)
            L.log("http: Jupyter backends (A: runtime, B: reference)")
            b.http_phase("jupyter", "A (runtime Jupyter via labd / nginx-uds) and B "
                                    "(reference Jupyter via direct / nginx / chp)")
        if args.only in (None, "ws"):
            L.log("websocket round trips")
            b.ws()
    except Exception as e:  # report, clean up, fail
        print(f"proxy-bench: {type(e).__name__}: {e}", file=sys.stderr)
        rc = 1
    finally:
        b.teardown()
    if b.problems:
        print("\nproblems seen:")
        for p in b.problems[:30]:
            print(f"  - {p}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
