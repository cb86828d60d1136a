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

/* A db_row_fn filling the struct token_info at out. */
static int token_from_row(sqlite3_stmt *st, void *out)
{
	struct token_info *t = out;

	memset(t, 0, sizeof(*t));
	t->id = sqlite3_column_int64(st, 0);
	t->user_id = sqlite3_column_int64(st, 1);
	snprintf(t->name, sizeof(t->name), "%s", (const char *)sqlite3_column_text(st, 2));
	snprintf(t->prefix, sizeof(t->prefix), "%s", (const char *)sqlite3_column_text(st, 3));
	t->created_at = sqlite3_column_int64(st, 4);
	t->last_used_at = sqlite3_column_int64(st, 5);
	snprintf(t->scopes, sizeof(t->scopes), "%s", (const char *)sqlite3_column_text(st, 6));
	t->expires_at = sqlite3_column_int64(st, 7);
	return 0;
}

#define TOKEN_COLUMNS                                                                 \
	"id, user_id, name, prefix, created_at, coalesce(last_used_at, 0), scopes,"      \
	" coalesce(expires_at, 0)"

int tokens_create(struct db *db, int64_t user_id, const char *name, const char *scopes,
		  int64_t expires_at, int64_t now, char token[TOKEN_LEN + 1],
		  struct token_info *out)
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
	snprintf(out->scopes, sizeof(out->scopes), "%s", scopes);
	out->expires_at = expires_at;
	db_lock(db);
	rc = db_exec(db,
		     "INSERT INTO api_tokens (user_id, name, prefix, token_hash, created_at, scopes,"
		     " expires_at) VALUES (?, ?, ?, ?, ?, ?, nullif(?, 0))",
		     "itttiti", user_id, name, out->prefix, hash, now, scopes, expires_at);
	out->id = db_last_id(db);
	db_unlock(db);
	out->user_id = user_id;
	out->created_at = now;
	return rc == 1 ? 0 : rc;
}

int tokens_lookup(struct db *db, const char *token, int64_t now, struct token_info *out)
{
	char hash[65];
	int rc;

	if (strlen(token) != TOKEN_LEN || strncmp(token, TOKEN_PREFIX, strlen(TOKEN_PREFIX)))
		return 0;
	crypto_sha256_hex(token, hash);
	db_lock(db);
	rc = db_one(db, "SELECT " TOKEN_COLUMNS " FROM api_tokens WHERE token_hash = ?", "t",
		    token_from_row, out, hash);
	/* Written at most once a minute per token, like session last_seen. */
	if (rc == 1 && (out->expires_at == 0 || now < out->expires_at) &&
	    now - out->last_used_at >= 60 &&
	    db_exec(db, "UPDATE api_tokens SET last_used_at = ? WHERE id = ?", "ii", now,
		    out->id) == 1)
		out->last_used_at = now;
	db_unlock(db);
	return rc < 0 ? -1 : rc;
}

struct token_walk {
	int (*fn)(const struct token_info *t, void *ctx);
	void *ctx;
};

static int token_row(sqlite3_stmt *st, void *arg)
{
	struct token_walk *w = arg;
	struct token_info t;

	token_from_row(st, &t);
	return w->fn(&t, w->ctx);
}

int tokens_each(struct db *db, int64_t user_id, int (*fn)(const struct token_info *t, void *ctx),
		void *ctx)
{
	struct token_walk w = {fn, ctx};
	int rc = db_each(db, "SELECT " TOKEN_COLUMNS " FROM api_tokens WHERE user_id = ? ORDER BY id",
			 "i", token_row, &w, user_id);
	return rc < 0 ? -1 : 0;
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

int tokens_delete_all(struct db *db, int64_t user_id)
{
	db_lock(db);
	int rc = db_exec(db, "DELETE FROM api_tokens WHERE user_id = ?", "i", user_id);
	if (rc > 0)
		db_changed(db, DB_IDENTITIES);
	db_unlock(db);
	return rc;
}
