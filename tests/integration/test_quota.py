"""Quotas: a user's effective limits and where each comes from (GET
/api/v1/me/quota), the admin's per-user plan and overrides (GET|PUT
/api/v1/users/{name}/quota), precedence (override > own plan > group plan >
default), the [quota] config defaults, and a runtime's length from its plan."""

import pytest

from labd_harness import (
    assert_error,
    assert_status,
    audit_entries,
    parse_api_time,
    stop_runtime,
    STRONG,
    unique_name,
    wait_runtime,
)

LIMITS = {"cpu_runtime_max_s", "gpu_runtime_max_s", "cpu_s_per_24h", "cpu_s_per_7d",
          "gpu_s_per_24h", "gpu_s_per_7d", "storage_bytes", "memory_bytes", "cpus_milli",
          "gpus_per_runtime", "concurrent_jobs", "job_max_runtime_s", "network",
          "egress_bytes_per_s", "job_storage_bytes"}


def make_plan(admin, limits):
    name = unique_name("pl")
    assert_status(admin.post("/api/v1/plans", json={"name": name, "limits": limits}), 201)
    return name


def make_group(admin, plan, members):
    name = unique_name("gr")
    r = admin.post("/api/v1/groups", json={"name": name, "plan": plan, "members": members})
    assert_status(r, 201)
    return name


def test_me_quota_defaults(daemon, user):
    r = user.get("/api/v1/me/quota")
    assert_status(r, 200)
    j = r.json
    assert set(j) == {"user", "limits", "used", "remaining", "next_free_at", "storage",
                      "job_storage"}, j
    assert j["job_storage"] == {"used_bytes": 0, "quota_bytes": 5 << 30, "jobs": 0,
                                "spec_bytes": 0, "log_bytes": 0, "metric_bytes": 0}, j
    windows = {"cpu_s_per_24h", "cpu_s_per_7d", "gpu_s_per_24h", "gpu_s_per_7d"}
    # no home yet: nothing stored
    assert j["user"] == user.user and j["used"] == dict.fromkeys(windows, 0) | {
        "storage_bytes": 0}, j
    assert j["remaining"] == {"cpu_s_per_24h": None, "cpu_s_per_7d": None,
                              "gpu_s_per_24h": 4 * 3600, "gpu_s_per_7d": None,
                              "storage_bytes": 15 << 30}, j
    assert j["next_free_at"] == dict.fromkeys(windows), j
    assert j["storage"] == {"used_bytes": 0, "quota_bytes": 15 << 30}, j
    lim = j["limits"]
    assert set(lim) == LIMITS, sorted(lim)
    assert all(v == {"value": v["value"], "source": "default"} for v in lim.values()), lim
    # the documented defaults ([runtime] and [quota] untouched in this daemon)
    assert lim["cpu_runtime_max_s"]["value"] == 12 * 3600
    assert lim["gpu_runtime_max_s"]["value"] == 4 * 3600
    assert lim["gpu_s_per_24h"]["value"] == 4 * 3600
    assert lim["gpu_s_per_7d"]["value"] is None  # unlimited
    assert lim["cpu_s_per_24h"]["value"] is None and lim["cpu_s_per_7d"]["value"] is None
    assert lim["storage_bytes"]["value"] == 15 << 30
    assert_error(daemon.client().get("/api/v1/me/quota"), 401, "unauthorized")


def test_precedence_group_plan_user_override(admin, user):
    course = make_plan(admin, {"gpu_s_per_24h": 3600, "cpu_runtime_max_s": 7200,
                               "memory_bytes": 1 << 30})
    staff = make_plan(admin, {"gpu_s_per_24h": 8 * 3600})
    group = make_group(admin, course, [user.user])

    lim = user.get("/api/v1/me/quota").json["limits"]
    assert lim["gpu_s_per_24h"] == {"value": 3600, "source": "group", "group": group,
                                    "plan": course}, lim
    assert lim["cpu_runtime_max_s"]["value"] == 7200
    assert lim["storage_bytes"]["source"] == "default"

    # the user's own plan beats the group's plan, limit by limit
    r = admin.put(f"/api/v1/users/{user.user}/quota", json={"plan": staff})
    assert_status(r, 200)
    lim = user.get("/api/v1/me/quota").json["limits"]
    assert lim["gpu_s_per_24h"] == {"value": 8 * 3600, "source": "plan", "plan": staff}, lim
    assert lim["cpu_runtime_max_s"]["source"] == "group", lim  # staff does not set it

    # an override beats both, also downwards; the plan is kept when absent
    r = admin.put(f"/api/v1/users/{user.user}/quota",
                  json={"overrides": {"gpu_s_per_24h": 600, "cpu_s_per_7d": "unlimited"}})
    assert_status(r, 200)
    j = r.json
    assert j["plan"] == staff and j["groups"] == [group], j
    assert j["overrides"] == {"gpu_s_per_24h": 600, "cpu_s_per_7d": "unlimited"}, j
    assert j["limits"]["gpu_s_per_24h"] == {"value": 600, "source": "override"}, j
    assert j["limits"]["memory_bytes"] == {"value": 1 << 30, "source": "group",
                                           "group": group, "plan": course}, j
    assert admin.get(f"/api/v1/users/{user.user}/quota").json == j
    assert user.get("/api/v1/me/quota").json["limits"] == j["limits"]

    # a change to the group's plan shows at once
    assert_status(admin.put(f"/api/v1/plans/{course}", json={"limits": {"memory_bytes": 3 << 30}}),
                  200)
    lim = user.get("/api/v1/me/quota").json["limits"]
    assert lim["memory_bytes"]["value"] == 3 << 30 and lim["cpu_runtime_max_s"]["source"] == "default"

    # clearing both goes back to the group
    r = admin.put(f"/api/v1/users/{user.user}/quota", json={"plan": None, "overrides": {}})
    assert r.json["plan"] is None and r.json["overrides"] == {}, r.json
    assert r.json["limits"]["gpu_s_per_24h"]["source"] == "default", r.json  # course dropped it

    details = [e["detail"] for e in audit_entries(admin, "quota.update", user.user)]
    assert details == ["plan=none overrides: ",
                       "overrides: cpu_s_per_7d=-1 gpu_s_per_24h=600",
                       f"plan={staff}"], details


def test_several_groups_most_generous(admin, user):
    small = make_plan(admin, {"cpus_milli": 1000})
    big = make_plan(admin, {"cpus_milli": 4000})
    make_group(admin, small, [user.user])
    g_big = make_group(admin, big, [user.user])
    lim = user.get("/api/v1/me/quota").json["limits"]
    assert lim["cpus_milli"] == {"value": 4000, "source": "group", "group": g_big,
                                 "plan": big}, lim


@pytest.mark.parametrize("body,field", [
    ({"plan": "nosuchplan"}, "nosuchplan"),
    ({"plan": 5}, "plan"),
    ({"overrides": {"bogus": 1}}, "overrides.bogus"),
    ({"overrides": {"memory_bytes": 1}}, "overrides.memory_bytes"),
    ({"overrides": {"gpu_s_per_24h": True}}, "overrides.gpu_s_per_24h"),
    ({"overrides": 3}, "overrides"),
    ({"limits": {}}, "limits"),
])
def test_user_quota_bad_input_changes_nothing(admin, user, body, field):
    plan = make_plan(admin, {"gpu_s_per_24h": 60})
    ok = {"plan": plan, "overrides": {"cpus_milli": 500}}
    assert_status(admin.put(f"/api/v1/users/{user.user}/quota", json=ok), 200)
    before = admin.get(f"/api/v1/users/{user.user}/quota").json
    n = len(audit_entries(admin, "quota.update", user.user))
    r = admin.put(f"/api/v1/users/{user.user}/quota", json=body)
    assert_error(r, 400, "bad_field", field=field)
    assert admin.get(f"/api/v1/users/{user.user}/quota").json == before
    assert len(audit_entries(admin, "quota.update", user.user)) == n


def test_user_quota_unknown_user(admin):
    assert_error(admin.get("/api/v1/users/nosuchuser/quota"), 404, "not_found")
    assert_error(admin.put("/api/v1/users/nosuchuser/quota", json={"plan": None}),
                 404, "not_found")


def test_config_defaults(daemon_factory):
    d = daemon_factory("quota-cfg", sections={
        "quota": {"gpu_per_24h": "2h", "cpu_per_7d": "40h", "gpu_per_7d": "none",
                  "gpus_per_runtime": "2", "concurrent_jobs": "5", "job_max_runtime": "6h"},
        "runtime": {"cpu_limit": "3h", "memory": "2G"}})
    a = d.admin()
    lim = a.get("/api/v1/me/quota").json["limits"]
    got = {k: v["value"] for k, v in lim.items()}
    assert got["gpu_s_per_24h"] == 7200 and got["cpu_s_per_7d"] == 40 * 3600, got
    assert got["gpu_s_per_7d"] is None and got["gpus_per_runtime"] == 2, got
    assert got["concurrent_jobs"] == 5 and got["job_max_runtime_s"] == 6 * 3600, got
    assert got["cpu_runtime_max_s"] == 3 * 3600 and got["memory_bytes"] == 2 << 30, got


def test_runtime_length_from_plan(runtime_daemon_factory):
    d = runtime_daemon_factory("quota-rt", runtime={"cpu_limit": "2h"})
    a = d.admin()
    plan = make_plan(a, {"cpu_runtime_max_s": 900})
    names = []
    for prefix in ("qg", "qo"):
        name = unique_name(prefix)
        pw = f"{STRONG}-{name}"
        assert_status(a.post("/api/v1/users", json={"name": name, "password": pw}), 201)
        c = d.client()
        c.login(name, pw)
        names.append((name, c))
    make_group(a, plan, [names[0][0]])
    # the second is in the group too, but its override wins
    assert_status(a.put(f"/api/v1/groups/{make_group(a, plan, [])}",
                        json={"add_members": [names[1][0]]}), 200)
    assert_status(a.put(f"/api/v1/users/{names[1][0]}/quota",
                        json={"overrides": {"cpu_runtime_max_s": 300}}), 200)
    for (name, c), length in zip(names, (900, 300)):
        r = c.post("/api/v1/me/runtime", json={"type": "cpu"})
        assert_status(r, 202)
        s = r.json["runtime"]
        assert parse_api_time(s["deadline"]) - parse_api_time(s["started_at"]) == length, s
        assert length - 3 <= s["seconds_left"] <= length, s
    # stopped once up: a stop while the sandbox starts waits for the start
    for _, c in names:
        wait_runtime(c, "running")
        stop_runtime(c)
