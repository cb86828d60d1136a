/* users.c - account rows; see users.h. */
#include "store/users.h"

#include <stdio.h>
#include <string.h>

#include "store/db.h"

bool users_name_valid(const char *name)
{
	size_t len = strlen(name);

	if (len < 1 || len > USER_NAME_MAX || name[0] < 'a' || name[0] > 'z')
		return false;
	for (size_t i = 1; i < len; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return false;
	}
	return true;
}

const char *users_role_name(enum user_role role)
{
	return role == USER_ROLE_ADMIN ? "admin" : "user";
}

int users_role_parse(const char *text, enum user_role *out)
{
	if (!strcmp(text, "admin"))
		*out = USER_ROLE_ADMIN;
	else if (!strcmp(text, "user"))
		*out = USER_ROLE_USER;
	else
		return -1;
	return 0;
}

#define USER_COLUMNS "id, name, role, disabled, created_at, password_hash"

static void user_from_row(sqlite3_stmt *st, struct user *u)
{
	memset(u, 0, sizeof(*u));
	u->id = sqlite3_column_int64(st, 0);
	snprintf(u->name, sizeof(u->name), "%s", (const char *)sqlite3_column_text(st, 1));
	u->role = strcmp((const char *)sqlite3_column_text(st, 2), "admin") == 0 ? USER_ROLE_ADMIN
										  : USER_ROLE_USER;
	u->disabled = sqlite3_column_int(st, 3) != 0;
	u->created_at = sqlite3_column_int64(st, 4);
	snprintf(u->password_hash, sizeof(u->password_hash), "%s",
		 (const char *)sqlite3_column_text(st, 5));
}

/* Runs a one-row user query; caller holds the lock. */
static int find_locked(struct db *db, struct user *out, const char *sql, const char *types,
		       const void *key)
{
	sqlite3_stmt *st;
	int rc;

	if (types[0] == 't')
		rc = db_prepare(db, &st, sql, "t", (const char *)key);
	else
		rc = db_prepare(db, &st, sql, "i", *(const int64_t *)key);
	if (rc < 0)
		return -1;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		user_from_row(st, out);
		rc = 1;
	} else {
		rc = rc == SQLITE_DONE ? 0 : -1;
	}
	db_done(db, st);
	return rc;
}

int users_find_by_name(struct db *db, const char *name, struct user *out)
{
	db_lock(db);
	int rc = find_locked(db, out, "SELECT " USER_COLUMNS " FROM users WHERE name = ?", "t",
			     name);
	db_unlock(db);
	return rc;
}

int users_find_by_id(struct db *db, int64_t id, struct user *out)
{
	db_lock(db);
	int rc = find_locked(db, out, "SELECT " USER_COLUMNS " FROM users WHERE id = ?", "i", &id);
	db_unlock(db);
	return rc;
}

int users_create(struct db *db, const char *name, enum user_role role, const char *hash,
		 int64_t now, struct user *out)
{
	int rc;

	db_lock(db);
	rc = db_exec(db,
		     "INSERT INTO users (name, role, password_hash, created_at, updated_at)"
		     " VALUES (?, ?, ?, ?, ?)",
		     "tttii", name, users_role_name(role), hash, now, now);
	if (rc > 0 && out) {
		int64_t id = db_last_id(db);
		rc = find_locked(db, out, "SELECT " USER_COLUMNS " FROM users WHERE id = ?", "i",
				 &id) == 1
			     ? 0
			     : -1;
	} else if (rc > 0) {
		rc = 0;
	}
	db_unlock(db);
	return rc;
}

int users_each(struct db *db, int (*fn)(const struct user *u, void *ctx), void *ctx)
{
	sqlite3_stmt *st;
	struct user u;
	int rc;

	db_lock(db);
	if (db_prepare(db, &st, "SELECT " USER_COLUMNS " FROM users ORDER BY name", "") < 0) {
		db_unlock(db);
		return -1;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		user_from_row(st, &u);
		if (fn(&u, ctx))
			break;
	}
	db_done(db, st);
	db_unlock(db);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

static int count_locked(struct db *db, const char *sql)
{
	sqlite3_stmt *st;
	int n = -1;

	if (db_prepare(db, &st, sql, "") < 0)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	db_done(db, st);
	return n;
}

int users_count(struct db *db)
{
	db_lock(db);
	int n = count_locked(db, "SELECT count(*) FROM users");
	db_unlock(db);
	return n;
}

int users_count_admins(struct db *db)
{
	db_lock(db);
	int n = count_locked(db, "SELECT count(*) FROM users WHERE role = 'admin'");
	db_unlock(db);
	return n;
}

static int enabled_admins_locked(struct db *db)
{
	return count_locked(db, "SELECT count(*) FROM users WHERE role = 'admin' AND disabled = 0");
}

/* Commits when the change still leaves an enabled admin, else rolls back. */
static int finish_admin_guarded(struct db *db, int rc)
{
	if (rc == USERS_OK && enabled_admins_locked(db) < 1)
		rc = USERS_LAST_ADMIN;
	if (rc == USERS_OK && db_commit(db) < 0)
		rc = USERS_ERROR;
	if (rc != USERS_OK)
		db_rollback(db);
	return rc;
}

int users_update(struct db *db, const char *name, const enum user_role *role,
		 const bool *disabled, int64_t now)
{
	struct user u;
	int rc = USERS_OK;

	db_lock(db);
	if (db_begin(db) < 0) {
		db_unlock(db);
		return USERS_ERROR;
	}
	int found = find_locked(db, &u, "SELECT " USER_COLUMNS " FROM users WHERE name = ?", "t",
				name);
	if (found != 1)
		rc = found == 0 ? USERS_NOT_FOUND : USERS_ERROR;
	if (rc == USERS_OK && role &&
	    db_exec(db, "UPDATE users SET role = ?, updated_at = ? WHERE id = ?", "tii",
		    users_role_name(*role), now, u.id) < 0)
		rc = USERS_ERROR;
	if (rc == USERS_OK && disabled &&
	    db_exec(db, "UPDATE users SET disabled = ?, updated_at = ? WHERE id = ?", "iii",
		    (int64_t)*disabled, now, u.id) < 0)
		rc = USERS_ERROR;
	/* A disabled account keeps no live browser session. */
	if (rc == USERS_OK && disabled && *disabled &&
	    db_exec(db, "DELETE FROM sessions WHERE user_id = ?", "i", u.id) < 0)
		rc = USERS_ERROR;
	rc = finish_admin_guarded(db, rc);
	db_changed(db, DB_IDENTITIES);
	db_unlock(db);
	return rc;
}

int users_set_password(struct db *db, int64_t user_id, const char *hash, int64_t keep_session,
		       int64_t now)
{
	int rc = USERS_OK;

	db_lock(db);
	if (db_begin(db) < 0) {
		db_unlock(db);
		return USERS_ERROR;
	}
	int changed = db_exec(db, "UPDATE users SET password_hash = ?, updated_at = ? WHERE id = ?",
			      "tii", hash, now, user_id);
	if (changed == 0)
		rc = USERS_NOT_FOUND;
	else if (changed < 0 || db_exec(db, "DELETE FROM sessions WHERE user_id = ? AND id != ?",
					 "ii", user_id, keep_session) < 0)
		rc = USERS_ERROR;
	if (rc == USERS_OK && db_commit(db) < 0)
		rc = USERS_ERROR;
	if (rc != USERS_OK)
		db_rollback(db);
	db_changed(db, DB_IDENTITIES);
	db_unlock(db);
	return rc;
}

int users_delete(struct db *db, const char *name)
{
	int rc = USERS_OK;

	db_lock(db);
	if (db_begin(db) < 0) {
		db_unlock(db);
		return USERS_ERROR;
	}
	int changed = db_exec(db, "DELETE FROM users WHERE name = ?", "t", name);
	if (changed == 0)
		rc = USERS_NOT_FOUND;
	else if (changed < 0)
		rc = USERS_ERROR;
	rc = finish_admin_guarded(db, rc);
	db_changed(db, DB_IDENTITIES);
	db_unlock(db);
	return rc;
}
