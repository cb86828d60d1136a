"""The Jupyter kinds besides the default JupyterLab 4 ([runtime] jupyter): one
Notebook 6 case (Debian's package, `jupyter = notebook`) and one plain Jupyter
Server case (`jupyter = server`, from labd's env), each started, running a
kernel cell and stopped; and a jupyter_env that is set but missing, which falls
back to the image's own jupyter with a logged line."""

import pytest

from labd_harness import (
    KERNEL_V1,
    assert_status,
    jupyter_execute,
    make_user,
    open_kernel_channel,
    start_runtime,
    stop_runtime,
)


def run_cell(d, c):
    """A kernel cell's answer, the kernel's Python and the subprotocol spoken."""
    kid, ws = open_kernel_channel(d, c)
    try:
        result, _, _ = jupyter_execute(ws, "import sys; (6*7, sys.prefix)")
        proto = ws.protocol
    finally:
        ws.close()
        c.delete(f"/user/{c.user}/api/kernels/{kid}")
    return result, proto


def test_notebook6(runtime_daemon_factory):
    d = runtime_daemon_factory("rt-nb6", runtime={"jupyter": "notebook"})
    c = make_user(d, prefix="knd")
    start_runtime(c)
    r = c.get(f"/user/{c.user}/api")
    assert_status(r, 200)
    assert r.json["version"].startswith("6."), r.json  # Notebook 6 answers, not Server 2
    r = c.get(f"/user/{c.user}/tree", headers={"Accept": "text/html"})
    assert_status(r, 200)
    assert "<title>Home Page - Select or create a notebook</title>" in r.text, r.text[:300]
    result, proto = run_cell(d, c)
    assert result == "(42, '/usr')", result  # Debian's python3, not labd's env
    assert proto is None, "Notebook 6 does not speak the v1 kernel subprotocol"
    # labd's env has no Notebook 6: the image's is used, and the log says so
    assert "jupyter_env /opt/labd/jupyter has no bin/jupyter-notebook: using the image's " \
        "jupyter" in d.log(), d.log_tail()
    stop_runtime(c)


def test_jupyter_server(runtime_daemon_factory):
    d = runtime_daemon_factory("rt-server", runtime={"jupyter": "server"})
    c = make_user(d, prefix="knd")
    start_runtime(c)
    r = c.get(f"/user/{c.user}/api")
    assert_status(r, 200)
    assert r.json["version"].startswith("2."), r.json
    # jupyter-server itself runs (ServerApp); JupyterLab, installed in the same env,
    # still loads as its extension, so /lab answers there too
    result, proto = run_cell(d, c)
    assert result == "(42, '/opt/labd/jupyter')", result
    assert proto == KERNEL_V1
    stop_runtime(c)


@pytest.mark.parametrize("env", ["/nonexistent/jupyter-env", ""], ids=["missing", "empty"])
def test_jupyter_env_missing_or_empty(runtime_daemon_factory, env):
    """A jupyter_env that is set but missing (or empty: none) still starts
    runtimes, on the image's jupyter (Debian's Notebook 6 here, the first kind
    the host's root has); a missing one is logged."""
    d = runtime_daemon_factory(f"rt-env-{'m' if env else 'e'}", runtime={"jupyter_env": env})
    c = make_user(d, prefix="knd")
    start_runtime(c)
    r = c.get(f"/user/{c.user}/api")
    assert_status(r, 200)
    assert r.json["version"].startswith("6."), r.json
    result, _ = run_cell(d, c)
    assert result == "(42, '/usr')", result
    logged = "jupyter_env /nonexistent/jupyter-env has no bin/jupyter-" in d.log()
    assert logged == bool(env), d.log_tail()
    stop_runtime(c)
