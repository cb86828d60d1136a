"""Secrets are stored only as hashes (read the SQLite files directly, as root)."""

import glob
import os
import sqlite3

from labd_harness import assert_status


def all_values(state_dir):
    dbs = [p for p in glob.glob(os.path.join(state_dir, "**", "*"), recursive=True)
           if os.path.isfile(p) and not p.endswith(("-wal", "-shm", "-journal"))]
    found = []
    for p in dbs:
        with open(p, "rb") as fh:
            if fh.read(16) != b"SQLite format 3\x00":
                continue
        con = sqlite3.connect(f"file:{p}?mode=ro", uri=True, timeout=10)
        try:
            tables = [r[0] for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")]
            for t in tables:
                for row in con.execute(f'SELECT * FROM "{t}"'):
                    for v in row:
                        if isinstance(v, bytes):
                            found.append(v.decode("latin-1"))
                        elif v is not None:
                            found.append(str(v))
        finally:
            con.close()
    return dbs, found


def test_secrets_not_stored_in_clear(daemon, user):
    tok = user.post("/api/v1/me/tokens", json={"name": "stored"})
    assert_status(tok, 201)
    secret = tok.json["token"]
    cookie = user.session
    assert cookie
    dbs, values = all_values(daemon.state_dir)
    assert values, f"no SQLite database with rows under {daemon.state_dir}: {dbs}"
    blob = "\n".join(values)
    assert user.user in blob, "the user is not in the database?"
    assert cookie not in blob, "session cookie stored in clear"
    assert secret not in blob, "API token stored in clear"
    assert secret[len(tok.json["prefix"]):] not in blob, "API token secret part stored in clear"
    assert user.password not in blob, "password stored in clear"
    assert daemon.admin_password not in blob, "admin password stored in clear"
