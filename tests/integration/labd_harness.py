"""Black-box harness for labd: starts the real daemon, talks HTTP to it.

Only the standard library is used (http.client, socket, subprocess).
"""

import glob
import http.client
import itertools
import json as jsonlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ASAN = bool(os.environ.get("LABD_ASAN"))
# Sanitizer builds are several times slower; stretch every wait accordingly.
SLOW = 3.0 if ASAN else 1.0
HTTP_TIMEOUT = 15 * SLOW

ADMIN_PW_RE = re.compile(r"admin password[^:]*: (\S+)")
SANITIZER_RE = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:")

EXPECTED_CSP = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self' data:",
    "connect-src": "'self'",
    "frame-ancestors": "'none'",
    "base-uri": "'none'",
    "form-action": "'self'",
}

STRONG = "correct-horse-battery"
_names = itertools.count(1)
_sources = itertools.count(0)


def next_source_address():
    n = next(_sources)
    return f"127.10.{(n // 250) % 250}.{n % 250 + 1}"


def unique_name(prefix="u"):
    """A fresh valid user name (^[a-z][a-z0-9_-]{0,31}$)."""
    return f"{prefix}{os.getpid() % 1000}x{next(_names)}"[:32]


def build_dir():
    b = os.environ.get("BUILD", "build")
    return b if os.path.isabs(b) else os.path.join(REPO, b)


def labd_binary():
    return os.path.join(build_dir(), "labd")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- HTTP


class Response:
    def __init__(self, method, path, status, reason, headers, body):
        self.method = method
        self.path = path
        self.status = status
        self.reason = reason
        self.headers = headers  # http.client.HTTPMessage (case-insensitive)
        self.body = body

    def header(self, name, default=None):
        return self.headers.get(name, default)

    def header_all(self, name):
        return self.headers.get_all(name) or []

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    @property
    def json(self):
        try:
            return jsonlib.loads(self.body)
        except ValueError as e:
            raise AssertionError(
                f"{self.method} {self.path}: body is not JSON ({e}): {self.body[:300]!r}"
            ) from None

    def set_cookies(self):
        """Parsed Set-Cookie headers: {name: (value, {attr_lower: value_or_True})}."""
        out = {}
        for line in self.header_all("Set-Cookie"):
            parts = [p.strip() for p in line.split(";")]
            name, _, value = parts[0].partition("=")
            attrs = {}
            for p in parts[1:]:
                if not p:
                    continue
                k, eq, v = p.partition("=")
                attrs[k.strip().lower()] = v.strip() if eq else True
            out[name.strip()] = (value.strip(), attrs)
        return out

    def __repr__(self):
        return f"<{self.method} {self.path} -> {self.status} {self.body[:200]!r}>"


AUTO = object()


class Client:
    """Tiny HTTP client: one connection per request, a cookie jar, no redirects."""

    def __init__(self, port, source=None, host="127.0.0.1"):
        self.host = host
        self.port = port
        self.source = source  # bind the client socket to this local address
        self.cookies = {}
        self.csrf = None
        self.bearer = None
        self.user = None

    @property
    def origin(self):
        return f"http://{self.host}:{self.port}"

    def _conn(self):
        src = (self.source, 0) if self.source else None
        return http.client.HTTPConnection(
            self.host, self.port, timeout=HTTP_TIMEOUT, source_address=src
        )

    def request(self, method, path, *, json=AUTO, form=None, body=None,
                content_type=None, headers=None, csrf=AUTO, bearer=AUTO,
                cookies=True):
        hdrs = {}
        data = None
        if json is not AUTO:
            data = jsonlib.dumps(json).encode()
            hdrs["Content-Type"] = "application/json"
        elif form is not None:
            data = urllib.parse.urlencode(form).encode()
            hdrs["Content-Type"] = "application/x-www-form-urlencoded"
        elif body is not None:
            data = body if isinstance(body, bytes) else body.encode()
        if content_type is not None:
            hdrs["Content-Type"] = content_type
        if cookies and self.cookies:
            hdrs["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        if csrf is AUTO:
            if method in ("POST", "PUT", "PATCH", "DELETE") and self.csrf:
                hdrs["X-CSRF-Token"] = self.csrf
        elif csrf is not None:
            hdrs["X-CSRF-Token"] = csrf
        tok = self.bearer if bearer is AUTO else bearer
        if tok:
            hdrs["Authorization"] = f"Bearer {tok}"
        for k, v in (headers or {}).items():
            if v is None:
                hdrs.pop(k, None)
            else:
                hdrs[k] = v
        conn = self._conn()
        try:
            try:
                conn.request(method, path, body=data, headers=hdrs)
            except (BrokenPipeError, ConnectionResetError):
                # The server may answer (e.g. 413) and close before reading the
                # whole body; the response is still there to read.
                pass
            resp = conn.getresponse()
            rbody = resp.read() if method != "HEAD" else b""
            r = Response(method, path, resp.status, resp.reason, resp.msg, rbody)
        finally:
            conn.close()
        for name, (value, attrs) in r.set_cookies().items():
            expired = attrs.get("max-age") in ("0", "-1") or value in ("", '""')
            if expired:
                self.cookies.pop(name, None)
            else:
                self.cookies[name] = value
        return r

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def patch(self, path, **kw):
        return self.request("PATCH", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def put(self, path, **kw):
        return self.request("PUT", path, **kw)

    def login(self, username, password, expect=200):
        r = self.post("/api/v1/login", json={"username": username, "password": password},
                      csrf=None)
        if expect is not None:
            assert r.status == expect, f"login {username}: expected {expect}, got {r!r}"
        if r.status == 200:
            j = r.json
            assert isinstance(j.get("csrf_token"), str) and j["csrf_token"], j
            self.csrf = j["csrf_token"]
            self.user = username
        return r

    @property
    def session(self):
        return self.cookies.get("labd_session")


def raw_request(port, data, timeout=HTTP_TIMEOUT):
    """Send raw bytes, read until the server closes; returns (status, headers, body)."""
    if isinstance(data, str):
        data = data.encode("latin-1")
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        while True:
            try:
                b = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not b:
                break
            chunks.append(b)
    raw = b"".join(chunks)
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = None
    m = re.match(rb"HTTP/1\.[01] (\d{3})", lines[0]) if lines and lines[0] else None
    if m:
        status = int(m.group(1))
    headers = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(b":")
        headers[k.strip().decode("latin-1").lower()] = v.strip().decode("latin-1")
    return status, headers, body


def raw_get(port, path, extra=""):
    return raw_request(
        port,
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n{extra}\r\n",
    )


# --------------------------------------------------------------------------- asserts


def assert_error(r, status, code=None, field=None):
    """The response is an error with exactly {"error":{"code","message"}}."""
    ctx = f"{r.method} {r.path}"
    statuses = (status,) if isinstance(status, int) else tuple(status)
    assert r.status in statuses, f"{ctx}: expected {status}, got {r.status}: {r.body[:300]!r}"
    ct = r.header("Content-Type", "")
    assert ct.split(";")[0].strip().lower() == "application/json", \
        f"{ctx}: error Content-Type is {ct!r}"
    j = r.json
    assert isinstance(j, dict) and set(j) == {"error"}, f"{ctx}: bad error shape {j!r}"
    e = j["error"]
    assert isinstance(e, dict) and set(e) == {"code", "message"}, f"{ctx}: bad error shape {j!r}"
    assert isinstance(e["code"], str) and e["code"], f"{ctx}: bad code {j!r}"
    assert isinstance(e["message"], str) and e["message"], f"{ctx}: empty message {j!r}"
    if code is not None:
        codes = (code,) if isinstance(code, str) else tuple(code)
        assert e["code"] in codes, f"{ctx}: expected code {code}, got {e['code']!r} ({e['message']!r})"
    if field is not None:
        assert field in e["message"], f"{ctx}: message does not name {field!r}: {e['message']!r}"
    return e


def assert_status(r, status):
    assert r.status == status, f"{r.method} {r.path}: expected {status}, got {r.status}: {r.body[:300]!r}"


def redirect_target(r, port):
    """(path, query dict) of a redirect's Location; asserts it stays on this site."""
    loc = r.header("Location")
    assert loc, f"{r.method} {r.path}: no Location header ({r.status})"
    assert not loc.startswith("//") and not loc.startswith("/\\"), \
        f"{r.method} {r.path}: off-site Location {loc!r}"
    p = urllib.parse.urlsplit(loc)
    if p.scheme or p.netloc:
        assert p.scheme == "http" and p.netloc == f"127.0.0.1:{port}", \
            f"{r.method} {r.path}: off-site Location {loc!r}"
    return p.path, urllib.parse.parse_qs(p.query), loc


def parse_csp(value):
    out = {}
    for d in (value or "").split(";"):
        d = d.strip()
        if not d:
            continue
        k, _, v = d.partition(" ")
        out[k.lower()] = " ".join(v.split())
    return out


def assert_security_headers(r, what=""):
    ctx = f"{what or r.method + ' ' + r.path} ({r.status})"
    csp = r.header("Content-Security-Policy")
    assert csp, f"{ctx}: no Content-Security-Policy"
    got = parse_csp(csp)
    assert got.get("frame-ancestors") == "'none'", f"{ctx}: CSP lacks frame-ancestors 'none': {csp!r}"
    assert got == EXPECTED_CSP, f"{ctx}: CSP differs from docs/api.md: {csp!r}"
    assert (r.header("X-Frame-Options") or "").upper() == "DENY", \
        f"{ctx}: X-Frame-Options is {r.header('X-Frame-Options')!r}"
    assert (r.header("X-Content-Type-Options") or "").lower() == "nosniff", \
        f"{ctx}: X-Content-Type-Options is {r.header('X-Content-Type-Options')!r}"
    assert (r.header("Referrer-Policy") or "").lower() == "same-origin", \
        f"{ctx}: Referrer-Policy is {r.header('Referrer-Policy')!r}"


# --------------------------------------------------------------------------- daemon


def proc_children(pid):
    """Direct children of pid (from /proc/<pid>/task/*/children, or a /proc scan)."""
    kids = set()
    for f in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            with open(f) as fh:
                kids.update(int(x) for x in fh.read().split())
        except OSError:
            pass
    if kids:
        return sorted(kids)
    for st in glob.glob("/proc/[0-9]*/status"):
        try:
            with open(st) as fh:
                for line in fh:
                    if line.startswith("PPid:"):
                        if int(line.split()[1]) == pid:
                            kids.add(int(st.split("/")[2]))
                        break
        except (OSError, ValueError):
            pass
    return sorted(kids)


def proc_status(pid, task=None):
    path = f"/proc/{pid}/task/{task}/status" if task else f"/proc/{pid}/status"
    out = {}
    with open(path) as fh:
        for line in fh:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def pid_alive(pid):
    """True if pid exists and is not a zombie."""
    try:
        st = proc_status(pid)
    except OSError:
        return False
    return not st.get("State", "").startswith("Z")


class Daemon:
    """One labd instance with its own temp dir, config, state and log."""

    def __init__(self, name="main", server=None, auth=None, keep_dir=False):
        self.name = name
        self.dir = tempfile.mkdtemp(prefix=f"labd-it-{name}-")
        # The web process runs as the unprivileged labd user: it must be able
        # to reach state_dir below this directory.
        os.chmod(self.dir, 0o755)
        self.state_dir = os.path.join(self.dir, "state")
        self.config_path = os.path.join(self.dir, "labd.ini")
        self.port = free_port()
        self.server = {
            "listen": f"127.0.0.1:{self.port}",
            "state_dir": self.state_dir,
            "web_root": os.path.join(REPO, "web"),
            "max_body": "64K",
        }
        self.server.update(server or {})
        self.auth = {
            "scrypt_n": "1024",
            "min_password_length": "10",
            "backoff_after": "100",
            "lockout_failures": "10",
            "lockout_duration": "15m",
        }
        self.auth.update(auth or {})
        self.proc = None
        self.runs = 0
        self.log_path = None
        self.admin_password = None
        self.keep_dir = keep_dir
        self.write_config()

    # config ---------------------------------------------------------------
    def write_config(self):
        lines = ["[server]"]
        lines += [f"{k} = {v}" for k, v in self.server.items()]
        lines += ["", "[auth]"]
        lines += [f"{k} = {v}" for k, v in self.auth.items()]
        with open(self.config_path, "w") as fh:
            fh.write("\n".join(lines) + "\n")

    def new_port(self):
        self.port = free_port()
        self.server["listen"] = f"127.0.0.1:{self.port}"
        self.write_config()

    # lifecycle ------------------------------------------------------------
    def start(self, expect_admin_password=True):
        binary = labd_binary()
        assert os.access(binary, os.X_OK), \
            f"{binary} not built (set BUILD or run make)"
        self.runs += 1
        self.log_path = os.path.join(self.dir, f"labd.{self.runs}.log")
        logf = open(self.log_path, "wb")
        env = dict(os.environ)
        self.proc = subprocess.Popen(
            [binary, "--config", self.config_path],
            stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
            cwd=self.dir, env=env, start_new_session=True,
        )
        logf.close()
        deadline = time.monotonic() + 10 * SLOW
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"labd ({self.name}) exited with {self.proc.returncode} at start\n"
                    + self.log_tail())
            try:
                r = self.client(source=None).get("/api/v1/health")
                last = r
                if r.status == 200:
                    break
            except OSError as e:
                last = e
            time.sleep(0.1)
        else:
            self.kill()
            raise AssertionError(
                f"labd ({self.name}) health not 200 within {10 * SLOW:.0f}s "
                f"(last: {last!r})\n" + self.log_tail())
        if expect_admin_password:
            deadline = time.monotonic() + 3 * SLOW
            while True:
                m = ADMIN_PW_RE.search(self.log())
                if m:
                    self.admin_password = m.group(1)
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"labd ({self.name}): no 'admin password: ...' in the log\n"
                        + self.log_tail())
                time.sleep(0.05)
        return self

    def stop(self, timeout=10):
        """SIGTERM; returns the exit status, or None if it had to be killed."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout * SLOW)
            except subprocess.TimeoutExpired:
                self.kill()
                return None
        rc = self.proc.returncode
        return rc

    def kill(self):
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                self.proc.kill()
            self.proc.wait(10)

    def cleanup(self):
        self.kill()
        if not self.keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    # inspection -----------------------------------------------------------
    @property
    def pid(self):
        return self.proc.pid

    def log(self, run=None):
        path = self.log_path if run is None else os.path.join(self.dir, f"labd.{run}.log")
        try:
            with open(path, "rb") as fh:
                return fh.read().decode("utf-8", "replace")
        except (OSError, TypeError):
            return ""

    def log_tail(self, n=40):
        lines = self.log().splitlines()[-n:]
        return f"--- labd ({self.name}) log tail ---\n" + "\n".join(lines)

    def sanitizer_reports(self):
        return [ln for ln in self.log().splitlines() if SANITIZER_RE.search(ln)]

    def client(self, source=AUTO):
        """A new client.  By default each client connects from its own loopback
        address (127.10.x.y), so that per-address login failure counters of one
        test never lock out another test."""
        if source is AUTO:
            source = next_source_address()
        return Client(self.port, source=source)

    def admin(self):
        c = self.client()
        c.login("admin", self.admin_password)
        return c

    def web_children(self):
        return proc_children(self.pid)

    def run_cli(self, *args, input=None, timeout=30):
        return subprocess.run(
            [labd_binary(), "--config", self.config_path, *args],
            input=input, capture_output=True, text=True, timeout=timeout * SLOW,
            cwd=self.dir,
        )


def teardown_daemon(d):
    """Stop a daemon, asserting that it exits on SIGTERM within 10 s."""
    try:
        if d.proc is None:
            return
        already = d.proc.poll() is not None
        rc = d.stop(10)
        reports = d.sanitizer_reports()
        assert not reports, f"sanitizer reports in labd ({d.name}) log:\n" + "\n".join(reports[:20]) \
            + "\n" + d.log_tail()
        if not already:
            assert rc is not None, \
                f"labd ({d.name}) did not exit within 10 s of SIGTERM (killed)\n" + d.log_tail()
    finally:
        d.cleanup()
