"""Helpers of the training-job tests (test_jobs_*.py): a daemon with a [jobs]
section, submit and wait, files into and out of a user's home through jobs
themselves (the home is an ext4 image only a sandbox mounts), and a streaming
Server-Sent Events reader.  Everything goes through the real API (docs/jobs.md)."""

import calendar
import json as jsonlib
import os
import socket
import time

from labd_harness import SLOW, STRONG, assert_status, unique_name, wait_until

SCRIPTS = os.path.join(os.path.dirname(__file__), "jobs_scripts")
PY = "/usr/bin/python3"  # Debian's, with python3-torch; seen read-only in the sandbox
LIVE = ("InProgress", "Stopping")
ENDED = ("Completed", "Failed", "Stopped")
JOB_TIMEOUT = 90 * SLOW

# Short thresholds so that every rule can fire within seconds (docs/config.md [jobs]).
JOBS_DEFAULTS = {
    "sample_interval": "200ms",
    "grace": "5s",
    "keep_alive_max": "600s",
}


def jobs_daemon(factory, name, jobs=None, runtime=None, quota=None, **kw):
    """A started runtime daemon whose config has [jobs] (JOBS_DEFAULTS + jobs)."""
    j = dict(JOBS_DEFAULTS)
    j.update(jobs or {})
    sections = dict(kw.pop("sections", None) or {}, jobs=j)
    if quota:
        sections["quota"] = dict(quota)
    rt = {"cpu_limit": "1h"}
    rt.update(runtime or {})
    return factory(name, runtime=rt, sections=sections, **kw)


def new_user(d, prefix="jb", overrides=None, plan=None):
    """(name, logged-in client) of a fresh user of daemon d."""
    name = unique_name(prefix)
    pw = f"{STRONG}-{name}"
    a = d.admin()
    assert_status(a.post("/api/v1/users", json={"name": name, "password": pw}), 201)
    if overrides or plan:
        body = {}
        if overrides:
            body["overrides"] = overrides
        if plan:
            body["plan"] = plan
        assert_status(a.put(f"/api/v1/users/{name}/quota", json=body), 200)
    c = d.client()
    c.login(name, pw)
    c.name, c.password = name, pw
    return name, c


def script(name):
    with open(os.path.join(SCRIPTS, name)) as fh:
        return fh.read()


_jobs = iter(range(1, 10 ** 9))


def job_name(prefix="j"):
    return f"{prefix}-{os.getpid() % 1000}-{next(_jobs)}"


def submit(c, command, name=None, expect=201, **fields):
    """POST /api/v1/jobs; returns the job object (or the response if expect is None)."""
    body = {"name": name or job_name(), "command": command}
    body.update(fields)
    r = c.post("/api/v1/jobs", json=body)
    if expect is None:
        return r
    assert r.status == expect, f"submitting {body['name']}: {r!r}"
    return r.json


def get_job(c, job_id):
    r = c.get(f"/api/v1/jobs/{job_id}")
    assert_status(r, 200)
    return r.json


def wait_job(c, job_id, statuses=ENDED, timeout=JOB_TIMEOUT, secondary=None):
    """Polls the job until its status is in statuses (and its secondary status is
    secondary, when given), and once it is over until its metrics are complete (its log
    read to the end, so final_metrics and findings are final); returns the job."""
    if isinstance(statuses, str):
        statuses = (statuses,)
    last = {}

    def done():
        last["job"] = j = get_job(c, job_id)
        if j["status"] in statuses and (secondary is None or j["secondary_status"] == secondary) \
                and (j["status"] not in ENDED or j["metrics_complete"]):
            return j
        return None

    return wait_until(done, timeout, lambda: f"job {job_id} {statuses}/{secondary}: {last.get('job')}",
                      interval=0.1)


def run_job(c, command, timeout=JOB_TIMEOUT, **fields):
    """Submit and wait for the end; returns the ended job."""
    j = submit(c, command, **fields)
    return wait_job(c, j["id"], timeout=timeout)


def log_text(c, job_id):
    r = c.get(f"/api/v1/jobs/{job_id}/logs")
    assert_status(r, 200)
    return r.body.decode("utf-8", "replace")


def secondaries(job):
    return [t["status"] for t in job["transitions"]]


def put_files(c, files, **fields):
    """Writes {home-relative path: text} into c's home with one job (a shell that
    prints the environment variables holding the texts into the files; each text
    is cut into values of at most 4000 bytes, the spec's limit being 4096)."""
    env, lines = {}, ["set -e"]
    for i, (path, text) in enumerate(sorted(files.items())):
        data = text.encode()
        chunks = [data[k:k + 4000] for k in range(0, len(data), 4000)] or [b""]
        names = []
        for k, ch in enumerate(chunks):
            env[f"LABD_TEST_F{i}_{k}"] = ch.decode()
            names.append(f'"$LABD_TEST_F{i}_{k}"')
        d = os.path.dirname(path)
        if d:
            lines.append(f"mkdir -p '{d}'")
        lines.append(f"printf %s {' '.join(names)} > '{path}'")
    assert len(env) <= 64, "too many chunks for one job"
    j = run_job(c, ["/bin/sh", "-c", "\n".join(lines)], environment=env, **fields)
    assert j["status"] == "Completed", f"put_files job: {j}\n{log_text(c, j['id'])}"
    return j


def home_run(c, shell, **fields):
    """Runs a shell line in c's home as a job; returns (job, log text)."""
    j = run_job(c, ["/bin/sh", "-c", shell], **fields)
    return j, log_text(c, j["id"])


# --------------------------------------------------------------------------- SSE

class SSE:
    """A streaming GET of an event-stream with c's cookies; events as dicts
    {event, id, data}.  Standard library only, one socket."""

    def __init__(self, c, path, headers=None, timeout=30 * SLOW):
        self.sock = socket.create_connection(("127.0.0.1", c.port), timeout=timeout,
                                             source_address=(c.source, 0) if c.source else None)
        hdrs = {"Host": f"127.0.0.1:{c.port}", "Accept": "text/event-stream"}
        if c.cookies:
            hdrs["Cookie"] = "; ".join(f"{k}={v}" for k, v in c.cookies.items())
        if c.bearer:
            hdrs["Authorization"] = f"Bearer {c.bearer}"
        hdrs.update(headers or {})
        req = f"GET {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) \
            + "Connection: close\r\n\r\n"
        self.sock.sendall(req.encode())
        self.buf = b""
        self.eof = False
        head = self._until(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self.chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        self.body = b""  # de-chunked bytes not yet parsed into events

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            self.eof = True
        self.buf += data

    def _until(self, sep):
        while sep not in self.buf:
            if self.eof:
                raise EOFError("stream ended")
            self._fill()
        head, _, self.buf = self.buf.partition(sep)
        return head

    def _more_body(self):
        if not self.chunked:
            if not self.buf:
                self._fill()
                if self.eof and not self.buf:
                    raise EOFError("stream ended")
            self.body += self.buf
            self.buf = b""
            return
        size = int(self._until(b"\r\n").split(b";")[0], 16)
        if size == 0:
            self.eof = True
            raise EOFError("stream ended")
        while len(self.buf) < size + 2:
            self._fill()
            if self.eof and len(self.buf) < size + 2:
                raise EOFError("stream ended mid-chunk")
        self.body += self.buf[:size]
        self.buf = self.buf[size + 2:]

    def event(self):
        """The next event (comments and keep-alives skipped); EOFError at the end."""
        while True:
            while b"\n\n" not in self.body:
                self._more_body()
            raw, _, self.body = self.body.partition(b"\n\n")
            ev = {"event": "message", "id": None, "data": []}
            for ln in raw.decode("utf-8", "replace").split("\n"):
                if not ln or ln.startswith(":"):
                    continue
                k, _, v = ln.partition(":")
                v = v[1:] if v.startswith(" ") else v
                if k == "data":
                    ev["data"].append(v)
                elif k in ("event", "id"):
                    ev[k] = v
            if ev["data"] or ev["event"] != "message":
                ev["data"] = "\n".join(ev["data"])
                return ev

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def usage_entries(c):
    now = int(time.time())
    r = c.get(f"/api/v1/me/usage?from={now - 86400}&to={now + 3600}")
    assert_status(r, 200)
    return r.json["entries"]


def metric_values(c, job_id, name):
    r = c.get(f"/api/v1/jobs/{job_id}/metrics")
    assert_status(r, 200)
    return [p["value"] for p in r.json["metrics"].get(name, [])]


def loads(text):
    return jsonlib.loads(text)


def at(s):
    """An API time ('2026-12-03T15:06:43Z' or with milliseconds '...43.913Z') as
    epoch seconds (a float)."""
    base, _, frac = s.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + (float("0." + frac) if frac else 0)
