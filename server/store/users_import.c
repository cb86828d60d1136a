/* users_import.c - many users in one transaction; see users_import.h. */
#include "store/users_import.h"

#include "store/db.h"
#include "store/users.h"

/* The id of a row of table by name into *id: 1, 0 none, -1 error. */
static int id_of(struct db *db, bool plan, const char *name, int64_t *id)
{
	int v = 0, rc = plan ? db_one(db, "SELECT id FROM plans WHERE name = ?", "t", db_row_int,
				      &v, name)
			     : db_one(db, "SELECT id FROM groups WHERE name = ?", "t", db_row_int,
				      &v, name);
	*id = v;
	return rc < 0 ? -1 : rc;
}

/* Creates one row's user; the result in *r; 0, or -1 on a store error. */
static int import_one(struct db *db, const struct users_import_row *row, int64_t now,
		      struct users_import_result *r)
{
	int64_t gids[USERS_IMPORT_GROUPS], pid = 0;
	struct user u;
	int rc;

	r->check = USERS_IMPORT_OK;
	for (size_t g = 0; g < row->n_groups; g++) {
		rc = id_of(db, false, row->groups[g], &gids[g]);
		if (rc <= 0) {
			r->check = USERS_IMPORT_NO_GROUP;
			r->which = g;
			return rc;
		}
	}
	if (row->plan[0] && (rc = id_of(db, true, row->plan, &pid)) <= 0) {
		r->check = USERS_IMPORT_NO_PLAN;
		return rc;
	}
	rc = users_create(db, row->name, USER_ROLE_USER, row->hash, now, &u);
	if (rc == DB_CONFLICT) {
		r->check = USERS_IMPORT_NAME_TAKEN;
		return 0;
	}
	if (rc < 0 ||
	    (row->email[0] &&
	     db_exec(db, "UPDATE users SET email = ? WHERE id = ?", "ti", row->email, u.id) < 0) ||
	    (pid && db_exec(db,
			    "INSERT INTO user_quotas (user_id, plan_id, overrides, updated_at)"
			    " VALUES (?, ?, '', ?)",
			    "iii", u.id, pid, now) < 0))
		return -1;
	for (size_t g = 0; g < row->n_groups; g++)
		if (db_exec(db,
			    "INSERT OR IGNORE INTO group_members (group_id, user_id) VALUES (?, ?)",
			    "ii", gids[g], u.id) < 0)
			return -1;
	return 0;
}

int users_import(struct db *db, const struct users_import_row *rows, size_t n, bool commit,
		 int64_t now, struct users_import_result *results)
{
	int bad = 0;

	db_lock(db);
	if (db_begin(db) < 0) {
		db_unlock(db);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (import_one(db, &rows[i], now, &results[i]) < 0) {
			bad = -1;
			break;
		}
		bad += results[i].check != USERS_IMPORT_OK;
	}
	if (bad == 0 && commit && db_commit(db) == 0) {
		db_changed(db, DB_IDENTITIES);
	} else {
		db_rollback(db);
		/* a commit that failed changed nothing either */
		if (bad == 0 && commit)
			bad = -1;
	}
	db_unlock(db);
	return bad;
}
