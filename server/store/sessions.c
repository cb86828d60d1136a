/* sessions.c - cookie session rows; see sessions.h. */
#include "store/sessions.h"

#include <stdio.h>
#include <string.h>

#include "labd/crypto.h"
#include "store/db.h"

/* last_seen is only rewritten when older than this, so a busy page does not
 * turn every request into a database write. */
#define TOUCH_INTERVAL_S 30

bool sessions_secret_valid(const char *value)
{
	if (strlen(value) != SESSION_SECRET_LEN)
		return false;
	for (const char *p = value; *p; p++) {
		char c = *p;
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_'))
			return false;
	}
	return true;
}

int sessions_create(struct db *db, int64_t user_id, const char *address,
		    const struct session_limits *lim, int64_t now,
		    char secret[SESSION_SECRET_LEN + 1], struct session *out)
{
	char hash[65];
	int rc;

	memset(out, 0, sizeof(*out));
	if (crypto_random_token(secret, SESSION_SECRET_LEN + 1, 32) < 0 ||
	    crypto_random_token(out->csrf_token, sizeof(out->csrf_token), 32) < 0)
		return -1;
	crypto_sha256_hex(secret, hash);
	db_lock(db);
	rc = db_exec(db,
		     "INSERT INTO sessions (user_id, token_hash, csrf_token, address, created_at,"
		     " last_seen, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
		     "itttiii", user_id, hash, out->csrf_token, address, now, now,
		     now + lim->lifetime_s);
	out->id = db_last_id(db);
	db_unlock(db);
	out->user_id = user_id;
	out->last_seen = now;
	out->expires_at = now + lim->lifetime_s;
	return rc == 1 ? 0 : -1;
}

/* The columns sessions_lookup reads: the session, and when it lapses. */
struct session_row {
	struct session *out;
	int64_t last_seen, expires_at;
};

static int session_from_row(sqlite3_stmt *st, void *arg)
{
	struct session_row *r = arg;

	r->out->id = sqlite3_column_int64(st, 0);
	r->out->user_id = sqlite3_column_int64(st, 1);
	snprintf(r->out->csrf_token, sizeof(r->out->csrf_token), "%s",
		 (const char *)sqlite3_column_text(st, 2));
	r->last_seen = sqlite3_column_int64(st, 3);
	r->expires_at = sqlite3_column_int64(st, 4);
	return 0;
}

int sessions_lookup(struct db *db, const char *secret, const struct session_limits *lim,
		    int64_t now, struct session *out)
{
	struct session_row row = {.out = out};
	char hash[65];
	int rc;

	if (!sessions_secret_valid(secret))
		return 0;
	crypto_sha256_hex(secret, hash);
	db_lock(db);
	rc = db_one(db,
		    "SELECT id, user_id, csrf_token, last_seen, expires_at FROM sessions"
		    " WHERE token_hash = ?",
		    "t", session_from_row, &row, hash);
	if (rc != 1) {
		db_unlock(db);
		return rc < 0 ? -1 : 0;
	}
	if (now >= row.expires_at || now - row.last_seen >= lim->idle_s) {
		db_exec(db, "DELETE FROM sessions WHERE id = ?", "i", out->id);
		db_changed(db, DB_IDENTITIES);
		rc = 0;
	} else {
		if (now - row.last_seen >= TOUCH_INTERVAL_S &&
		    db_exec(db, "UPDATE sessions SET last_seen = ? WHERE id = ?", "ii", now,
			    out->id) == 1)
			row.last_seen = now;
		out->last_seen = row.last_seen;
		out->expires_at = row.expires_at;
		rc = 1;
	}
	db_unlock(db);
	return rc;
}

int sessions_delete(struct db *db, int64_t session_id)
{
	db_lock(db);
	int rc = db_exec(db, "DELETE FROM sessions WHERE id = ?", "i", session_id);
	db_changed(db, DB_IDENTITIES);
	db_unlock(db);
	return rc < 0 ? -1 : 0;
}

int sessions_purge_expired(struct db *db, const struct session_limits *lim, int64_t now)
{
	db_lock(db);
	int rc = db_exec(db, "DELETE FROM sessions WHERE expires_at <= ? OR last_seen <= ?", "ii",
			 now, now - lim->idle_s);
	if (rc != 0)
		db_changed(db, DB_IDENTITIES);
	db_unlock(db);
	return rc;
}

static int int64_from_row(sqlite3_stmt *st, void *ctx)
{
	*(int64_t *)ctx = sqlite3_column_int64(st, 0);
	return 0;
}

int sessions_created_at(struct db *db, int64_t session_id, int64_t *created_at)
{
	int rc = db_one(db, "SELECT created_at FROM sessions WHERE id = ?", "i", int64_from_row,
			created_at, session_id);
	return rc < 0 ? -1 : rc;
}
