"""Plans and groups (admin): every endpoint, its errors (nothing changed after
a refused request) and the audit entry of every change."""

import pytest

from labd_harness import assert_error, assert_status, audit_entries, unique_name

PLAN_ENDPOINTS = [
    ("GET", "/api/v1/plans", None),
    ("POST", "/api/v1/plans", {"name": "sneakyplan"}),
    ("GET", "/api/v1/plans/{p}", None),
    ("PUT", "/api/v1/plans/{p}", {"limits": {}}),
    ("DELETE", "/api/v1/plans/{p}", None),
    ("GET", "/api/v1/groups", None),
    ("POST", "/api/v1/groups", {"name": "sneakygroup"}),
    ("GET", "/api/v1/groups/{g}", None),
    ("PUT", "/api/v1/groups/{g}", {"plan": None}),
    ("DELETE", "/api/v1/groups/{g}", None),
    ("GET", "/api/v1/users/{u}/quota", None),
    ("PUT", "/api/v1/users/{u}/quota", {"plan": None}),
]


@pytest.fixture
def plan(admin):
    name = unique_name("pl")
    r = admin.post("/api/v1/plans", json={"name": name, "limits": {"gpu_s_per_24h": 7200}})
    assert_status(r, 201)
    return name


@pytest.fixture
def group(admin, plan):
    name = unique_name("gr")
    assert_status(admin.post("/api/v1/groups", json={"name": name, "plan": plan}), 201)
    return name


@pytest.mark.parametrize("method,path,body", PLAN_ENDPOINTS)
def test_admin_only(daemon, user, admin, plan, group, method, path, body):
    kw = {"json": body} if body is not None else {}
    p = path.format(p=plan, g=group, u=user.user)
    assert_error(user.request(method, p, **kw), 403, "forbidden")
    assert_error(daemon.client().request(method, p, **kw), 401, "unauthorized")
    assert_status(admin.get(f"/api/v1/plans/{plan}"), 200)
    assert_status(admin.get(f"/api/v1/groups/{group}"), 200)
    assert_error(admin.get("/api/v1/plans/sneakyplan"), 404, "not_found")
    assert_error(admin.get("/api/v1/groups/sneakygroup"), 404, "not_found")


def test_plan_lifecycle_and_audit(admin):
    name = unique_name("pl")
    limits = {"cpu_runtime_max_s": 3600, "gpu_s_per_7d": "unlimited", "memory_bytes": 2 << 30}
    r = admin.post("/api/v1/plans", json={"name": name, "limits": limits})
    assert_status(r, 201)
    p = r.json["plan"]
    assert p["name"] == name and p["limits"] == limits, p
    assert set(p) == {"name", "limits", "image", "preemptible_rate", "gpu", "created_at",
                      "updated_at"}, p
    assert p["gpu"] == "whole", p  # the default kind of GPU device (docs/gpu.md)
    assert p["image"] == "", p  # the host's root (test_images.py sets one)
    assert p["preemptible_rate"] == 0.3, p  # the default (docs/jobs.md "Preemptible capacity")
    assert admin.get(f"/api/v1/plans/{name}").json == {"plan": p}
    assert p in admin.get("/api/v1/plans").json["plans"]

    # PUT replaces the whole set; null means "not set" (inherited)
    r = admin.put(f"/api/v1/plans/{name}", json={"limits": {"gpu_s_per_24h": 0,
                                                           "memory_bytes": None}})
    assert_status(r, 200)
    assert r.json["plan"]["limits"] == {"gpu_s_per_24h": 0}, r.json
    assert r.json["plan"]["preemptible_rate"] == 0.3, r.json  # kept when absent
    r = admin.put(f"/api/v1/plans/{name}", json={"limits": {"gpu_s_per_24h": 0},
                                                 "preemptible_rate": 0.7})
    assert_status(r, 200)
    assert r.json["plan"]["preemptible_rate"] == 0.7, r.json
    assert_error(admin.put(f"/api/v1/plans/{name}", json={"limits": {}, "preemptible_rate": -1}),
                 400, "bad_field")
    assert admin.get(f"/api/v1/plans/{name}").json["plan"]["preemptible_rate"] == 0.7
    assert admin.get(f"/api/v1/plans/{name}").json["plan"]["limits"] == {"gpu_s_per_24h": 0}

    assert_status(admin.delete(f"/api/v1/plans/{name}"), 204)
    assert_error(admin.get(f"/api/v1/plans/{name}"), 404, "not_found")
    assert_error(admin.delete(f"/api/v1/plans/{name}"), 404, "not_found")

    actions = [e["action"] for e in audit_entries(admin, target=name)]
    assert actions[:4] == ["plan.delete", "plan.update", "plan.update", "plan.create"], actions
    create = audit_entries(admin, "plan.create", name)[0]
    assert create["actor"] == "admin", create
    assert "cpu_runtime_max_s=3600" in create["detail"], create


@pytest.mark.parametrize("body,field", [
    ({"limits": {}}, "name"),
    ({"name": "Bad Name"}, "name"),
    ({"name": 7}, "name"),
    ({"name": "ok", "limits": []}, "limits"),
    ({"name": "ok", "limits": {"gpu_hours": 1}}, "limits.gpu_hours"),
    ({"name": "ok", "limits": {"cpus_milli": 1}}, "limits.cpus_milli"),
    ({"name": "ok", "limits": {"gpu_s_per_24h": -1}}, "limits.gpu_s_per_24h"),
    ({"name": "ok", "limits": {"gpu_s_per_24h": "lots"}}, "limits.gpu_s_per_24h"),
    ({"name": "ok", "limits": {"gpu_s_per_24h": 1.5}}, "limits.gpu_s_per_24h"),
    ({"name": "ok", "extra": 1}, "extra"),
    ({"name": "ok", "gpu": "mig"}, "gpu"),
    ({"name": "ok", "gpu": "1g.18gb+me"}, "gpu"),
    ({"name": "ok", "gpu": 1}, "gpu"),
])
def test_plan_create_bad_input(admin, body, field):
    before = admin.get("/api/v1/plans").json
    assert_error(admin.post("/api/v1/plans", json=body), 400, "bad_field", field=field)
    assert admin.get("/api/v1/plans").json == before


def test_plan_conflicts_and_bad_put(admin, plan):
    assert_error(admin.post("/api/v1/plans", json={"name": plan}), 409, "conflict", field=plan)
    before = admin.get(f"/api/v1/plans/{plan}").json
    assert_error(admin.put(f"/api/v1/plans/{plan}", json={}), 400, "bad_field", field="limits")
    assert_error(admin.put(f"/api/v1/plans/{plan}", json={"limits": {"storage_bytes": 5}}),
                 400, "bad_field", field="limits.storage_bytes")
    assert admin.get(f"/api/v1/plans/{plan}").json == before
    assert_error(admin.put("/api/v1/plans/nosuchplan", json={"limits": {}}), 404, "not_found")


def test_plan_gpu_kind(admin, plan):
    """A plan's kind of GPU device: set on create and on a PUT, kept by a PUT
    without it, refused (nothing changed) when it is no kind, audited."""
    name = unique_name("pl")
    r = admin.post("/api/v1/plans", json={"name": name, "gpu": "1g.18gb"})
    assert_status(r, 201)
    assert r.json["plan"]["gpu"] == "1g.18gb", r.json
    r = admin.put(f"/api/v1/plans/{name}", json={"limits": {}})
    assert r.json["plan"]["gpu"] == "1g.18gb", r.json  # kept when absent
    r = admin.put(f"/api/v1/plans/{name}", json={"limits": {}, "gpu": "share"})
    assert r.json["plan"]["gpu"] == "share", r.json
    before = admin.get(f"/api/v1/plans/{name}").json
    e = assert_error(admin.put(f"/api/v1/plans/{name}", json={"limits": {"gpu_s_per_24h": 5},
                                                              "gpu": "18gb"}),
                     400, "bad_field", field="gpu")
    assert "1g.18gb" in e["message"], e
    assert admin.get(f"/api/v1/plans/{name}").json == before
    detail = audit_entries(admin, "plan.update", name)[0]["detail"]
    assert "gpu=share" in detail, detail
    assert_status(admin.delete(f"/api/v1/plans/{name}"), 204)


def test_plan_in_use_is_not_deleted(admin, new_user, plan, group):
    name, _ = new_user()
    assert_status(admin.put(f"/api/v1/users/{name}/quota", json={"plan": plan}), 200)
    e = assert_error(admin.delete(f"/api/v1/plans/{plan}"), 409, "plan_in_use")
    assert f"group {group}" in e["message"] and f"user {name}" in e["message"], e
    assert_status(admin.get(f"/api/v1/plans/{plan}"), 200)
    assert not audit_entries(admin, "plan.delete", plan)
    # freed by both, it goes
    assert_status(admin.put(f"/api/v1/groups/{group}", json={"plan": None}), 200)
    assert_status(admin.put(f"/api/v1/users/{name}/quota", json={"plan": None}), 200)
    assert_status(admin.delete(f"/api/v1/plans/{plan}"), 204)


def test_group_lifecycle_members_and_audit(admin, new_user, plan):
    a, _ = new_user(prefix="ga")
    b, _ = new_user(prefix="gb")
    name = unique_name("gr")
    r = admin.post("/api/v1/groups", json={"name": name, "plan": plan, "members": [b, a]})
    assert_status(r, 201)
    g = r.json["group"]
    assert set(g) == {"name", "plan", "members", "created_at", "expires_at", "ended"}, g
    assert g["plan"] == plan and g["members"] == sorted([a, b]), g
    assert g in admin.get("/api/v1/groups").json["groups"]

    r = admin.put(f"/api/v1/groups/{name}", json={"remove_members": [a], "plan": None})
    assert_status(r, 200)
    assert r.json["group"]["members"] == [b] and r.json["group"]["plan"] is None, r.json
    r = admin.put(f"/api/v1/groups/{name}", json={"add_members": [a, a]})
    assert r.json["group"]["members"] == sorted([a, b]), r.json
    assert name in admin.get(f"/api/v1/users/{a}/quota").json["groups"]

    # a deleted user leaves the group
    assert_status(admin.delete(f"/api/v1/users/{b}"), 204)
    assert admin.get(f"/api/v1/groups/{name}").json["group"]["members"] == [a]

    assert_status(admin.delete(f"/api/v1/groups/{name}"), 204)
    assert_error(admin.get(f"/api/v1/groups/{name}"), 404, "not_found")
    assert_error(admin.delete(f"/api/v1/groups/{name}"), 404, "not_found")
    assert admin.get(f"/api/v1/users/{a}/quota").json["groups"] == []
    actions = [e["action"] for e in audit_entries(admin, target=name)]
    assert actions == ["group.delete", "group.update", "group.update", "group.create"], actions
    assert "plan=none" in audit_entries(admin, "group.update", name)[1]["detail"]


@pytest.mark.parametrize("body,field", [
    ({"plan": "x"}, "name"),
    ({"name": "Bad!"}, "name"),
    ({"name": "ok", "plan": 3}, "plan"),
    ({"name": "ok", "plan": "nosuchplan"}, "nosuchplan"),
    ({"name": "ok", "members": "alice"}, "members"),
    ({"name": "ok", "members": ["Not A Name"]}, "members"),
    ({"name": "ok", "members": ["nosuchuser"]}, "nosuchuser"),
    ({"name": "ok", "add_members": []}, "add_members"),
])
def test_group_create_bad_input(admin, body, field):
    before = admin.get("/api/v1/groups").json
    assert_error(admin.post("/api/v1/groups", json=body), 400, "bad_field", field=field)
    assert admin.get("/api/v1/groups").json == before


def test_group_bad_change_changes_nothing(admin, new_user, group, plan):
    a, _ = new_user()
    before = admin.get(f"/api/v1/groups/{group}").json
    # the valid half (plan, the first member) is not applied either
    r = admin.put(f"/api/v1/groups/{group}",
                  json={"plan": None, "add_members": [a, "nosuchuser"]})
    assert_error(r, 400, "bad_field", field="nosuchuser")
    assert_error(admin.put(f"/api/v1/groups/{group}", json={"plan": "nosuchplan"}),
                 400, "bad_field", field="plan")
    assert_error(admin.put(f"/api/v1/groups/{group}", json={"members": [a]}),
                 400, "bad_field", field="members")
    assert admin.get(f"/api/v1/groups/{group}").json == before
    assert_error(admin.post("/api/v1/groups", json={"name": group}), 409, "conflict")
    assert_error(admin.put("/api/v1/groups/nosuchgroup", json={}), 404, "not_found")
