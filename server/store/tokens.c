/* tokens.c - API token rows; see tokens.h. */
#include "store/tokens.h"

#include <stdio.h>
#include <string.h>

#include "labd/crypto.h"
#include "store/db.h"

bool tokens_name_valid(const char *name)
{
	size_t chars = 0;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		if (*p < 0x20 || *p == 0x7f)
			return false;
		if ((*p & 0xc0) != 0x80) /* count UTF-8 lead bytes, not continuations */
			chars++;
	}
	return chars >= 1 && chars <= TOKEN_NAME_MAX;
}

static void token_from_row(sqlite3_stmt *st, struct token_info *t)
{
	memset(t, 0, sizeof(*t));
	t->id = sqlite3_column_int64(st, 0);
	t->user_id = sqlite3_column_int64(st, 1);
	snprintf(t->name, sizeof(t->name), "%s", (const char *)sqlite3_column_text(st, 2));
	snprintf(t->prefix, sizeof(t->prefix), "%s", (const char *)sqlite3_column_text(st, 3));
	t->created_at = sqlite3_column_int64(st, 4);
	t->last_used_at = sqlite3_column_int64(st, 5);
}

#define TOKEN_COLUMNS "id, user_id, name, prefix, created_at, coalesce(last_used_at, 0)"

int tokens_create(struct db *db, int64_t user_id, const char *name, int64_t now,
		  char token[TOKEN_LEN + 1], struct token_info *out)
{
	char secret[TOKEN_SECRET_LEN + 1], hash[65];
	int rc;

	if (crypto_random_token(secret, sizeof(secret), 32) < 0)
		return -1;
	snprintf(token, TOKEN_LEN + 1, TOKEN_PREFIX "%s", secret);
	crypto_sha256_hex(token, hash);
	memset(out, 0, sizeof(*out));
	snprintf(out->prefix, sizeof(out->prefix), "%.*s", TOKEN_SHOWN_PREFIX_LEN, token);
	snprintf(out->name, sizeof(out->name), "%s", name);
	db_lock(db);
	rc = db_exec(db,
		     "INSERT INTO api_tokens (user_id, name, prefix, token_hash, created_at)"
		     " VALUES (?, ?, ?, ?, ?)",
		     "ittti", user_id, name, out->prefix, hash, now);
	out->id = db_last_id(db);
	db_unlock(db);
	out->user_id = user_id;
	out->created_at = now;
	return rc == 1 ? 0 : rc;
}

int tokens_lookup(struct db *db, const char *token, int64_t now, struct token_info *out)
{
	sqlite3_stmt *st;
	char hash[65];
	int rc;

	if (strlen(token) != TOKEN_LEN || strncmp(token, TOKEN_PREFIX, strlen(TOKEN_PREFIX)))
		return 0;
	crypto_sha256_hex(token, hash);
	db_lock(db);
	if (db_prepare(db, &st, "SELECT " TOKEN_COLUMNS " FROM api_tokens WHERE token_hash = ?",
		       "t", hash) < 0) {
		db_unlock(db);
		return -1;
	}
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		token_from_row(st, out);
	db_done(db, st);
	/* Written at most once a minute per token, like session last_seen. */
	if (rc == SQLITE_ROW && now - out->last_used_at >= 60 &&
	    db_exec(db, "UPDATE api_tokens SET last_used_at = ? WHERE id = ?", "ii", now,
		    out->id) == 1)
		out->last_used_at = now;
	db_unlock(db);
	return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

int tokens_each(struct db *db, int64_t user_id, int (*fn)(const struct token_info *t, void *ctx),
		void *ctx)
{
	sqlite3_stmt *st;
	struct token_info t;
	int rc;

	db_lock(db);
	if (db_prepare(db, &st,
		       "SELECT " TOKEN_COLUMNS " FROM api_tokens WHERE user_id = ? ORDER BY id", "i",
		       user_id) < 0) {
		db_unlock(db);
		return -1;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		token_from_row(st, &t);
		if (fn(&t, ctx))
			break;
	}
	db_done(db, st);
	db_unlock(db);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

int tokens_delete(struct db *db, int64_t user_id, int64_t token_id)
{
	db_lock(db);
	int rc = db_exec(db, "DELETE FROM api_tokens WHERE id = ? AND user_id = ?", "ii", token_id,
			 user_id);
	db_changed(db, DB_IDENTITIES);
	db_unlock(db);
	return rc < 0 ? -1 : rc > 0;
}
