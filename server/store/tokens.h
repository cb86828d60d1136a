/* tokens.h - named API tokens for scripts ("Authorization: Bearer labd_...").
 * The token is shown once at creation; the store keeps its SHA-256 and a short
 * prefix that lets the owner recognise it in a list. */
#ifndef LABD_TOKENS_H
#define LABD_TOKENS_H

#include <stdbool.h>
#include <stdint.h>

struct db;

#define TOKEN_PREFIX "labd_"
#define TOKEN_LEN (5 + TOKEN_SECRET_LEN)
#define TOKEN_NAME_MAX 64
#define TOKEN_SECRET_LEN 43 /* base64url of 32 bytes */
#define TOKEN_SHOWN_PREFIX_LEN 9 /* "labd_" + 4 characters */
#define TOKEN_SCOPES_MAX 256
/* the longest expires_in_s when [auth] token_max_lifetime is "none" */
#define TOKEN_LIFETIME_MAX_S (10 * 366 * 86400LL)

struct token_info {
	int64_t id;
	int64_t user_id;
	char name[TOKEN_NAME_MAX * 4 + 1]; /* UTF-8 */
	char prefix[TOKEN_SHOWN_PREFIX_LEN + 1];
	int64_t created_at;
	int64_t last_used_at; /* 0 = never */
	char scopes[TOKEN_SCOPES_MAX]; /* scope names, space-separated; "*" = all of the owner's */
	int64_t expires_at;            /* 0 = never */
};

/* True for 1-64 characters of printable text (UTF-8 allowed, no control characters). */
bool tokens_name_valid(const char *name);
/* Creates a token with scopes (stored as given, see token_info) that expires
 * at expires_at (0 = never); writes the secret into token[] and the row into
 * *out. Returns 0, DB_CONFLICT when the user already has a token of that name, -1. */
int tokens_create(struct db *db, int64_t user_id, const char *name, const char *scopes,
		  int64_t expires_at, int64_t now, char token[TOKEN_LEN + 1],
		  struct token_info *out);
/* Resolves a bearer token to its row and records its use: 1 found, 0 not, -1
 * error. An expired token is found too (the caller says why it is refused);
 * its use is not recorded. */
int tokens_lookup(struct db *db, const char *token, int64_t now, struct token_info *out);
/* Calls fn for each of a user's tokens, oldest first. */
int tokens_each(struct db *db, int64_t user_id, int (*fn)(const struct token_info *t, void *ctx),
		void *ctx);
/* Deletes a user's token: 1 deleted, 0 no such token of that user, -1 error. */
int tokens_delete(struct db *db, int64_t user_id, int64_t token_id);
/* Deletes every token of a user; returns how many, or -1. */
int tokens_delete_all(struct db *db, int64_t user_id);

#endif
