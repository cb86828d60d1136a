"""The monitoring files under deploy/ against a live labd: every series the Grafana
dashboard (deploy/grafana/labd.json) and the alert rules (deploy/prometheus/
labd-alerts.yml) name is one labd serves on GET /metrics, with the labels they match
on; promtool accepts the scrape config; and a real Prometheus run on that config
(only the target and the token file changed) scrapes labd with the scrape token and
evaluates every dashboard query and alert rule without an error."""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import urllib.parse

import pytest
import yaml

from labd_harness import REPO, assert_status, free_port, wait_until

SCRAPE_TOKEN = "monitor-" + "t" * 40
DASHBOARD = os.path.join(REPO, "deploy", "grafana", "labd.json")
SCRAPE_CONFIG = os.path.join(REPO, "deploy", "prometheus", "labd.yml")
ALERTS = os.path.join(REPO, "deploy", "prometheus", "labd-alerts.yml")
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? \S+$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
# Series Prometheus makes itself, not labd.
PROMETHEUS_MADE = {"up"}
# Rendered only when NVML reads the GPUs (docs/api.md): not on a host without one.
NVML_ONLY = {"labd_gpu_utilization_ratio"}
# PromQL words the files use that are not series.
PROMQL = {"sum", "rate", "by", "without", "histogram_quantile", "changes", "time", "and",
          "or", "unless", "avg", "max", "min", "count", "increase", "irate", "bool", "on",
          "ignoring", "group_left", "group_right", "offset", "le"}


@pytest.fixture(scope="module")
def token_file():
    d = tempfile.mkdtemp(prefix="labd-it-monitor-")
    path = os.path.join(d, "labd-token")
    with open(path, "w") as fh:
        fh.write(SCRAPE_TOKEN + "\n")
    os.chmod(path, 0o600)
    yield path
    shutil.rmtree(d)


@pytest.fixture(scope="module")
def md(daemon_factory, token_file):
    return daemon_factory("monitor", sections={"metrics": {"scrape_token_file": token_file},
                                               "gpu": {"stand_in": "1"}})


@pytest.fixture(scope="module")
def served(md):
    """{series name: {label name: set of values}} from one scrape with the token."""
    r = md.client().get("/metrics", headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"})
    assert_status(r, 200)
    out = {}
    for line in r.body.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        labels = out.setdefault(m.group(1), {})
        for k, v in LABEL.findall(m.group(2) or ""):
            labels.setdefault(k, set()).add(v)
    return out


def dashboard_exprs():
    with open(DASHBOARD) as fh:
        d = json.load(fh)
    return [t["expr"] for p in d["panels"] for t in p.get("targets", [])]


def alert_exprs():
    with open(ALERTS) as fh:
        rules = yaml.safe_load(fh)
    return [r["expr"] for g in rules["groups"] for r in g["rules"]]


def names_in(expr):
    """(series, [(series, label, value)], [grouping labels]) named by a PromQL expr."""
    matchers = []
    for name, body in re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}", expr):
        matchers += [(name, k, v) for k, v in LABEL.findall(body)]
    grouping = [w for g in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr)
                for w in re.split(r"[,\s]+", g) if w]
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)          # strings
    bare = re.sub(r"\{[^}]*\}", "", bare)                   # label matchers
    bare = re.sub(r"\b(?:by|without)\s*\([^)]*\)", "", bare)  # grouping
    bare = re.sub(r"\[[^\]]*\]", "", bare)                  # ranges
    words = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", bare)) - PROMQL
    return words, matchers, grouping


def check_exprs(exprs, served, where):
    assert exprs, f"no queries found in {where}"
    problems = []
    for e in exprs:
        words, matchers, grouping = names_in(e)
        for w in words:
            if w in PROMETHEUS_MADE or w in served:
                continue
            if w in NVML_ONLY:
                # not on this host: at least the source renders it and the docs list it
                with open(os.path.join(REPO, "server", "web", "scrape.c")) as fh:
                    src = fh.read()
                with open(os.path.join(REPO, "docs", "api.md")) as fh:
                    doc = fh.read()
                if f'"{w}"' in src and f"`{w}" in doc:
                    continue
            problems.append(f"{where}: {w!r} (in {e!r}) is not served by labd")
        for name, label, value in matchers:
            if name in PROMETHEUS_MADE or name in NVML_ONLY:
                continue
            have = served.get(name, {})
            if label not in have:
                problems.append(f"{where}: {name} has no label {label!r} (in {e!r})")
            elif value not in have[label]:
                problems.append(f"{where}: {name}{{{label}}} is never {value!r} (in {e!r})")
        all_labels = {k for labels in served.values() for k in labels}
        for g in grouping:
            if g not in all_labels:
                problems.append(f"{where}: no series has the label {g!r} (in {e!r})")
    assert not problems, "\n".join(problems)


def test_dashboard_names_only_served_series(served):
    check_exprs(dashboard_exprs(), served, "deploy/grafana/labd.json")


def test_alert_rules_name_only_served_series(served):
    check_exprs(alert_exprs(), served, "deploy/prometheus/labd-alerts.yml")


def test_the_check_catches_a_series_labd_lacks(served):
    # the checks above can fail: a misspelt series, a label labd does not set, a value
    # it never has, and a grouping label that exists nowhere
    for bad in ["labd_runtime_total", 'labd_runtimes{status="running"}',
                'labd_runtimes{state="sleeping"}', "sum by (user) (labd_runtimes)"]:
        with pytest.raises(AssertionError):
            check_exprs([bad], served, "planted")


def prometheus_copy(token_file, labd_port, tmp):
    """The shipped scrape config with only the target, the token file and the
    intervals changed (a test cannot wait 15 s for a scrape)."""
    with open(SCRAPE_CONFIG) as fh:
        cfg = yaml.safe_load(fh)
    cfg["global"]["scrape_interval"] = "1s"
    cfg["global"]["evaluation_interval"] = "1s"
    job = cfg["scrape_configs"][0]
    assert job["authorization"]["credentials_file"] == "/etc/prometheus/labd-token", job
    job["authorization"]["credentials_file"] = token_file
    job["static_configs"] = [{"targets": [f"127.0.0.1:{labd_port}"]}]
    path = os.path.join(tmp, "labd.yml")
    with open(path, "w") as fh:
        yaml.safe_dump(cfg, fh)
    shutil.copy(ALERTS, tmp)
    return path


def test_promtool_checks_the_shipped_config(token_file, md):
    with tempfile.TemporaryDirectory(prefix="labd-it-prom-") as tmp:
        path = prometheus_copy(token_file, md.port, tmp)
        p = subprocess.run(["promtool", "check", "config", path], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "SUCCESS: 7 rules found" in p.stdout + p.stderr, p.stdout + p.stderr


def query(port, expr):
    import urllib.request
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


def get(port, path):
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return json.load(r)


def test_prometheus_scrapes_labd_and_runs_every_query(token_file, md):
    tmp = tempfile.mkdtemp(prefix="labd-it-prom-")
    port = free_port()
    path = prometheus_copy(token_file, md.port, tmp)
    log = open(os.path.join(tmp, "prometheus.log"), "wb")
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={path}", f"--storage.tsdb.path={tmp}/data",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()

    def tail():
        with open(os.path.join(tmp, "prometheus.log"), errors="replace") as fh:
            return "prometheus log:\n" + fh.read()[-3000:]

    def answers(expr, want=None):
        try:
            r = query(port, expr)
        except OSError:
            return None
        res = r.get("data", {}).get("result", [])
        return r if want is None else any(float(s["value"][1]) == want for s in res)

    try:
        # the shipped auth works: Prometheus reaches labd with the token file
        wait_until(lambda: answers('up{job="labd"}', 1.0), 30, tail)
        wait_until(lambda: answers("labd_supervisor_channel_up", 1.0), 10, tail)
        for e in dashboard_exprs() + alert_exprs():
            r = query(port, e)
            assert r["status"] == "success", (e, r)
        # the rule file loaded, and every rule evaluates without an error
        def rules_ran():
            groups = get(port, "/api/v1/rules")["data"]["groups"]
            rules = [r for g in groups for r in g["rules"]]
            return len(rules) == 7 and all(r.get("lastEvaluation", "").startswith("20")
                                           and not r["lastEvaluation"].startswith("0001")
                                           for r in rules) and rules
        rules = wait_until(rules_ran, 15, tail)
        bad = [(r["name"], r.get("lastError")) for r in rules if r.get("health") != "ok"]
        assert not bad, bad
        # a healthy labd fires none of them
        firing = [r["name"] for r in rules if r.get("state") == "firing"]
        assert not firing, firing
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
