/* groups.c - the groups and group_members tables; see groups.h. */
#include "store/groups.h"

#include <stdio.h>
#include <string.h>

#include "labd/log.h"
#include "store/db.h"

#define GROUP_SELECT                                                                          \
	"SELECT g.id, g.name, coalesce(p.name, ''), g.created_at, coalesce(g.expires_at, 0),"  \
	" coalesce(g.ended_at, 0) FROM groups g"                                               \
	" LEFT JOIN plans p ON p.id = g.plan_id"

static int group_from_row(sqlite3_stmt *st, void *out)
{
	struct group *g = out;

	memset(g, 0, sizeof(*g));
	g->id = sqlite3_column_int64(st, 0);
	snprintf(g->name, sizeof(g->name), "%s", (const char *)sqlite3_column_text(st, 1));
	snprintf(g->plan, sizeof(g->plan), "%s", (const char *)sqlite3_column_text(st, 2));
	g->created_at = sqlite3_column_int64(st, 3);
	g->expires_at = sqlite3_column_int64(st, 4);
	g->ended_at = sqlite3_column_int64(st, 5);
	return 0;
}

int groups_find(struct db *db, const char *name, struct group *out)
{
	int rc = db_one(db, GROUP_SELECT " WHERE g.name = ?", "t", group_from_row, out, name);
	return rc < 0 ? -1 : rc;
}

struct group_walk {
	int (*fn)(const struct group *g, void *ctx);
	void *ctx;
};

static int group_row(sqlite3_stmt *st, void *arg)
{
	struct group_walk *w = arg;
	struct group g;

	group_from_row(st, &g);
	return w->fn(&g, w->ctx);
}

int groups_each(struct db *db, int (*fn)(const struct group *g, void *ctx), void *ctx)
{
	struct group_walk w = {fn, ctx};
	return db_each(db, GROUP_SELECT " ORDER BY g.name", "", group_row, &w) < 0 ? -1 : 0;
}

struct name_walk {
	int (*fn)(const char *name, void *ctx);
	void *ctx;
};

static int name_row(sqlite3_stmt *st, void *arg)
{
	struct name_walk *w = arg;
	return w->fn((const char *)sqlite3_column_text(st, 0), w->ctx);
}

int groups_members_each(struct db *db, int64_t group_id,
			int (*fn)(const char *user, void *ctx), void *ctx)
{
	struct name_walk w = {fn, ctx};
	return db_each(db,
		       "SELECT u.name FROM group_members m JOIN users u ON u.id = m.user_id"
		       " WHERE m.group_id = ? ORDER BY u.name",
		       "i", name_row, &w, group_id) < 0
		       ? -1
		       : 0;
}

int groups_of_user_each(struct db *db, int64_t user_id,
			int (*fn)(const char *group, void *ctx), void *ctx)
{
	struct name_walk w = {fn, ctx};
	return db_each(db,
		       "SELECT g.name FROM group_members m JOIN groups g ON g.id = m.group_id"
		       " WHERE m.user_id = ? ORDER BY g.name",
		       "i", name_row, &w, user_id) < 0
		       ? -1
		       : 0;
}

struct plan_fill {
	struct quota_group_plan *out;
	size_t max, n;
};

static int group_plan_row(sqlite3_stmt *st, void *arg)
{
	struct plan_fill *f = arg;
	struct quota_group_plan *g;

	if (f->n == f->max)
		return 1;
	g = &f->out[f->n++];
	snprintf(g->group, sizeof(g->group), "%s", (const char *)sqlite3_column_text(st, 0));
	snprintf(g->plan, sizeof(g->plan), "%s", (const char *)sqlite3_column_text(st, 1));
	if (quota_limits_parse((const char *)sqlite3_column_text(st, 2), &g->limits) < 0)
		log_error("plan %s: unreadable limits kept as unset", g->plan);
	return 0;
}

int groups_plans_of_user(struct db *db, int64_t user_id, struct quota_group_plan *out,
			 size_t max)
{
	struct plan_fill f = {out, max, 0};
	int rc = db_each(db,
			 "SELECT g.name, p.name, p.limits FROM group_members m"
			 " JOIN groups g ON g.id = m.group_id JOIN plans p ON p.id = g.plan_id"
			 " WHERE m.user_id = ? ORDER BY g.name",
			 "i", group_plan_row, &f, user_id);
	return rc < 0 ? -1 : (int)f.n;
}

/* The id of a plan by name into *id: 1, 0 none, -1 error. */
static int plan_id(struct db *db, const char *plan, int64_t *id)
{
	int v = 0, rc = db_one(db, "SELECT id FROM plans WHERE name = ?", "t", db_row_int, &v,
			       plan);
	*id = v;
	return rc < 0 ? -1 : rc;
}

/* Applies c to group gid; caller holds the transaction. */
static enum quota_change_result apply(struct db *db, int64_t gid, const struct group_change *c,
				      char missing[QUOTA_NAME_MAX + 1])
{
	int64_t pid;
	int rc;

	if (c->set_plan && c->plan) {
		rc = plan_id(db, c->plan, &pid);
		if (rc <= 0) {
			snprintf(missing, QUOTA_NAME_MAX + 1, "%s", c->plan);
			return rc < 0 ? QUOTA_ERROR : QUOTA_NO_PLAN;
		}
	}
	/* plan NULL binds NULL: the group has no plan */
	if (c->set_plan && db_exec(db,
				   "UPDATE groups SET plan_id = (SELECT id FROM plans WHERE name = ?)"
				   " WHERE id = ?",
				   "ti",
				   c->plan ? c->plan : NULL, gid) < 0)
		return QUOTA_ERROR;
	/* a new end starts the course again: its members are disabled anew then */
	if (c->set_expires &&
	    db_exec(db,
		    "UPDATE groups SET expires_at = nullif(?, 0), ended_at = NULL, retired_at = NULL"
		    " WHERE id = ?",
		    "ii", c->expires_at, gid) < 0)
		return QUOTA_ERROR;
	for (size_t i = 0; i < c->n_add; i++) {
		rc = db_exec(db,
			     "INSERT OR IGNORE INTO group_members (group_id, user_id)"
			     " SELECT ?, id FROM users WHERE name = ?",
			     "it", gid, c->add[i]);
		if (rc < 0)
			return QUOTA_ERROR;
		int known = 0;
		if (rc == 0 && db_one(db, "SELECT count(*) FROM users WHERE name = ?", "t",
				      db_row_int, &known, c->add[i]) == 1 && !known) {
			snprintf(missing, QUOTA_NAME_MAX + 1, "%s", c->add[i]);
			return QUOTA_NO_USER;
		}
	}
	for (size_t i = 0; i < c->n_remove; i++)
		if (db_exec(db,
			    "DELETE FROM group_members WHERE group_id = ?"
			    " AND user_id = (SELECT id FROM users WHERE name = ?)",
			    "it", gid, c->remove[i]) < 0)
			return QUOTA_ERROR;
	return QUOTA_OK;
}

/* Commits when rc is QUOTA_OK, else rolls back; unlocks. */
static enum quota_change_result finish(struct db *db, enum quota_change_result rc)
{
	if (rc == QUOTA_OK && db_commit(db) < 0)
		rc = QUOTA_ERROR;
	if (rc != QUOTA_OK)
		db_rollback(db);
	db_unlock(db);
	return rc;
}

enum quota_change_result groups_create(struct db *db, const char *name,
				       const struct group_change *c, int64_t now,
				       char missing[QUOTA_NAME_MAX + 1])
{
	int rc;

	db_lock(db);
	if (db_begin(db) < 0) {
		db_unlock(db);
		return QUOTA_ERROR;
	}
	rc = db_exec(db, "INSERT INTO groups (name, created_at) VALUES (?, ?)", "ti", name, now);
	if (rc == DB_CONFLICT)
		return finish(db, QUOTA_CONFLICT);
	if (rc < 0)
		return finish(db, QUOTA_ERROR);
	return finish(db, apply(db, db_last_id(db), c, missing));
}

enum quota_change_result groups_update(struct db *db, const char *name,
				       const struct group_change *c,
				       char missing[QUOTA_NAME_MAX + 1])
{
	struct group g;
	int rc;

	db_lock(db);
	if (db_begin(db) < 0) {
		db_unlock(db);
		return QUOTA_ERROR;
	}
	rc = groups_find(db, name, &g);
	if (rc <= 0)
		return finish(db, rc < 0 ? QUOTA_ERROR : QUOTA_NOT_FOUND);
	return finish(db, apply(db, g.id, c, missing));
}

enum quota_change_result groups_delete(struct db *db, const char *name)
{
	int rc;

	db_lock(db);
	rc = db_exec(db, "DELETE FROM groups WHERE name = ?", "t", name);
	db_unlock(db);
	return rc < 0 ? QUOTA_ERROR : rc == 0 ? QUOTA_NOT_FOUND : QUOTA_OK;
}

static int row_int64(sqlite3_stmt *st, void *out)
{
	*(int64_t *)out = sqlite3_column_int64(st, 0); /* NULL reads 0 */
	return 0;
}

int groups_next_due(struct db *db, int64_t keep, int64_t *at)
{
	int64_t end = 0, retire = 0;
	int rc = db_one(db, "SELECT min(expires_at) FROM groups WHERE ended_at IS NULL", "",
			row_int64, &end);

	if (rc >= 0 && keep >= 0)
		rc = db_one(db,
			    "SELECT min(expires_at) + ? FROM groups"
			    " WHERE ended_at IS NOT NULL AND retired_at IS NULL",
			    "i", row_int64, &retire, keep);
	*at = !end ? retire : !retire || end < retire ? end : retire;
	return rc < 0 ? -1 : 0;
}

int groups_due_to_end(struct db *db, int64_t now, int64_t *id, char name[QUOTA_NAME_MAX + 1])
{
	struct group g;
	int rc = db_one(db,
			GROUP_SELECT " WHERE g.ended_at IS NULL AND g.expires_at <= ? ORDER BY g.id",
			"i", group_from_row, &g, now);

	if (rc == 1) {
		*id = g.id;
		snprintf(name, QUOTA_NAME_MAX + 1, "%s", g.name);
	}
	return rc < 0 ? -1 : rc;
}

int groups_due_to_retire(struct db *db, int64_t before, int64_t *id,
			 char name[QUOTA_NAME_MAX + 1])
{
	struct group g;
	int rc = db_one(db,
			GROUP_SELECT " WHERE g.ended_at IS NOT NULL AND g.retired_at IS NULL"
				     " AND g.expires_at <= ? ORDER BY g.id",
			"i", group_from_row, &g, before);

	if (rc == 1) {
		*id = g.id;
		snprintf(name, QUOTA_NAME_MAX + 1, "%s", g.name);
	}
	return rc < 0 ? -1 : rc;
}

int groups_mark(struct db *db, int64_t group_id, bool retired, int64_t now)
{
	int rc;

	db_lock(db);
	rc = retired ? db_exec(db, "UPDATE groups SET retired_at = ? WHERE id = ?", "ii", now,
			       group_id)
		     : db_exec(db, "UPDATE groups SET ended_at = ? WHERE id = ?", "ii", now,
			       group_id);
	db_unlock(db);
	return rc < 0 ? -1 : 0;
}

struct member_fill {
	struct group_member *out;
	size_t max, n;
};

static int member_row(sqlite3_stmt *st, void *arg)
{
	struct member_fill *f = arg;
	struct group_member *m;

	if (f->n == f->max)
		return 1;
	m = &f->out[f->n++];
	m->user_id = sqlite3_column_int64(st, 0);
	snprintf(m->name, sizeof(m->name), "%s", (const char *)sqlite3_column_text(st, 1));
	m->admin = sqlite3_column_int(st, 2) != 0;
	m->disabled = sqlite3_column_int(st, 3) != 0;
	m->live_elsewhere = sqlite3_column_int(st, 4) != 0;
	return 0;
}

int groups_members_state(struct db *db, int64_t group_id, int64_t now, int64_t after_id,
			 struct group_member *out, size_t max)
{
	struct member_fill f = {out, max, 0};
	int rc = db_each(db,
			 "SELECT u.id, u.name, u.role = 'admin', u.disabled,"
			 " EXISTS (SELECT 1 FROM group_members o JOIN groups og ON og.id = o.group_id"
			 "   WHERE o.user_id = u.id AND og.id <> m.group_id"
			 "   AND (og.expires_at IS NULL OR og.expires_at > ?1))"
			 " FROM group_members m JOIN users u ON u.id = m.user_id"
			 " WHERE m.group_id = ?2 AND u.id > ?3 ORDER BY u.id",
			 "iii", member_row, &f, now, group_id, after_id);
	return rc < 0 ? -1 : (int)f.n;
}

struct end_fill {
	struct group_end *out;
	size_t max, n;
};

static int end_row(sqlite3_stmt *st, void *arg)
{
	struct end_fill *f = arg;

	if (f->n == f->max)
		return 1;
	snprintf(f->out[f->n].group, sizeof(f->out[f->n].group), "%s",
		 (const char *)sqlite3_column_text(st, 0));
	f->out[f->n++].expires_at = sqlite3_column_int64(st, 1);
	return 0;
}

int groups_ends_of_user(struct db *db, int64_t user_id, int64_t until, struct group_end *out,
			size_t max)
{
	struct end_fill f = {out, max, 0};
	int rc = db_each(db,
			 "SELECT g.name, g.expires_at FROM group_members m"
			 " JOIN groups g ON g.id = m.group_id"
			 " WHERE m.user_id = ?1 AND g.expires_at IS NOT NULL AND g.expires_at <= ?2"
			 /* the end disables them only when no group of theirs goes on */
			 " AND NOT EXISTS (SELECT 1 FROM group_members o JOIN groups og"
			 "   ON og.id = o.group_id WHERE o.user_id = ?1"
			 "   AND (og.expires_at IS NULL OR og.expires_at > g.expires_at))"
			 " ORDER BY g.expires_at, g.name",
			 "ii", end_row, &f, user_id, until);
	return rc < 0 ? -1 : (int)f.n;
}
