"""Static files, HTML routes and path traversal."""

import os

import pytest

from labd_harness import REPO, assert_status, raw_get, redirect_target

STATIC = os.path.join(REPO, "web", "static")

CONTENT_TYPES = {
    ".css": ("text/css",),
    ".js": ("text/javascript", "application/javascript"),
    ".html": ("text/html",),
    ".svg": ("image/svg+xml",),
}


def static_files(ext):
    out = []
    for dp, _, files in os.walk(STATIC):
        for f in sorted(files):
            if f.endswith(ext):
                out.append(os.path.relpath(os.path.join(dp, f), STATIC))
    return out


@pytest.mark.parametrize("ext", [".css", ".js", ".svg"])
def test_static_content_type(daemon, ext):
    files = static_files(ext)
    assert files, f"no {ext} file under web/static to test with"
    c = daemon.client()
    for f in files:
        r = c.get("/static/" + f)
        assert_status(r, 200)
        ct = (r.header("Content-Type") or "").split(";")[0].strip().lower()
        assert ct in CONTENT_TYPES[ext], f"/static/{f}: Content-Type {r.header('Content-Type')!r}"
        with open(os.path.join(STATIC, f), "rb") as fh:
            assert r.body == fh.read(), f"/static/{f}: body differs from the file"
        cc = r.header("Cache-Control") or ""
        assert "public" in cc and "max-age=3600" in cc, f"/static/{f}: Cache-Control {cc!r}"
        assert r.header("Last-Modified"), f"/static/{f}: no Last-Modified"


def test_static_html_content_type(daemon):
    """HTML from web/: the pages, and any .html under web/static."""
    c = daemon.client()
    r = c.get("/login")
    assert_status(r, 200)
    assert (r.header("Content-Type") or "").lower().startswith("text/html"), r.header("Content-Type")
    assert b"<form" in r.body and b"password" in r.body, r.body[:300]
    assert "no-cache" in (r.header("Cache-Control") or ""), r.header("Cache-Control")
    for f in static_files(".html"):
        r = c.get("/static/" + f)
        assert_status(r, 200)
        assert (r.header("Content-Type") or "").lower().startswith("text/html"), f


def test_static_etag_304(daemon):
    files = static_files(".css") + static_files(".js")
    assert files
    c = daemon.client()
    path = "/static/" + files[0]
    r = c.get(path)
    assert_status(r, 200)
    etag = r.header("ETag")
    assert etag, f"{path}: no ETag"
    r2 = c.get(path, headers={"If-None-Match": etag})
    assert_status(r2, 304)
    assert r2.body == b"", r2.body[:100]
    assert r2.header("ETag") == etag, (r2.header("ETag"), etag)
    r3 = c.get(path, headers={"If-None-Match": '"not-the-etag"'})
    assert_status(r3, 200)
    assert r3.body == r.body
    # different files have different ETags
    if len(files) > 1:
        other = c.get("/static/" + files[1]).header("ETag")
        assert other != etag, (files[0], files[1], etag)


def test_static_missing(daemon):
    c = daemon.client()
    r = c.get("/static/no-such-file.js")
    assert_status(r, 404)
    r = c.get("/static/")
    assert r.status in (403, 404), r


SECRET_MARKERS = [b"root:x:0:0", b"PKG_CFLAGS", b"#include", b"[server]", b"SQLite format 3"]


@pytest.mark.parametrize("path", [
    "/static/../../etc/passwd",
    "/static/../../../../../../../../etc/passwd",
    "/static/%2e%2e/%2e%2e/etc/passwd",
    "/static/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/static/%2E%2E/%2E%2E/Makefile",
    "/static/..%2fserver",
    "/static/..%2f..%2fMakefile",
    "/static/..%2f..%2fserver%2fconfig.c",
    "/static/..%2f..%2f..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
    "/static/%2e%2e%2f%2e%2e%2fMakefile",
    "/static/.%2e/.%2e/Makefile",
    "/static/..\\..\\Makefile",
    "/static/..%5c..%5cMakefile",
    "/static//etc/passwd",
    "/static/%2fetc%2fpasswd",
    "/static/%00",
    "/static/labd.css%00.html",
    "/static/%00/../../Makefile",
    "/static/%c0%ae%c0%ae/%c0%ae%c0%ae/Makefile",
    "/static/%252e%252e/%252e%252e/Makefile",
    "/static/./../../Makefile",
    "/static/....//....//Makefile",
    "/../../etc/passwd",
    "/static/../login.html",
    "/static/%2e%2e/login.html",
])
def test_static_path_traversal(daemon, path):
    status, headers, body = raw_get(daemon.port, path)
    assert status in (400, 404), f"GET {path}: status {status}, body {body[:200]!r}"
    for m in SECRET_MARKERS:
        assert m not in body, f"GET {path}: body contains {m!r}"
    with open(os.path.join(REPO, "web", "login.html"), "rb") as fh:
        login = fh.read()
    if path.endswith("login.html"):
        assert body != login, f"GET {path}: served web/login.html through /static/"


def test_root_redirects(daemon):
    r = daemon.client().get("/")
    assert_status(r, 303)
    path, _, loc = redirect_target(r, daemon.port)
    assert path == "/dashboard", loc


@pytest.mark.parametrize("page", ["/dashboard", "/admin", "/jobs/1"])
def test_pages_need_login(daemon, page):
    r = daemon.client().get(page)
    assert_status(r, 303)
    path, query, loc = redirect_target(r, daemon.port)
    assert path == "/login", loc
    assert query.get("next") == [page], loc


def test_admin_page_forbidden_for_user(daemon, user):
    r = user.get("/admin")
    assert_status(r, 403)
    d = user.get("/dashboard")
    assert_status(d, 200)
    assert "no-cache" in (d.header("Cache-Control") or ""), d.header("Cache-Control")


def test_job_page(daemon, user):
    """/jobs/{id} is job.html for any number; the page asks the API for the job."""
    r = user.get("/jobs/12345")
    assert_status(r, 200)
    assert (r.header("Content-Type") or "").startswith("text/html"), r.header("Content-Type")
    assert b'src="/static/job.js"' in r.body, r.body[:300]
    assert_status(user.get("/jobs/12345/extra"), 404)


def test_admin_page_for_admin(daemon, admin):
    r = admin.get("/admin")
    assert_status(r, 200)
    assert (r.header("Content-Type") or "").startswith("text/html"), r.header("Content-Type")


def test_login_page_with_error(daemon):
    for err in ("invalid", "throttled", "locked"):
        r = daemon.client().get(f"/login?error={err}&next=/admin")
        assert_status(r, 200)
