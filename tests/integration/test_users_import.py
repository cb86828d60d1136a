"""CSV import of users (POST /api/v1/users/import, docs/api.md): a dry run
names every bad row and its column; an import with any bad row creates
nobody; a good one creates every user with their e-mail, groups, plan and
password, or none (single sign-on only) in one transaction."""

import sqlite3

import pytest

from labd_harness import assert_error, assert_status, unique_name

PATH = "/api/v1/users/import"


@pytest.fixture(scope="module")
def course(daemon):
    """A plan and a group for the rows to name."""
    admin = daemon.admin()
    plan, group = unique_name("p"), unique_name("g")
    assert_status(admin.post("/api/v1/plans", json={"name": plan}), 201)
    assert_status(admin.post("/api/v1/groups", json={"name": group}), 201)
    return plan, group


def exists(admin, name):
    return admin.get(f"/api/v1/users/{name}").status == 200


def test_dry_run_names_every_bad_row_and_an_import_creates_nobody(daemon, admin, course,
                                                                   new_user):
    plan, group = course
    taken, _ = new_user()
    good, sso = unique_name("s"), f"2024{unique_name('')}"[:32]
    csv = "\n".join([
        "name,email,groups,plan,password",
        f"{good},{good}@uni.example,{group},{plan},correct-horse-battery",
        f"{sso},,{group},,",                                  # SSO only: no password
        "-bad,,,,",                                           # row 4: name
        f"{unique_name('e')},not-an-address,,,",              # row 5: email
        f"{unique_name('n')},,{group};nosuchgroup,,",         # row 6: groups
        f"{unique_name('n')},,,nosuchplan,",                  # row 7: plan
        f"{good},,,,",                                        # row 8: name twice
        f"{taken},,,,",                                       # row 9: name taken
        f"{unique_name('n')},,,,short",                       # row 10: password
    ]) + "\n"
    r = admin.post(PATH, json={"csv": csv, "dry_run": True})
    assert_status(r, 200)
    j = r.json
    assert j["dry_run"] is True and j["created"] == 0 and j["bad"] == 7, j
    rows = {row["row"]: row for row in j["rows"]}
    assert rows[2]["ok"] and rows[3]["ok"], j
    want = {4: "name", 5: "email", 6: "groups", 7: "plan", 8: "name", 9: "name", 10: "password"}
    for n, column in want.items():
        assert rows[n]["ok"] is False and rows[n]["column"] == column, rows[n]
    assert "nosuchgroup" in rows[6]["error"] and "nosuchplan" in rows[7]["error"], j
    assert "row 2" in rows[8]["error"] and "already exists" in rows[9]["error"], j
    assert not exists(admin, good) and not exists(admin, sso)
    # the same without dry_run: refused whole, nothing created
    r = admin.post(PATH, json={"csv": csv})
    assert_status(r, 422)
    assert r.json["error"]["code"] == "bad_rows" and r.json["bad"] == 7, r.json
    assert not exists(admin, good) and not exists(admin, sso)


def test_import_creates_every_user_in_one_go(daemon, admin, course):
    plan, group = course
    a, b = unique_name("s"), f"j.doe_{unique_name('')}"[:32]
    csv = (f"password, name ,groups,plan,email\r\n"
           f"\"pw, with \"\"quotes\"\"\",{a},{group},{plan},{a}@uni.example\r\n"
           f",{b},{group},,\r\n")
    r = admin.post(PATH + "?dry_run=true", body=csv, content_type="text/csv")
    assert_status(r, 200)
    assert r.json["bad"] == 0 and not exists(admin, a), r.json
    r = admin.post(PATH, body=csv, content_type="text/csv")
    assert_status(r, 201)
    assert r.json["created"] == 2 and [x["row"] for x in r.json["rows"]] == [2, 3], r.json
    # the password from the CSV works; the SSO-only account has none to guess
    daemon.client().login(a, 'pw, with "quotes"')
    assert daemon.client().login(b, "", expect=None).status in (400, 401)
    members = admin.get(f"/api/v1/groups/{group}").json["group"]["members"]
    assert a in members and b in members, members
    assert admin.get(f"/api/v1/users/{a}/quota").json["plan"] == plan
    db = sqlite3.connect(f"file:{daemon.db_file}?mode=ro", uri=True)
    try:
        emails = dict(db.execute("SELECT name, email FROM users WHERE name IN (?, ?)", (a, b)))
    finally:
        db.close()
    assert emails == {a: f"{a}@uni.example", b: ""}, emails
    # and the API shows it
    assert admin.get(f"/api/v1/users/{a}").json["user"]["email"] == f"{a}@uni.example"
    listed = {u["name"]: u["email"] for u in admin.get("/api/v1/users").json["users"]}
    assert listed[a] == f"{a}@uni.example" and listed[b] == "", listed
    # imported again: every row is now taken
    r = admin.post(PATH, body=csv, content_type="text/csv")
    assert_status(r, 422)
    assert all(x["column"] == "name" for x in r.json["rows"]), r.json


def test_bad_csv_and_who_may_import(daemon, admin, user):
    for csv, want in (("name\nok1\n\"open\n", "row 3"),
                      ("nick\nx\n", "row 1"),
                      ("name\n", "row 2"),
                      ("name,email\na\n", "row 2")):
        r = admin.post(PATH, json={"csv": csv, "dry_run": True})
        assert_error(r, 400, "bad_csv")
        assert r.json["error"]["message"].startswith(want), (csv, r.json)
    assert_error(admin.post(PATH, body="name\nx\n", content_type="text/plain"), 415)
    # admins only, and a cookie session needs its CSRF token as everywhere
    assert_error(user.post(PATH, json={"csv": "name\nx\n"}), 403)
    assert_error(admin.post(PATH, json={"csv": "name\nx\n"}, csrf=None), 403, "csrf_failed")


def test_at_most_100_passwords_in_one_import(daemon, admin):
    rows = [f"{unique_name('h')},long-enough-password" for _ in range(101)]
    r = admin.post(PATH, json={"csv": "name,password\n" + "\n".join(rows), "dry_run": True})
    assert_status(r, 200)
    bad = [x for x in r.json["rows"] if not x["ok"]]
    assert [(x["row"], x["column"]) for x in bad] == [(102, "password")], bad
