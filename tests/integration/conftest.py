"""Fixtures: real labd daemons (a shared one per session, fresh ones per module)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from labd_harness import (  # noqa: E402
    STRONG,
    Daemon,
    runtime_daemon,
    teardown_daemon,
    teardown_runtime_daemon,
    unique_name,
)


@pytest.fixture(scope="session")
def daemon():
    """The shared daemon: the config from the brief, backoff effectively off."""
    d = Daemon("main")
    try:
        d.start()
    except BaseException:
        d.cleanup()
        raise
    yield d
    teardown_daemon(d)


@pytest.fixture
def admin(daemon):
    """A client logged in (cookie + CSRF token) as the bootstrap admin."""
    return daemon.admin()


@pytest.fixture
def new_user(daemon, admin):
    """Factory: create a user through the API; returns (name, password)."""

    def make(role="user", password=None, prefix="u"):
        name = unique_name(prefix)
        pw = password or f"{STRONG}-{name}"
        r = admin.post("/api/v1/users", json={"name": name, "role": role, "password": pw})
        assert r.status == 201, f"creating {name}: {r!r}"
        return name, pw

    return make


@pytest.fixture
def user(daemon, new_user):
    """A client logged in as a fresh user of role 'user' (.user, .password set)."""
    name, pw = new_user()
    c = daemon.client()
    c.login(name, pw)
    c.password = pw
    return c


def start_daemon(name, **kw):
    d = Daemon(name, **kw)
    try:
        d.start()
    except BaseException:
        d.cleanup()
        raise
    return d


@pytest.fixture(scope="module")
def daemon_factory():
    """Module-scoped: start extra daemons (fresh state) that are torn down after the module."""
    started = []

    def make(name, **kw):
        d = start_daemon(name, **kw)
        started.append(d)
        return d

    yield make
    errors = []
    for d in started:
        try:
            teardown_daemon(d)
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, "\n\n".join(errors)


@pytest.fixture(scope="module")
def runtime_daemon_factory():
    """Module-scoped: start daemons with a [runtime] section (small limits,
    keep_on_shutdown = false unless overridden).  Teardown stops each one and
    asserts that no sandbox, mount or loop device is left under its state dir."""
    started = []

    def make(name, runtime=None, gpu=None, **kw):
        d = runtime_daemon(name, runtime=runtime, gpu=gpu, **kw)
        started.append(d)
        try:
            d.start()
        except BaseException:
            started.remove(d)
            try:
                teardown_runtime_daemon(d)
            except AssertionError:
                pass  # the start failure is the error to report
            raise
        return d

    yield make
    errors = []
    for d in started:
        try:
            teardown_runtime_daemon(d)
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, "\n\n".join(errors)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach the log tail of every daemon a failing test used to its report."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        seen = set()
        for v in getattr(item, "funcargs", {}).values():
            if isinstance(v, Daemon) and id(v) not in seen:
                seen.add(id(v))
                rep.sections.append((f"labd ({v.name}) log tail", v.log_tail(30)))


def pytest_runtest_logreport(report):
    """Names every skipped (or xfailed) test for tests/integration/run.sh, which
    checks each against tests/expected-skips.txt: one line "<node id>\\t<reason>" in
    the file LABD_SKIP_LOG names (set by run.sh; nothing is written without it)."""
    path = os.environ.get("LABD_SKIP_LOG")
    if not path or not report.skipped:
        return
    if hasattr(report, "wasxfail"):
        reason = f"xfail: {report.wasxfail}"
    elif isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        reason = str(report.longrepr[2]).removeprefix("Skipped: ")
    else:
        reason = str(report.longrepr)
    nodeid = report.nodeid.split("tests/integration/", 1)[-1]
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"{nodeid}\t{' '.join(reason.split())}\n")
