"""proxy-lib.py - helpers shared by the labd benchmarks (standard library only).

Loaded by bench/proxy-bench.py and bench/start-ready.py with load_lib(); not a
test and not part of labd.  Everything here talks to 127.0.0.1 or Unix sockets
only, and every wait has a deadline.
"""

import http.client
import json
import os
import re
import secrets
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BUILD = os.environ.get("BUILD", "build")
BUILD_DIR = BUILD if os.path.isabs(BUILD) else os.path.join(REPO, BUILD)
LABD = os.path.join(BUILD_DIR, "labd")
# The scripts themselves need only the standard library of Debian's python3.
PY = "/usr/bin/python3"
# The runtime's JupyterLab environment (deploy/install-deps.sh): labd's runtimes run
# it, and so does every peer here (reference Jupyter, JupyterHub's single-user server).
JUPYTER_ENV = os.environ.get("BENCH_JUPYTER_ENV", "/opt/labd/jupyter")
# The peers' own installs, made by bench/setup.sh (current releases, not Debian's).
BENCH_DIR = os.environ.get("BENCH_DIR", "/opt/labd/bench")
HUB_ENV = os.path.join(BENCH_DIR, "hub")
CHP = os.path.join(BENCH_DIR, "chp", "node_modules", ".bin", "configurable-http-proxy")


def log(msg):
    print(f"  [{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def driver_lib_line():
    """A [gpu] driver_lib_dir line from GPU_DRIVER_LIB_DIR (bench/gpu-check.sh sets it
    on a host whose driver libraries only LD_LIBRARY_PATH finds), else nothing."""
    d = os.environ.get("GPU_DRIVER_LIB_DIR")
    return f"driver_lib_dir = {d}\n" if d else ""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(fn, timeout, interval=0.05):
    """Calls fn until it returns a true value or timeout seconds pass; returns
    that value, or None."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            v = fn()
        except OSError:
            v = None
        if v:
            return v
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval)


# --------------------------------------------------------------------------- processes


class Procs:
    """The processes one benchmark started: each in its own session, stopped
    (SIGTERM, then SIGKILL to its group) in reverse order by stop_all()."""

    def __init__(self, pid_file=None):
        self.procs = []  # (name, Popen)
        self.pid_file = pid_file

    def start(self, name, argv, log_path, env=None, cwd=None, user=None):
        """user: (uid, gid) to run as, or None for this process's own."""
        logf = open(log_path, "ab")
        ids = {"user": user[0], "group": user[1], "extra_groups": []} if user else {}
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                             env=env, cwd=cwd, start_new_session=True, **ids)
        logf.close()
        self.procs.append((name, p))
        if self.pid_file:
            with open(self.pid_file, "a") as fh:
                fh.write(f"{p.pid}\n")
        return p

    def stop(self, p, timeout=15):
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
        else:
            # the leader exited: anything left in its group goes too
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
        self.procs = [(n, q) for n, q in self.procs if q is not p]
        return p.returncode

    def stop_all(self):
        for _, p in reversed(list(self.procs)):
            self.stop(p)


def install_signal_exit():
    """SIGTERM/SIGHUP/SIGINT raise SystemExit so that finally: blocks clean up."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, handler)


def cpu_seconds(pids):
    """utime+stime of the given processes (all their threads), in seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / tick


def children(pid):
    kids = []
    for f in os.listdir(f"/proc/{pid}/task") if os.path.isdir(f"/proc/{pid}/task") else []:
        try:
            with open(f"/proc/{pid}/task/{f}/children") as fh:
                kids += [int(x) for x in fh.read().split()]
        except OSError:
            pass
    return kids


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


# --------------------------------------------------------------------------- HTTP


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def request(port, method, path, body=None, headers=None, unix=None, timeout=10, source=None):
    """One request on a fresh connection: (status, headers, body bytes).
    source: the loopback address to connect from (another client to labd)."""
    hdrs = dict(headers or {})
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        hdrs.setdefault("Content-Type", "application/json")
    conn = UnixHTTPConnection(unix, timeout) if unix else \
        http.client.HTTPConnection("127.0.0.1", port, timeout=timeout,
                                   source_address=(source, 0) if source else None)
    try:
        conn.request(method, path, body=data, headers=hdrs)
        r = conn.getresponse()
        return r.status, r.msg, r.read()
    finally:
        conn.close()


def jbody(raw):
    try:
        return json.loads(raw)
    except ValueError:
        return None


# --------------------------------------------------------------------------- labd


class Labd:
    """One labd daemon with its own temp config and state (see
    tests/integration/labd_harness.py), driven over its HTTP API."""

    def __init__(self, procs, workdir, runtime=None, sections=None):
        """sections: {"server": {...}, "jobs": {...}} extra config keys; [server]
        and [runtime] ones merge with the defaults here, others are new sections."""
        self.procs = procs
        self.dir = workdir
        os.makedirs(workdir, exist_ok=True)
        os.chmod(workdir, 0o755)  # the web process (user labd) reaches state_dir below it
        self.state_dir = os.path.join(workdir, "state")
        self.port = free_port()
        self.log_path = os.path.join(workdir, "labd.log")
        # jupyter = lab: the runtime runs JupyterLab from [runtime] jupyter_env (never
        # a silent fall-back to another app)
        rt = {"home_size": "1G", "memory": "2G", "idle_timeout": "0", "keep_on_shutdown": "false",
              "jupyter": "lab"}
        rt.update(runtime or {})
        sections = dict(sections or {})
        server = {"listen": f"127.0.0.1:{self.port}", "state_dir": self.state_dir,
                  "web_root": os.path.join(REPO, "web")}
        if os.environ.get("BENCH_LABD_THREADS"):
            server["threads"] = os.environ["BENCH_LABD_THREADS"]
        server.update(sections.pop("server", {}))
        rt.update(sections.pop("runtime", {}))
        sections = {"server": server, "auth": {"scrypt_n": "1024"}, "runtime": rt, **sections}
        lines = []
        for name, keys in sections.items():
            lines += [f"[{name}]"] + [f"{k} = {v}" for k, v in keys.items()] + [""]
        self.config = os.path.join(workdir, "labd.ini")
        with open(self.config, "w") as fh:
            fh.write("\n".join(lines) + "\n")
        self.proc = None
        self.token = None
        self.user = None

    def start(self):
        self.proc = self.procs.start("labd", [LABD, "--config", self.config], self.log_path,
                                     cwd=self.dir)
        ok = wait_until(lambda: self.proc.poll() is None and
                        request(self.port, "GET", "/api/v1/health")[0] == 200, 15, 0.1)
        if not ok:
            raise RuntimeError(f"labd did not answer /api/v1/health within 15 s:\n{self.log_tail()}")
        m = wait_until(lambda: re.search(r"admin password[^:]*: (\S+)", self.log()), 5)
        if not m:
            raise RuntimeError(f"labd printed no admin password:\n{self.log_tail()}")
        self.admin_password = m.group(1)
        return self

    def log(self):
        try:
            with open(self.log_path, "rb") as fh:
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def log_tail(self, n=30):
        return "\n".join(self.log().splitlines()[-n:])

    def log_problems(self):
        """labd's warning and error lines, deduplicated: [(count, text)]."""
        seen = {}
        for line in self.log().splitlines():
            if ": error:" in line or ": warn" in line or "ERROR" in line:
                key = re.sub(r"\d+", "N", line)
                seen.setdefault(key, [0, line])[0] += 1
        return [(c, line) for c, line in seen.values()]

    def web_pid(self):
        for k in children(self.proc.pid):
            if comm(k) == "labd-web":
                return k
        return None

    def _login(self, user, password):
        st, hdrs, raw = request(self.port, "POST", "/api/v1/login",
                                body={"username": user, "password": password})
        if st != 200:
            raise RuntimeError(f"login {user}: {st} {raw[:200]!r}")
        cookie = "; ".join(c.split(";")[0] for c in hdrs.get_all("Set-Cookie") or [])
        return {"Cookie": cookie, "X-CSRF-Token": jbody(raw)["csrf_token"]}

    def setup_user(self, user="bench"):
        """Creates a plain user, logs in as it and makes an API token (bearer)."""
        admin = self._login("admin", self.admin_password)
        password = secrets.token_urlsafe(18)
        st, _, raw = request(self.port, "POST", "/api/v1/users", headers=admin,
                             body={"name": user, "role": "user", "password": password})
        if st != 201:
            raise RuntimeError(f"create user {user}: {st} {raw[:200]!r}")
        me = self._login(user, password)
        st, _, raw = request(self.port, "POST", "/api/v1/me/tokens", headers=me,
                             body={"name": "bench"})
        if st not in (200, 201):
            raise RuntimeError(f"create token: {st} {raw[:200]!r}")
        self.token = jbody(raw)["token"]
        self.user = user
        return self.token

    def auth(self):
        return {"Authorization": f"Bearer {self.token}"}

    def runtime_auth(self):
        """Headers for the runtime's paths: they are served on the user's own
        origin (<user>.localhost, origin_mode = per_user), which accepts the
        bearer token of API clients; the socket still goes to 127.0.0.1."""
        return dict(self.auth(), Host=f"{self.user}.localhost:{self.port}")

    def runtime(self):
        st, _, raw = request(self.port, "GET", "/api/v1/me/runtime", headers=self.auth())
        j = jbody(raw) if st == 200 else None
        return (j or {}).get("runtime")

    def runtime_start(self):
        st, _, raw = request(self.port, "POST", "/api/v1/me/runtime", headers=self.auth(),
                             body={"type": "cpu"})
        if st != 202:
            raise RuntimeError(f"POST /api/v1/me/runtime: {st} {raw[:300]!r}")
        return jbody(raw)["runtime"]

    def wait_state(self, states, timeout):
        """Polls the runtime until its state is one of states; returns it or None."""
        def check():
            s = self.runtime()
            return s if s and s.get("state") in states else None
        return wait_until(check, timeout, 0.025)

    def runtime_stop(self, timeout=60):
        """DELETEs the runtime and waits until it is no longer live."""
        s = self.runtime()
        if s and s.get("state") in ("starting", "running"):
            request(self.port, "DELETE", "/api/v1/me/runtime", headers=self.auth())
        if s and s.get("state") in ("starting", "running", "stopping"):
            return self.wait_state(("stopped", "failed"), timeout)
        return s

    def socket_path(self):
        return os.path.join(self.state_dir, "runtimes", self.user, "run", "jupyter.sock")

    def runtime_token(self):
        """Jupyter's token of the user's newest runtime, read from labd's
        database (root only): lets a peer proxy reach the same Jupyter."""
        db = sqlite3.connect(f"file:{self.state_dir}/db/labd.db?mode=ro", uri=True, timeout=5)
        try:
            row = db.execute("SELECT token FROM runtimes ORDER BY id DESC LIMIT 1").fetchone()
        finally:
            db.close()
        return row[0] if row else None

    def stop(self):
        if self.proc is None:
            return
        try:
            if self.token:
                self.runtime_stop(30)
        except OSError:
            pass
        self.procs.stop(self.proc, timeout=30)
        self.proc = None


# --------------------------------------------------------------------------- peers


def start_jupyter(procs, workdir, port, base_url, token, extra=()):
    """A JupyterLab like the runtime's (same environment, same app, same
    base_url) but outside labd, on TCP 127.0.0.1:port."""
    for d in ("home", "nb", "runtime"):
        os.makedirs(os.path.join(workdir, d), exist_ok=True)
    env = {"PATH": f"{JUPYTER_ENV}/bin:/usr/bin:/bin", "HOME": os.path.join(workdir, "home"),
           "JUPYTER_TOKEN": token, "JUPYTER_RUNTIME_DIR": os.path.join(workdir, "runtime"),
           "LANG": "C.UTF-8"}
    p = procs.start("jupyter", [f"{JUPYTER_ENV}/bin/jupyter-lab", *extra, "--no-browser",
                                "--allow-root", "--ip=127.0.0.1", f"--port={port}",
                                "--ServerApp.port_retries=0",
                                f"--ServerApp.base_url={base_url}",
                                "--ServerApp.allow_remote_access=True",
                                f"--ServerApp.root_dir={os.path.join(workdir, 'nb')}"],
                    os.path.join(workdir, "jupyter.log"), env=env, cwd=os.path.join(workdir, "nb"))
    ok = wait_until(lambda: p.poll() is None and request(
        port, "GET", f"{base_url}api/status", headers={"Authorization": f"token {token}"})[0] == 200,
        60, 0.1)
    if not ok:
        raise RuntimeError(f"the reference Jupyter did not start (see {workdir}/jupyter.log)")
    return p


def lab_asset(size_bytes=100_000):
    """The name of a JupyterLab static file (served under <base_url>static/lab/)
    whose size is closest to size_bytes: the "large response" of the HTTP runs."""
    d = os.path.join(JUPYTER_ENV, "share", "jupyter", "lab", "static")
    names = [n for n in os.listdir(d) if n.endswith(".js") and os.path.isfile(os.path.join(d, n))]
    return min(names, key=lambda n: abs(os.path.getsize(os.path.join(d, n)) - size_bytes))


def start_nginx(procs, workdir, servers, name="nginx", workers=2, run_as=None, cwd=None):
    """nginx with one server block per entry of servers (text), workers as
    user labd like labd's web process (so it may enter runtimes/<user>/).
    run_as=(uid, gid): the whole nginx, master included, runs as that user
    instead (a backend on a runtime's socket must be the runtime's own uid:
    labd checks the listening peer with SO_PEERCRED). cwd: its working directory,
    entered before the user changes, so that relative socket paths there work
    even where that user cannot walk the path from the root."""
    os.makedirs(os.path.join(workdir, "tmp"), exist_ok=True)
    conf = os.path.join(workdir, "nginx.conf")
    tmp = os.path.join(workdir, "tmp")
    if run_as:
        for path in (workdir, tmp):
            os.chown(path, *run_as)
    with open(conf, "w") as fh:
        fh.write(f"""{'' if run_as else 'user labd labd;'}
worker_processes {workers};
daemon off;
pid {workdir}/nginx.pid;
error_log {workdir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  include /etc/nginx/mime.types;
  access_log off;
  client_body_temp_path {tmp}/body;
  proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fastcgi;
  uwsgi_temp_path {tmp}/uwsgi;
  scgi_temp_path {tmp}/scgi;
  keepalive_requests 1000000;
  map $http_upgrade $conn_upgrade {{ default upgrade; '' ''; }}
{servers}
}}
""")
    p = procs.start(name, ["/usr/sbin/nginx", "-c", conf, "-e", f"{workdir}/error.log"],
                    os.path.join(workdir, "nginx.out"), cwd=cwd or workdir, user=run_as)
    time.sleep(0.3)
    if p.poll() is not None:
        raise RuntimeError(f"{name} did not start: {open(workdir + '/error.log').read()[-2000:]}")
    return p


def nginx_proxy_server(listen_port, upstream, auth=None):
    """A reverse-proxy server block, made fair per the nginx docs: upstream
    keepalive, HTTP/1.1, Connection cleared (or Upgrade for WebSockets)."""
    name = f"up{listen_port}"
    auth_line = f'proxy_set_header Authorization "{auth}";' if auth else ""
    return f"""  upstream {name} {{ server {upstream}; keepalive 64; keepalive_requests 1000000; }}
  server {{
    listen 127.0.0.1:{listen_port} backlog=1024;
    location / {{
      proxy_pass http://{name};
      proxy_http_version 1.1;
      proxy_set_header Host $host;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $conn_upgrade;
      proxy_read_timeout 300s;
      {auth_line}
    }}
  }}
"""


def start_chp(procs, workdir, port, target, name="chp"):
    """configurable-http-proxy (JupyterHub's proxy, from npm: bench/setup.sh) with
    one default route; target may be http://host:port or unix+http://<%2F-encoded path>."""
    os.makedirs(workdir, exist_ok=True)
    api_port = free_port()
    env = dict(os.environ, CONFIGPROXY_AUTH_TOKEN=secrets.token_hex(16))
    p = procs.start(name, [CHP, "--ip", "127.0.0.1",
                           "--port", str(port), "--api-ip", "127.0.0.1",
                           "--api-port", str(api_port), "--default-target", target,
                           "--log-level", "warn"],
                    os.path.join(workdir, f"{name}.log"), env=env, cwd=workdir)
    ok = wait_until(lambda: p.poll() is None and socket.create_connection(
        ("127.0.0.1", port), 1).close() is None, 15, 0.1)
    if not ok:
        raise RuntimeError(f"{name} did not start (see {workdir}/{name}.log)")
    return p


# --------------------------------------------------------------------------- wrk


def _ms(v):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", v)
    if not m:
        return None
    n, u = float(m.group(1)), m.group(2)
    return n * {"us": 0.001, "ms": 1, "s": 1000, "m": 60000}[u]


def wrk(url, headers, duration, conns, threads=1):
    """Runs wrk (keep-alive, closed loop): dict with rps, p50, p99 (ms),
    requests, errors (socket errors + non-2xx/3xx)."""
    argv = ["wrk", f"-t{threads}", f"-c{conns}", f"-d{duration}s", "--latency",
            "--timeout=10s"]
    for k, v in headers.items():
        argv += ["-H", f"{k}: {v}"]
    out = subprocess.run(argv + [url], capture_output=True, text=True,
                         timeout=duration + 30).stdout
    r = {"rps": 0.0, "p50": None, "p99": None, "requests": 0, "errors": 0, "raw": out}
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if m:
        r["rps"] = float(m.group(1))
    m = re.search(r"(\d+) requests in", out)
    if m:
        r["requests"] = int(m.group(1))
    for pct, key in (("50", "p50"), ("99", "p99")):
        m = re.search(rf"^\s+{pct}%\s+(\S+)", out, re.M)
        if m:
            r[key] = _ms(m.group(1))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m:
        r["errors"] += int(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        r["errors"] += sum(int(x) for x in m.groups())
    return r


# --------------------------------------------------------------------------- output


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(v, spec=".0f"):
    return "-" if v is None else format(v, spec)


def ratio(a, b):
    return a / b if a is not None and b else None


def summary(path, bench, metric, labd, peer, peer_value, target, met):
    """One line for run.sh's closing table: TSV bench, metric, labd value,
    peer name, peer value, labd/peer, target, met."""
    if not path:
        return
    r = ratio(labd, peer_value)

    def num(v):
        if v is None:
            return "-"
        return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"
    with open(path, "a") as fh:
        fh.write("\t".join([bench, metric, num(labd), peer, num(peer_value),
                            "-" if r is None else f"{r:.2f}x", target, met]) + "\n")
