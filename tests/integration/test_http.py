"""Request validation, error format, methods, body limits, security headers."""

import http.client
import json
import os

import pytest

from labd_harness import (HTTP_TIMEOUT, REPO, STRONG, assert_error, assert_security_headers,
                          assert_status, raw_request, unique_name)


def test_bad_json(daemon, admin):
    for body in (b"{", b"not json", b"{\"name\": }", b"", b"\xff\xfe"):
        r = admin.post("/api/v1/users", body=body, content_type="application/json")
        assert_error(r, 400, "bad_json")
    for body in (b"[1, 2]", b"\"name\"", b"42", b"null"):
        r = admin.post("/api/v1/users", body=body, content_type="application/json")
        assert_error(r, 400, "bad_json")


def test_bad_json_login(daemon):
    c = daemon.client()
    r = c.post("/api/v1/login", body=b"{\"username\": \"admin\", ", content_type="application/json")
    assert_error(r, 400, "bad_json")


def test_wrong_field_type(daemon, admin):
    r = admin.post("/api/v1/users", json={"name": 5, "password": STRONG})
    assert_error(r, 400, "bad_field", field="name")
    r = daemon.client().post("/api/v1/login", json={"username": ["admin"], "password": "x" * 12})
    assert_error(r, 400, "bad_field", field="username")
    r = daemon.client().post("/api/v1/login", json={"username": "admin", "password": None})
    assert_error(r, 400, "bad_field", field="password")


def test_json_endpoint_wants_json_content_type(daemon, admin):
    name = unique_name("ct")
    body = json.dumps({"name": name, "password": STRONG})
    for ct in ("text/plain", "application/x-www-form-urlencoded", "text/json"):
        r = admin.post("/api/v1/users", body=body, content_type=ct)
        assert_error(r, 415, "unsupported_media_type")
    assert_error(admin.get(f"/api/v1/users/{name}"), 404, "not_found")
    r = daemon.client().post("/api/v1/login", body=json.dumps(
        {"username": "admin", "password": daemon.admin_password}), content_type="text/plain")
    assert_error(r, 415, "unsupported_media_type")
    assert "labd_session" not in r.set_cookies()


def test_body_too_large(daemon, admin):
    name = unique_name("big")
    body = json.dumps({"name": name, "password": STRONG, "pad": "x" * (70 * 1024)})
    r = admin.post("/api/v1/users", body=body, content_type="application/json")
    assert_error(r, 413, "body_too_large")
    assert_error(admin.get(f"/api/v1/users/{name}"), 404, "not_found")


def test_body_too_large_chunked(daemon, admin):
    """A chunked body has no Content-Length: the limit must count the bytes."""
    name = unique_name("chk")
    payload = json.dumps({"name": name, "password": STRONG, "pad": "y" * (80 * 1024)}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=HTTP_TIMEOUT)
    try:
        conn.putrequest("POST", "/api/v1/users")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.putheader("Cookie", f"labd_session={admin.session}")
        conn.putheader("X-CSRF-Token", admin.csrf)
        conn.endheaders()
        try:
            for i in range(0, len(payload), 8192):
                chunk = payload[i:i + 8192]
                conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            conn.send(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        resp = conn.getresponse()
        status, body = resp.status, resp.read()
    finally:
        conn.close()
    assert status == 413, f"chunked oversized body: expected 413, got {status}: {body[:200]!r}"
    assert json.loads(body)["error"]["code"] == "body_too_large", body
    assert_error(admin.get(f"/api/v1/users/{name}"), 404, "not_found")


def test_body_under_limit_ok(daemon, admin):
    name = unique_name("pad")
    body = json.dumps({"name": name, "password": STRONG, "role": "user"})
    body = body[:-1] + " " * (60 * 1024 - len(body)) + "}"
    r = admin.post("/api/v1/users", body=body, content_type="application/json")
    assert_status(r, 201)


def test_unknown_api_path(daemon, admin):
    for path in ("/api/v1/nope", "/api/v1/users/admin/extra", "/api/v2/health", "/api/v1/",
                 "/api/v1/me/tokens/1/x"):
        assert_error(admin.get(path), 404, "not_found")


def test_unknown_api_path_unauthenticated(daemon):
    assert_error(daemon.client().get("/api/v1/nope"), 404, "not_found")


def allow_set(r):
    return {m.strip().upper() for m in (r.header("Allow") or "").split(",") if m.strip()}


@pytest.mark.parametrize("method,path,allowed", [
    ("DELETE", "/api/v1/health", {"GET"}),
    ("POST", "/api/v1/health", {"GET"}),
    ("GET", "/api/v1/login", {"POST"}),
    ("GET", "/api/v1/logout", {"POST"}),
    ("PUT", "/api/v1/users", {"GET", "POST"}),
    ("PATCH", "/api/v1/me/tokens", {"GET", "POST"}),
    ("POST", "/api/v1/users/admin", {"GET", "PATCH", "DELETE"}),
    ("GET", "/api/v1/me/tokens/1", {"DELETE"}),
    ("DELETE", "/api/v1/me", {"GET"}),
    ("POST", "/api/v1/audit", {"GET"}),
    ("PUT", "/api/v1/me/runtime", {"GET", "POST", "DELETE"}),
])
def test_method_not_allowed(daemon, admin, method, path, allowed):
    kw = {"json": {}} if method in ("POST", "PUT", "PATCH") else {}
    r = admin.request(method, path, **kw)
    assert_error(r, 405, "method_not_allowed")
    got = allow_set(r)
    assert allowed <= got, f"{method} {path}: Allow is {r.header('Allow')!r}, want {allowed}"
    assert got <= allowed | {"HEAD", "OPTIONS"}, f"{method} {path}: Allow is {r.header('Allow')!r}"


def test_api_responses_no_store(daemon, admin):
    for r in (admin.get("/api/v1/me"), admin.get("/api/v1/health"),
              admin.get("/api/v1/nope"), daemon.client().get("/api/v1/me")):
        assert "no-store" in (r.header("Cache-Control") or ""), \
            f"{r.method} {r.path} ({r.status}): Cache-Control {r.header('Cache-Control')!r}"


def test_json_content_type_on_success(daemon, admin):
    for path in ("/api/v1/me", "/api/v1/users", "/api/v1/health", "/api/v1/audit"):
        r = admin.get(path)
        assert_status(r, 200)
        assert r.header("Content-Type", "").startswith("application/json"), \
            f"{path}: {r.header('Content-Type')!r}"


def _first_static(ext):
    root = os.path.join(REPO, "web", "static")
    for dp, _, files in os.walk(root):
        for f in sorted(files):
            if f.endswith(ext):
                return "/static/" + os.path.relpath(os.path.join(dp, f), root)
    return None


def _responses(daemon, kind):
    c = daemon.client()
    if kind == "api":
        return c.get("/api/v1/health")
    if kind == "api-401":
        return c.get("/api/v1/me")
    if kind == "api-404":
        return c.get("/api/v1/nope")
    if kind == "api-405":
        return c.request("DELETE", "/api/v1/health")
    if kind == "api-400":
        return c.post("/api/v1/login", body=b"{", content_type="application/json")
    if kind == "api-413":
        return c.post("/api/v1/login", body=b"{\"a\":\"" + b"x" * 70000 + b"\"}",
                      content_type="application/json")
    if kind == "api-login":
        return c.post("/api/v1/login", json={"username": "admin",
                                             "password": daemon.admin_password})
    if kind == "html-login":
        return c.get("/login")
    if kind == "html-dashboard":
        c.login("admin", daemon.admin_password)
        return c.get("/dashboard")
    if kind == "redirect":
        return c.get("/dashboard")
    if kind == "static":
        p = _first_static(".css")
        assert p, "no .css under web/static"
        return c.get(p)
    if kind == "static-304":
        p = _first_static(".css")
        assert p, "no .css under web/static"
        etag = c.get(p).header("ETag")
        assert etag, f"{p}: no ETag"
        return c.get(p, headers={"If-None-Match": etag})
    if kind == "static-404":
        return c.get("/static/no-such-file.css")
    if kind == "html-404":
        return c.get("/no-such-page")
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", [
    "api", "api-401", "api-404", "api-405", "api-400", "api-413", "api-login", "html-login",
    "html-dashboard", "redirect", "static", "static-304", "static-404", "html-404",
])
def test_security_headers(daemon, kind):
    r = _responses(daemon, kind)
    assert_security_headers(r, kind)


def test_security_headers_on_raw_bad_request(daemon):
    status, headers, _ = raw_request(
        daemon.port, f"GET /static/%2e%2e/%2e%2e/etc/passwd HTTP/1.1\r\nHost: 127.0.0.1:{daemon.port}"
                     "\r\nConnection: close\r\n\r\n")
    assert status in (400, 404), status
    assert "frame-ancestors 'none'" in headers.get("content-security-policy", ""), headers
    assert headers.get("x-frame-options", "").upper() == "DENY", headers
    assert headers.get("x-content-type-options", "").lower() == "nosniff", headers
    assert headers.get("referrer-policy", "").lower() == "same-origin", headers


@pytest.mark.parametrize("header, size, want", [
    ("X-Big", 24 * 1024, 200),
    ("Cookie", 10 * 1024, 200),
    ("X-Big", 40 * 1024, 431),
    ("Cookie", 40 * 1024, 431),
])
def test_large_request_heads(daemon, header, size, want):
    """libmicrohttpd's per-connection pool (32 KiB, zeroed per request) takes heads
    well past what browsers send, and a larger one is answered 431, never a
    connection closed without a reply."""
    value = ("a=" if header == "Cookie" else "") + "x" * size
    status, _, _ = raw_request(
        daemon.port, f"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1:{daemon.port}\r\n"
                     f"{header}: {value}\r\nConnection: close\r\n\r\n")
    assert status == want, (header, size, status)
