"""A course's end (docs/operations.md "Courses"): a group's expires_at is
announced to its members beforehand (GET /api/v1/me, the dashboard); when it
passes, the members' accounts are disabled and their sessions end, except an
admin's and a member's who is still in a group that has not ended; after
[runtime] course_retention the accounts it disabled are deleted (their homes
archived as [runtime] deleted_home says). One daemon, a retention of 2 s."""

import calendar
import time

import pytest

from labd_harness import STRONG, assert_error, assert_status, unique_name


def utc(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def wait_until(what, check, timeout=20):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def d(daemon_factory):
    return daemon_factory("courses", sections={"runtime": {"course_retention": "2s"}})


def make(d, admin, role="user"):
    name = unique_name("c")
    pw = f"{STRONG}-{name}"
    assert_status(admin.post("/api/v1/users", json={"name": name, "role": role, "password": pw}),
                  201)
    c = d.client()
    c.login(name, pw)
    return name, c


def state(admin, name):
    r = admin.get(f"/api/v1/users/{name}")
    return None if r.status == 404 else r.json["user"]["disabled"]


def test_expires_at_is_checked_and_shown(d):
    admin = d.admin()
    g = unique_name("g")
    for bad in ("tomorrow", "2026-13-01", "2026-07-31T25:00:00Z", 12345):
        assert_error(admin.post("/api/v1/groups", json={"name": g, "expires_at": bad}), 400,
                     "bad_field")
    r = admin.post("/api/v1/groups", json={"name": g, "expires_at": "2031-07-31"})
    assert_status(r, 201)
    assert r.json["group"]["expires_at"] == "2031-07-31T00:00:00Z", r.json
    assert r.json["group"]["ended"] is False
    r = admin.put(f"/api/v1/groups/{g}", json={"expires_at": None})
    assert r.json["group"]["expires_at"] is None, r.json


def test_course_end_disables_then_retires_its_accounts(d):
    admin = d.admin()
    (student, sc), (both, bc), (teacher, tc) = make(d, admin), make(d, admin), \
        make(d, admin, "admin")
    course, other = unique_name("g"), unique_name("g")
    end = int(time.time()) + 3
    assert_status(admin.post("/api/v1/groups", json={
        "name": course, "members": [student, both, teacher], "expires_at": utc(end)}), 201)
    assert_status(admin.post("/api/v1/groups", json={"name": other, "members": [both]}), 201)
    # announced beforehand, to the members only
    me = sc.get("/api/v1/me").json
    assert me["course_ends"] == [{"group": course, "expires_at": utc(end)}], me
    assert admin.get("/api/v1/me").json["course_ends"] == []
    # not to one whose other course goes on, nor to an admin: the end spares them
    assert bc.get("/api/v1/me").json["course_ends"] == []
    assert tc.get("/api/v1/me").json["course_ends"] == []
    # at the end: the student is disabled and signed out; the one still in a
    # live course and the admin keep working
    wait_until("the student disabled", lambda: state(admin, student) is True)
    assert_error(sc.get("/api/v1/me"), 401)
    assert state(admin, both) is False and state(admin, teacher) is False
    assert_status(bc.get("/api/v1/me"), 200)
    assert_status(tc.get("/api/v1/me"), 200)
    assert admin.get(f"/api/v1/groups/{course}").json["group"]["ended"] is True
    # course_retention (2 s) after the end: the disabled account is deleted
    wait_until("the student deleted", lambda: state(admin, student) is None)
    assert state(admin, both) is False and state(admin, teacher) is False
    actions = [(e["action"], e["target"]) for e in admin.get("/api/v1/audit").json["entries"]]
    assert ("user.disable", student) in actions and ("user.delete", student) in actions
    assert calendar.timegm(time.gmtime()) >= end + 2
