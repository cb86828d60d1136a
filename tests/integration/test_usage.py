"""The usage API over the real daemon and store: GET /api/v1/me/usage and the
admin's GET /api/v1/usage. Ledger entries with known times (spanning UTC
midnights, one still open) are written into labd's SQLite file, then every
total the API gives at and around the window's edges must equal the entries
clipped to [from, to), for each grouping, in JSON and in CSV."""

import calendar
import csv
import io
import sqlite3

import pytest

from labd_harness import STRONG, assert_error, assert_status, unique_name, user_id

DAY = 86400
D = calendar.timegm((2025, 12, 5, 0, 0, 0))  # a UTC midnight


@pytest.fixture(scope="module")
def ud(daemon_factory):
    d = daemon_factory("usage")
    users = {}
    for tag in ("ua", "ub"):
        name = unique_name(tag)
        pw = f"{STRONG}-{name}"
        assert d.admin().post("/api/v1/users", json={"name": name, "password": pw}).status == 201
        c = d.client()
        c.login(name, pw)
        users[tag] = (name, user_id(d, name), c)
    (na, ia, _), (nb, ib, _) = users["ua"], users["ub"]
    # (user id, name, kind, start, end or None, last heartbeat)
    rows = [
        (ia, na, "cpu", D - 100, D + 50, D + 48),
        (ia, na, "gpu", D + 1000, D + 1600, D + 1598),
        (ia, na, "cpu", D + 5000, None, D + 5030),  # open: billed to its heartbeat
        (ib, nb, "cpu", D - DAY, D + DAY + 10, D + DAY + 7),  # three days
    ]
    db = sqlite3.connect(d.db_file, timeout=10)
    try:
        db.executemany(
            "INSERT INTO ledger (user_id, user_name, kind, plan, start_at, end_at, billable_s,"
            " end_reason, last_heartbeat) VALUES (?, ?, ?, 'default', ?, ?, ?, ?, ?)",
            [(u, n, k, s, e, (e or hb) - s, e and "done", hb) for u, n, k, s, e, hb in rows])
        db.commit()
    finally:
        db.close()
    d.usage_users = users
    d.usage_rows = [(n, k, s, e or hb) for _, n, k, s, e, hb in rows]
    return d


def clip(s, e, lo, hi):
    return max(0, min(e, hi) - max(s, lo))


def expected(d, lo, hi, key):
    out = {}
    for name, kind, s, e in d.usage_rows:
        if key == "day":
            day = (max(s, lo) // DAY) * DAY
            while day < min(e, hi):
                sec = clip(s, e, max(lo, day), min(hi, day + DAY))
                k = calendar.timegm(__import__("time").gmtime(day)[:3] + (0, 0, 0))
                label = __import__("time").strftime("%Y-%m-%d", __import__("time").gmtime(k))
                if sec:
                    g = out.setdefault(label, {"cpu_s": 0, "gpu_s": 0})
                    g[f"{kind}_s"] += sec
                day += DAY
            continue
        sec = clip(s, e, lo, hi)
        if sec:
            g = out.setdefault(name if key == "user" else kind, {"cpu_s": 0, "gpu_s": 0})
            g[f"{kind}_s"] += sec
    for g in out.values():
        g["total_s"] = g["cpu_s"] + g["gpu_s"]
    return out


WINDOWS = [
    (D - 100, D + 50),  # exactly the first entry
    (D - 99, D + 49),  # one second inside each end
    (D - 101, D + 51),  # one second outside each end
    (D - 1, D),  # the last second before midnight
    (D, D + 1),  # the first after it
    (D + 50, D + 1000),  # between entries (ub's long one only)
    (D + 1599, D + 5001),  # the gpu entry's last second and the open one's first
    (D + 5029, D + 5031),  # the open entry's heartbeat edge
    (D - 2 * DAY, D + 2 * DAY),  # everything
]


@pytest.mark.parametrize("lo,hi", WINDOWS)
def test_totals_equal_rows_clipped(ud, lo, hi):
    admin = ud.admin()
    for key in ("user", "kind", "day"):
        r = admin.get(f"/api/v1/usage?from={lo}&to={hi}&group_by={key}")
        assert_status(r, 200)
        got = {g["key"]: {k: g[k] for k in ("cpu_s", "gpu_s", "total_s")} for g in r.json["groups"]}
        want = expected(ud, lo, hi, key)
        assert got == want, (key, lo - D, hi - D)
        tot = r.json["totals"]
        assert tot["cpu_s"] == sum(g["cpu_s"] for g in want.values())
        assert tot["gpu_s"] == sum(g["gpu_s"] for g in want.values())
        assert tot["total_s"] == tot["cpu_s"] + tot["gpu_s"]
        assert (r.json["from"], r.json["to"], r.json["group_by"]) == (lo, hi, key)
    # each user's own view: its entries clipped, and totals that add up to them
    for name, _, c in ud.usage_users.values():
        r = c.get(f"/api/v1/me/usage?from={lo}&to={hi}")
        assert_status(r, 200)
        mine = [(k, s, e) for n, k, s, e in ud.usage_rows if n == name and clip(s, e, lo, hi)]
        got = r.json["entries"]
        assert [(x["kind"], x["start_s"]) for x in got] == [(k, s) for k, s, _ in mine]
        for x, (_, s, e) in zip(got, mine):
            assert x["seconds_in_window"] == clip(s, e, lo, hi), x
        for kind in ("cpu", "gpu"):
            assert r.json["totals"][f"{kind}_s"] == sum(
                x["seconds_in_window"] for x in got if x["kind"] == kind)


def test_csv_matches_json(ud):
    admin = ud.admin()
    lo, hi = D - 2 * DAY, D + 2 * DAY
    for key in ("user", "kind", "day"):
        j = admin.get(f"/api/v1/usage?from={lo}&to={hi}&group_by={key}")
        c = admin.get(f"/api/v1/usage?from={lo}&to={hi}&group_by={key}",
                      headers={"Accept": "text/csv"})
        assert_status(c, 200)
        assert c.header("Content-Type").startswith("text/csv"), c.header("Content-Type")
        rows = list(csv.DictReader(io.StringIO(c.text)))
        assert [r[key] for r in rows] == [g["key"] for g in j.json["groups"]]
        for r, g in zip(rows, j.json["groups"]):
            assert {k: int(r[k]) for k in ("cpu_s", "gpu_s", "total_s")} == \
                {k: g[k] for k in ("cpu_s", "gpu_s", "total_s")}
    _, _, user = ud.usage_users["ua"]
    j = user.get(f"/api/v1/me/usage?from={lo}&to={hi}")
    c = user.get(f"/api/v1/me/usage?from={lo}&to={hi}", headers={"Accept": "text/csv"})
    assert_status(c, 200)
    rows = list(csv.DictReader(io.StringIO(c.text)))
    assert len(rows) == len(j.json["entries"]) == 3
    for r, e in zip(rows, j.json["entries"]):
        for k in ("id", "start_s", "billable_s", "seconds_in_window"):
            assert int(r[k]) == e[k], (k, r, e)
        assert r["kind"] == e["kind"] and r["plan"] == e["plan"]
        assert r["end_s"] == ("" if e["end_s"] is None else str(e["end_s"])), (r, e)
    assert [r["end_s"] for r in rows].count("") == 1  # the open entry


def test_csv_carries_what_a_job_bills_at_its_rate(ud):
    """A job's entries in CSV as in JSON: source, job and pool, capacity, the rate of
    a preemptible attempt and the seconds it charges (docs/jobs.md "Preemptible
    capacity"). Its own user, a window of its own (far from the others' entries)."""
    name = unique_name("uc")
    pw = f"{STRONG}-{name}"
    assert_status(ud.admin().post("/api/v1/users", json={"name": name, "password": pw}), 201)
    c = ud.client()
    c.login(name, pw)
    at = D + 300 * DAY
    db = sqlite3.connect(ud.db_file, timeout=10)
    try:
        db.executemany(
            "INSERT INTO ledger (user_id, user_name, kind, plan, start_at, end_at, billable_s,"
            " end_reason, last_heartbeat, source, job_id, pool_id, capacity, rate)"
            " VALUES (?, ?, ?, 'default', ?, ?, ?, 'done', ?, ?, ?, ?, ?, ?)",
            [(user_id(ud, name), name, "gpu", at, at + 1001, 1001, at + 1001, "job", 41, 7,
              "preemptible", 0.3),
             (user_id(ud, name), name, "cpu", at + 2000, at + 2100, 100, at + 2100, "warm",
              None, 8, "on-demand", 1.0)])
        db.commit()
    finally:
        db.close()
    q = f"/api/v1/me/usage?from={at}&to={at + DAY}"
    j = c.get(q).json["entries"]
    r = c.get(q, headers={"Accept": "text/csv"})
    assert_status(r, 200)
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert [(x["source"], x["job_id"], x["pool_id"], x["capacity"], x["rate"], x["charged_s"])
            for x in rows] == [("job", "41", "7", "preemptible", "0.3", "300"),
                               ("warm", "", "8", "on-demand", "1", "100")], r.text
    for x, e in zip(rows, j):
        assert float(x["rate"]) == e["rate"] and int(x["charged_s"]) == e["charged_s"], (x, e)


@pytest.mark.parametrize("query,field", [
    ("from=abc", "from"),
    ("from=-5", "from"),
    ("to=1.5", "to"),
    ("to=", "to"),
    ("from=100&to=100", "from"),
    ("from=200&to=100", "from"),
    (f"group_by=day&from=0&to={500 * DAY}", "from"),
    ("group_by=month", "group_by"),
])
def test_bad_parameters_name_the_field(ud, query, field):
    assert_error(ud.admin().get(f"/api/v1/usage?{query}"), 400, "bad_field", field)
    if "group_by" not in query:  # /me/usage has no grouping
        _, _, c = ud.usage_users["ua"]
        assert_error(c.get(f"/api/v1/me/usage?{query}"), 400, "bad_field", field)


@pytest.mark.parametrize("lo,hi", WINDOWS)
def test_group_by_group_counts_a_member_in_each_of_its_groups(ud, lo, hi):
    """ua is in two groups and counts in both; ub is in none: key "(none)". The
    totals are the ledger's, each entry once."""
    admin = ud.admin()
    (na, _, _), (nb, _, _) = ud.usage_users["ua"], ud.usage_users["ub"]
    if not hasattr(ud, "usage_groups"):
        ud.usage_groups = [unique_name("ug") for _ in range(2)]
        for g in ud.usage_groups:
            assert_status(admin.post("/api/v1/groups", json={"name": g, "members": [na]}), 201)
    per_user = expected(ud, lo, hi, "user")
    want = {g: per_user[na] for g in ud.usage_groups if na in per_user}
    if nb in per_user:
        want["(none)"] = per_user[nb]
    r = admin.get(f"/api/v1/usage?from={lo}&to={hi}&group_by=group")
    assert_status(r, 200)
    got = {g["key"]: {k: g[k] for k in ("cpu_s", "gpu_s", "total_s")} for g in r.json["groups"]}
    assert got == want, (lo - D, hi - D)
    assert r.json["group_by"] == "group"
    tot = r.json["totals"]
    assert tot["cpu_s"] == sum(g["cpu_s"] for g in per_user.values()), tot
    assert tot["gpu_s"] == sum(g["gpu_s"] for g in per_user.values()), tot
    c = admin.get(f"/api/v1/usage?from={lo}&to={hi}&group_by=group",
                  headers={"Accept": "text/csv"})
    assert_status(c, 200)
    rows = list(csv.DictReader(io.StringIO(c.text)))
    assert {row["group"]: int(row["total_s"]) for row in rows} == \
        {k: v["total_s"] for k, v in want.items()}


def test_usage_of_all_needs_an_admin(ud):
    _, _, c = ud.usage_users["ua"]
    assert_error(c.get("/api/v1/usage"), 403, "forbidden")
    assert_error(ud.client().get("/api/v1/me/usage"), 401)
    r = c.get("/api/v1/me/usage")  # defaults: the last 7 days, nothing in it
    assert_status(r, 200)
    assert r.json["to"] - r.json["from"] == 7 * DAY and r.json["entries"] == []
