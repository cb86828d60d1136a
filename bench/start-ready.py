#!/usr/bin/python3
"""start-ready.py - time from "start" to a JupyterLab the user can use:
labd (full sandbox) against JupyterHub (bench/setup.sh: jupyterhub 6.1.1 from
PyPI, configurable-http-proxy 5.3.0 from npm) in one run.

Both sides run the same JupyterLab 4 / Jupyter Server 2 from the same
environment (/opt/labd/jupyter): labd's runtime runs its jupyter-lab;
JupyterHub's LocalProcessSpawner runs jupyterhub-singleuser with that
environment's python (JupyterHub and the dependencies the environment lacks
appended to sys.path, see DEPS_CLOSURE), which loads the same server
extensions (lab, git, terminals).

"Ready" = JupyterLab's page served through the proxy AND a kernel answers:
  t0     = the start request: labd POST /api/v1/me/runtime {"type":"cpu"};
           hub POST /hub/api/users/labdbench/server (admin service token);
  api    = the start API says ready (labd: GET /api/v1/me/runtime "running",
           polled every 5 ms; hub: the POST's 201, or after a 202 the server
           shown ready);
  page   = first 200 with JupyterLab's HTML from GET <base>/lab through the
           proxy (polled every 25 ms from t0);
  ready  = after the page: POST <base>api/kernels (201), its WebSocket
           <base>api/kernels/<id>/channels (subprotocol
           v1.kernel.websocket.jupyter.org, as JupyterLab 4 asks for) and one
           execute_request "6*7" answered by execute_reply "ok" with the
           execute_result 42 on iopub.
One warm-up start each (labd's first start also creates the user's ext4
home), then RUNS timed starts; each is stopped (and seen stopped) before the
next, the two sides taking turns.  JupyterHub spawns for a system user "labdbench" that this script
creates (useradd --system) when missing and removes again.

Usage: start-ready.py --workdir DIR [--summary FILE] [--runs 5] [--only labd|hub]
"""

import argparse
import importlib.util
import json
import os
import pwd
import secrets
import signal
import subprocess
import sys
import threading
import time
import types
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in bench/


def _load(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, file))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


L = _load("proxylib", "proxy-lib.py")
WSC = _load("wsrtt", "ws-rtt.py")  # its WebSocket client

HUB_USER = "labdbench"
START_LIMIT = 90  # seconds for one start to be ready
STOP_LIMIT = 60
TARGET = 0.8  # labd / JupyterHub, time to ready (issue 10)


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


# --------------------------------------------------------------------------- ready check


def lab_page(port, base, headers):
    """True when <base>lab answers 200 with JupyterLab's page."""
    st, _, body = L.request(port, "GET", base + "lab", headers=headers, timeout=5)
    return st == 200 and b"jupyter-config-data" in body


def kernel_answers(port, base, headers, timeout=START_LIMIT):
    """Starts a kernel, runs 6*7 on it over its WebSocket and waits for the
    reply and the result 42; deletes the kernel.  Raises on any failure."""
    st, _, raw = L.request(port, "POST", base + "api/kernels", body={}, headers=headers,
                           timeout=timeout)
    kid = (L.jbody(raw) or {}).get("id") if st == 201 else None
    if not kid:
        raise RuntimeError(f"POST {base}api/kernels: {st} {raw[:200]!r}")
    sid = uuid.uuid4().hex
    hdrs = [f"{k}: {v}" for k, v in headers.items() if k.lower() != "host"]
    hdrs.append(f"Sec-WebSocket-Protocol: {WSC.SUBPROTOCOL_V1}")
    args = types.SimpleNamespace(unix=None, tcp=port, host=headers.get("Host"), header=hdrs,
                                 path=f"{base}api/kernels/{kid}/channels?session_id={sid}")
    ws = WSC.WS.connect(args)
    try:
        if ws.subprotocol != WSC.SUBPROTOCOL_V1:
            raise RuntimeError(f"the server chose subprotocol {ws.subprotocol!r}")
        ws.sock.settimeout(timeout)
        WSC.send(ws, WSC.message(sid, sid + "-x", "execute_request", {
            "code": "6*7", "silent": False, "store_history": False, "user_expressions": {},
            "allow_stdin": False, "stop_on_error": True}), True)
        replied, result = False, False
        while not (replied and result):
            msg = WSC.decode(ws.recv())
            if msg.get("parent_header", {}).get("msg_id") != sid + "-x":
                continue
            kind = msg["header"]["msg_type"]
            if kind == "execute_reply":
                if msg["content"].get("status") != "ok":
                    raise RuntimeError(f"execute_reply: {msg['content']}")
                replied = True
            elif kind == "execute_result":
                result = msg["content"]["data"].get("text/plain") == "42"
    finally:
        ws.sock.close()
        L.request(port, "DELETE", f"{base}api/kernels/{kid}", headers=headers)


def timed_ready(t0, port, base, headers):
    """(page, ready) seconds after t0 (None when it never came)."""
    t_page = poll(lambda: lab_page(port, base, headers), START_LIMIT, 0.025)
    if t_page is None:
        return None, None
    kernel_answers(port, base, headers)
    return t_page - t0, time.monotonic() - t0


# --------------------------------------------------------------------------- labd


class LabdSide:
    """labd with user "bench": one timed start (and stop) per call of run()."""

    name = "labd"
    base = "/user/bench/"

    def __init__(self, procs, w, problems):
        self.labd = L.Labd(procs, os.path.join(w, "labd"))
        self.problems = problems

    def start(self):
        self.labd.start()
        self.labd.setup_user("bench")

    def run(self, i):
        labd = self.labd
        t0 = time.monotonic()
        s = labd.runtime_start()
        if s.get("state") == "failed":
            raise RuntimeError(f"labd refused the start: {s}")
        api = {}

        def watch_api():
            api["t"] = poll(lambda: (labd.runtime() or {}).get("state") in
                            ("running", "failed", "stopped"), START_LIMIT, 0.005)

        th = threading.Thread(target=watch_api, daemon=True)
        th.start()
        t_page, t_ready = timed_ready(t0, labd.port, self.base, labd.runtime_auth())
        th.join(START_LIMIT)
        state = (labd.runtime() or {}).get("state")
        if state != "running" or t_ready is None or api.get("t") is None:
            raise RuntimeError(f"labd start {i}: state {state}, page {t_page}\n{labd.log_tail()}")
        t_stop0 = time.monotonic()
        s = labd.runtime_stop(STOP_LIMIT)
        t_stop = time.monotonic() - t_stop0
        if not s or s.get("state") not in ("stopped", "failed"):
            raise RuntimeError(f"labd runtime did not stop within {STOP_LIMIT} s: {s}")
        r = {"api": api["t"] - t0, "page": t_page, "ready": t_ready, "stop": t_stop}
        L.log(f"labd start {'warm-up' if i == 0 else i}: running after {r['api']:.2f} s, "
              f"JupyterLab page after {t_page:.2f} s, kernel answered after {t_ready:.2f} s;"
              f" stopped in {t_stop:.2f} s")
        return r

    def stop(self):
        for count, line in self.labd.log_problems():
            self.problems.append(f"labd log ({count}x): {line}")
        self.labd.stop()


# --------------------------------------------------------------------------- JupyterHub

# jupyterhub-singleuser from the JupyterLab environment's python: that
# environment's packages first, then a directory holding only JupyterHub and the
# dependencies the environment lacks (see DEPS_CLOSURE).
SINGLEUSER = ("import sys; sys.path.append({path!r}); "
              "from jupyterhub.singleuser import main; sys.exit(main())")

# Run by the hub venv's python with the JupyterLab environment's distribution
# names: prints the top-level modules of jupyterhub's dependency closure, not
# descending into what the environment already has.  Exposing the whole hub
# venv instead would hand the environment packages it leaves out on purpose
# (lark and rfc3987-syntax, whose import cost JupyterLab over a CPU second of
# start-up: deploy/jupyter).
DEPS_CLOSURE = r"""
import importlib.metadata as md, json, re, sys
have = set(json.loads(sys.argv[1]))
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
todo, seen, tops = ["jupyterhub"], set(), set()
while todo:
    n = norm(todo.pop())
    if n in seen or (n in have and n != "jupyterhub"):
        continue
    seen.add(n)
    try:
        d = md.distribution(n)
    except md.PackageNotFoundError:
        continue
    for r in d.requires or []:
        m = re.match(r"[A-Za-z0-9_.-]+", r)
        if m and "extra ==" not in r:
            todo.append(m.group(0))
    for f in d.files or []:
        top = f.parts[0]
        if not top.endswith((".dist-info", ".pth")) and top not in ("..", "__pycache__", "bin"):
            tops.add(top)
print(json.dumps(sorted(tops)))
"""
ENV_DISTS = ("import importlib.metadata as md, json, re; print(json.dumps(sorted("
             "{re.sub(r'[-_.]+', '-', d.metadata['Name']).lower() for d in md.distributions()})))")

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
c.ConfigurableHTTPProxy.command = [{chp!r}]
c.JupyterHub.services = [{{"name": "bench", "api_token": "{token}"}}]
c.JupyterHub.load_roles = [{{"name": "bench", "services": ["bench"],
    "scopes": ["admin:users", "admin:servers", "access:servers"]}}]
c.Spawner.cmd = [{py!r}, "-c", {singleuser!r}]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "{home}"
c.Spawner.environment = {{"PATH": "{env}/bin:/usr/bin:/bin"}}
c.Spawner.start_timeout = {limit}
c.Spawner.http_timeout = {limit}
"""


class Hub:
    """JupyterHub with user "labdbench": one timed start (and stop) per run()."""

    name = "JupyterHub"

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
        path = self.singleuser_path()
        with open(cfg, "w") as fh:
            fh.write(HUB_CONFIG.format(port=self.port, hub_port=self.hub_port, dir=self.dir,
                                       api_port=self.api_port, proxy_token=secrets.token_hex(24),
                                       token=self.token, home=self.home, limit=START_LIMIT,
                                       chp=L.CHP, py=f"{L.JUPYTER_ENV}/bin/python",
                                       singleuser=SINGLEUSER.format(path=path),
                                       env=L.JUPYTER_ENV))
        env = {"PATH": f"{L.HUB_ENV}/bin:/usr/bin:/bin:/usr/sbin:/sbin", "LANG": "C.UTF-8",
               "HOME": self.dir}
        self.proc = self.procs.start("jupyterhub", [f"{L.HUB_ENV}/bin/jupyterhub", "-f", cfg],
                                     os.path.join(self.dir, "jupyterhub.log"), env=env,
                                     cwd=self.dir)
        ok = L.wait_until(lambda: self.proc.poll() is None and
                          L.request(self.port, "GET", "/hub/api/")[0] == 200, 60, 0.2)
        if not ok:
            raise RuntimeError("JupyterHub did not answer /hub/api/ within 60 s:\n" + self.log_tail())
        st, _, raw = L.request(self.port, "POST", f"/hub/api/users/{HUB_USER}", headers=self.auth())
        if st not in (201, 409):
            raise RuntimeError(f"JupyterHub: create user: {st} {raw[:300]!r}")

    def singleuser_path(self):
        """A directory of links to JupyterHub and the dependencies the JupyterLab
        environment lacks (DEPS_CLOSURE), for the single-user server's sys.path."""
        def py(python, *argv):
            return subprocess.run([python, *argv], capture_output=True, text=True, check=True,
                                  timeout=60).stdout.strip()
        have = py(f"{L.JUPYTER_ENV}/bin/python", "-c", ENV_DISTS)
        site = py(f"{L.HUB_ENV}/bin/python", "-c",
                  "import sysconfig; print(sysconfig.get_paths()['purelib'])")
        path = os.path.join(self.dir, "singleuser-path")
        os.makedirs(path, exist_ok=True)
        for top in json.loads(py(f"{L.HUB_ENV}/bin/python", "-c", DEPS_CLOSURE, have)):
            if os.path.exists(os.path.join(site, top)):
                os.symlink(os.path.join(site, top), os.path.join(path, top))
        return path

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

    def run(self, i):
        base = f"/user/{HUB_USER}/"
        t0 = time.monotonic()
        api = {}

        def spawn():
            st, _, raw = L.request(self.port, "POST", f"/hub/api/users/{HUB_USER}/server",
                                   headers=self.auth(), timeout=START_LIMIT)
            if st == 201:
                api["t"] = time.monotonic()
            elif st == 202:
                api["t"] = poll(lambda: (self.server() or {}).get("ready"), START_LIMIT, 0.025)
            else:
                api["error"] = f"JupyterHub spawn: {st} {raw[:300]!r}"

        th = threading.Thread(target=spawn, daemon=True)
        th.start()
        t_page, t_ready = timed_ready(t0, self.port, base, self.auth())
        th.join(START_LIMIT)
        if api.get("error") or api.get("t") is None or t_ready is None:
            raise RuntimeError(f"JupyterHub start {i}: {api}, page {t_page}\n{self.log_tail()}")
        t_stop0 = time.monotonic()
        L.request(self.port, "DELETE", f"/hub/api/users/{HUB_USER}/server",
                  headers=self.auth(), timeout=STOP_LIMIT)
        if poll(lambda: self.server() is None, STOP_LIMIT, 0.05) is None:
            raise RuntimeError("JupyterHub: the server did not stop\n" + self.log_tail())
        r = {"api": api["t"] - t0, "page": t_page, "ready": t_ready,
             "stop": time.monotonic() - t_stop0}
        L.log(f"hub start {'warm-up' if i == 0 else i}: ready after {r['api']:.2f} s, "
              f"JupyterLab page after {t_page:.2f} s, kernel answered after {t_ready:.2f} s;"
              f" stopped in {r['stop']:.2f} s")
        return r

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


def versions():
    def py(env, mod):
        r = subprocess.run([f"{env}/bin/python", "-c", f"import {mod}; print({mod}.__version__)"],
                           capture_output=True, text=True, timeout=30)
        return r.stdout.strip() or "?"
    chp = subprocess.run([L.CHP, "--version"], capture_output=True, text=True, timeout=30)
    return (f"jupyterlab {py(L.JUPYTER_ENV, 'jupyterlab')}, jupyter_server "
            f"{py(L.JUPYTER_ENV, 'jupyter_server')}, jupyterhub {py(L.HUB_ENV, 'jupyterhub')}, "
            f"configurable-http-proxy {chp.stdout.strip() or '?'}")


def print_table(args, lab, hub_res, hub_err, problems):
    print("\n### Start to ready: labd (full sandbox) vs JupyterHub LocalProcessSpawner "
          "(no sandbox), the same JupyterLab on both")
    print(versions())
    print(f"{args.runs} timed starts each after one warm-up; seconds; median [min-max]; "
          f"ready = JupyterLab page served and a kernel answered execute_request")
    cols = (("api", "api says ready"), ("page", "JupyterLab page"), ("ready", "kernel answers"))
    print(f"{'':<26} " + " ".join(f"{label:>20}" for _, label in cols) + f" {'stop':>8}")

    def row(name, rs, warm):
        def cell(k):
            xs = [r[k] for r in rs if r.get(k) is not None]
            return f"{L.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]" if xs else "-"
        print(f"{name:<26} " + " ".join(f"{cell(k):>20}" for k, _ in cols) +
              f" {L.fmt(L.median([r['stop'] for r in rs]), '.2f'):>8}")
        print(f"{'  warm-up (first) start':<26} " +
              " ".join(f"{L.fmt(warm.get(k), '.2f'):>20}" for k, _ in cols))

    if lab:
        row("labd", lab[1:], lab[0])
    if hub_res:
        row("JupyterHub (CHP)", hub_res[1:], hub_res[0])
    elif hub_err:
        print(f"JupyterHub: not measured: {hub_err}")
    if lab and hub_res:
        for k, label in cols:
            a = L.median([r[k] for r in lab[1:]])
            b = L.median([r[k] for r in hub_res[1:]])
            r = L.ratio(a, b)
            target = k == "ready"
            met = r is not None and r <= TARGET
            print(f"  labd/JupyterHub ({label}): {L.fmt(r, '.2f')}x" +
                  (f" (target <= {TARGET:.1f}x: {'met' if met else 'NOT met'})" if target else ""))
            L.summary(args.summary, "start to ready", f"{k} s", a, "jupyterhub", b,
                      f"<={TARGET}x" if target else "-", ("yes" if met else "NO") if target else "-")
    for p in problems:
        print(f"  problem: {p}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--summary")
    ap.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_START_RUNS", 5)))
    ap.add_argument("--only", choices=("labd", "hub"))
    args = ap.parse_args()
    L.install_signal_exit()
    w = os.path.abspath(args.workdir)
    os.makedirs(w, exist_ok=True)
    os.chmod(w, 0o755)
    procs = L.Procs(os.path.join(w, "pids"))
    problems = []
    sides = []
    if args.only != "hub":
        sides.append(LabdSide(procs, w, problems))
    if args.only != "labd":
        sides.append(Hub(procs, w))
    results = {s.name: [] for s in sides}
    errors = {}
    try:
        for side in sides:
            try:
                if side.name == "JupyterHub" and not (os.access(f"{L.HUB_ENV}/bin/jupyterhub", os.X_OK)
                                                      and os.access(L.CHP, os.X_OK)):
                    raise RuntimeError("JupyterHub or configurable-http-proxy missing "
                                       "(bash bench/setup.sh)")
                side.start()
            except Exception as e:
                errors[side.name] = f"{type(e).__name__}: {e}"
        # The two sides take turns (which one goes first alternates), so that a machine
        # whose load changes during the run weighs on both alike.
        for i in range(args.runs + 1):
            for side in sides if i % 2 == 0 else reversed(sides):
                if side.name in errors:
                    continue
                try:
                    results[side.name].append(side.run(i))
                except Exception as e:
                    errors[side.name] = f"{type(e).__name__}: {e}"
    finally:
        for side in sides:
            try:
                side.stop()
            except Exception as e:
                problems.append(f"{side.name} stop: {type(e).__name__}: {e}")
        procs.stop_all()
    for name, err in errors.items():
        print(f"start-ready: {name}: {err}", file=sys.stderr)
    lab = results.get("labd") if "labd" not in errors else None
    hub_res = results.get("JupyterHub") if "JupyterHub" not in errors else None
    hub_err = errors.get("JupyterHub")
    print_table(args, lab, hub_res, hub_err, problems)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
