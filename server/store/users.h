/* users.h - lab accounts in the store: names, roles, password hashes, disabled flag. */
#ifndef LABD_USERS_H
#define LABD_USERS_H

#include <stdbool.h>
#include <stdint.h>

/* Room for a password hash as auth/password.c writes it. */
#define USERS_HASH_MAX 192

#include "labd/parse.h"

struct db;

#define USER_NAME_MAX PARSE_USER_NAME_MAX /* valid names: parse_user_name_ok() */

enum user_role { USER_ROLE_USER, USER_ROLE_ADMIN };

/* An e-mail address as kept, at most (a CSV field: 255 bytes). */
#define USERS_EMAIL_MAX 256

struct user {
	int64_t id;
	char name[USER_NAME_MAX + 1];
	enum user_role role;
	bool disabled;
	int64_t created_at;
	char password_hash[USERS_HASH_MAX];
	char email[USERS_EMAIL_MAX]; /* "" = none (a CSV import sets it) */
};

const char *users_role_name(enum user_role role);
/* Parses "admin"/"user"; -1 otherwise. */
int users_role_parse(const char *text, enum user_role *out);

/* Lookups fill *out; return 1 found, 0 not found, -1 on a store error. */
int users_find_by_name(struct db *db, const char *name, struct user *out);
int users_find_by_id(struct db *db, int64_t id, struct user *out);
/* Inserts a user; returns 0, DB_CONFLICT when the name exists, -1 on error.
 * On success out->id is set. */
int users_create(struct db *db, const char *name, enum user_role role, const char *hash,
		 int64_t now, struct user *out);
/* Calls fn for each user ordered by name; stops early when fn returns non-zero. */
int users_each(struct db *db, int (*fn)(const struct user *u, void *ctx), void *ctx);
int users_count(struct db *db);
/* Number of users with role admin, enabled or not; -1 on error. */
int users_count_admins(struct db *db);

enum users_change_result { USERS_OK = 0, USERS_ERROR = -1, USERS_NOT_FOUND = -3, USERS_LAST_ADMIN = -4 };
/* Applies role/disabled changes (NULL = unchanged) in one transaction, refusing
 * one that leaves no enabled admin. Changing the role or disabling ends the
 * user's sessions when disabled. */
enum users_change_result users_update(struct db *db, const char *name,
				      const enum user_role *role, const bool *disabled, int64_t now);
/* Replaces the password hash and ends the user's sessions except keep_session
 * (0 = end all). */
enum users_change_result users_set_password(struct db *db, int64_t user_id, const char *hash,
					    int64_t keep_session, int64_t now);
/* Deletes a user (sessions and tokens cascade), refusing the last enabled admin. */
enum users_change_result users_delete(struct db *db, const char *name);

#endif
