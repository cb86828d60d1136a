"""The labd command line: user management, config errors, persistence."""

import os
import subprocess
import tempfile

import pytest

from labd_harness import (ADMIN_PW_RE, REPO, SLOW, Daemon, assert_error, assert_status, free_port,
                          labd_binary, teardown_daemon, unique_name)


def test_cli_user_add_list_passwd(daemon):
    name = "carol"
    pw1 = "carol-first-password"
    r = daemon.run_cli("user", "add", name, "--password-stdin", input=pw1 + "\n")
    assert r.returncode == 0, f"user add: rc {r.returncode}\nstdout {r.stdout}\nstderr {r.stderr}"
    c = daemon.client()
    c.login(name, pw1)
    me = c.get("/api/v1/me").json
    assert me["name"] == name and me["role"] == "user", me

    r = daemon.run_cli("user", "list")
    assert r.returncode == 0, r.stderr
    words = r.stdout.split()
    assert name in words and "admin" in words, r.stdout

    pw2 = "carol-second-password"
    r = daemon.run_cli("user", "passwd", name, "--password-stdin", input=pw2 + "\n")
    assert r.returncode == 0, f"user passwd: rc {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert_error(daemon.client().post("/api/v1/login", json={"username": name, "password": pw1}),
                 401, "invalid_credentials")
    daemon.client().login(name, pw2)
    # the daemon can still write to its database after the CLI touched it as root
    c2 = daemon.client()
    c2.login(name, pw2)
    assert_status(c2.post("/api/v1/me/tokens", json={"name": "after-cli"}), 201)


def test_cli_user_add_admin(daemon):
    name = unique_name("cliadm")
    pw = "cli-admin-password"
    r = daemon.run_cli("user", "add", name, "--admin", "--password-stdin", input=pw + "\n")
    assert r.returncode == 0, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}"
    c = daemon.client()
    c.login(name, pw)
    assert c.get("/api/v1/me").json["role"] == "admin"
    assert_status(c.get("/api/v1/users"), 200)
    # leave the admin count as it was
    assert_status(daemon.admin().patch(f"/api/v1/users/{name}", json={"role": "user"}), 200)


@pytest.mark.parametrize("args,stdin", [
    (["user", "add", "admin", "--password-stdin"], "another-long-password\n"),  # duplicate
    (["user", "add", "Bad Name", "--password-stdin"], "another-long-password\n"),
    (["user", "add", "shortpw", "--password-stdin"], "short\n"),
    (["user", "passwd", "nosuchuser", "--password-stdin"], "another-long-password\n"),
    (["user", "frobnicate"], ""),
])
def test_cli_errors(daemon, args, stdin):
    r = daemon.run_cli(*args, input=stdin)
    assert r.returncode != 0, f"{args}: rc 0\n{r.stdout}\n{r.stderr}"
    assert r.stderr.strip(), f"{args}: no message on stderr"
    if args[1] == "add" and args[2] == "shortpw":
        assert_error(daemon.admin().get("/api/v1/users/shortpw"), 404, "not_found")


BASE_CONFIG = """[server]
listen = 127.0.0.1:{port}
state_dir = {dir}/state
web_root = {web}
{extra_server}
[auth]
scrypt_n = 1024
{extra_auth}
"""


def run_config(extra_server="", extra_auth="", raw=None):
    """Start labd with a config whose bad line carries #MARK (removed before use).
    Returns (rc, stderr, path, line_of_marker)."""
    with tempfile.TemporaryDirectory(prefix="labd-it-cfg-") as d:
        os.chmod(d, 0o755)
        text = (raw if raw is not None else BASE_CONFIG).format(
            port=free_port(), dir=d, web=os.path.join(REPO, "web"),
            extra_server=extra_server, extra_auth=extra_auth)
        line = next(i for i, ln in enumerate(text.splitlines(), 1) if "#MARK" in ln)
        text = text.replace(" #MARK", "")
        path = os.path.join(d, "bad.ini")
        with open(path, "w") as fh:
            fh.write(text)
        p = subprocess.Popen([labd_binary(), "--config", path], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=d, start_new_session=True)
        try:
            _, err = p.communicate(timeout=10 * SLOW)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            _, err = p.communicate()
            raise AssertionError(f"labd accepted a bad config and kept running:\n{text}\n{err}")
        return p.returncode, err, path, line


@pytest.mark.parametrize("where,key,bad", [
    ("server", "bogus_key", "bogus_key = 1 #MARK"),
    ("server", "threads", "threads = lots #MARK"),
    ("server", "max_body", "max_body = 12Q #MARK"),
    ("server", "secure_cookies", "secure_cookies = maybe #MARK"),
    ("server", "connection_timeout", "connection_timeout = soon #MARK"),
    ("server", "listen", "listen = nowhere #MARK"),
    ("server", "log_level", "log_level = loud #MARK"),
    ("auth", "failure_window", "failure_window = 15x #MARK"),
    ("server", "trusted_proxies", "trusted_proxies = my-nginx #MARK"),
    ("auth", "scrypt_n", "scrypt_n = 1000 #MARK"),
    ("auth", "min_password_length", "min_password_length = -3 #MARK"),
    ("auth", "nonsense", "nonsense = yes #MARK"),
])
def test_config_errors_name_file_line_key(where, key, bad):
    kw = {"extra_server": bad} if where == "server" else {"extra_auth": bad}
    rc, err, path, line = run_config(**kw)
    assert rc != 0, f"labd exited 0 on `{bad}`"
    assert f"{path}:{line}" in err, f"stderr does not say {path}:{line}: {err!r}"
    assert key in err, f"stderr does not name {key!r}: {err!r}"


def test_config_unknown_section():
    raw = BASE_CONFIG + "[bogus] #MARK\nx = 1\n"
    rc, err, path, line = run_config(raw=raw)
    assert rc != 0, "labd exited 0 with an unknown section"
    assert f"{path}:{line}" in err and "bogus" in err, err


def test_config_missing_file():
    p = subprocess.run([labd_binary(), "--config", "/nonexistent/labd.ini"],
                       capture_output=True, text=True, timeout=10 * SLOW)
    assert p.returncode != 0
    assert "/nonexistent/labd.ini" in p.stderr, p.stderr


def test_state_persists_across_restart():
    d = Daemon("persist")
    try:
        d.start()
        first_admin_pw = d.admin_password
        admin = d.admin()
        name = unique_name("keep")
        pw = "persistent-password-1"
        assert_status(admin.post("/api/v1/users", json={"name": name, "password": pw}), 201)
        c = d.client()
        c.login(name, pw)
        tok = c.post("/api/v1/me/tokens", json={"name": "kept"})
        assert_status(tok, 201)
        rc = d.stop(10)
        assert rc == 0, f"exit status {rc} after SIGTERM\n" + d.log_tail()
        d.new_port()
        d.start(expect_admin_password=False)
        assert not ADMIN_PW_RE.search(d.log()), "admin password printed again on restart\n" \
            + d.log_tail()
        d.admin_password = first_admin_pw
        d.client().login(name, pw)
        d.admin()
        b = d.client()
        b.bearer = tok.json["token"]
        assert_status(b.get("/api/v1/me"), 200)
        users = [u["name"] for u in d.admin().get("/api/v1/users").json["users"]]
        assert name in users and "admin" in users, users
    finally:
        teardown_daemon(d)
