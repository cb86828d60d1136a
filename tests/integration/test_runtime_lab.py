"""JupyterLab 4 / Jupyter Server 2 on the wire, through labd's proxy: what changed
from Notebook 6 and what a browser's JupyterLab relies on. Terminals (open one,
run a command, resize it), the events WebSocket, the _xsrf cookie and header of
Jupyter Server 2 on the user's origin, large uploads in chunks (the contents
API's `chunk` field), and JupyterLab's own workspaces and settings APIs, which
keep their files in the home."""

import base64
import hashlib
import json
import os
import re
import shlex
import socket
import time

import pytest

from labd_harness import (
    SLOW,
    WebSocket,
    assert_status,
    jupyter_execute,
    make_user,
    open_kernel_channel,
    runtime_token,
    start_runtime,
    ws_cookie_headers,
)
from runtime_shell import sh, user_path


# What labd handed the client during a test (HTTP answers, WebSocket frames): the
# runtime's token must be in none of it (labd injects it; the browser never needs it).
SEEN = []


@pytest.fixture(scope="module")
def ld(runtime_daemon_factory):
    return runtime_daemon_factory("rt-lab", runtime={"cpu_limit": "2h"})


@pytest.fixture(scope="module")
def owner(ld):
    c = make_user(ld, prefix="lab")
    start_runtime(c)
    c.token = runtime_token(ld, c.user)
    c.on_response = lambda r: SEEN.append((f"{r.method} {r.path}", str(r.headers), r.body))
    return c


@pytest.fixture(autouse=True)
def no_token_leaks(owner):
    SEEN.clear()
    yield
    leaks = [what for what, head, body in SEEN
             if owner.token in head or owner.token.encode() in body]
    SEEN.clear()
    assert not leaks, f"the runtime's token reached the client in: {leaks}"



def open_ws(ld, c, rest):
    ws = WebSocket(ld.port, user_path(c, rest),
                   headers=dict(ws_cookie_headers(c), Origin=c.runtime_origin()),
                   source=c.source).expect_open()
    SEEN.append((f"websocket {rest}", ws.raw_head.decode("latin-1"), ws.buf))
    recv = ws.recv

    def recording_recv(timeout=None):
        op, data = recv(timeout)
        SEEN.append((f"websocket {rest} frame", "", data))
        return op, data
    ws.recv = recording_recv
    return ws


def run_in_kernel(ld, c, code):
    kid, ws = open_kernel_channel(ld, c)
    try:
        _, out, _ = jupyter_execute(ws, code)
    finally:
        ws.close()
        c.delete(user_path(c, f"api/kernels/{kid}"))
    return out


# ---------------------------------------------------------------- terminals


class TermReader:
    """Reads terminado's ["stdout", text] messages. Output a match did not use
    stays for the next call: one pty read can carry the answers to two
    commands (it does under load), and a reader that dropped the rest would
    wait for output that already came."""

    def __init__(self, ws):
        self.ws = ws
        self.seen = ""

    def until(self, pattern, timeout=30 * SLOW):
        """Returns the first match of pattern in the output not yet used."""
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(pattern, self.seen)
            if m:
                self.seen = self.seen[m.end():]
                return m
            left = deadline - time.monotonic()
            assert left > 0, \
                f"terminal: {pattern!r} not seen within {timeout:.0f}s: {self.seen[-500:]!r}"
            try:
                msg = self.ws.recv_json(timeout=left)
            except socket.timeout:
                continue
            if msg[0] == "stdout":
                self.seen += msg[1]


def test_terminal_runs_a_command_and_resizes(ld, owner):
    r = owner.post(user_path(owner, "api/terminals"))
    assert_status(r, 200)
    name = r.json["name"]
    r = owner.get(user_path(owner, "api/terminals"))
    assert_status(r, 200)
    assert name in [t["name"] for t in r.json], r.json
    ws = open_ws(ld, owner, f"terminals/websocket/{name}")
    term = TermReader(ws)
    try:
        ws.send_json(["set_size", 24, 80])
        # the markers are split in the command line, so only the output matches
        ws.send_json(["stdin", "echo o''k-$((6*7)); echo \"user=$(id -un) home=$HOME\"\r"])
        term.until(r"ok-42")
        m = term.until(r"user=(\S+) home=(\S+)")
        assert m.group(2) == f"/home/{owner.user}", m.group(0)
        assert m.group(1) == owner.user, m.group(0)  # the sandbox's own /etc/passwd
        ws.send_json(["stdin", "echo si''ze-$(stty size | tr ' ' x)\r"])
        term.until(r"size-24x80")
        # resize: the pty takes the new size; stty inside reports it
        ws.send_json(["set_size", 37, 123])
        ws.send_json(["stdin", "echo si''ze-$(stty size | tr ' ' x)\r"])
        term.until(r"size-37x123")
        # labd's JupyterLab env is on PATH inside, after the user's ~/.local/bin
        ws.send_json(["stdin", "echo pa''th-$PATH-end\r"])
        m = term.until(r"path-(\S+)-end")
        assert m.group(1).startswith(f"/home/{owner.user}/.local/bin:/opt/labd/jupyter/bin:"), \
            m.group(1)
        # each command is in ~/.bash_history as soon as it ran, the shell still open: a
        # stop that kills the shell before it writes its history at exit loses nothing
        marker = f"hist-{os.urandom(3).hex()}"
        ws.send_json(["stdin", f"echo {marker}-do''ne\r"])
        term.until(f"{marker}-done")
        deadline = time.monotonic() + 5 * SLOW  # the prompt comes after the output
        while f"echo {marker}-do''ne" not in (hist := sh(ld, owner, "cat ~/.bash_history || :")):
            assert time.monotonic() < deadline, f"not in ~/.bash_history: {hist[-500:]!r}"
            time.sleep(0.2)
    finally:
        ws.close()
    r = owner.delete(user_path(owner, f"api/terminals/{name}"))
    assert_status(r, 204)


def test_accounts_are_the_sandboxs_own(ld, owner):
    """The runtime's /etc/passwd and /etc/group are the sandbox's (sandbox/accounts.c):
    the user under their labd name, with the home HOME names; no host account."""
    out = sh(ld, owner, "whoami; id -gn; getent passwd | cut -d: -f1 | tr '\\n' ' '; echo;"
                        " getent group | cut -d: -f1 | tr '\\n' ' '; echo;"
                        ' getent passwd "$(whoami)" | cut -d: -f6; echo "$HOME"')
    who, group, users, groups, pw_home, home = out.split("\n")[:6]
    assert (who, group) == (owner.user, owner.user), out
    assert users.split() == ["root", owner.user, "nobody"], out
    assert groups.split() == ["root", owner.user, "nogroup"], out
    assert pw_home == home == f"/home/{owner.user}", out


# ---------------------------------------------------------------- events


def test_events_websocket_reports_a_save(ld, owner):
    """Jupyter Server 2's event bus (/api/events/subscribe) reaches the browser
    through the relay: a save made over HTTP shows up as an event."""
    ws = open_ws(ld, owner, "api/events/subscribe")
    try:
        path = f"ev-{os.urandom(4).hex()}.txt"
        r = owner.put(user_path(owner, f"api/contents/{path}"),
                      json={"type": "file", "format": "text", "content": "hello"})
        assert_status(r, 201)
        deadline = time.monotonic() + 20 * SLOW
        while True:
            left = deadline - time.monotonic()
            assert left > 0, "no save event for " + path
            ev = ws.recv_json(timeout=left)
            if ev.get("action") == "save" and ev.get("path") == path:
                break
        assert "contents_service" in ev["schema_id"], ev
    finally:
        ws.close()


# ---------------------------------------------------------------- XSRF


def test_xsrf_cookie_and_header_on_user_origin(ld, owner):
    """Jupyter Server 2 sets its _xsrf cookie for the runtime's base URL on the
    user's origin, and JupyterLab sends it back as X-XSRFToken: both pass
    through labd, and a write carrying them succeeds. (labd adds the token,
    so Jupyter's own XSRF check stands aside; labd's Origin check is the guard:
    test_runtime_proxy.py's cross-origin cases.)"""
    r = owner.get(user_path(owner, "lab"), headers={"Accept": "text/html"})
    assert_status(r, 200)
    cookies = r.set_cookies()
    assert "_xsrf" in cookies, r.header_all("Set-Cookie")
    value, attrs = cookies["_xsrf"]
    assert attrs.get("path") == user_path(owner), attrs
    jar = owner.runtime_jars[owner.user]
    assert jar.get("_xsrf") == value
    # labd's own cookies never reach Jupyter, Jupyter's never replace labd's
    assert not any(k.startswith("labd") for k in cookies), cookies
    r = owner.post(user_path(owner, "api/contents"), json={"type": "file", "ext": ".txt"},
                   headers={"X-XSRFToken": value, "Origin": owner.runtime_origin()})
    assert_status(r, 201)
    assert r.json["type"] == "file", r.json


# ---------------------------------------------------------------- chunked upload


def test_large_upload_in_chunks(ld, owner):
    """JupyterLab uploads big files in 1 MiB pieces (chunk 1, 2, ..., -1 for the
    last) through the contents API; the file arrives whole."""
    data = os.urandom((4 << 20) + 12345)
    piece = 1 << 20
    parts = [data[i:i + piece] for i in range(0, len(data), piece)]
    path = user_path(owner, "api/contents/upload.bin")
    for i, part in enumerate(parts):
        chunk = -1 if i == len(parts) - 1 else i + 1
        r = owner.put(path, json={"type": "file", "format": "base64", "name": "upload.bin",
                                  "path": "upload.bin", "chunk": chunk,
                                  "content": base64.b64encode(part).decode()})
        assert_status(r, 201 if i == 0 else 200)
    r = owner.get(path + "?content=1&format=base64&type=file")
    assert_status(r, 200)
    got = base64.b64decode(r.json["content"])
    assert len(got) == len(data) and hashlib.sha256(got).digest() == hashlib.sha256(data).digest(), \
        f"{len(got)} bytes back of {len(data)}"
    assert r.json["size"] == len(data), r.json["size"]


# ---------------------------------------------------------------- listings


# Renames one file in ~/flip back and forth for a few seconds, a few hundred
# times a second (an editor or a script saving under new names, not a tight
# loop that no listing could ever beat), then writes how many renames it made.
# Run detached, so sh() returns at once.
RENAMER = (
    "import os, time\n"
    "a, b, n = 'flip/a.ipynb', 'flip/b.ipynb', 0\n"
    "end = time.monotonic() + {secs}\n"
    "while time.monotonic() < end:\n"
    "    os.rename(a, b); time.sleep(0.002); os.rename(b, a); time.sleep(0.002); n += 2\n"
    "open('flip-renames', 'w').write(str(n))\n"
)


def test_a_listing_survives_a_rename_in_it(ld, owner):
    """Jupyter Server builds a listing from the names it read a moment before:
    a file renamed in between made the whole directory a 404, which JupyterLab
    shows as a "Directory not found" dialog over the page (saving a new notebook
    under a name renames it while the file browser refreshes). labd's env lists
    again; a directory that is really gone is still a 404."""
    secs = 4
    sh(ld, owner, "rm -rf flip flip-renames; mkdir flip; : >flip/a.ipynb; "
       f"setsid python3 -c {shlex.quote(RENAMER.format(secs=secs))} </dev/null >/dev/null 2>&1 &")
    statuses = {}
    end = time.monotonic() + secs * SLOW
    while time.monotonic() < end:
        r = owner.get(user_path(owner, "api/contents/flip?content=1"))
        statuses[r.status] = statuses.get(r.status, 0) + 1
        if r.status == 200:
            names = [e["name"] for e in r.json["content"]]
            assert len(names) <= 1 and set(names) <= {"a.ipynb", "b.ipynb"}, names
    renames = sh(ld, owner, "for _ in $(seq 50); do [ -s flip-renames ] && break; sleep 0.2; done; "
                 "cat flip-renames")
    assert int(renames) > 100 * secs, f"the renamer ran: {renames} renames"
    assert statuses.get(200, 0) > 50 and set(statuses) == {200}, \
        f"listings of a folder with a file being renamed, by status: {statuses}"
    r = owner.get(user_path(owner, "api/contents/flip-gone?content=1"))
    assert_status(r, 404)


# ---------------------------------------------------------------- workspaces, settings


def test_workspaces_and_settings_live_in_the_home(ld, owner):
    ws_id = f"w{os.urandom(3).hex()}"
    body = {"data": {"layout-restorer:data": {"main": {"current": "notebook:t.ipynb"}}},
            "metadata": {"id": ws_id}}
    r = owner.put(user_path(owner, f"lab/api/workspaces/{ws_id}"), json=body,
                  headers={"Origin": owner.runtime_origin()})
    assert_status(r, 204)
    r = owner.get(user_path(owner, f"lab/api/workspaces/{ws_id}"))
    assert_status(r, 200)
    assert r.json["data"] == body["data"] and r.json["metadata"]["id"] == ws_id, r.json

    plugin = "@jupyterlab/apputils-extension:themes"
    raw = '{"theme": "JupyterLab Dark"}'
    r = owner.put(user_path(owner, f"lab/api/settings/{plugin}"), json={"raw": raw},
                  headers={"Origin": owner.runtime_origin()})
    assert_status(r, 204)
    r = owner.get(user_path(owner, f"lab/api/settings/{plugin}"))
    assert_status(r, 200)
    assert r.json["raw"] == raw and r.json["settings"]["theme"] == "JupyterLab Dark", r.json

    # both are files in the home (~/.jupyter/lab), so they outlive the runtime
    out = run_in_kernel(ld, owner, (
        "import glob, json, os\n"
        "lab = os.path.expanduser('~/.jupyter/lab')\n"
        f"w = glob.glob(lab + '/workspaces/{ws_id}*')\n"
        "s = lab + '/user-settings/@jupyterlab/apputils-extension/themes.jupyterlab-settings'\n"
        "print(json.dumps({'w': len(w), 'w_id': json.load(open(w[0]))['metadata']['id'] if w "
        "else None, 's': open(s).read()}))\n"))
    got = json.loads(out)
    assert got["w"] == 1 and got["w_id"] == ws_id, got
    assert "JupyterLab Dark" in got["s"], got
