"""Black-box harness for labd: starts the real daemon, talks HTTP to it.

Only the standard library is used (http.client, socket, subprocess).
"""

import base64
import calendar
import glob
import hashlib
import http.client
import itertools
import json as jsonlib
import os
import re
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import tempfile
import time
import urllib.parse
import uuid

import openapi_check

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ASAN = bool(os.environ.get("LABD_ASAN"))
TSAN = bool(os.environ.get("LABD_TSAN"))  # make check-tsan (tests/tsan/run.sh)
# Sanitizer builds are several times slower; stretch every wait accordingly.
SLOW = 3.0 if ASAN or TSAN else 1.0
HTTP_TIMEOUT = 15 * SLOW


def wait_until(predicate, timeout, what, interval=0.05):
    """Polls predicate() every interval seconds until it returns a true value, and
    returns that value.  After timeout seconds it raises AssertionError "timed out
    after T s waiting for WHAT" (what: a string, or a callable giving one then, for
    details such as the last answer or a log tail).  Use it instead of fixed sleeps."""
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() >= deadline:
            detail = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:.1f} s waiting for {detail}")
        time.sleep(interval)


ADMIN_PW_RE = re.compile(r"admin password[^:]*: (\S+)")
SANITIZER_RE = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|WARNING: ThreadSanitizer")

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
    """A fresh valid user name (^[a-z0-9][a-z0-9._-]{0,31}$)."""
    return f"{prefix}{os.getpid() % 1000}x{next(_names)}"[:32]


def build_dir():
    b = os.environ.get("BUILD", "build")
    return b if os.path.isabs(b) else os.path.join(REPO, b)


def labd_binary():
    return os.path.join(build_dir(), "labd")


def make_user(d, admin=None, prefix="u"):
    """A new user (role user) of daemon d, created by admin (default: d's admin) and
    logged in: their Client, with .password set."""
    admin = admin or d.admin()
    name = unique_name(prefix)
    pw = f"{STRONG}-{name}"
    r = admin.post("/api/v1/users", json={"name": name, "role": "user", "password": pw})
    assert r.status == 201, f"creating {name}: {r!r}"
    c = d.client()
    c.login(name, pw)
    c.password = pw
    return c


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


USER_DOMAIN = "localhost"  # the daemons' [server] user_domain (the default)
RUNTIME_PATH = re.compile(r"^/user/([^/?]+)")


def origin_label(name):
    """The DNS label of name's origin, as server/auth/origin.c derives it: the
    name itself when it is a label ([a-z0-9-], no "--", no '-' last), else
    its symbols as '-', "--", and the symbols coded three to a character."""
    if re.fullmatch(r"[a-z0-9-]+", name) and "--" not in name and not name.endswith("-"):
        return name
    code, syms = "abcdefghijklmnopqrstuvwxyz0", [("-_.").index(c) for c in name if c in "-_."]
    groups = [syms[i:i + 3] for i in range(0, len(syms), 3)]
    tail = "".join(code[sum(d * 3 ** j for j, d in enumerate(g))] for g in groups)
    return re.sub(r"[._-]", "-", name) + "--" + tail


def user_origin_host(name, port):
    """The Host of name's own origin (per_user mode): <label>.localhost:<port>."""
    return f"{origin_label(name)}.{USER_DOMAIN}:{port}"


def has_runtime_cookie(jar):
    """Whether a user origin's jar holds labd's runtime cookie (__Host-labd_rt
    behind TLS, labd_rt over plain HTTP)."""
    return "labd_rt" in jar or "__Host-labd_rt" in jar


class Client:
    """Tiny HTTP client: one connection per request, a cookie jar, no redirects.

    Like a browser, it keeps one cookie jar per origin: `cookies` is labd's own
    origin's; `runtime_jars[label]` holds what the origin of that label (origin_label) set (labd_rt).
    With `user_origins` on (the default, as the daemon's origin_mode =
    per_user), a request for /user/<name>/... goes to <name>.localhost (Host
    header; the socket still goes to 127.0.0.1), after the handoff from labd's
    origin when the client is logged in by cookie and has no runtime cookie
    there yet."""

    def __init__(self, port, source=None, host="127.0.0.1"):
        self.host = host
        self.port = port
        self.source = source  # bind the client socket to this local address
        self.cookies = {}
        self.runtime_jars = {}
        self.user_origins = True
        self.csrf = None
        self.bearer = None
        self.user = None
        self.on_response = None  # optional callable(Response), e.g. to scan for leaks
        # every JSON answer is checked against docs/openapi.yaml (openapi_check.py)
        self.check_openapi = True

    @property
    def origin(self):
        return f"http://{self.host}:{self.port}"

    def runtime_origin(self, name=None):
        """The origin of name's runtime (c's own by default)."""
        name = name or self.user
        if not self.user_origins:
            return self.origin
        return f"http://{user_origin_host(name, self.port)}"

    def handoff(self, name=None):
        """Logs this cookie-authenticated client into name's origin as a browser
        would: GET /user/<name>/ on labd's origin (302 to the user origin's
        /_labd/handoff?code=...), then that URL on the user origin (302 +
        Set-Cookie labd_rt). Returns the first response that was not a 302
        (the refusal), or None once the runtime cookie is set."""
        name = name or self.user
        r = self.request("GET", f"/user/{name}/", origin_route=False)
        if r.status not in (302, 303):
            return r
        loc = urllib.parse.urlsplit(r.header("Location"))
        assert loc.netloc == user_origin_host(name, self.port), r.header("Location")
        r = self.request("GET", f"{loc.path}?{loc.query}", host=loc.netloc)
        if r.status not in (302, 303):
            return r
        assert has_runtime_cookie(self.runtime_jars.get(origin_label(name), {})), \
            r.header_all("Set-Cookie")
        return None

    def origin_headers(self, path):
        """Host and Cookie headers for a hand-made request to path (a runtime
        path goes to its user origin, after the handoff if needed)."""
        host, jar = self._runtime_route(path, None, True)
        if host and not self.bearer and self.session and not has_runtime_cookie(jar):
            self.handoff(host.split(".", 1)[0])
        h = {"Host": host or f"{self.host}:{self.port}"}
        if jar:
            h["Cookie"] = "; ".join(f"{k}={v}" for k, v in jar.items())
        return h

    def _runtime_route(self, path, host, origin_route):
        """(host, jar) a request for path goes with: a runtime path to its
        user origin when user_origins is on; else labd's origin."""
        m = RUNTIME_PATH.match(path)
        if host is None and origin_route and self.user_origins and m:
            host = user_origin_host(m.group(1), self.port)
        if host is None:
            return None, self.cookies
        label = host.split(".", 1)[0]  # jars are kept per origin label
        return host, self.runtime_jars.setdefault(label, {})

    def _conn(self):
        src = (self.source, 0) if self.source else None
        return http.client.HTTPConnection(
            self.host, self.port, timeout=HTTP_TIMEOUT, source_address=src
        )

    def request(self, method, path, *, json=AUTO, form=None, body=None,
                content_type=None, headers=None, csrf=AUTO, bearer=AUTO,
                cookies=True, host=None, origin_route=True, openapi=True):
        """openapi=False skips the check of the answer against docs/openapi.yaml
        (openapi_check.py): only for deliberately malformed requests."""
        host, jar = self._runtime_route(path, host, origin_route)
        tok = self.bearer if bearer is AUTO else bearer
        if (host and cookies and not tok and self.session and not has_runtime_cookie(jar)
                and RUNTIME_PATH.match(path)):
            if self.handoff(RUNTIME_PATH.match(path).group(1)) is not None and method in ("GET", "HEAD"):
                # refused (another user's runtime, say): a browser navigating
                # there sees what labd's origin answers; anything else goes
                # to the user origin without a cookie
                host, jar = None, self.cookies
        hdrs = {}
        if host:
            hdrs["Host"] = host
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
        if cookies and jar:
            hdrs["Cookie"] = "; ".join(f"{k}={v}" for k, v in jar.items())
        if csrf is AUTO:
            if method in ("POST", "PUT", "PATCH", "DELETE") and self.csrf:
                hdrs["X-CSRF-Token"] = self.csrf
        elif csrf is not None:
            hdrs["X-CSRF-Token"] = csrf
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
        if openapi and self.check_openapi:
            openapi_check.check(r)
        if self.on_response is not None:
            self.on_response(r)
        for name, (value, attrs) in r.set_cookies().items():
            expired = attrs.get("max-age") in ("0", "-1") or value in ("", '""')
            if expired:
                jar.pop(name, None)
            else:
                jar[name] = value
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
        # behind TLS (secure_cookies) labd's cookies carry the __Host- prefix
        return self.cookies.get("labd_session") or self.cookies.get("__Host-labd_session")


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
    """The response is an error with exactly {"error":{"code","message"}} and
    optionally "field" (the request field refused)."""
    ctx = f"{r.method} {r.path}"
    statuses = (status,) if isinstance(status, int) else tuple(status)
    assert r.status in statuses, f"{ctx}: expected {status}, got {r.status}: {r.body[:300]!r}"
    ct = r.header("Content-Type", "")
    assert ct.split(";")[0].strip().lower() == "application/json", \
        f"{ctx}: error Content-Type is {ct!r}"
    j = r.json
    assert isinstance(j, dict) and set(j) == {"error"}, f"{ctx}: bad error shape {j!r}"
    e = j["error"]
    assert isinstance(e, dict) and {"code", "message"} <= set(e) <= {"code", "message", "field"}, \
        f"{ctx}: bad error shape {j!r}"
    assert isinstance(e["code"], str) and e["code"], f"{ctx}: bad code {j!r}"
    assert isinstance(e["message"], str) and e["message"], f"{ctx}: empty message {j!r}"
    if code is not None:
        codes = (code,) if isinstance(code, str) else tuple(code)
        assert e["code"] in codes, f"{ctx}: expected code {code}, got {e['code']!r} ({e['message']!r})"
    if field is not None:
        assert e.get("field") == field or field in e["message"], \
            f"{ctx}: error does not name {field!r}: {j!r}"
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


def proc_comm(pid):
    """The process's name (/proc/<pid>/comm), or "" once it is gone."""
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


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

    def __init__(self, name="main", server=None, auth=None, keep_dir=False, sections=None,
                 env=None):
        self.name = name
        # Extra environment for the daemon (failure injection: LABD_FAULT_*).
        self.env = dict(env or {})
        self.dir = tempfile.mkdtemp(prefix=f"labd-it-{name}-")
        # The web process runs as the unprivileged labd user: it must be able
        # to reach state_dir below this directory.
        os.chmod(self.dir, 0o755)
        self.state_dir = os.path.join(self.dir, "state")
        # the web process's database, in its own directory of the root-only state dir
        self.db_file = os.path.join(self.state_dir, "db", "labd.db")
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
        }
        self.auth.update(auth or {})
        self.proc = None
        self.runs = 0
        self.log_path = None
        self.admin_password = None
        self.keep_dir = keep_dir
        # Further INI sections, e.g. {"runtime": {"cpu_limit": "20s"}, "gpu": {...}}.
        self.sections = {k: dict(v) for k, v in (sections or {}).items()}
        self.write_config()

    # config ---------------------------------------------------------------
    def write_config(self):
        lines = ["[server]"]
        lines += [f"{k} = {v}" for k, v in self.server.items()]
        lines += ["", "[auth]"]
        lines += [f"{k} = {v}" for k, v in self.auth.items()]
        for section, keys in getattr(self, "sections", {}).items():
            lines += ["", f"[{section}]"]
            lines += [f"{k} = {v}" for k, v in keys.items()]
        with open(self.config_path, "w") as fh:
            fh.write("\n".join(lines) + "\n")

    def new_port(self):
        self.port = free_port()
        self.server["listen"] = f"127.0.0.1:{self.port}"
        self.write_config()

    # lifecycle ------------------------------------------------------------
    def start(self, expect_admin_password=True, binary=None):
        """binary: another labd than $BUILD's (the upgrade test's previous release)."""
        binary = binary or labd_binary()
        assert os.access(binary, os.X_OK), \
            f"{binary} not built (set BUILD or run make)"
        self.runs += 1
        self.log_path = os.path.join(self.dir, f"labd.{self.runs}.log")
        logf = open(self.log_path, "wb")
        env = dict(os.environ)
        env.update(self.env)
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
        """The supervisor's children that are web processes (its other children,
        image and pool builders, come and go with other tests' jobs)."""
        return [k for k in proc_children(self.pid) if proc_comm(k) == "labd-web"]

    def run_cli(self, *args, input=None, timeout=30, env=None):
        """env: more environment variables for this one command."""
        return subprocess.run(
            [labd_binary(), "--config", self.config_path, *args],
            input=input, capture_output=True, text=True, timeout=timeout * SLOW,
            cwd=self.dir, env=dict(os.environ, **env) if env else None,
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


# --------------------------------------------------------------------------- runtimes
#
# Helpers for the runtime tests (test_runtime*.py): daemons with a [runtime]
# section, the runtime API, teardown that proves no sandbox, mount or loop
# device is left behind, and a minimal WebSocket client (standard library only).

# Small limits for every runtime daemon; tests override single keys.
RUNTIME_DEFAULTS = {
    "home_size": "1G",
    "memory": "2G",
    "stop_grace": "3s",
    "keep_on_shutdown": "false",
}
# Jupyter in a fresh sandbox answers within a few seconds; allow for a busy machine.
RUNTIME_START_TIMEOUT = 60 * SLOW
LIVE_STATES = ("starting", "running", "stopping")


def uid_base(d):
    """The base of d's sandbox uids: [runtime] uid_base = auto is chosen at the first
    start and recorded in <state>/uids.json (docs/config.md)."""
    with open(os.path.join(d.state_dir, "uids.json")) as fh:
        return jsonlib.load(fh)["uid_base"]


def labbox_binary():
    return os.path.join(build_dir(), "labbox")


def runtime_daemon(name, runtime=None, gpu=None, server=None, auth=None, env=None,
                   sections=None):
    """A Daemon (not started) whose config has [runtime] (RUNTIME_DEFAULTS + runtime)
    and any further sections ({"proxy": {...}})."""
    rt = dict(RUNTIME_DEFAULTS)
    rt.update(runtime or {})
    sections = dict(sections or {}, runtime=rt)
    if gpu is not None:
        sections["gpu"] = dict(gpu)
    return Daemon(name, server=server, auth=auth, sections=sections, env=env)


# [network] deny's default (docs/config.md): the private ranges.
NETWORK_DENY_DEFAULT = "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7"


def egress_daemon(name, deny_extra=("198.19.0.0/16",), network=None, quota=None, runtime=None,
                  sections=None, **kw):
    """A runtime Daemon (not started) whose runtimes get egress: [quota] network = egress,
    [network] deny = deny_extra + the default private ranges (the tests' denied range
    198.19.0.0/16 besides), plus network (more [network] keys: dns, max_connections)
    and quota ([quota] keys, e.g. egress_rate).  Only testnet.TestHost hosts are ever
    addressed from such runtimes."""
    net = {"deny": ",".join(list(deny_extra) + [NETWORK_DENY_DEFAULT])}
    net.update(network or {})
    q = {"network": "egress"}
    q.update(quota or {})
    sections = dict(sections or {})
    sections["network"] = dict(net, **sections.get("network", {}))
    sections["quota"] = dict(q, **sections.get("quota", {}))
    return runtime_daemon(name, runtime=runtime, sections=sections, **kw)


def wait_runtime(c, states, timeout=RUNTIME_START_TIMEOUT, interval=0.2):
    """Polls GET /api/v1/me/runtime until its state is in states; returns the runtime."""
    if isinstance(states, str):
        states = (states,)
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        r = c.get("/api/v1/me/runtime")
        assert r.status == 200, f"GET /api/v1/me/runtime: {r!r}"
        s = r.json["runtime"]
        st = s and s["state"]
        if not seen or seen[-1] != st:
            seen.append(st)
        if st in states:
            return s
        assert st not in ("failed",) or "failed" in states, \
            f"runtime failed (wanted {states}): {s}"
        assert time.monotonic() < deadline, \
            f"runtime not {states} within {timeout:.0f}s; states seen {seen}; last {s}"
        time.sleep(interval)


def start_runtime(c, kind="cpu"):
    """POST /api/v1/me/runtime and wait for running; returns (202 runtime, running runtime)."""
    r = c.post("/api/v1/me/runtime", json={"type": kind})
    assert r.status == 202, f"starting a {kind} runtime: {r!r}"
    first = r.json["runtime"]
    return first, wait_runtime(c, "running")


def stop_runtime(c, timeout=30 * SLOW):
    """DELETE /api/v1/me/runtime (if live) and wait for stopped; returns the runtime."""
    r = c.get("/api/v1/me/runtime")
    s = r.json["runtime"]
    if s and s["state"] in ("queued", "starting", "running"):
        r = c.delete("/api/v1/me/runtime")
        assert r.status in (202, 404), f"stopping the runtime: {r!r}"
    return wait_runtime(c, ("stopped", "failed"), timeout=timeout)


def runtime_token(d, user):
    """The Jupyter token of user's newest runtime, read (as root) from labd's
    database: only to prove that it never shows up in a response."""
    db = sqlite3.connect(f"file:{d.db_file}?mode=ro", uri=True,
                         timeout=10)
    try:
        row = db.execute(
            "SELECT r.token FROM runtimes r JOIN users u ON u.id = r.user_id "
            "WHERE u.name = ? ORDER BY r.id DESC LIMIT 1", (user,)).fetchone()
    finally:
        db.close()
    assert row and row[0], f"no runtime token for {user} in the database"
    return row[0]


def user_id(d, name):
    """The id of user name, read (as root) from labd's database; None if absent."""
    db = sqlite3.connect(f"file:{d.db_file}?mode=ro",
                         uri=True, timeout=10)
    try:
        row = db.execute("SELECT id FROM users WHERE name = ?", (name,)).fetchone()
    finally:
        db.close()
    return row and row[0]


def home_image(d, name):
    """Where user name's home image lives: homes are keyed on user ids."""
    return os.path.join(d.state_dir, "homes", f"{user_id(d, name)}.img")


def parse_api_time(s):
    """'2026-12-02T16:00:00Z' -> epoch seconds."""
    return calendar.timegm(time.strptime(s, "%Y-%m-%dT%H:%M:%SZ"))


def audit_entries(admin, action=None, target=None, limit=500):
    r = admin.get(f"/api/v1/audit?limit={limit}")
    assert r.status == 200, f"GET /api/v1/audit: {r!r}"
    out = r.json["entries"]
    if action:
        out = [e for e in out if e["action"] == action]
    if target:
        out = [e for e in out if e["target"] == target]
    return out


def web_process(d, timeout=10):
    """The daemon's web process: the supervisor's child whose comm is labd-web
    (sandboxes are children of the supervisor too)."""
    deadline = time.monotonic() + timeout * SLOW
    while True:
        found = []
        for k in proc_children(d.pid):
            try:
                with open(f"/proc/{k}/comm") as fh:
                    comm = fh.read().strip()
            except OSError:
                continue
            if comm == "labd-web" and pid_alive(k):
                found.append(k)
        if len(found) == 1:
            return found[0]
        assert len(found) < 2, f"supervisor has {len(found)} labd-web children: {found}"
        assert time.monotonic() < deadline, \
            "supervisor has no labd-web child: " + repr(
                [(k, open(f"/proc/{k}/comm").read().strip()) for k in proc_children(d.pid)
                 if os.path.exists(f"/proc/{k}/comm")]) + "\n" + d.log_tail()
        time.sleep(0.05)


def proc_kib(pid, key):
    """A '<n> kB' field of /proc/<pid>/status (VmHWM, VmRSS) in KiB."""
    return int(proc_status(pid)[key].split()[0])


# ---- leftovers ---------------------------------------------------------------


def _pid_start_time(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rpartition(")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def sandbox_records(state_dir):
    """[(file, {key: value})] of the sandbox state files under state_dir."""
    out = []
    for f in sorted(glob.glob(os.path.join(state_dir, "sandboxes", "*.state"))):
        kv = {}
        try:
            with open(f) as fh:
                for line in fh:
                    k, _, v = line.rstrip("\n").partition("=")
                    kv[k] = v
        except OSError:
            continue
        out.append((f, kv))
    return out


def mounts_under(path):
    """Mount points at or below path (like `findmnt | grep path`)."""
    path = os.path.realpath(path)
    out = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            f = line.split()
            mp = f[4].encode().decode("unicode_escape")
            if mp == path or mp.startswith(path + "/"):
                out.append(mp)
    try:
        fm = subprocess.run(["findmnt", "-rn", "-o", "TARGET,SOURCE"], capture_output=True,
                            text=True, timeout=10).stdout
        out += [ln for ln in fm.splitlines() if path in ln and ln.split()[0] not in out]
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def loops_under(path):
    """Loop devices whose backing file lies below path."""
    path = os.path.realpath(path)
    out = []
    for bf in glob.glob("/sys/block/loop*/loop/backing_file"):
        try:
            with open(bf) as fh:
                backing = fh.read().strip()
        except OSError:
            continue
        if backing.startswith(path + "/"):
            out.append(f"/dev/{bf.split('/')[3]} -> {backing}")
    return out


def processes_in_cgroups(ids):
    """[(pid, id)] of live processes whose cgroup path names one of the sandbox ids."""
    out = []
    if not ids:
        return out
    for cg in glob.glob("/proc/[0-9]*/cgroup"):
        try:
            with open(cg) as fh:
                text = fh.read()
        except OSError:
            continue
        for i in ids:
            if f"/{i}\n" in text or f"/{i}/" in text:
                pid = int(cg.split("/")[2])
                if pid_alive(pid):
                    out.append((pid, i))
                break
    return out


def mount_holders(path):
    """[(pid, comm)] of processes in other mount namespaces that still have a
    mount below path (a sandbox cloned from the host's root takes a copy of
    every mount there, including homes of other runtimes)."""
    path = os.path.realpath(path)
    try:
        mine = os.readlink("/proc/self/ns/mnt")
    except OSError:
        mine = None
    seen_ns, out = set(), []
    for mi in glob.glob("/proc/[0-9]*/mountinfo"):
        pid = int(mi.split("/")[2])
        try:
            ns = os.readlink(f"/proc/{pid}/ns/mnt")
            if ns == mine or ns in seen_ns:
                continue
            with open(mi) as fh:
                text = fh.read()
            if path + "/" in text:
                seen_ns.add(ns)
                with open(f"/proc/{pid}/comm") as fh:
                    out.append((pid, fh.read().strip()))
        except OSError:
            continue
    return out


def wait_loops_released(state_dir, timeout=20):
    """Waits for the loop devices of state_dir's homes to detach (autoclear at
    the last unmount).  Returns (loops still attached, their holders)."""
    try:
        wait_until(lambda: not loops_under(state_dir), timeout * SLOW,
                   f"the loop devices under {state_dir} to detach", interval=0.2)
    except AssertionError:
        pass  # the caller asserts on what is left, with its holders
    loops = loops_under(state_dir)
    return loops, (mount_holders(state_dir) if loops else [])


def runtime_leftovers(state_dir, seen_pids=(), seen_ids=(), loop_wait=20):
    """Human-readable list of what a stopped daemon left behind (waiting up to
    loop_wait s for its homes' loop devices to detach)."""
    left = []
    for f, kv in sandbox_records(state_dir):
        left.append(f"sandbox state file {f} (id {kv.get('id')}, pid {kv.get('pid')})")
    for pid, start in seen_pids:
        if pid_alive(pid) and _pid_start_time(pid) == start:
            left.append(f"sandbox process {pid} still alive")
    for pid, i in processes_in_cgroups(seen_ids):
        left.append(f"process {pid} still in the cgroup of sandbox {i}")
    # pasta of a runtime with egress lives in "<id>.net" (sandbox/egress.h)
    for pid, i in processes_in_cgroups([f"{i}.net" for i in seen_ids]):
        left.append(f"pasta {pid} still in the cgroup {i}")
    left += [f"mount {m}" for m in mounts_under(state_dir)]
    loops, holders = wait_loops_released(state_dir, loop_wait) if not left else \
        (loops_under(state_dir), mount_holders(state_dir))
    if loops and holders:
        # Only namespaces outside this daemon (its own sandbox processes are
        # checked above) still hold a copy: not this daemon's leak.
        print(f"\nnote: {state_dir}: {loops} still attached, held by the mount namespaces "
              f"of {holders[:5]} (other sandboxes on this machine)")
    else:
        left += [f"loop device {lp} (no process holds a mount of it)" for lp in loops]
    return left


def remember_sandboxes(d):
    """Records (pid, start time) of d's current sandboxes for the teardown check."""
    seen = getattr(d, "sandbox_pids", set())
    ids = getattr(d, "sandbox_ids", set())
    for _, kv in sandbox_records(d.state_dir):
        if kv.get("id"):
            ids.add(kv["id"])
        try:
            pid = int(kv.get("pid", "0"))
        except ValueError:
            continue
        if pid > 0:
            st = _pid_start_time(pid)
            if st is not None:
                seen.add((pid, st))
    # and every sandbox the daemon's logs name ("... started: sandbox <id>, pid N")
    for log in glob.glob(os.path.join(d.dir, "labd.*.log")):
        try:
            with open(log, errors="replace") as fh:
                ids.update(re.findall(r"\bsandbox ([a-z][a-z0-9_-]*-[0-9a-f]{8,})\b", fh.read()))
        except OSError:
            pass
    d.sandbox_pids = seen
    d.sandbox_ids = ids
    return seen


def teardown_runtime_daemon(d, stop_timeout=30):
    """Stops a runtime daemon (SIGTERM, within stop_timeout s: keep_on_shutdown=false
    stops its runtimes first) and asserts that nothing is left: no sandbox state
    file or process, no mount and no loop device under its state dir.  Then runs
    `labbox gc --all` for safety and checks again."""
    errors = []
    try:
        if d.proc is None:
            return
        remember_sandboxes(d)
        already = d.proc.poll() is not None
        rc = d.stop(stop_timeout)
        remember_sandboxes(d)
        if not already and rc is None:
            errors.append(f"labd ({d.name}) did not exit within {stop_timeout} s of SIGTERM "
                          "(killed)")
        reports = d.sanitizer_reports()
        if reports:
            errors.append("sanitizer reports:\n" + "\n".join(reports[:20]))
        left = runtime_leftovers(d.state_dir, getattr(d, "sandbox_pids", ()),
                                 getattr(d, "sandbox_ids", ()))
        if left:
            errors.append(f"labd ({d.name}) left behind after it stopped:\n  " +
                          "\n  ".join(left))
        gc = subprocess.run([labbox_binary(), "gc", "--all", "--state-dir", d.state_dir],
                            capture_output=True, text=True, timeout=60)
        if gc.returncode != 0:
            errors.append(f"labbox gc --all failed ({gc.returncode}): {gc.stderr.strip()}")
        # loop devices that other mount namespaces still held above (noted, not
        # this daemon's leak) are not waited for a second time
        held = loops_under(d.state_dir) and mount_holders(d.state_dir)
        left = runtime_leftovers(d.state_dir, getattr(d, "sandbox_pids", ()),
                                 getattr(d, "sandbox_ids", ()), loop_wait=0 if held else 20)
        if left:
            d.keep_dir = True  # never rmtree through a mounted home
            errors.append(f"still left after labbox gc --all ({d.dir} kept):\n  " +
                          "\n  ".join(left))
        if errors:
            raise AssertionError("\n".join(errors) + "\n" + d.log_tail())
    finally:
        d.cleanup()


# ---- WebSocket -----------------------------------------------------------------

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class WebSocketClosed(Exception):
    def __init__(self, code=None, reason="", clean=True):
        super().__init__(f"websocket closed (code {code}, reason {reason!r}, "
                         f"{'clean' if clean else 'without a close frame'})")
        self.code = code
        self.reason = reason
        self.clean = clean


class WebSocket:
    """Minimal RFC 6455 client: handshake, masked client frames, fragmented and
    126/127-length server frames, ping/pong, close."""

    def __init__(self, port, path, headers=None, timeout=HTTP_TIMEOUT, source=None,
                 user_origins=True, protocols=None):
        self.port = port
        headers = dict(headers or {})
        self.path = path
        src = (source, 0) if source else None
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                             source_address=src)
        self.key = base64.b64encode(os.urandom(16)).decode()
        m = RUNTIME_PATH.match(path)
        host = (headers or {}).pop("Host", None) if headers else None
        if host is None:
            host = user_origin_host(m.group(1), port) if m and user_origins else \
                f"127.0.0.1:{port}"
        lines = [f"GET {path} HTTP/1.1", f"Host: {host}", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Key: {self.key}",
                 "Sec-WebSocket-Version: 13"]
        if protocols:
            lines.append("Sec-WebSocket-Protocol: " + ", ".join(protocols))
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        buf = b""
        while b"\r\n\r\n" not in buf:
            b = self.sock.recv(65536)
            if not b:
                break
            buf += b
            assert len(buf) < 1 << 20, "websocket handshake reply too large"
        head, _, self.buf = buf.partition(b"\r\n\r\n")
        self.raw_head = head
        hl = head.split(b"\r\n")
        m = re.match(rb"HTTP/1\.1 (\d{3})", hl[0] if hl else b"")
        self.status = int(m.group(1)) if m else None
        self.headers = {}
        for ln in hl[1:]:
            k, _, v = ln.partition(b":")
            self.headers.setdefault(k.strip().decode("latin-1").lower(), []).append(
                v.strip().decode("latin-1"))
        self.closed = False
        self.close_code = None

    def header(self, name):
        v = self.headers.get(name.lower())
        return v[0] if v else None

    def expect_open(self):
        assert self.status == 101, \
            f"websocket {self.path}: expected 101, got {self.status}: {self.raw_head[:500]!r}" \
            f" {self.buf[:300]!r}"
        want = base64.b64encode(hashlib.sha1((self.key + WS_GUID).encode()).digest()).decode()
        assert self.header("Sec-WebSocket-Accept") == want, \
            f"bad Sec-WebSocket-Accept {self.header('Sec-WebSocket-Accept')!r}"
        assert (self.header("Upgrade") or "").lower() == "websocket", self.raw_head
        return self

    # frames
    def send_frame(self, opcode, payload=b"", fin=True):
        if isinstance(payload, str):
            payload = payload.encode()
        n = len(payload)
        head = bytes([(0x80 if fin else 0) | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload)) if n < 4096 else \
            (int.from_bytes(payload, "big") ^ int.from_bytes((mask * (n // 4 + 1))[:n], "big")
             ).to_bytes(n, "big")
        self.sock.sendall(head + mask + masked)

    def send_text(self, text):
        self.send_frame(0x1, text)

    def send_json(self, obj):
        self.send_text(jsonlib.dumps(obj))

    def send_binary(self, data):
        self.send_frame(0x2, data)

    @property
    def protocol(self):
        """The subprotocol the server chose (Sec-WebSocket-Protocol), or None."""
        return self.header("Sec-WebSocket-Protocol")

    def _read(self, n):
        while len(self.buf) < n:
            b = self.sock.recv(65536)
            if not b:
                raise WebSocketClosed(None, "", clean=False)
            self.buf += b
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _frame(self):
        b0, b1 = self._read(2)
        assert not b1 & 0x80, "server frames must not be masked"
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read(8))[0]
        return bool(b0 & 0x80), b0 & 0x0F, self._read(n)

    def recv(self, timeout=None):
        """Next data message as (opcode, bytes); answers pings; raises
        WebSocketClosed on a close frame (answered) or EOF, socket.timeout on timeout."""
        if self.closed:
            raise WebSocketClosed(self.close_code)
        old = self.sock.gettimeout()
        if timeout is not None:
            self.sock.settimeout(timeout)
        try:
            parts, first_op = [], None
            while True:
                fin, op, payload = self._frame()
                if op == 0x9:
                    self.send_frame(0xA, payload)
                    continue
                if op == 0xA:
                    continue
                if op == 0x8:
                    code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                    self.closed = True
                    self.close_code = code
                    try:
                        self.send_frame(0x8, payload[:2])
                    except OSError:
                        pass
                    raise WebSocketClosed(code, payload[2:].decode("utf-8", "replace"))
                if op != 0x0:
                    first_op = op
                parts.append(payload)
                if fin:
                    return first_op, b"".join(parts)
        finally:
            if timeout is not None and not self.closed:
                try:
                    self.sock.settimeout(old)
                except OSError:
                    pass

    def recv_json(self, timeout=None):
        op, data = self.recv(timeout)
        assert op == 0x1, f"expected a text frame, got opcode {op}: {data[:200]!r}"
        return jsonlib.loads(data)

    def close(self, code=1000):
        if not self.closed:
            try:
                self.send_frame(0x8, struct.pack("!H", code))
            except OSError:
                pass
            self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass


def ws_cookie_headers(c, name=None):
    """Headers a browser would send on c's behalf for a WebSocket to name's
    runtime (c's own by default): the cookies of that runtime's origin (after
    the handoff), or labd's own in path mode."""
    h = {}
    jar = c.cookies
    if c.user_origins:
        name = name or c.user
        if not c.bearer and c.session and not has_runtime_cookie(c.runtime_jars.get(origin_label(name), {})):
            c.handoff(name)
        jar = c.runtime_jars.get(origin_label(name), {})
    if jar:
        h["Cookie"] = "; ".join(f"{k}={v}" for k, v in jar.items())
    if c.bearer:
        h["Authorization"] = f"Bearer {c.bearer}"
    return h


def jupyter_message(msg_type, content, channel="shell", session=None):
    return {
        "header": {"msg_id": uuid.uuid4().hex, "username": "test",
                   "session": session or uuid.uuid4().hex, "msg_type": msg_type,
                   "version": "5.3",
                   "date": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())},
        "parent_header": {}, "metadata": {}, "content": content,
        "channel": channel, "buffers": [],
    }


# Jupyter Server 2's kernel WebSocket subprotocol: binary frames of
# [n][n offsets][channel][header][parent_header][metadata][content][buffers...],
# little-endian uint64 counts and offsets (jupyter_server's
# services/kernels/connection/base.py). JupyterLab 4 offers it; Notebook 6
# ignores the offer and speaks JSON text frames.
KERNEL_V1 = "v1.kernel.websocket.jupyter.org"


def kernel_v1_pack(msg):
    """A kernel message dict as one v1 binary frame payload."""
    channel = msg.get("channel", "shell").encode()
    parts = [jsonlib.dumps(msg.get(k, {})).encode()
             for k in ("header", "parent_header", "metadata", "content")]
    offsets = [8 * (1 + 1 + len(parts) + 1)]
    offsets.append(offsets[-1] + len(channel))
    for part in parts:
        offsets.append(offsets[-1] + len(part))
    head = struct.pack("<Q", len(offsets)) + b"".join(struct.pack("<Q", o) for o in offsets)
    return head + channel + b"".join(parts)


def kernel_v1_unpack(data):
    """A v1 binary frame payload as a message dict (channel, header, ...)."""
    n = struct.unpack_from("<Q", data, 0)[0]
    assert 3 <= n <= 64, f"v1 frame with {n} offsets"
    offs = [struct.unpack_from("<Q", data, 8 * (i + 1))[0] for i in range(n)]
    assert offs[0] == 8 * (n + 1) and offs == sorted(offs) and offs[-1] <= len(data), offs
    parts = [data[offs[i]:offs[i + 1]] for i in range(1, n - 1)]
    msg = {"channel": data[offs[0]:offs[1]].decode()}
    for k, part in zip(("header", "parent_header", "metadata", "content"), parts):
        msg[k] = jsonlib.loads(part) if part else {}
    msg["buffers"] = parts[4:]
    msg["msg_type"] = msg["header"].get("msg_type")
    return msg


def kernel_send(ws, msg):
    """Sends a kernel message in the framing the channel negotiated."""
    if ws.protocol == KERNEL_V1:
        ws.send_binary(kernel_v1_pack(msg))
    else:
        ws.send_json(msg)


def kernel_recv(ws, timeout=None):
    """The next kernel message from ws as a dict, in either framing."""
    op, data = ws.recv(timeout)
    if ws.protocol == KERNEL_V1:
        assert op == 0x2, f"v1 kernel channel: expected a binary frame, got opcode {op}"
        return kernel_v1_unpack(data)
    assert op == 0x1, f"expected a text frame, got opcode {op}: {data[:200]!r}"
    return jsonlib.loads(data)


def open_kernel_channel(daemon, c, protocols=(KERNEL_V1,)):
    """Starts a python3 kernel in c's runtime and opens its channels WebSocket
    through labd with c's cookie, offering protocols as a browser's JupyterLab
    does; returns (kernel id, open WebSocket)."""
    base = f"/user/{c.user}/"
    r = c.post(base + "api/kernels", json={"name": "python3"})
    assert r.status == 201, r
    kid = r.json["id"]
    ws = WebSocket(daemon.port, base + f"api/kernels/{kid}/channels",
                   headers=dict(ws_cookie_headers(c), Origin=c.runtime_origin()),
                   source=c.source, protocols=protocols).expect_open()
    return kid, ws


def jupyter_execute(ws, code, timeout=60 * SLOW):
    """Runs code on the kernel behind ws; returns (execute_result text/plain or None,
    stdout text, every message whose parent is this request)."""
    msg = jupyter_message("execute_request", {
        "code": code, "silent": False, "store_history": True, "user_expressions": {},
        "allow_stdin": False, "stop_on_error": True})
    mid = msg["header"]["msg_id"]
    kernel_send(ws, msg)
    result, stdout, mine, replied, idle = None, "", [], False, False
    deadline = time.monotonic() + timeout
    while not (replied and idle):
        left = deadline - time.monotonic()
        assert left > 0, f"no complete reply to execute_request {code!r} within {timeout}s: " \
            f"{[m.get('msg_type') for m in mine]}"
        m = kernel_recv(ws, timeout=left)
        if (m.get("parent_header") or {}).get("msg_id") != mid:
            continue
        mine.append(m)
        t = m.get("msg_type") or m["header"]["msg_type"]
        if t == "execute_result":
            result = m["content"]["data"]["text/plain"]
        elif t == "stream" and m["content"].get("name") == "stdout":
            stdout += m["content"]["text"]
        elif t == "execute_reply":
            replied = True
        elif t == "status" and m["content"].get("execution_state") == "idle":
            idle = True
    return result, stdout, mine
