/* grants.c - runtime grant rows; see grants.h. */
#include "store/grants.h"

#include <string.h>

#include "labd/crypto.h"
#include "store/db.h"

/* A session's last_seen is rewritten at most this often by runtime traffic. */
#define TOUCH_INTERVAL_S 30

int grants_issue(struct db *db, int64_t session_id, int64_t target_user_id, int64_t now,
		 int64_t ttl_s, char code[GRANT_SECRET_LEN + 1])
{
	char hash[65];
	int rc;

	if (crypto_random_token(code, GRANT_SECRET_LEN + 1, 32) < 0)
		return -1;
	crypto_sha256_hex(code, hash);
	db_lock(db);
	db_exec(db, "DELETE FROM runtime_grants WHERE cookie_hash IS NULL AND code_expires_at <= ?",
		"i", now);
	rc = db_exec(db,
		     "INSERT INTO runtime_grants (session_id, target_user_id, code_hash,"
		     " code_expires_at, created_at) VALUES (?, ?, ?, ?, ?)",
		     "iitii", session_id, target_user_id, hash, now + ttl_s, now);
	db_unlock(db);
	return rc == 1 ? 0 : -1;
}

struct grant_row {
	int64_t id, session_id, user_id, expires_at, last_seen, target_user_id;
};

static int grant_from_row(sqlite3_stmt *st, void *ctx)
{
	struct grant_row *g = ctx;

	g->id = sqlite3_column_int64(st, 0);
	g->session_id = sqlite3_column_int64(st, 1);
	g->user_id = sqlite3_column_int64(st, 2);
	g->expires_at = sqlite3_column_int64(st, 3);
	g->last_seen = sqlite3_column_int64(st, 4);
	g->target_user_id = sqlite3_column_int64(st, 5);
	return 0;
}

int grants_redeem(struct db *db, const char *code, int64_t target_user_id, int64_t now,
		  char cookie[GRANT_SECRET_LEN + 1], int64_t *viewer_id)
{
	struct grant_row g = {0};
	char code_hash[65], cookie_hash[65];
	int rc;

	if (strlen(code) != GRANT_SECRET_LEN || crypto_random_token(cookie, GRANT_SECRET_LEN + 1, 32) < 0)
		return 0;
	crypto_sha256_hex(code, code_hash);
	crypto_sha256_hex(cookie, cookie_hash);
	db_lock(db);
	/* The code is cleared whatever the outcome below: a code shown to the
	 * wrong origin, or too late, is spent all the same. */
	rc = db_one(db,
		    "SELECT g.id, g.session_id, s.user_id, g.code_expires_at, 0, g.target_user_id"
		    " FROM runtime_grants g JOIN sessions s ON s.id = g.session_id"
		    " WHERE g.code_hash = ?",
		    "t", grant_from_row, &g, code_hash);
	if (rc == 1 && (g.target_user_id != target_user_id || now >= g.expires_at)) {
		db_exec(db, "DELETE FROM runtime_grants WHERE id = ?", "i", g.id);
		rc = 0;
	}
	if (rc == 1) {
		db_exec(db,
			"DELETE FROM runtime_grants WHERE session_id = ? AND target_user_id = ?"
			" AND id <> ? AND cookie_hash IS NOT NULL",
			"iii", g.session_id, target_user_id, g.id);
		if (db_exec(db,
			    "UPDATE runtime_grants SET code_hash = NULL, cookie_hash = ? WHERE id = ?",
			    "ti", cookie_hash, g.id) != 1)
			rc = -1;
		db_changed(db, DB_IDENTITIES);
	}
	db_unlock(db);
	*viewer_id = g.user_id;
	return rc < 0 ? -1 : rc;
}

int grants_lookup(struct db *db, const char *cookie, int64_t target_user_id,
		  const struct session_limits *lim, int64_t now, int64_t *viewer_id,
		  int64_t *session_id)
{
	struct grant_row g = {0};
	char hash[65];
	int rc;

	if (!sessions_secret_valid(cookie))
		return 0;
	crypto_sha256_hex(cookie, hash);
	db_lock(db);
	rc = db_one(db,
		    "SELECT g.id, g.session_id, s.user_id, s.expires_at, s.last_seen,"
		    " g.target_user_id FROM runtime_grants g JOIN sessions s ON s.id = g.session_id"
		    " WHERE g.cookie_hash = ?",
		    "t", grant_from_row, &g, hash);
	/* An ended session is left for sessions_lookup or the sweep to delete. */
	if (rc == 1 && (g.target_user_id != target_user_id || now >= g.expires_at ||
			now - g.last_seen >= lim->idle_s))
		rc = 0;
	if (rc == 1 && now - g.last_seen >= TOUCH_INTERVAL_S)
		db_exec(db, "UPDATE sessions SET last_seen = ? WHERE id = ?", "ii", now,
			g.session_id);
	db_unlock(db);
	*viewer_id = g.user_id;
	*session_id = g.session_id;
	return rc < 0 ? -1 : rc;
}
