"""Environments that persist: what a user sets up in a runtime is there after a stop
and a start, because it all lives in the home (docs/runtime.md "What persists").

- `pip install --user` from a kernel and from a terminal lands in ~/.local, is
  importable next time, and its console script is on PATH (~/.local/bin);
- a virtual environment made in the home and registered with
  `python -m ipykernel install --user --name X` is a kernelspec next time, and a kernel
  of it runs in that environment;
- JupyterLab settings and workspaces (~/.jupyter/lab/) and a user-installed prebuilt
  extension (~/.local/share/jupyter/labextensions/) are there next time.

The wheels are built here, by hand (a wheel is a zip with METADATA, WHEEL, RECORD),
and served from a PEP 503 simple index over plain HTTP by a testnet.TestHost, which the
runtime reaches through its egress."""

import base64
import hashlib
import io
import json
import os
import re
import shutil
import tempfile
import zipfile

import pytest

from labd_harness import (
    assert_status,
    egress_daemon,
    remember_sandboxes,
    start_runtime,
    stop_runtime,
    teardown_runtime_daemon,
)
from runtime_shell import kernel_run, make_user, sh, terminal_run, user_path
from testnet import TestHost



def wheel(name, version="1.0"):
    """(file name, bytes) of a pure-Python wheel of module `name` with a console
    script `<name>-hello` that prints "hello from <name>"."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f'VALUE = "persisted {name}"\n\n'
                               f'def main():\n    print("hello from {name}")\n',
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: labd-tests\nRoot-Is-Purelib: true\n"
                         "Tag: py3-none-any\n",
        f"{dist}/entry_points.txt": f"[console_scripts]\n{name}-hello = {name}:main\n",
    }
    record = []
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for path, text in files.items():
            data = text.encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{path},sha256={digest.decode()},{len(data)}")
            z.writestr(path, data)
        record.append(f"{dist}/RECORD,,")
        z.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
    return f"{name}-{version}-py3-none-any.whl", buf.getvalue()


def simple_index(names):
    """{relative path: bytes} of a PEP 503 index of wheels of names."""
    out = {}
    links = []
    for name in names:
        fname, data = wheel(name)
        sha = hashlib.sha256(data).hexdigest()
        out[f"files/{fname}"] = data
        out[f"simple/{name}/index.html"] = (
            f'<!DOCTYPE html><html><body><a href="../../files/{fname}#sha256={sha}">'
            f"{fname}</a></body></html>").encode()
        links.append(f'<a href="{name}/">{name}</a>')
    out["simple/index.html"] = ("<!DOCTYPE html><html><body>" + "".join(links) +
                                "</body></html>").encode()
    return out


def write_index(top, names):
    """Writes the index of names under top (served as the test host's root)."""
    for path, data in simple_index(names).items():
        full = os.path.join(top, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as fh:
            fh.write(data)


PIP = "python3 -m pip install --user --disable-pip-version-check --no-cache-dir"

THEME = "@jupyterlab/apputils-extension:themes"
EXTENSION = "labd-persist-ext"


def lab_config(c):
    """The page config JupyterLab renders into /lab."""
    r = c.get(user_path(c, "lab"), headers={"Accept": "text/html"})
    assert_status(r, 200)
    m = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>',
                  r.text, re.S)
    assert m, r.text[:500]
    return json.loads(m.group(1))


@pytest.fixture(scope="module")
def net():
    """A test host serving the package index, and a daemon whose runtimes have
    egress (only test hosts are ever addressed)."""
    top = tempfile.mkdtemp(prefix="labd-persist-")
    write_index(top, ["labdkernelpkg", "labdtermpkg"])
    with TestHost() as host:
        host.serve_http(top)
        d = egress_daemon("persist", runtime={"cpu_limit": "2h"})
        try:
            d.start()
            # plain HTTP from anywhere but localhost needs pip's --trusted-host
            yield d, f"--trusted-host {host.addr} --index-url http://{host.addr}/simple"
        finally:
            teardown_runtime_daemon(d)
            shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(scope="module")
def pd(net):
    return net[0]


@pytest.fixture(scope="module")
def setup_then_restart(pd, net):
    """One user sets everything up in a first runtime, stops it and starts a second
    one; the tests look at the second."""
    c = make_user(pd, pd.admin(), "pst")
    start_runtime(c)
    remember_sandboxes(pd)
    index = net[1]  # pip's options naming the test host's index
    # pip from a notebook kernel, and from a terminal
    out = sh(pd, c, f"{PIP} {index} labdkernelpkg")
    assert "Successfully installed labdkernelpkg-1.0" in out, out
    out = terminal_run(pd, c, f"pip install --user --disable-pip-version-check "
                              f"--no-cache-dir {index} labdtermpkg")
    assert "Successfully installed labdtermpkg-1.0" in out, out
    # a venv in the home, registered as a kernel
    sh(pd, c, "/usr/bin/python3 -m venv --system-site-packages ~/venvs/mine && "
              "~/venvs/mine/bin/python -m ipykernel install --user --name mine "
              "--display-name 'My venv'")
    # JupyterLab settings and a workspace
    r = c.put(user_path(c, f"lab/api/settings/{THEME}"),
              json={"raw": json.dumps({"theme": "JupyterLab Dark"})},
              headers={"Origin": c.runtime_origin()})
    assert r.status in (200, 204), r
    r = c.put(user_path(c, "lab/api/workspaces/persisted"),
              json={"data": {"labd:test": {"kept": True}}, "metadata": {"id": "persisted"}},
              headers={"Origin": c.runtime_origin()})
    assert r.status in (200, 204), r
    # a prebuilt extension placed by hand
    ext = f".local/share/jupyter/labextensions/{EXTENSION}"
    sh(pd, c, f"""mkdir -p {ext}/static && echo '// labd test' > {ext}/static/remoteEntry.0.js
cat > {ext}/package.json <<'JSON'
{{"name": "{EXTENSION}", "version": "0.1.0",
 "jupyterlab": {{"_build": {{"load": "static/remoteEntry.0.js", "extension": "./extension"}}}}}}
JSON""")
    assert EXTENSION in [e["name"] for e in lab_config(c).get("federated_extensions", [])]
    stop_runtime(c)
    start_runtime(c)
    return c


def test_pip_user_packages_persist_and_import(pd, setup_then_restart):
    c = setup_then_restart
    _, out = kernel_run(pd, c, "import labdkernelpkg, labdtermpkg\n"
                               "print(labdkernelpkg.VALUE); print(labdtermpkg.__file__)")
    lines = out.splitlines()
    assert lines[0] == "persisted labdkernelpkg", out
    assert re.fullmatch(rf"/home/{c.user}/\.local/lib/python3\.\d+/site-packages/"
                        r"labdtermpkg/__init__\.py", lines[1]), out


def test_console_scripts_are_on_path(pd, setup_then_restart):
    c = setup_then_restart
    out = terminal_run(pd, c, "command -v labdkernelpkg-hello; labdtermpkg-hello")
    assert f"/home/{c.user}/.local/bin/labdkernelpkg-hello" in out, out
    assert "hello from labdtermpkg" in out, out
    _, out = kernel_run(pd, c, "import shutil; print(shutil.which('labdtermpkg-hello'))")
    assert out.strip() == f"/home/{c.user}/.local/bin/labdtermpkg-hello", out


def test_home_venv_kernel_is_listed_and_runs(pd, setup_then_restart):
    c = setup_then_restart
    r = c.get(user_path(c, "api/kernelspecs"))
    assert_status(r, 200)
    specs = r.json["kernelspecs"]
    assert "mine" in specs, sorted(specs)
    assert specs["mine"]["spec"]["display_name"] == "My venv"
    _, out = kernel_run(pd, c, "import sys; print(sys.prefix)", kernel="mine")
    assert out.strip() == f"/home/{c.user}/venvs/mine", out


def test_lab_settings_and_workspaces_persist(pd, setup_then_restart):
    c = setup_then_restart
    r = c.get(user_path(c, f"lab/api/settings/{THEME}"))
    assert_status(r, 200)
    assert json.loads(r.json["raw"]) == {"theme": "JupyterLab Dark"}, r.json["raw"]
    r = c.get(user_path(c, "lab/api/workspaces/persisted"))
    assert_status(r, 200)
    assert r.json["data"] == {"labd:test": {"kept": True}}, r.json
    out = sh(pd, c, "ls .jupyter/lab/user-settings/@jupyterlab/apputils-extension "
                    ".jupyter/lab/workspaces")
    assert "themes.jupyterlab-settings" in out and "persisted" in out, out


def test_user_extension_is_listed_after_restart(pd, setup_then_restart):
    c = setup_then_restart
    exts = lab_config(c).get("federated_extensions", [])
    mine = [e for e in exts if e["name"] == EXTENSION]
    assert mine and mine[0]["load"] == "static/remoteEntry.0.js", exts
