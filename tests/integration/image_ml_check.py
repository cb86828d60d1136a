"""make test-image (not part of make test): the full runtime image, built by
deploy/image/build with the ML set and PyTorch CPU (cached by deploy/image/cached), and
a runtime on it whose kernel imports numpy, pandas, scikit-learn, matplotlib and torch
and computes with each. Named outside test_*.py so the default suite never collects it."""

import json
import os
import subprocess
import time

import pytest

from labd_harness import REPO, start_runtime, stop_runtime
from test_images import run_in_kernel, user_on_plan

BUILD_TIMEOUT_S = 3600


@pytest.fixture(scope="module")
def ml_image():
    t0 = time.monotonic()
    p = subprocess.run([os.path.join(REPO, "deploy/image/cached"), "ml", "--ml", "--torch",
                        "cpu"], capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    assert p.returncode == 0, f"deploy/image/cached failed ({p.returncode}):\n{p.stderr[-3000:]}"
    folder = p.stdout.strip().splitlines()[-1]
    print(f"image {folder} ready in {time.monotonic() - t0:.1f} s")
    return folder


@pytest.fixture(scope="module")
def mld(runtime_daemon_factory, ml_image):
    return runtime_daemon_factory("image-ml", runtime={"cpu_limit": "1h", "memory": "4G"},
                                  sections={"images": {"ml": ml_image}})


def test_ml_set_imports_on_image(mld, ml_image):
    with open(os.path.join(ml_image, "labd-image.json")) as fh:
        meta = json.load(fh)
    admin = mld.admin()
    c = user_on_plan(mld, admin, "ml")
    _, running = start_runtime(c)
    assert running["image"] == "ml" and running["image_hash"] == meta["hash"], running
    code = ("import numpy, pandas, sklearn, matplotlib, torch\n"
            "from sklearn.linear_model import LinearRegression\n"
            "matplotlib.use('Agg'); import matplotlib.pyplot as plt\n"
            "x = numpy.arange(10.0).reshape(-1, 1)\n"
            "m = LinearRegression().fit(x, 2 * x.ravel() + 1)\n"
            "plt.plot(x); plt.savefig('/tmp/p.png')\n"
            "print(round(float(m.coef_[0]), 3), int(pandas.Series([1, 2]).sum()),"
            " float(torch.ones(3).sum()), torch.cuda.is_available())\n")
    out, msgs = run_in_kernel(mld, c, code)
    assert out == "2.0 3 3.0 False\n", (out, msgs)
    stop_runtime(c)
