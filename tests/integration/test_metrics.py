"""GET /metrics on a live daemon: who may scrape (admin, the scrape token),
promtool accepts the body, and the series follow real events: logins that
fail, proxied requests by status class, a WebSocket relay, a real runtime's
start and stop, the supervisor channel."""

import os
import re
import subprocess
import tempfile
import time

import pytest

from labd_harness import (
    Daemon,
    STRONG,
    WebSocket,
    assert_error,
    assert_status,
    make_user,
    start_runtime,
    stop_runtime,
    unique_name,
    wait_until,
    ws_cookie_headers,
)

SCRAPE_TOKEN = "scrape-" + "k" * 40
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (\S+)$")


@pytest.fixture(scope="module")
def token_file():
    # root-only, as an operator would keep it: labd reads it before dropping root
    d = tempfile.mkdtemp(prefix="labd-it-scrape-")
    path = os.path.join(d, "scrape-token")
    with open(path, "w") as fh:
        fh.write(SCRAPE_TOKEN + "\n")
    os.chmod(path, 0o600)
    yield path
    os.unlink(path)
    os.rmdir(d)


@pytest.fixture(scope="module")
def md(runtime_daemon_factory, token_file):
    return runtime_daemon_factory("metrics", runtime={"cpu_limit": "2h"},
                                  sections={"metrics": {"scrape_token_file": token_file}})


@pytest.fixture(scope="module")
def madmin(md):
    return md.admin()



def scrape_raw(d, **kw):
    return d.client().get("/metrics", headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"},
                          **kw)


def scrape(d):
    """The scrape as {series: value}; series are written as labd writes them."""
    r = scrape_raw(d)
    assert_status(r, 200)
    values = {}
    for line in r.body.decode().splitlines():
        if line.startswith("#") or not line:
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        values[m.group(1)] = float(m.group(2))
    return values


def metric(d, series):
    v = scrape(d)
    assert series in v, f"{series} missing from the scrape"
    return v[series]


def user_path(c, rest=""):
    return f"/user/{c.user}/{rest}"


# ---------------------------------------------------------------- who may scrape


def test_anonymous_gets_401(md):
    assert_error(md.client().get("/metrics"), 401, "unauthorized")


def test_wrong_token_gets_401(md):
    r = md.client().get("/metrics", headers={"Authorization": "Bearer " + "x" * 47})
    assert_error(r, 401, "unauthorized")
    # the scrape token is not an API token either: it opens nothing else
    r = md.client().get("/api/v1/me", headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"})
    assert_error(r, 401, "unauthorized")


def test_plain_user_gets_403(md, madmin):
    c = make_user(md, madmin, "m")
    assert_error(c.get("/metrics"), 403, "forbidden")


def test_admin_and_scrape_token_get_200(md, madmin):
    r = madmin.get("/metrics")
    assert_status(r, 200)
    assert r.header("Content-Type") == "text/plain; version=0.0.4; charset=utf-8", r
    assert r.header("Cache-Control") == "no-store", r
    r = scrape_raw(md)
    assert_status(r, 200)
    assert b"# TYPE labd_runtimes gauge" in r.body, r.body[:400]


# ---------------------------------------------------------------- format


def test_promtool_accepts_the_scrape(md):
    body = scrape_raw(md).body
    p = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True,
                       timeout=30)
    assert p.returncode == 0, f"promtool: {p.stdout.decode()} {p.stderr.decode()}"


def test_process_and_supervisor(md):
    v = scrape(md)
    assert v["labd_supervisor_channel_up"] == 1, v
    started = v["process_start_time_seconds"]
    assert time.time() - 3600 < started <= time.time() + 1, started


# ---------------------------------------------------------------- series follow events


def test_login_failures_count(md):
    before = metric(md, "labd_login_failures_total")
    c = md.client()
    r = c.post("/api/v1/login", json={"username": "admin", "password": "not-the-password"})
    assert_error(r, 401, "invalid_credentials")
    r = c.post("/api/v1/login", json={"username": unique_name("nobody"), "password": STRONG})
    assert_error(r, 401, "invalid_credentials")
    assert metric(md, "labd_login_failures_total") == before + 2
    md.admin()  # a good login counts nothing
    assert metric(md, "labd_login_failures_total") == before + 2


def test_runtime_proxy_and_websocket_series(md, madmin):
    live = 'labd_runtimes{state="running",kind="cpu"}'
    starts = "labd_runtime_start_duration_seconds_count"
    ok = 'labd_proxy_requests_total{code="2xx"}'
    missing = 'labd_proxy_requests_total{code="4xx"}'
    ok_time = 'labd_proxy_request_duration_seconds_count{code="2xx"}'
    before = scrape(md)
    c = make_user(md, madmin, "m")
    start_runtime(c)
    # counters move when the request is done, which may be just after its
    # answer reached the client: wait for them rather than read once
    wait_until(lambda: metric(md, live) == before[live] + 1
               and metric(md, starts) == before[starts] + 1, 10,
               "the running runtime and its start to be counted")
    after_start = scrape(md)

    # proxied requests, by the status class Jupyter answered with
    r = c.get(user_path(c, "api/status"))
    assert_status(r, 200)
    r = c.get(user_path(c, "api/contents/no-such-notebook.ipynb"))
    assert_status(r, 404)
    wait_until(lambda: metric(md, ok) >= after_start[ok] + 1
               and metric(md, missing) == after_start[missing] + 1, 10,
               "the proxied 2xx and 4xx answers to be counted")
    v = scrape(md)
    assert v[missing] == after_start[missing] + 1, (after_start[missing], v[missing])
    assert v[ok_time] == v[ok], v  # each counted request has its latency

    # a WebSocket relay is counted while open
    r = c.post(user_path(c, "api/kernels"), json={"name": "python3"})
    assert_status(r, 201)
    kid = r.json["id"]
    headers = ws_cookie_headers(c)
    headers["Origin"] = c.runtime_origin()
    ws = WebSocket(md.port, user_path(c, f"api/kernels/{kid}/channels"), headers=headers,
                   source=c.source)
    try:
        wait_until(lambda: metric(md, "labd_websocket_relays") == before[
            "labd_websocket_relays"] + 1, 10, "the relay to be counted")
    finally:
        ws.close()
    wait_until(lambda: metric(md, "labd_websocket_relays") == before["labd_websocket_relays"],
               10, "the relay to be uncounted")
    # the upgrade itself is a proxied request answered 101
    upgraded = 'labd_proxy_requests_total{code="1xx"}'
    wait_until(lambda: metric(md, upgraded) == before[upgraded] + 1, 10,
               "the upgrade to be counted as 1xx")
    c.delete(user_path(c, f"api/kernels/{kid}"))

    stop_runtime(c)
    assert metric(md, live) == before[live]


def test_runtime_gauge_zero_series_present(md):
    v = scrape(md)
    for state in ("queued", "starting", "running", "stopping"):
        for kind in ("cpu", "gpu"):
            assert f'labd_runtimes{{state="{state}",kind="{kind}"}}' in v, v.keys()


def test_ledger_seconds_match_the_ledger(md, madmin):
    """labd_ledger_seconds_total is the ledger's billable seconds by kind: after
    a runtime has been billed and stopped, the counter has grown by what it was
    billed, and equals the usage API's all-time totals."""
    def totals():
        r = madmin.get(f"/api/v1/usage?from=0&to={int(time.time()) + 3600}&group_by=kind")
        assert_status(r, 200)
        return r.json["totals"]

    before = metric(md, 'labd_ledger_seconds_total{kind="cpu"}')
    c = make_user(md, madmin, "ls")
    start_runtime(c)
    # billed from running on: wait for a heartbeat to advance the entry
    wait_until(lambda: totals()["cpu_s"] > before, 30, "a billed second")
    stop_runtime(c)
    wait_until(lambda: metric(md, 'labd_ledger_seconds_total{kind="cpu"}') == totals()["cpu_s"]
               and metric(md, 'labd_ledger_seconds_total{kind="gpu"}') == totals()["gpu_s"],
               30, "the counters to equal the ledger's totals")
    assert metric(md, 'labd_ledger_seconds_total{kind="cpu"}') > before


@pytest.mark.parametrize("content", [None, "short\n", "two tokens" + "x" * 40])
def test_bad_token_file_stops_labd_at_start(content):
    """A missing, short or spaced token file: labd exits 1 at start naming the
    key, rather than serving without the scraper's access or looping."""
    d = Daemon("metrics-bad")
    try:
        path = os.path.join(d.dir, "scrape-token")
        if content is not None:
            with open(path, "w") as fh:
                fh.write(content)
        d.sections["metrics"] = {"scrape_token_file": path}
        d.write_config()
        with pytest.raises(AssertionError, match="exited with 1 at start"):
            d.start()
        assert "[metrics] scrape_token_file" in d.log(), d.log_tail()
        assert "started web process" not in d.log(), d.log_tail()
    finally:
        d.cleanup()
