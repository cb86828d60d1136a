"""Runtime images (docs/operations.md, "Runtime images"): a small image built by
deploy/image/build (--no-ml --torch none), cached between runs under
/var/cache/labd/images by deploy/image/cached, named in [images] and chosen per plan.
A user on that plan gets a runtime whose root is the image (files only the image has,
its own JupyterLab at /opt/labd/jupyter), the runtime row records the image and its
hash, GET /api/v1/images lists it, an unknown image in a plan is a 400 naming "image",
and an image whose folder is gone fails the start with image_missing."""

import json
import os
import subprocess
import time

import pytest

from labd_harness import (
    REPO,
    STRONG,
    WebSocket,
    assert_error,
    audit_entries,
    assert_status,
    jupyter_execute,
    start_runtime,
    stop_runtime,
    unique_name,
    wait_runtime,
    ws_cookie_headers,
)

# The first build on a fresh machine downloads Debian's base and JupyterLab's wheels.
BUILD_TIMEOUT_S = 900
GONE_FOLDER = "/var/cache/labd/images/labd-test-image-that-is-not-there"


@pytest.fixture(scope="module")
def image_dir():
    """The cached small image (built now when its inputs changed), as deploy/image/cached
    prints it."""
    t0 = time.monotonic()
    p = subprocess.run([os.path.join(REPO, "deploy/image/cached"), "test", "--no-ml",
                        "--torch", "none"], capture_output=True, text=True,
                       timeout=BUILD_TIMEOUT_S)
    assert p.returncode == 0, f"deploy/image/cached failed ({p.returncode}):\n{p.stderr[-3000:]}"
    folder = p.stdout.strip().splitlines()[-1]
    print(f"image {folder} ready in {time.monotonic() - t0:.1f} s")
    return folder


@pytest.fixture(scope="module")
def meta(image_dir):
    with open(os.path.join(image_dir, "labd-image.json")) as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def loose_dir(tmp_path_factory):
    """A folder with a labd-image.json that anyone may write: never a runtime's root."""
    d = tmp_path_factory.mktemp("loose-image")
    (d / "labd-image.json").write_text(json.dumps({"name": "loose", "hash": "sha256:" + "0" * 64}))
    os.chmod(d, 0o777)
    return str(d)


@pytest.fixture(scope="module")
def imd(runtime_daemon_factory, image_dir, loose_dir):
    return runtime_daemon_factory("images", runtime={"cpu_limit": "1h"},
                                  sections={"images": {"small": image_dir,
                                                       "gone": GONE_FOLDER,
                                                       "loose": loose_dir}})


@pytest.fixture(scope="module")
def admin(imd):
    return imd.admin()


def user_on_plan(d, admin, image):
    """A new user whose own plan runs on image."""
    plan = unique_name("p")
    assert_status(admin.post("/api/v1/plans", json={"name": plan, "limits": {},
                                                     "image": image}), 201)
    name = unique_name("img")
    pw = f"{STRONG}-{name}"
    assert_status(admin.post("/api/v1/users", json={"name": name, "role": "user",
                                                     "password": pw}), 201)
    assert_status(admin.put(f"/api/v1/users/{name}/quota", json={"plan": plan}), 200)
    c = d.client()
    c.login(name, pw)
    return c


def run_in_kernel(d, c, code):
    r = c.post(f"/user/{c.user}/api/kernels", json={"name": "python3"})
    assert r.status == 201, r
    kid = r.json["id"]
    headers = ws_cookie_headers(c)
    headers["Origin"] = c.runtime_origin()
    ws = WebSocket(d.port, f"/user/{c.user}/api/kernels/{kid}/channels", headers=headers,
                   source=c.source).expect_open()
    try:
        _, out, msgs = jupyter_execute(ws, code)
    finally:
        ws.close()
    return out, msgs


def test_image_build_metadata(image_dir, meta):
    """labd-image.json says what the image is, and the hash is deploy/image/hash's."""
    assert meta["name"] == "test"
    assert meta["debian"].startswith("12."), meta["debian"]
    assert meta["jupyterlab"] == "4.6.6", meta["jupyterlab"]
    assert meta["packages"]["ipykernel"] == "7.4.0"
    assert meta["size_bytes"] > 50 << 20
    h = subprocess.run([os.path.join(REPO, "deploy/image/hash"), image_dir],
                       capture_output=True, text=True, timeout=600, check=True).stdout.strip()
    assert meta["hash"] == "sha256:" + h


def test_images_listed(imd, admin, image_dir, meta):
    r = admin.get("/api/v1/images")
    assert_status(r, 200)
    by_name = {i["name"]: i for i in r.json["images"]}
    small = by_name["small"]
    assert small["usable"] is True and small["hash"] == meta["hash"], small
    assert small["folder"] == image_dir and small["jupyterlab"] == "4.6.6", small
    assert small["size_bytes"] == meta["size_bytes"]
    assert by_name["gone"] == {"name": "gone", "usable": False, "folder": GONE_FOLDER}
    assert by_name["loose"]["usable"] is False, by_name["loose"]  # not root's alone
    # any logged-in user may list them; only admins see where they live
    c = user_on_plan(imd, admin, "")
    r = c.get("/api/v1/images")
    assert_status(r, 200)
    assert all("folder" not in i for i in r.json["images"]), r.json
    assert {i["name"] for i in r.json["images"]} == {"small", "gone", "loose"}


def test_unknown_image_in_plan_refused(admin):
    name = unique_name("p")
    r = admin.post("/api/v1/plans", json={"name": name, "limits": {}, "image": "nope"})
    assert_error(r, 400, "bad_field")
    assert '"image"' in r.json["error"]["message"], r.json
    assert admin.get(f"/api/v1/plans/{name}").status == 404  # nothing made
    assert_status(admin.post("/api/v1/plans", json={"name": name, "limits": {}}), 201)
    r = admin.put(f"/api/v1/plans/{name}", json={"limits": {}, "image": "/etc"})
    assert_error(r, 400, "bad_field")
    assert '"image"' in r.json["error"]["message"], r.json
    assert admin.get(f"/api/v1/plans/{name}").json["plan"]["image"] == ""  # unchanged
    r = admin.put(f"/api/v1/plans/{name}", json={"limits": {}, "image": "small"})
    assert_status(r, 200)
    assert r.json["plan"]["image"] == "small"
    assert "image=small" in audit_entries(admin, "plan.update", name)[0]["detail"]
    # a PUT without "image" keeps it
    r = admin.put(f"/api/v1/plans/{name}", json={"limits": {}})
    assert r.json["plan"]["image"] == "small"


def test_runtime_on_image(imd, admin, meta):
    c = user_on_plan(imd, admin, "small")
    first, running = start_runtime(c)
    assert running["image"] == "small" and running["image_hash"] == meta["hash"], running
    code = ("import os, sys, jupyterlab\n"
            "print(open('/labd-image.json').read().count(%r))\n"
            "print(os.path.exists('/usr/bin/gcc'), os.path.exists(%r))\n"
            "print(sys.prefix, jupyterlab.__version__)\n"
            "import labd_contents\n"
            "print(open(sys.prefix + '/etc/jupyter/jupyter_server_config.json').read().count("
            "'labd_contents.ListingContentsManager'))\n") % (meta["hash"], REPO)
    out, msgs = run_in_kernel(imd, c, code)
    # the image's own marker, none of the host's compiler or checkout, the image's env
    # with labd's contents manager (deploy/jupyter/labd_contents.py) chosen
    assert out == f"1\nFalse False\n/opt/labd/jupyter 4.6.6\n1\n", (out, msgs)
    # the admin's list of live runtimes shows it too
    live = {x["user"]: x for x in admin.get("/api/v1/runtimes").json["runtimes"]}
    assert live[c.user]["image_hash"] == meta["hash"], live[c.user]
    ended = stop_runtime(c)
    assert ended["image"] == "small" and ended["image_hash"] == meta["hash"], ended


def test_host_root_runtime_has_no_image(imd, admin):
    """The default: no image in the plan, the host's root (make run needs no image)."""
    c = user_on_plan(imd, admin, "")
    _, running = start_runtime(c)
    assert running["image"] is None and running["image_hash"] is None, running
    out, msgs = run_in_kernel(imd, c, "import os; print(os.path.exists('/labd-image.json'))")
    assert out == "False\n", (out, msgs)
    stop_runtime(c)


def test_missing_image_folder_fails_start(imd, admin):
    c = user_on_plan(imd, admin, "gone")
    r = c.post("/api/v1/me/runtime", json={"type": "cpu"})
    assert r.status in (202, 201), r
    failed = wait_runtime(c, "failed")
    assert "image_missing" in failed["reason"], failed
    assert failed["image"] == "gone" and failed["image_hash"] is None, failed
    assert "image_missing" in imd.log() or "[images] gone" in imd.log()


def test_writable_image_folder_refused(imd, admin):
    """A folder others may write would let them choose what runtimes run: root refuses it."""
    c = user_on_plan(imd, admin, "loose")
    r = c.post("/api/v1/me/runtime", json={"type": "cpu"})
    assert r.status in (202, 201), r
    failed = wait_runtime(c, "failed")
    assert "image_unsafe" in failed["reason"], failed
    assert "writable by its group or others" in failed["reason"], failed
