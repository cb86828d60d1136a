#!/usr/bin/python3
"""start-ready.py - time from "start" to a Jupyter the user can reach:
labd (full sandbox) against JupyterHub 3 with its LocalProcessSpawner, in one run.

Both start the same app, Notebook 6 (Debian's jupyter-notebook; JupyterHub via
jupyterhub-singleuser with JUPYTERHUB_SINGLEUSER_APP=notebook.notebookapp.NotebookApp).

labd:  t0 = POST /api/v1/me/runtime {"type":"cpu"};
       api   = GET /api/v1/me/runtime first says "running" (polled every 5 ms);
       proxy = first 200 from GET /user/bench/api/status through labd;
       up    = first 200 from Jupyter's own socket (polled every 2 ms, token
               from labd's database): when Jupyter itself was ready, so
               api - up is labd's own detection delay.
hub:   t0 = POST /hub/api/users/labdbench/server (admin service token);
       api   = that POST answers 201 (or, after a 202, GET /hub/api/users/<u>
               shows the server ready);
       proxy = first 200 from GET /user/labdbench/api/status through the hub's
               configurable-http-proxy.
One warm-up start each (labd's first start also creates the user's ext4
home), then RUNS timed starts; each is stopped (and seen stopped) before
the next.  JupyterHub spawns for a system user "labdbench" that this script
creates (useradd --system) when missing and removes again.

Usage: start-ready.py --workdir DIR [--summary FILE] [--runs 5]
"""

import argparse
import importlib.util
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in bench/
_spec = importlib.util.spec_from_file_location("proxylib", os.path.join(HERE, "proxy-lib.py"))
L = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(L)

HUB_USER = "labdbench"
START_LIMIT = 90  # seconds for one start to be ready
STOP_LIMIT = 60


def poll(fn, timeout, interval):
    """Seconds (monotonic) when fn() first returned true, or None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if fn():
                return time.monotonic()
        except OSError:
            pass
        time.sleep(interval)
    return None


# --------------------------------------------------------------------------- labd


def labd_runs(procs, w, runs, problems):
    labd = L.Labd(procs, os.path.join(w, "labd")).start()
    try:
        labd.setup_user("bench")
        out = []
        for i in range(runs + 1):
            t0 = time.monotonic()
            s = labd.runtime_start()
            if s.get("state") == "failed":
                raise RuntimeError(f"labd refused the start: {s}")
            up = {}

            def watch_socket():
                tok = None
                deadline = time.monotonic() + START_LIMIT
                while time.monotonic() < deadline and "t" not in up and not up.get("stop"):
                    try:
                        tok = tok or labd.runtime_token()
                        if tok and L.request(0, "GET", "/user/bench/api/status", unix=labd.socket_path(),
                                             headers={"Authorization": f"token {tok}"},
                                             timeout=2)[0] == 200:
                            up["t"] = time.monotonic()
                    except OSError:
                        pass
                    time.sleep(0.002)

            th = threading.Thread(target=watch_socket, daemon=True)
            th.start()
            t_api = poll(lambda: (labd.runtime() or {}).get("state") in ("running", "failed", "stopped"),
                         START_LIMIT, 0.005)
            state = (labd.runtime() or {}).get("state")
            if state != "running":
                up["stop"] = True
                raise RuntimeError(f"labd start {i}: state {state}\n{labd.log_tail()}")
            t_proxy = poll(lambda: L.request(labd.port, "GET", "/user/bench/api/status",
                                             headers=labd.runtime_auth())[0] == 200, 30, 0.025)
            th.join(5)
            up["stop"] = True
            t_stop0 = time.monotonic()
            s = labd.runtime_stop(STOP_LIMIT)
            t_stop = time.monotonic() - t_stop0
            if not s or s.get("state") not in ("stopped", "failed"):
                raise RuntimeError(f"labd runtime did not stop within {STOP_LIMIT} s: {s}")
            r = {"api": t_api - t0, "proxy": t_proxy - t0 if t_proxy else None,
                 "up": up["t"] - t0 if "t" in up else None, "stop": t_stop}
            L.log(f"labd start {'warm-up' if i == 0 else i}: running after {r['api']:.2f} s, "
                  f"proxy 200 after {L.fmt(r['proxy'], '.2f')} s, Jupyter up after "
                  f"{L.fmt(r['up'], '.2f')} s; stopped in {t_stop:.2f} s")
            out.append(r)
        for count, line in labd.log_problems():
            problems.append(f"labd log ({count}x): {line}")
        return out
    finally:
        labd.stop()


# --------------------------------------------------------------------------- JupyterHub


HUB_CONFIG = """# generated by bench/start-ready.py
c = get_config()  # noqa
c.JupyterHub.bind_url = "http://127.0.0.1:{port}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub_port}"
c.JupyterHub.db_url = "sqlite:///{dir}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{dir}/cookie_secret"
c.JupyterHub.pid_file = "{dir}/hub.pid"
c.JupyterHub.authenticator_class = "dummy"
c.JupyterHub.spawner_class = "localprocess"
c.JupyterHub.cleanup_servers = True
c.JupyterHub.cleanup_proxy = True
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.ConfigurableHTTPProxy.auth_token = "{proxy_token}"
c.ConfigurableHTTPProxy.pid_file = "{dir}/chp.pid"
c.ConfigurableHTTPProxy.command = ["/usr/bin/configurable-http-proxy"]
c.JupyterHub.services = [{{"name": "bench", "api_token": "{token}"}}]
c.JupyterHub.load_roles = [{{"name": "bench", "services": ["bench"],
    "scopes": ["admin:users", "admin:servers", "access:servers"]}}]
c.Spawner.cmd = ["jupyterhub-singleuser"]
c.Spawner.notebook_dir = "{home}"
c.Spawner.environment = {{"JUPYTERHUB_SINGLEUSER_APP": "notebook.notebookapp.NotebookApp"}}
c.Spawner.start_timeout = {limit}
c.Spawner.http_timeout = {limit}
"""


class Hub:
    def __init__(self, procs, w):
        self.procs = procs
        self.dir = os.path.join(w, "hub")
        self.home = os.path.join(self.dir, "home")
        self.port, self.hub_port, self.api_port = L.free_port(), L.free_port(), L.free_port()
        self.token = secrets.token_hex(24)
        self.created_user = False
        self.proc = None
        self.marker = os.path.join(w, "hub-user-created")

    def make_user(self):
        os.makedirs(self.home, exist_ok=True)
        try:
            pwd.getpwnam(HUB_USER)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", self.home,
                            "--shell", "/usr/sbin/nologin", HUB_USER], check=True,
                           capture_output=True, timeout=30)
            self.created_user = True
            with open(self.marker, "w") as fh:
                fh.write(HUB_USER + "\n")
        u = pwd.getpwnam(HUB_USER)
        if u.pw_dir != self.home:
            subprocess.run(["usermod", "--home", self.home, HUB_USER], check=True,
                           capture_output=True, timeout=30)
        os.chown(self.home, u.pw_uid, u.pw_gid)
        os.chmod(self.dir, 0o755)

    def remove_user(self):
        if self.created_user:
            subprocess.run(["userdel", HUB_USER], capture_output=True, timeout=30)
            self.created_user = False
            try:
                os.unlink(self.marker)
            except OSError:
                pass

    def start(self):
        self.make_user()
        cfg = os.path.join(self.dir, "jupyterhub_config.py")
        with open(cfg, "w") as fh:
            fh.write(HUB_CONFIG.format(port=self.port, hub_port=self.hub_port, dir=self.dir,
                                       api_port=self.api_port, proxy_token=secrets.token_hex(24),
                                       token=self.token, home=self.home, limit=START_LIMIT))
        env = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "LANG": "C.UTF-8", "HOME": self.dir,
               "NODE_PATH": L.NODE_PATH}
        self.proc = self.procs.start("jupyterhub", [L.PY, "/usr/bin/jupyterhub", "-f", cfg],
                                     os.path.join(self.dir, "jupyterhub.log"), env=env,
                                     cwd=self.dir)
        ok = L.wait_until(lambda: self.proc.poll() is None and
                          L.request(self.port, "GET", "/hub/api/")[0] == 200, 60, 0.2)
        if not ok:
            raise RuntimeError("JupyterHub did not answer /hub/api/ within 60 s:\n" + self.log_tail())
        st, _, raw = L.request(self.port, "POST", f"/hub/api/users/{HUB_USER}", headers=self.auth())
        if st not in (201, 409):
            raise RuntimeError(f"JupyterHub: create user: {st} {raw[:300]!r}")

    def auth(self):
        return {"Authorization": f"token {self.token}"}

    def log_tail(self, n=25):
        try:
            with open(os.path.join(self.dir, "jupyterhub.log"), errors="replace") as fh:
                return "".join(fh.readlines()[-n:])
        except OSError:
            return ""

    def server(self):
        st, _, raw = L.request(self.port, "GET", f"/hub/api/users/{HUB_USER}", headers=self.auth())
        j = L.jbody(raw) if st == 200 else None
        return ((j or {}).get("servers") or {}).get("")

    def runs(self, runs):
        out = []
        for i in range(runs + 1):
            t0 = time.monotonic()
            st, _, raw = L.request(self.port, "POST", f"/hub/api/users/{HUB_USER}/server",
                                   headers=self.auth(), timeout=START_LIMIT)
            if st == 201:
                t_api = time.monotonic()
            elif st == 202:
                t_api = poll(lambda: (self.server() or {}).get("ready"), START_LIMIT, 0.025)
            else:
                raise RuntimeError(f"JupyterHub spawn: {st} {raw[:300]!r}\n{self.log_tail()}")
            if t_api is None:
                raise RuntimeError("JupyterHub: the server was not ready in time\n" + self.log_tail())
            t_proxy = poll(lambda: L.request(self.port, "GET", f"/user/{HUB_USER}/api/status",
                                             headers=self.auth())[0] == 200, 30, 0.025)
            t_stop0 = time.monotonic()
            L.request(self.port, "DELETE", f"/hub/api/users/{HUB_USER}/server",
                      headers=self.auth(), timeout=STOP_LIMIT)
            if poll(lambda: self.server() is None, STOP_LIMIT, 0.05) is None:
                raise RuntimeError("JupyterHub: the server did not stop\n" + self.log_tail())
            r = {"api": t_api - t0, "proxy": t_proxy - t0 if t_proxy else None,
                 "stop": time.monotonic() - t_stop0}
            L.log(f"hub start {'warm-up' if i == 0 else i}: ready after {r['api']:.2f} s, "
                  f"proxy 200 after {L.fmt(r['proxy'], '.2f')} s; stopped in {r['stop']:.2f} s")
            out.append(r)
        return out

    def stop(self):
        if self.proc:
            self.procs.stop(self.proc, timeout=30)
            self.proc = None
        # the hub started CHP in a session of its own
        try:
            with open(os.path.join(self.dir, "chp.pid")) as fh:
                pid = int(fh.read().strip())
            if "node" in L.comm(pid) or "configurable" in L.comm(pid):
                os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError):
            pass
        self.remove_user()


# --------------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--summary")
    ap.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_START_RUNS", 5)))
    args = ap.parse_args()
    L.install_signal_exit()
    w = os.path.abspath(args.workdir)
    os.makedirs(w, exist_ok=True)
    os.chmod(w, 0o755)
    procs = L.Procs(os.path.join(w, "pids"))
    problems = []
    lab, hub_res, hub_err = None, None, None
    rc = 0
    try:
        L.log("labd: start-to-ready")
        lab = labd_runs(procs, w, args.runs, problems)
    except Exception as e:
        print(f"start-ready: labd: {type(e).__name__}: {e}", file=sys.stderr)
        rc = 1
    hub = Hub(procs, w)
    try:
        if not shutil.which("jupyterhub", path="/usr/bin"):
            raise RuntimeError("jupyterhub is not installed (apt-get install jupyterhub)")
        L.log("JupyterHub: start-to-ready")
        hub.start()
        hub_res = hub.runs(args.runs)
    except Exception as e:
        hub_err = f"{type(e).__name__}: {e}"
        print(f"start-ready: JupyterHub: {hub_err}", file=sys.stderr)
        rc = 1
    finally:
        hub.stop()
        procs.stop_all()

    print("\n### Start to ready: labd (full sandbox) vs JupyterHub 3 LocalProcessSpawner "
          "(no sandbox), Notebook 6 both")
    print(f"{args.runs} timed starts each after one warm-up; seconds; median [min-max]")
    print(f"{'':<26} {'api says ready':>22} {'first 200 via proxy':>22} {'Jupyter up':>18} "
          f"{'stop':>8}")

    def row(name, rs, warm):
        def cell(k):
            xs = [r[k] for r in rs if r.get(k) is not None]
            if not xs:
                return "-"
            return f"{L.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]"
        print(f"{name:<26} {cell('api'):>22} {cell('proxy'):>22} {cell('up'):>18} "
              f"{L.fmt(L.median([r['stop'] for r in rs]), '.2f'):>8}")
        print(f"{'  warm-up (first) start':<26} {warm['api']:>22.2f} "
              f"{L.fmt(warm.get('proxy'), '.2f'):>22} {L.fmt(warm.get('up'), '.2f'):>18}")

    if lab:
        row("labd", lab[1:], lab[0])
        d = [r["api"] - r["up"] for r in lab[1:] if r.get("up") is not None]
        if d:
            print(f"  labd noticed Jupyter was up {L.median(d):.2f} s (median) after it was "
                  f"(the supervisor pushes readiness)")
    if hub_res:
        row("JupyterHub (CHP)", hub_res[1:], hub_res[0])
    elif hub_err:
        print(f"JupyterHub: not measured: {hub_err}")
    if lab and hub_res:
        for k, label in (("api", "api says ready"), ("proxy", "first 200 via proxy")):
            a = L.median([r[k] for r in lab[1:]])
            b = L.median([r[k] for r in hub_res[1:]])
            r = L.ratio(a, b)
            print(f"  labd/JupyterHub ({label}): {L.fmt(r, '.2f')}x "
                  f"(target <= 1.00x: {'met' if r is not None and r <= 1 else 'NOT met'})")
            L.summary(args.summary, "start to ready", f"{k} s", a, "jupyterhub", b, "<=1x",
                      "yes" if r is not None and r <= 1 else "NO")
    for p in problems:
        print(f"  problem: {p}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
