"""Running things inside a user's runtime the way the user would: a shell script from
a kernel (sh), Python code on a kernel of a given kernelspec (kernel_run), and a
command typed into a JupyterLab terminal (terminal_run). All go through labd's proxy
with the user's own cookies, so they run as the user, in the sandbox, in the home."""

import json
import os
import re
import time

from labd_harness import SLOW, WebSocket, jupyter_execute, make_user, ws_cookie_headers  # noqa: F401 (make_user: for the tests)



def user_path(c, rest=""):
    return f"/user/{c.user}/{rest}"


def _ws(d, c, path):
    headers = dict(ws_cookie_headers(c), Origin=c.runtime_origin())
    return WebSocket(d.port, user_path(c, path), headers=headers, source=c.source).expect_open()


def kernel_run(d, c, code, kernel="python3", timeout=60 * SLOW):
    """Runs code on a new kernel of kernelspec `kernel`; returns (result, stdout).
    The kernel is shut down afterwards."""
    r = c.post(user_path(c, "api/kernels"), json={"name": kernel})
    assert r.status == 201, r
    kid = r.json["id"]
    ws = _ws(d, c, f"api/kernels/{kid}/channels")
    try:
        result, out, _ = jupyter_execute(ws, code, timeout=timeout)
    finally:
        ws.close()
        c.delete(user_path(c, f"api/kernels/{kid}"))
    return result, out


class _ShellKernel:
    """One kernel per client for sh(), started on first use and kept: starting a
    kernel costs seconds, and the scripts need nothing of a fresh process."""

    def __init__(self, d, c):
        r = c.post(user_path(c, "api/kernels"), json={"name": "python3"})
        assert r.status == 201, r
        self.kid = r.json["id"]
        self.ws = _ws(d, c, f"api/kernels/{self.kid}/channels")
        self.runtime_id = _runtime_id(c)

    def close(self, c):
        self.ws.close()
        c.delete(user_path(c, f"api/kernels/{self.kid}"))


def _runtime_id(c):
    r = c.get("/api/v1/me/runtime")
    return (r.json.get("runtime") or {}).get("id")


def _shell_kernel(d, c):
    k = getattr(c, "_shell_kernel", None)
    if k is not None and (k.ws.closed or k.runtime_id != _runtime_id(c)):
        k = None  # its runtime was stopped since
    if k is None:
        k = c._shell_kernel = _ShellKernel(d, c)
    return k


def sh(d, c, script, timeout=60 * SLOW):
    """Runs a shell script in c's runtime (from a kernel kept for these, in the home)
    and returns its stdout; a non-zero exit fails the test with its stderr."""
    code = ("import os, subprocess\n"
            f"p = subprocess.run(['sh', '-ec', {script!r}], capture_output=True, text=True,"
            " cwd=os.path.expanduser('~'), stdin=subprocess.DEVNULL)\n"
            "print(p.returncode); print(p.stdout, end=''); print('\\x00' + p.stderr, end='')\n")
    k = _shell_kernel(d, c)
    try:
        _, out, _ = jupyter_execute(k.ws, code, timeout=timeout)
    except BaseException:
        c._shell_kernel = None
        k.close(c)
        raise
    rc, _, rest = out.partition("\n")
    stdout, _, stderr = rest.partition("\x00")
    assert rc == "0", f"script failed ({rc}): {script}\nstdout: {stdout}\nstderr: {stderr}"
    return stdout


def terminal_run(d, c, command, timeout=60 * SLOW):
    """Types command into a new JupyterLab terminal (its login shell) and returns
    what it printed before its exit status; asserts the status is 0. The terminal
    is deleted afterwards."""
    r = c.post(user_path(c, "api/terminals"), json={})
    assert r.status == 200, r
    name = r.json["name"]
    ws = _ws(d, c, f"terminals/websocket/{name}")
    mark = os.urandom(4).hex()
    # the quotes keep the echoed command line from matching the marker itself
    ws.send_text(json.dumps(["stdin", f"{command}; echo \"__END\"\"{mark} $?\"\r"]))
    out, deadline = "", time.monotonic() + timeout
    try:
        while f"__END{mark} " not in out or not out.split(f"__END{mark} ", 1)[1].strip():
            left = deadline - time.monotonic()
            assert left > 0, f"terminal: no end of {command!r} within {timeout}s: {out[-2000:]!r}"
            msg = ws.recv_json(timeout=left)
            if msg[0] == "stdout":
                out += msg[1]
    finally:
        ws.close()
        c.delete(user_path(c, f"api/terminals/{name}"))
    before, _, after = out.partition(f"__END{mark} ")
    status = after.split()[0]
    assert status == "0", f"terminal: {command!r} exited {status}: {before[-2000:]!r}"
    # drop the echoed command line: output starts after its first line break
    return before.split("\n", 1)[1] if "\n" in before else before


def job_shell_run(ws, command, timeout=15 * SLOW):
    """Types command into a job's shell WebSocket, then an end marker the echo cannot
    match; returns the output up to the marker, without the terminal's control
    sequences (bash's bracketed paste mode)."""
    ws.send_binary((command + "; echo END-$((40+2))\n").encode())
    out, deadline = b"", time.monotonic() + timeout
    while b"END-42" not in out:
        left = deadline - time.monotonic()
        assert left > 0, f"no end marker after {command!r}: {out[-2000:]!r}"
        op, data = ws.recv(timeout=left)
        assert op == 0x2, (op, data)
        out += data
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.decode("utf-8", "replace").replace("\r", ""))
