"""docs/openapi.yaml: a valid OpenAPI 3.1 file, every route of the table in it
with the scope the table declares, and every documented operation called at
least once here (its answers checked against the file by the harness client,
as every answer of the whole suite is: openapi_check.py)."""

import http.client
import json

import pytest
import yaml
from jsonschema import Draft202012Validator

import openapi_check
from labd_harness import HTTP_TIMEOUT, Response, assert_status

METHODS = ("get", "put", "post", "delete", "patch")


def load():
    with open(openapi_check.SPEC_PATH, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def routes(daemon):
    """(METHOD, pattern, access, kind, scope) of each route of `labd routes`."""
    r = daemon.run_cli("routes")
    assert r.returncode == 0, r.stderr
    return [tuple(line.split(" ")) for line in r.stdout.splitlines()]


def spec_template(pattern):
    """The spec's template for a route pattern ("{}" for each parameter)."""
    for template in load()["paths"]:
        parts, want = template.split("/"), pattern.split("/")
        if len(parts) == len(want) and all(
                w == p or (w == "{}" and p.startswith("{")) for w, p in zip(want, parts)):
            return template
    return None


def test_spec_is_openapi_3_1_with_valid_schemas():
    doc = load()
    assert doc["openapi"] == "3.1.0"
    for name, schema in doc["components"]["schemas"].items():
        Draft202012Validator.check_schema(schema)
    schemes = doc["components"]["securitySchemes"]
    assert schemes["bearer"]["scheme"] == "bearer" and schemes["cookie"]["in"] == "cookie"
    try:  # the full meta-check where the validator is installed (pip); not a skip
        from openapi_spec_validator import validate
    except ImportError:
        validate = None
    if validate:
        validate(doc)
    ids = [op["operationId"] for item in doc["paths"].values()
           for m, op in item.items() if m in METHODS]
    assert len(ids) == len(set(ids)), "operationId used twice"


def test_every_route_is_documented_with_its_scope(daemon):
    doc = load()
    served = set()
    for method, pattern, access, kind, scope in routes(daemon):
        if kind != "api":
            continue
        template = spec_template(pattern)
        assert template, f"{method} {pattern} is not in docs/openapi.yaml"
        op = doc["paths"][template].get(method.lower())
        assert op, f"{method} {template} is not in docs/openapi.yaml"
        served.add((method, template))
        want = None if scope == "-" else scope
        assert op.get("x-labd-scope", "missing") == want, \
            f"{method} {template}: x-labd-scope {op.get('x-labd-scope')!r}, route table {scope}"
        if want and want != "metrics":
            assert {"bearer": [want]} in op["security"], \
                f"{method} {template}: security does not ask the bearer for {want}"
        if access == "public" and want is None:
            assert op["security"] == [{}], f"{method} {template} is public in the table"
    # the other way: every documented operation is served
    for method, template, op in openapi_check.spec().operations():
        assert (method, template) in served, \
            f"{method} {template} is documented but not in the route table"


def sse_status(daemon, bearer):
    """Status and Content-Type of the event stream's head (the body never ends)."""
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=HTTP_TIMEOUT)
    try:
        conn.request("GET", "/api/v1/me/runtime/events",
                     headers={"Authorization": f"Bearer {bearer}"})
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type")
    finally:
        conn.close()


def test_every_documented_operation_is_called(daemon, admin, new_user):
    openapi_check.seen.clear()
    name, pw = new_user()
    c = daemon.client()
    c.login(name, pw)
    t = admin.post("/api/v1/me/tokens", json={"name": "openapi", "password": daemon.admin_password})
    assert_status(t, 201)
    a = daemon.client()
    a.bearer = t.json["token"]
    assert_status(a.get("/api/v1/health"), 200)
    assert_status(c.get("/api/v1/me"), 200)
    tok = c.post("/api/v1/me/tokens", json={"name": "x", "password": pw, "expires_in_s": 600})
    assert_status(tok, 201)
    assert_status(c.get("/api/v1/me/tokens"), 200)
    assert_status(c.delete(f"/api/v1/me/tokens/{tok.json['id']}"), 204)
    assert_status(c.get("/api/v1/me/runtime"), 200)
    c.post("/api/v1/me/runtime", json={"type": "gpu"})  # no GPU here: 409, as documented
    c.delete("/api/v1/me/runtime")  # none live: 404, as documented
    # a file: URL is refused before any runtime is asked (400 naming repo)
    c.post("/api/v1/me/runtime/open", json={"repo": "file:///etc", "path": "a.ipynb"})
    c.get("/api/v1/me/runtime/open")  # nothing opened yet: 404
    for m in ("GET", "POST", "DELETE"):
        assert_status(c.request(m, "/api/v1/me/session", json={}), 308)
    assert_status(c.get("/api/v1/me/quota"), 200)
    assert_status(c.get("/api/v1/me/usage"), 200)
    c.get("/api/v1/gpus")
    assert_status(a.post("/api/v1/gpus/rescan", json={}), 200)  # no NVML here: the config's
    assert_status(a.get("/api/v1/users"), 200)
    assert_status(a.get(f"/api/v1/users/{name}"), 200)
    assert_status(a.patch(f"/api/v1/users/{name}", json={"disabled": False}), 200)
    assert_status(a.get(f"/api/v1/users/{name}/quota"), 200)
    assert_status(a.put(f"/api/v1/users/{name}/quota", json={"overrides": {"gpu_s_per_24h": 60}}), 200)
    assert_status(a.post("/api/v1/plans", json={"name": "oaplan", "limits": {"cpu_s_per_24h": "unlimited"}}), 201)
    assert_status(a.get("/api/v1/plans"), 200)
    assert_status(a.get("/api/v1/plans/oaplan"), 200)
    assert_status(a.put("/api/v1/plans/oaplan", json={"limits": {"cpu_s_per_24h": 60}}), 200)
    assert_status(a.post("/api/v1/groups", json={"name": "oagroup", "plan": "oaplan", "members": [name]}), 201)
    assert_status(a.get("/api/v1/groups"), 200)
    assert_status(a.get("/api/v1/groups/oagroup"), 200)
    assert_status(a.put("/api/v1/groups/oagroup", json={"plan": None, "expires_at": "2031-01-01"}), 200)
    assert_status(a.post("/api/v1/users/import", json={"csv": f"name\n{name}\n", "dry_run": True}), 200)
    assert_status(a.delete("/api/v1/groups/oagroup"), 204)
    assert_status(a.delete("/api/v1/plans/oaplan"), 204)
    assert_status(a.get("/api/v1/usage?group_by=day"), 200)
    assert_status(a.get("/api/v1/runtimes"), 200)
    assert_status(c.get("/api/v1/images"), 200)
    job = c.post("/api/v1/jobs", json={"name": "oajob", "command": ["true"]})
    assert_status(job, 201)
    assert_status(c.get("/api/v1/jobs"), 200)
    assert_status(c.get(f"/api/v1/jobs/{job.json['id']}"), 200)
    c.post(f"/api/v1/jobs/{job.json['id']}/stop")  # 202, or 409 once it is over
    assert_status(c.get("/api/v1/warm-pools"), 200)
    c.delete("/api/v1/warm-pools/999999")  # none: 404
    tune = c.post("/api/v1/tuning-jobs", json={
        "name": "oatune", "job": {"command": ["true"], "metric_definitions": [
            {"name": "m", "regex": "m=([0-9]+)"}]},
        "parameter_ranges": [{"name": "x", "type": "integer", "min": 1, "max": 2}],
        "objective": {"metric": "m", "type": "maximize"}, "max_trials": 1})
    assert_status(tune, 201)
    assert_status(c.get("/api/v1/tuning-jobs"), 200)
    assert_status(c.get(f"/api/v1/tuning-jobs/{tune.json['id']}"), 200)
    c.post(f"/api/v1/tuning-jobs/{tune.json['id']}/stop")  # 202, or 409 once it is over
    # webhooks (test_webhooks.py delivers them): no egress here, so a create is 403
    c.post("/api/v1/webhooks", json={"url": "https://hooks.example.org/x", "events": ["job.ended"]})
    assert_status(c.get("/api/v1/webhooks"), 200)
    assert_status(c.get("/api/v1/webhooks/999999/deliveries"), 404)
    assert_status(c.delete("/api/v1/webhooks/999999"), 404)
    # the job's log, metrics, samples, report (test_job_logs.py drives them further); its events
    # stream, so only a missing job's answer here
    for what in ("logs", "metrics", "samples", "report"):
        assert_status(c.get(f"/api/v1/jobs/{job.json['id']}/{what}"), 200)
    assert_status(c.get("/api/v1/jobs/999999/events"), 404)
    # the shell is a WebSocket (test_job_shell.py): a plain request is told so
    assert_status(c.get("/api/v1/jobs/999999/shell"), 426)
    assert_status(c.post("/api/v1/jobs/999999/shell"), 426)
    c.delete(f"/api/v1/jobs/{job.json['id']}")  # 204 once stopped, 409 while it stops
    assert_status(c.delete("/api/v1/jobs/999999"), 404)
    a.delete("/api/v1/runtimes/999999")  # none: 404 (test_admin_runtimes stops real ones)
    assert_status(a.get("/api/v1/audit?limit=5"), 200)
    assert_status(a.get("/metrics"), 200)
    other, opw = new_user()
    r = a.post("/api/v1/users", json={"name": other + "x"})
    assert_status(r, 201)
    assert_status(a.delete(f"/api/v1/users/{other}x"), 204)
    assert_status(c.post("/api/v1/me/password", json={"current_password": pw,
                                                      "new_password": pw + "-2"}), 204)
    c.login(name, pw + "-2")
    assert_status(c.post("/api/v1/logout"), 204)
    assert sse_status(daemon, t.json["token"])[0] == 200
    openapi_check.seen.add(("GET", "/api/v1/me/runtime/events", 200))
    r = daemon.client().post("/api/v1/login", json={"username": name, "password": pw + "-2"})
    assert_status(r, 200)
    # single sign-on off here: test_oidc.py sees it on
    assert daemon.client().get("/api/v1/sso").json == {"enabled": False}

    missing = []
    for method, template, op in openapi_check.spec().operations():
        statuses = {s for (m, t_, s) in openapi_check.seen if m == method and t_ == template}
        documented = {int(s) for s in op["responses"]}
        if not statuses & documented:
            missing.append(f"{method} {template} (saw {sorted(statuses)})")
    assert not missing, "documented operations not called with a documented status:\n" + \
        "\n".join(missing)


def fake(method, path, status, body):
    class Headers(dict):
        def get(self, k, d=None):
            return super().get(k.lower(), d)

        def get_all(self, k):
            return []
    return Response(method, path, status, "", Headers({"content-type": "application/json"}),
                    json.dumps(body).encode())


@pytest.mark.parametrize("method,path,status,body", [
    ("GET", "/api/v1/me", 200, {"name": "alice"}),                       # fields missing
    ("GET", "/api/v1/me/tokens", 200, {"tokens": [{"id": 1}]}),
    ("GET", "/api/v1/runtimes", 200, {"runtimes": [{"id": "7"}]}),
    ("GET", "/api/v1/me", 403, {"error": {"code": "forbidden"}}),       # no message
    ("GET", "/api/v1/me", 201, {"name": "alice"}),                       # undocumented status
    ("GET", "/api/v1/nowhere", 200, {}),                                 # undocumented path
])
def test_the_check_refuses_what_the_spec_does_not_allow(method, path, status, body):
    with pytest.raises(AssertionError):
        openapi_check.check(fake(method, path, status, body))
