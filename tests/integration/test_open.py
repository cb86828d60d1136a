""""Open in labd" (/open?repo=&path=, POST/GET /api/v1/me/runtime/open) against a real
JupyterLab runtime with jupyterlab-git: a Git repository served over dumb HTTP, cloned
into the home by git inside the user's sandbox, fast-forwarded when that touches nothing
local, left exactly as it is otherwise; bad links refused naming the field; a logged-out
visit goes through the login and back; a runtime without jupyterlab-git is told so."""

import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse

import pytest

from labd_harness import (
    SLOW,
    assert_error,
    assert_status,
    audit_entries,
    egress_daemon,
    redirect_target,
    remember_sandboxes,
    start_runtime,
    stop_runtime,
    teardown_runtime_daemon,
)
from runtime_shell import make_user, sh, user_path
from testnet import TestHost

OPEN_TIMEOUT_S = 120 * SLOW
# refused before anything is asked: any well-formed URL will do
SOME_REPO = "http://198.18.0.2/proj.git"


def git(*args, cwd=None):
    """git on the host, as the test (the upstream side only)."""
    p = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                       env=dict(os.environ, GIT_AUTHOR_NAME="up", GIT_AUTHOR_EMAIL="up@example.invalid",
                                GIT_COMMITTER_NAME="up", GIT_COMMITTER_EMAIL="up@example.invalid"))
    assert p.returncode == 0, f"git {args}: {p.stderr}"
    return p.stdout


class Upstream:
    """Bare repositories under srv/ (served over git's dumb HTTP protocol by a test
    host) and a working copy of each under up/ to commit and push from."""

    def __init__(self, top, base_url):
        self.top, self.base_url = top, base_url
        os.makedirs(os.path.join(top, "srv"))
        os.makedirs(os.path.join(top, "up"))

    def create(self, name):
        work = os.path.join(self.top, "up", name)
        bare = os.path.join(self.top, "srv", f"{name}.git")
        git("init", "-q", "-b", "main", work)
        os.makedirs(os.path.join(work, "nb"))
        with open(os.path.join(work, "nb", "demo.ipynb"), "w") as fh:
            fh.write('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
        with open(os.path.join(work, "data.txt"), "w") as fh:
            fh.write("one\n")
        git("add", "-A", cwd=work)
        git("commit", "-qm", "one", cwd=work)
        git("clone", "-q", "--bare", work, bare)
        git("update-server-info", cwd=bare)
        git("remote", "add", "origin", bare, cwd=work)
        git("fetch", "-q", "origin", cwd=work)
        git("branch", "-q", "-u", "origin/main", cwd=work)
        return f"{self.base_url}/{name}.git"

    def commit(self, name, fname, text):
        """A new commit upstream: pushed to the bare repository and announced to
        dumb HTTP clients (update-server-info)."""
        work = os.path.join(self.top, "up", name)
        with open(os.path.join(work, fname), "w") as fh:
            fh.write(text + "\n")
        git("add", fname, cwd=work)
        git("commit", "-qm", fname, cwd=work)
        git("push", "-q", "origin", "main", cwd=work)
        git("update-server-info", cwd=os.path.join(self.top, "srv", f"{name}.git"))


def open_repo(c, repo, path="nb/demo.ipynb"):
    """POST the open, wait for its outcome; returns the outcome object."""
    r = c.post("/api/v1/me/runtime/open", json={"repo": repo, "path": path})
    assert r.status == 202, r
    o = r.json["open"]
    assert o["state"] == "running" and o["result"] is None and o["repo"] == repo, o
    deadline = time.monotonic() + OPEN_TIMEOUT_S
    while time.monotonic() < deadline:
        r = c.get("/api/v1/me/runtime/open")
        assert_status(r, 200)
        o = r.json["open"]
        if o["state"] == "done":
            return o
        time.sleep(0.2)
    raise AssertionError(f"open not done within {OPEN_TIMEOUT_S}s: {o}")


def contents(c, path):
    return c.get(user_path(c, f"api/contents/{urllib.parse.quote(path)}?content=1"))


def file_text(c, path):
    r = contents(c, path)
    assert_status(r, 200)
    return r.json["content"]


@pytest.fixture(scope="module")
def net():
    """A test host serving the upstream repositories, and a daemon whose runtimes
    have egress (only test hosts are ever addressed)."""
    top = tempfile.mkdtemp(prefix="labd-open-")
    with TestHost() as host:
        up = Upstream(top, f"http://{host.addr}")
        up.repo = up.create("proj")
        host.serve_http(os.path.join(top, "srv"))
        d = egress_daemon("open", runtime={"cpu_limit": "2h"})
        try:
            d.start()
            yield d, up
        finally:
            teardown_runtime_daemon(d)
            shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(scope="module")
def od(net):
    return net[0]


@pytest.fixture(scope="module")
def up(net):
    return net[1]


@pytest.fixture(scope="module")
def oadmin(od):
    return od.admin()


@pytest.fixture(scope="module")
def owner(od, oadmin):
    """A user with a running JupyterLab runtime."""
    c = make_user(od, oadmin, "opn")
    start_runtime(c)
    remember_sandboxes(od)
    return c


# ---------------------------------------------------------------- refused links

BAD = [
    ({"repo": "file:///etc", "path": "a.ipynb"}, "repo"),
    ({"repo": "/home/x/repo", "path": "a.ipynb"}, "repo"),
    ({"repo": "ext::sh -c touch% /tmp/pwned", "path": "a.ipynb"}, "repo"),
    ({"repo": "ssh://host/repo.git", "path": "a.ipynb"}, "repo"),
    ({"repo": "git@host:repo.git", "path": "a.ipynb"}, "repo"),
    ({"repo": "git://host/repo.git", "path": "a.ipynb"}, "repo"),
    ({"repo": "https://user:secret@host/repo.git", "path": "a.ipynb"}, "repo"),
    ({"repo": "https:///repo.git", "path": "a.ipynb"}, "repo"),
    ({"repo": "https://host", "path": "a.ipynb"}, "repo"),
    ({"repo": "https://host/re po.git", "path": "a.ipynb"}, "repo"),
    ({"repo": "https://host/repo.git?x=1", "path": "a.ipynb"}, "repo"),
    ({"repo": "", "path": "a.ipynb"}, "repo"),
    ({"path": "a.ipynb"}, "repo"),
    ({"repo": SOME_REPO, "path": "../../etc/passwd"}, "path"),
    ({"repo": SOME_REPO, "path": "nb/../../x.ipynb"}, "path"),
    ({"repo": SOME_REPO, "path": "/etc/passwd"}, "path"),
    ({"repo": SOME_REPO, "path": "a//b.ipynb"}, "path"),
    ({"repo": SOME_REPO, "path": "a\\b.ipynb"}, "path"),
    ({"repo": SOME_REPO, "path": "a\nb.ipynb"}, "path"),
    ({"repo": SOME_REPO, "path": ""}, "path"),
    ({"repo": SOME_REPO}, "path"),
]


def test_bad_links_are_refused_naming_the_field(od, oadmin):
    c = make_user(od, oadmin, "obad")
    for body, field in BAD:
        r = c.post("/api/v1/me/runtime/open", json=body)
        assert_error(r, 400, "bad_field")
        assert r.json["error"].get("field") == field, (body, r.json)
        q = urllib.parse.urlencode(body)
        page = c.get(f"/open?{q}", headers={"Accept": "text/html"})
        assert page.status == 400, (body, page)
        assert "open.js" in page.text
    # not a string, an unknown field
    assert_error(c.post("/api/v1/me/runtime/open", json={"repo": 5, "path": "a"}), 400, "bad_field")
    assert_error(c.post("/api/v1/me/runtime/open",
                        json={"repo": SOME_REPO, "path": "a", "dest": "/"}), 400, "bad_field")
    # nothing was started: no open, no runtime
    assert_error(c.get("/api/v1/me/runtime/open"), 404, "no_open")
    assert c.get("/api/v1/me/runtime").json["runtime"] is None


def test_open_needs_a_running_runtime(od, oadmin):
    c = make_user(od, oadmin, "onrt")
    r = c.post("/api/v1/me/runtime/open", json={"repo": SOME_REPO, "path": "nb/demo.ipynb"})
    assert_error(r, 409, "runtime_not_running")
    assert_error(c.get("/api/v1/me/runtime/open"), 404, "no_open")


def test_logged_out_visit_logs_in_and_comes_back(od, oadmin):
    c = make_user(od, oadmin, "olog")
    link = "/open?" + urllib.parse.urlencode({"repo": SOME_REPO, "path": "nb/demo notebook.ipynb"})
    anon = od.client()
    r = anon.get(link, headers={"Accept": "text/html"})
    assert r.status in (302, 303), r
    path, query, _ = redirect_target(r, od.port)
    assert path == "/login" and query["next"] == [link], (path, query)
    # the login form carries next back to the link, query and all
    r = anon.post("/login", form={"username": c.user, "password": c.password, "next": link},
                  csrf=None, headers={"Origin": anon.origin})
    assert r.status in (302, 303), r
    assert r.header("Location") == link, r.header("Location")
    r = anon.get(link, headers={"Accept": "text/html"})
    assert_status(r, 200)
    assert "/static/open.js" in r.text


# ---------------------------------------------------------------- clone, update, keep


def test_clone_opens_the_notebook(od, up, owner):
    o = open_repo(owner, up.repo)
    assert o["result"] == "cloned", o
    assert o["folder"] == "proj" and o["notebook_found"] is True, o
    assert o["url"] == f"/user/{owner.user}/lab/tree/proj/nb/demo.ipynb", o
    assert file_text(owner, "proj/data.txt").strip() == "one"
    r = contents(owner, "proj/nb/demo.ipynb")
    assert_status(r, 200)
    assert r.json["type"] == "notebook"
    # no staging folder is left behind
    names = [e["name"] for e in contents(owner, "").json["content"]]
    assert not [n for n in names if n.startswith("labd-open-")], names
    # the URL the page goes to: JupyterLab's page for that notebook
    r = owner.get(o["url"], headers={"Accept": "text/html"})
    assert_status(r, 200)
    assert "jupyter-config-data" in r.text, r.text[:300]
    # the clone is the user's, made in the sandbox
    out = sh(od, owner, "id -u; stat -c %u proj/data.txt; git -C proj remote get-url origin")
    uid, owner_uid, origin = out.split()
    assert uid == owner_uid and origin == up.repo, out
    e = audit_entries(od.admin(), "runtime.open_repo", owner.user)
    assert e and up.repo in (e[0].get("detail") or ""), e


def test_reopen_current_then_fast_forward(od, up, owner):
    o = open_repo(owner, up.repo)
    assert o["result"] == "current" and o["folder"] == "proj", o
    up.commit("proj", "two.txt", "two")
    o = open_repo(owner, up.repo)
    assert o["result"] == "updated", o
    assert file_text(owner, "proj/two.txt").strip() == "two"
    assert o["url"].endswith("/lab/tree/proj/nb/demo.ipynb")


def test_local_changes_are_never_touched(od, up, owner):
    sh(od, owner, "echo mine > proj/data.txt && echo scratch > proj/untracked.txt")
    head = sh(od, owner, "git -C proj rev-parse HEAD").strip()
    up.commit("proj", "three.txt", "three")
    o = open_repo(owner, up.repo)
    assert o["result"] == "kept", o
    assert "data.txt" in o["message"] and "not updated" in o["message"], o
    assert o["url"].endswith("/lab/tree/proj/nb/demo.ipynb"), o
    assert file_text(owner, "proj/data.txt") == "mine\n"
    assert sh(od, owner, "git -C proj rev-parse HEAD").strip() == head
    assert contents(owner, "proj/three.txt").status == 404
    # diverged: a local commit and a new upstream one
    sh(od, owner, "cd proj && git -c user.name=me -c user.email=me@example.invalid "
                  "commit -qam mine")
    up.commit("proj", "four.txt", "four")
    head = sh(od, owner, "git -C proj rev-parse HEAD").strip()
    o = open_repo(owner, up.repo)
    assert o["result"] == "kept" and "diverged" in o["message"], o
    assert sh(od, owner, "git -C proj rev-parse HEAD").strip() == head
    assert sh(od, owner, "git -C proj status --porcelain --untracked-files=no") == ""
    assert file_text(owner, "proj/untracked.txt") == "scratch\n"


def test_a_folder_of_that_name_that_is_not_the_repository(od, up, owner):
    # ~/other is a plain folder and ~/other-2 another repository: the clone goes to -3
    repo = up.create("other")
    sh(od, owner, "mkdir -p other && echo keep > other/mine.txt && git init -q other-2")
    o = open_repo(owner, repo)
    assert o["result"] == "cloned" and o["folder"] == "other-3", o
    assert file_text(owner, "other/mine.txt") == "keep\n"
    # opening it again finds the clone in other-3
    o = open_repo(owner, repo)
    assert o["result"] == "current" and o["folder"] == "other-3", o


def test_missing_notebook_and_failed_clone(od, up, owner):
    o = open_repo(owner, up.repo, path="nb/nope.ipynb")
    assert o["notebook_found"] is False and o["folder"] == "proj", o
    assert o["url"] == f"/user/{owner.user}/lab/tree/proj", o
    o = open_repo(owner, up.base_url + "/missing.git")
    assert o["result"] == "failed" and o["folder"] is None and o["url"] is None, o
    assert "clone" in o["message"], o
    assert contents(owner, "missing").status == 404


def test_clone_survives_a_restart(od, owner):
    stop_runtime(owner)
    start_runtime(owner)
    assert file_text(owner, "proj/data.txt") == "mine\n"


# ---------------------------------------------------------------- no jupyterlab-git


def test_runtime_without_jupyterlab_git_is_told_so(runtime_daemon_factory):
    d = runtime_daemon_factory("open-nb6", runtime={"jupyter": "notebook"})
    c = make_user(d, d.admin(), "onb")
    start_runtime(c)
    o = open_repo(c, SOME_REPO)
    assert o["result"] == "unsupported" and "jupyterlab-git" in o["message"], o
    assert o["folder"] is None and o["url"] is None, o
    stop_runtime(c)
