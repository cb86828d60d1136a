"""Validates labd's JSON answers against docs/openapi.yaml.

The harness client (labd_harness.Client) hands every response it receives to
check(); a JSON body on a documented path must match the schema of its
operation and status.  What is not checked, and why:
  - bodies that are not application/json (HTML pages, CSV, event streams,
    Prometheus text) and answers to HEAD;
  - paths outside /api/ and /metrics (Jupyter's own answers under /user/);
  - a 404 for a path no template matches (an unknown route has no operation).
An error status the operation does not list is checked against the common
Error schema; a success status it does not list is a failure, as is a path
under /api/ that the file does not document but the server answers.

Works with python3-jsonschema 4.10 (Debian 12: RefResolver) and later
releases (the referencing library)."""

import os
import re
import threading

import jsonschema
import yaml

SPEC_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "openapi.yaml")
SPEC_URI = "urn:labd:openapi"

_lock = threading.Lock()
_spec = None
# (METHOD, template, status) of every answer checked so far in this process.
seen = set()


class Spec:
    def __init__(self, path=SPEC_PATH):
        with open(path, encoding="utf-8") as fh:
            self.doc = yaml.safe_load(fh)
        self.templates = []
        for template, item in self.doc["paths"].items():
            pattern = "^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)) + "$"
            self.templates.append((template.count("{"), re.compile(pattern), template, item))
        # a literal path wins over a template with parameters
        self.templates.sort(key=lambda t: t[0])
        self._validators = {}

    def template_of(self, path):
        for _, rx, template, item in self.templates:
            if rx.match(path):
                return template, item
        return None, None

    def operations(self):
        """(METHOD, template, operation) of every documented operation."""
        for template, item in self.doc["paths"].items():
            for method, op in item.items():
                if method in ("get", "put", "post", "delete", "patch"):
                    yield method.upper(), template, op

    def _validator(self, pointer):
        v = self._validators.get(pointer)
        if v is None:
            schema = {"$ref": f"{SPEC_URI}#{pointer}"}
            try:
                from referencing import Registry, Resource
                from referencing.jsonschema import DRAFT202012
                registry = Registry().with_resource(
                    SPEC_URI, Resource.from_contents(self.doc, default_specification=DRAFT202012))
                v = jsonschema.Draft202012Validator(schema, registry=registry)
            except ImportError:  # jsonschema < 4.18
                resolver = jsonschema.RefResolver(SPEC_URI, self.doc,
                                                  store={SPEC_URI: self.doc})
                v = jsonschema.Draft202012Validator(schema, resolver=resolver)
            self._validators[pointer] = v
        return v

    def validate(self, pointer, body, what):
        errors = sorted(self._validator(pointer).iter_errors(body), key=lambda e: list(e.path))
        if errors:
            e = errors[0]
            where = "/".join(str(p) for p in e.absolute_path) or "(body)"
            raise AssertionError(
                f"{what}: answer does not match docs/openapi.yaml at {where}: {e.message}"
                f" (schema {pointer}; {len(errors)} error(s)); body {str(body)[:400]}")

    def response_pointer(self, method, template, status):
        """JSON pointer to the schema for the answer, or raises AssertionError."""
        esc = template.replace("~", "~0").replace("/", "~1")
        item = self.doc["paths"][template]
        op = item.get(method.lower())
        what = f"{method} {template} -> {status}"
        if op is None:
            assert status in (404, 405), f"{what}: no such operation in docs/openapi.yaml"
            return "/components/schemas/Error"
        resp = op["responses"].get(str(status))
        if resp is None:
            assert status >= 400, f"{what}: status not documented in docs/openapi.yaml"
            return "/components/schemas/Error"
        base = f"/paths/{esc}/{method.lower()}/responses/{status}"
        if "$ref" in resp:
            base = resp["$ref"][1:]
            resp = self.resolve(resp["$ref"])
        content = resp.get("content", {})
        assert "application/json" in content, \
            f"{what}: docs/openapi.yaml documents no JSON body for it"
        return f"{base}/content/application~1json/schema"

    def resolve(self, ref):
        node = self.doc
        for part in ref.lstrip("#/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node


def spec():
    global _spec
    with _lock:
        if _spec is None:
            _spec = Spec()
        return _spec


def is_json(r):
    ct = (r.header("Content-Type") or "").split(";")[0].strip().lower()
    return ct == "application/json"


def check(r):
    """Validates Response r (labd_harness.Response) against the spec; raises
    AssertionError naming the operation and the first mismatch."""
    path = r.path.split("?", 1)[0]
    if r.method == "HEAD" or not (path.startswith("/api/") or path == "/metrics"):
        return
    s = spec()
    template, _ = s.template_of(path)
    if template is None:
        assert r.status == 404 or not is_json(r), \
            f"{r.method} {path} -> {r.status}: path not documented in docs/openapi.yaml"
        return
    with _lock:
        seen.add((r.method, template, r.status))
    if not is_json(r):
        return
    pointer = s.response_pointer(r.method, template, r.status)
    s.validate(pointer, r.json, f"{r.method} {path} -> {r.status}")
