/* users.c - account rows; see users.h. */
#include "store/users.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "store/db.h"
#include "store/ledger.h"

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

#define USER_COLUMNS "id, name, role, disabled, created_at, password_hash, email"

/* A db_row_fn filling the struct user at out. */
static int user_from_row(sqlite3_stmt *st, void *out)
{
	struct user *u = out;

	memset(u, 0, sizeof(*u));
	u->id = sqlite3_column_int64(st, 0);
	snprintf(u->name, sizeof(u->name), "%s", (const char *)sqlite3_column_text(st, 1));
	u->role = strcmp((const char *)sqlite3_column_text(st, 2), "admin") == 0 ? USER_ROLE_ADMIN
										  : USER_ROLE_USER;
	u->disabled = sqlite3_column_int(st, 3) != 0;
	u->created_at = sqlite3_column_int64(st, 4);
	snprintf(u->password_hash, sizeof(u->password_hash), "%s",
		 (const char *)sqlite3_column_text(st, 5));
	snprintf(u->email, sizeof(u->email), "%s", (const char *)sqlite3_column_text(st, 6));
	return 0;
}

#define USER_BY_NAME "SELECT " USER_COLUMNS " FROM users WHERE name = ?"
#define USER_BY_ID "SELECT " USER_COLUMNS " FROM users WHERE id = ?"

int users_find_by_name(struct db *db, const char *name, struct user *out)
{
	int rc = db_one(db, USER_BY_NAME, "t", user_from_row, out, name);
	return rc < 0 ? -1 : rc;
}

int users_find_by_id(struct db *db, int64_t id, struct user *out)
{
	int rc = db_one(db, USER_BY_ID, "i", user_from_row, out, id);
	return rc < 0 ? -1 : rc;
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
		rc = db_one(db, USER_BY_ID, "i", user_from_row, out, id) == 1 ? 0 : -1;
	} else if (rc > 0) {
		rc = 0;
	}
	db_unlock(db);
	return rc;
}

struct user_walk {
	int (*fn)(const struct user *u, void *ctx);
	void *ctx;
};

static int user_row(sqlite3_stmt *st, void *arg)
{
	struct user_walk *w = arg;
	struct user u;

	user_from_row(st, &u);
	return w->fn(&u, w->ctx);
}

int users_each(struct db *db, int (*fn)(const struct user *u, void *ctx), void *ctx)
{
	struct user_walk w = {fn, ctx};
	int rc = db_each(db, "SELECT " USER_COLUMNS " FROM users ORDER BY name", "", user_row, &w);
	return rc < 0 ? -1 : 0;
}

/* A count(*) query; -1 on error. */
static int count(struct db *db, const char *sql)
{
	int n;
	return db_one(db, sql, "", db_row_int, &n) == 1 ? n : -1;
}

int users_count(struct db *db) { return count(db, "SELECT count(*) FROM users"); }

int users_count_admins(struct db *db)
{
	return count(db, "SELECT count(*) FROM users WHERE role = 'admin'");
}

static int enabled_admins(struct db *db)
{
	return count(db, "SELECT count(*) FROM users WHERE role = 'admin' AND disabled = 0");
}

/* Commits when the change still leaves an enabled admin, else rolls back. */
static enum users_change_result finish_admin_guarded(struct db *db,
						     enum users_change_result rc)
{
	if (rc == USERS_OK && enabled_admins(db) < 1)
		rc = USERS_LAST_ADMIN;
	if (rc == USERS_OK && db_commit(db) < 0)
		rc = USERS_ERROR;
	if (rc != USERS_OK)
		db_rollback(db);
	return rc;
}

enum users_change_result users_update(struct db *db, const char *name,
				      const enum user_role *role, const bool *disabled, int64_t now)
{
	struct user u;
	enum users_change_result rc = USERS_OK;

	db_lock(db);
	if (db_begin(db) < 0) {
		db_unlock(db);
		return USERS_ERROR;
	}
	int found = db_one(db, USER_BY_NAME, "t", user_from_row, &u, name);
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

enum users_change_result users_set_password(struct db *db, int64_t user_id, const char *hash,
					    int64_t keep_session, int64_t now)
{
	enum users_change_result rc = USERS_OK;

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

enum users_change_result users_delete(struct db *db, const char *name)
{
	enum users_change_result rc = USERS_OK;

	db_lock(db);
	if (db_begin(db) < 0) {
		db_unlock(db);
		return USERS_ERROR;
	}
	/* the runtime rows go with the account: its ledger entries close now */
	int changed = ledger_close_user(db, name, time(NULL)) < 0
			      ? -1
			      : db_exec(db, "DELETE FROM users WHERE name = ?", "t", name);
	if (changed == 0)
		rc = USERS_NOT_FOUND;
	else if (changed < 0)
		rc = USERS_ERROR;
	rc = finish_admin_guarded(db, rc);
	db_changed(db, DB_IDENTITIES);
	db_unlock(db);
	return rc;
}
