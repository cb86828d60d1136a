"""Users' content on its own origin (docs/security.md §3), with a real runtime: what a
user's own Jupyter may put into responses (labd's cookies, Service-Worker-Allowed,
Clear-Site-Data) never reaches the browser; an admin with admin_access reaches
another user's runtime only through that user's origin, audited; and path mode,
the opt-out, still serves runtimes on labd's origin."""

import json
import urllib.parse

import pytest

from labd_harness import (
    STRONG,
    assert_error,
    assert_status,
    audit_entries,
    jupyter_execute,
    open_kernel_channel,
    remember_sandboxes,
    start_runtime,
    stop_runtime,
    unique_name,
    user_origin_host,
)

# What a hostile runtime adds to every response (Notebook 6 and jupyter_server both
# apply tornado_settings["headers"] to their handlers), plus a canary that shows the
# configuration took effect.
HOSTILE_HEADERS = {
    "Set-Cookie": "labd_session=planted-by-the-runtime; Path=/",
    "Service-Worker-Allowed": "/",
    "Clear-Site-Data": '"cookies", "storage"',
    "X-Runtime-Canary": "1",
}


@pytest.fixture(scope="module")
def od(runtime_daemon_factory):
    return runtime_daemon_factory("rt-origins", runtime={"cpu_limit": "2h", "admin_access": "true"})


@pytest.fixture(scope="module")
def oadmin(od):
    return od.admin()


def make_user(d, admin, prefix):
    name = unique_name(prefix)
    pw = f"{STRONG}-{name}"
    r = admin.post("/api/v1/users", json={"name": name, "password": pw})
    assert r.status == 201, r
    c = d.client()
    c.login(name, pw)
    c.password = pw
    return c


@pytest.fixture(scope="module")
def hostile(od, oadmin):
    """A user whose runtime runs with a Jupyter configuration the user wrote
    (from a kernel, as any code of theirs could) that adds HOSTILE_HEADERS."""
    c = make_user(od, oadmin, "hos")
    start_runtime(c)
    remember_sandboxes(od)
    config = f"c = get_config()\nc.NotebookApp.tornado_settings = {{'headers': {HOSTILE_HEADERS!r}}}\n" \
             f"c.ServerApp.tornado_settings = {{'headers': {HOSTILE_HEADERS!r}}}\n"
    kid, ws = open_kernel_channel(od, c)
    try:
        code = ("import os\nos.makedirs(os.path.expanduser('~/.jupyter'), exist_ok=True)\n"
                "for n in ('jupyter_notebook_config.py', 'jupyter_server_config.py'):\n"
                f"    open(os.path.expanduser('~/.jupyter/' + n), 'w').write({config!r})\n"
                "print('written')")
        _, out, _ = jupyter_execute(ws, code)
        assert "written" in out, out
    finally:
        ws.close()
    stop_runtime(c)
    c.runtime_jars.clear()  # as a browser whose runtime restarted: a fresh handoff
    start_runtime(c)
    remember_sandboxes(od)
    yield c
    stop_runtime(c)


def test_upstream_cannot_set_labd_cookies_or_worker_scope(od, hostile):
    theirs = set()
    for path in (f"/user/{hostile.user}/api/status", f"/user/{hostile.user}/lab"):
        r = hostile.get(path, headers={"Accept": "text/html"} if path.endswith("lab") else None)
        assert_status(r, 200)
        theirs |= set(r.set_cookies())
        # the runtime's configuration is live (its canary header came through) ...
        assert r.header("X-Runtime-Canary") == "1", dict(r.headers)
        # ... and what would reach across origins did not
        assert "labd_session" not in r.set_cookies(), r.header_all("Set-Cookie")
        assert r.header("Service-Worker-Allowed") is None, dict(r.headers)
        assert r.header("Clear-Site-Data") is None, dict(r.headers)
        assert not any("planted" in v for v in r.header_all("Set-Cookie")), \
            r.header_all("Set-Cookie")
    # Jupyter's own cookies still pass (JupyterLab's page sets _xsrf and a login
    # cookie the first time, when the browser has none yet)
    assert "_xsrf" in theirs and not any(n.startswith("labd_") for n in theirs), r.header_all("Set-Cookie")
    # and the owner's labd login is untouched
    assert_status(hostile.get("/api/v1/me"), 200)


def test_admin_reaches_a_runtime_only_through_its_origin_audited(od, oadmin, hostile):
    before = len(audit_entries(oadmin, "runtime.admin_access", hostile.user))
    status = f"/user/{hostile.user}/api/status"
    # the admin's browser: labd's origin hands the admin's session to the user origin
    r = oadmin.get(f"/user/{hostile.user}/", origin_route=False)
    assert r.status in (302, 303), r
    loc = urllib.parse.urlsplit(r.header("Location"))
    assert loc.netloc == user_origin_host(hostile.user, od.port), loc
    r = oadmin.get(f"{loc.path}?{loc.query}", host=loc.netloc)
    assert r.status in (302, 303) and "labd_rt" in r.set_cookies(), r
    assert_status(oadmin.get(status), 200)
    ents = audit_entries(oadmin, "runtime.admin_access", hostile.user)
    assert len(ents) == before + 1, ents
    assert ents[0]["actor"] == "admin" and ents[0]["target"] == hostile.user, ents
    # the owner opening their own runtime is no admin access
    hostile.runtime_jars.clear()
    assert hostile.handoff() is None
    assert len(audit_entries(oadmin, "runtime.admin_access", hostile.user)) == before + 1
    # an admin's API token is no way in, on either origin
    t = oadmin.post("/api/v1/me/tokens", json={"name": unique_name("adm")})
    assert_status(t, 201)
    b = od.client()
    b.bearer = t.json["token"]
    assert_error(b.get(status), 403, "forbidden")
    assert_error(b.get(status, origin_route=False), 421, "wrong_origin")
    # the admin's runtime cookie for this origin opens no other user's
    other = make_user(od, oadmin, "oth")
    rt = oadmin.runtime_jars[hostile.user]["labd_rt"]
    r = oadmin.get(f"/user/{other.user}/api/status", cookies=False,
                   host=user_origin_host(other.user, od.port),
                   headers={"Cookie": f"labd_rt={rt}"})
    assert_error(r, 401, "unauthorized")


@pytest.fixture(scope="module")
def pathd(runtime_daemon_factory):
    return runtime_daemon_factory("rt-pathmode", runtime={"cpu_limit": "2h", "admin_access": "true"},
                                  server={"origin_mode": "path"})


def test_path_mode_serves_runtimes_on_labd_origin(pathd):
    """origin_mode = path, the opt-out: /user/<name>/ on labd's own origin, with
    labd's cookie; no handoff, no user origins, and no admin access."""
    admin = pathd.admin()
    c = make_user(pathd, admin, "pth")
    c.user_origins = False
    admin.user_origins = False
    start_runtime(c)
    remember_sandboxes(pathd)
    try:
        r = c.get(f"/user/{c.user}/api/status")
        assert_status(r, 200)
        assert "version" in r.json or "started" in r.json, r.json
        r = c.put(f"/user/{c.user}/api/contents/p.txt",
                  json={"type": "file", "format": "text", "content": "path mode"})
        assert r.status == 201, r
        # a user-origin Host is just another name for labd's origin here
        r = c.get(f"/user/{c.user}/api/status", host=user_origin_host(c.user, c.port),
                  cookies=False, headers={"Cookie": f"labd_session={c.session}"})
        assert_status(r, 200)
        # admins never reach another user's runtime on one shared origin
        assert_error(admin.get(f"/user/{c.user}/api/status"), 403, "forbidden")
    finally:
        stop_runtime(c)
    assert json.dumps(audit_entries(admin, "runtime.admin_access")) == "[]"
