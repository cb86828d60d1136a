/* plans.c - the plans table; see plans.h. */
#include "store/plans.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "labd/log.h"
#include "store/db.h"

#define PLAN_COLUMNS "id, name, limits, created_at, updated_at, image, preemptible_rate, gpu"

static int plan_from_row(sqlite3_stmt *st, void *out)
{
	struct plan *p = out;

	memset(p, 0, sizeof(*p));
	p->id = sqlite3_column_int64(st, 0);
	snprintf(p->name, sizeof(p->name), "%s", (const char *)sqlite3_column_text(st, 1));
	/* rows are written only through quota_limits_format, so this holds */
	if (quota_limits_parse((const char *)sqlite3_column_text(st, 2), &p->limits) < 0)
		log_error("plan %s: unreadable limits kept as unset", p->name);
	p->created_at = sqlite3_column_int64(st, 3);
	p->updated_at = sqlite3_column_int64(st, 4);
	snprintf(p->image, sizeof(p->image), "%s", (const char *)sqlite3_column_text(st, 5));
	p->preemptible_rate = sqlite3_column_double(st, 6);
	snprintf(p->gpu, sizeof(p->gpu), "%s", (const char *)sqlite3_column_text(st, 7));
	return 0;
}

/* Reads the digits at *s (1 to max_digits of them, no leading zero) into
 * *out and moves *s past them. False when there are none. */
static bool read_count(const char **s, int max_digits, unsigned *out)
{
	int n = 0;

	if (**s < '1' || **s > '9')
		return false;
	*out = 0;
	while (isdigit((unsigned char)**s) && n < max_digits) {
		*out = *out * 10 + (unsigned)(**s - '0');
		(*s)++;
		n++;
	}
	return !isdigit((unsigned char)**s);
}

/* A MIG profile "<n>g.<m>gb": true with its slices and GB. */
static bool mig_profile(const char *kind, unsigned *slices, unsigned *gb)
{
	const char *s = kind;

	if (!read_count(&s, 1, slices) || strncmp(s, "g.", 2) != 0)
		return false;
	s += 2;
	return read_count(&s, 4, gb) && strcmp(s, "gb") == 0;
}

bool plans_gpu_ok(const char *kind)
{
	unsigned slices, gb;

	return strcmp(kind, PLAN_GPU_WHOLE) == 0 || strcmp(kind, PLAN_GPU_SHARE) == 0 ||
	       mig_profile(kind, &slices, &gb);
}

bool plans_gpu_allows(const char *plan_kind, const char *asked)
{
	unsigned ps, pg, as, ag;

	if (strcmp(plan_kind, asked) == 0 || strcmp(plan_kind, PLAN_GPU_WHOLE) == 0)
		return plans_gpu_ok(asked);
	return mig_profile(plan_kind, &ps, &pg) && mig_profile(asked, &as, &ag) && as <= ps &&
	       ag <= pg;
}

int plans_find(struct db *db, const char *name, struct plan *out)
{
	int rc = db_one(db, "SELECT " PLAN_COLUMNS " FROM plans WHERE name = ?", "t",
			plan_from_row, out, name);
	return rc < 0 ? -1 : rc;
}

int plans_find_by_id(struct db *db, int64_t id, struct plan *out)
{
	int rc = db_one(db, "SELECT " PLAN_COLUMNS " FROM plans WHERE id = ?", "i", plan_from_row,
			out, id);
	return rc < 0 ? -1 : rc;
}

struct plan_walk {
	int (*fn)(const struct plan *p, void *ctx);
	void *ctx;
};

static int plan_row(sqlite3_stmt *st, void *arg)
{
	struct plan_walk *w = arg;
	struct plan p;

	plan_from_row(st, &p);
	return w->fn(&p, w->ctx);
}

int plans_each(struct db *db, int (*fn)(const struct plan *p, void *ctx), void *ctx)
{
	struct plan_walk w = {fn, ctx};
	return db_each(db, "SELECT " PLAN_COLUMNS " FROM plans ORDER BY name", "", plan_row, &w) < 0
		       ? -1
		       : 0;
}

enum quota_change_result plans_create(struct db *db, const char *name,
				      const struct quota_limits *limits, const char *image,
				      int64_t now, struct plan *out)
{
	char text[1024];
	int rc;

	if (quota_limits_format(limits, text, sizeof(text)) < 0)
		return QUOTA_ERROR;
	db_lock(db);
	rc = db_exec(db,
		     "INSERT INTO plans (name, limits, image, created_at, updated_at)"
		     " VALUES (?, ?, ?, ?, ?)",
		     "tttii", name, text, image, now, now);
	if (rc > 0)
		rc = plans_find(db, name, out) == 1 ? QUOTA_OK : QUOTA_ERROR;
	db_unlock(db);
	return rc == DB_CONFLICT ? QUOTA_CONFLICT : rc < 0 ? QUOTA_ERROR : rc;
}

enum quota_change_result plans_update(struct db *db, const char *name,
				      const struct quota_limits *limits, const char *image,
				      int64_t now)
{
	char text[1024];
	int rc;

	if (quota_limits_format(limits, text, sizeof(text)) < 0)
		return QUOTA_ERROR;
	db_lock(db);
	rc = db_exec(db, "UPDATE plans SET limits = ?, image = ?, updated_at = ? WHERE name = ?",
		     "ttit", text, image, now, name);
	db_unlock(db);
	return rc < 0 ? QUOTA_ERROR : rc == 0 ? QUOTA_NOT_FOUND : QUOTA_OK;
}

/* Where a one-text answer goes. */
struct text_ctx {
	char *out;
	size_t len;
};

static int text_row(sqlite3_stmt *st, void *arg)
{
	struct text_ctx *c = arg;
	snprintf(c->out, c->len, "%s", (const char *)sqlite3_column_text(st, 0));
	return 0;
}

enum quota_change_result plans_set_gpu(struct db *db, const char *name, const char *gpu)
{
	db_lock(db);
	int rc = db_exec(db, "UPDATE plans SET gpu = ? WHERE name = ?", "tt", gpu, name);
	db_unlock(db);
	return rc < 0 ? QUOTA_ERROR : rc == 0 ? QUOTA_NOT_FOUND : QUOTA_OK;
}

int plans_user_gpu(struct db *db, int64_t user_id, char *out, size_t len)
{
	struct text_ctx c = {out, len};
	int rc;

	snprintf(out, len, PLAN_GPU_WHOLE);
	/* the plan store/ledger.c's ledger_plan_of names, in the same order */
	rc = db_one(db,
		    "SELECT COALESCE("
		    " (SELECT p.gpu FROM user_quotas q JOIN plans p ON p.id = q.plan_id"
		    "  WHERE q.user_id = ?1),"
		    " (SELECT p.gpu FROM group_members m JOIN groups g ON g.id = m.group_id"
		    "  JOIN plans p ON p.id = g.plan_id WHERE m.user_id = ?1 ORDER BY g.name LIMIT 1),"
		    " '" PLAN_GPU_WHOLE "')",
		    "i", text_row, &c, user_id);
	if (rc < 0)
		snprintf(out, len, PLAN_GPU_WHOLE);
	return rc < 0 ? -1 : 0;
}

enum quota_change_result plans_set_preemptible_rate(struct db *db, const char *name,
						    double rate)
{
	db_lock(db);
	int rc = db_exec(db, "UPDATE plans SET preemptible_rate = ? WHERE name = ?", "dt", rate,
			 name);
	db_unlock(db);
	return rc < 0 ? QUOTA_ERROR : rc == 0 ? QUOTA_NOT_FOUND : QUOTA_OK;
}

int plans_user_image(struct db *db, int64_t user_id, char *out, size_t len)
{
	struct text_ctx c = {out, len};
	int rc;

	out[0] = '\0';
	rc = db_one(db,
		    "SELECT image FROM (SELECT p.image, 0 AS rank, '' AS via FROM user_quotas q"
		    " JOIN plans p ON p.id = q.plan_id WHERE q.user_id = ?1 AND p.image != ''"
		    " UNION ALL SELECT p.image, 1, g.name FROM group_members m"
		    " JOIN groups g ON g.id = m.group_id JOIN plans p ON p.id = g.plan_id"
		    " WHERE m.user_id = ?1 AND p.image != '') ORDER BY rank, via LIMIT 1",
		    "i", text_row, &c, user_id);
	return rc < 0 ? -1 : 0;
}

struct who_ctx {
	char *out;
	size_t len;
};

/* Appends "kind name" to the list of users of a plan. */
static int add_who(sqlite3_stmt *st, void *arg)
{
	struct who_ctx *w = arg;
	size_t used = strlen(w->out);

	snprintf(w->out + used, w->len - used, "%s%s %s", used ? ", " : "",
		 (const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1));
	return 0;
}

enum quota_change_result plans_delete(struct db *db, const char *name, char *who,
				      size_t wholen)
{
	struct who_ctx w = {who, wholen};
	enum quota_change_result rc = QUOTA_OK;
	int n;

	who[0] = '\0';
	db_lock(db);
	if (db_begin(db) < 0) {
		db_unlock(db);
		return QUOTA_ERROR;
	}
	n = db_each(db,
		    "SELECT 'group', g.name FROM groups g JOIN plans p ON p.id = g.plan_id"
		    " WHERE p.name = ?1"
		    " UNION ALL SELECT 'user', u.name FROM user_quotas q JOIN plans p ON p.id = q.plan_id"
		    " JOIN users u ON u.id = q.user_id WHERE p.name = ?1 ORDER BY 1, 2",
		    "t", add_who, &w, name);
	if (n < 0)
		rc = QUOTA_ERROR;
	else if (n > 0)
		rc = QUOTA_IN_USE;
	if (rc == QUOTA_OK) {
		int changed = db_exec(db, "DELETE FROM plans WHERE name = ?", "t", name);
		rc = changed < 0 ? QUOTA_ERROR : changed == 0 ? QUOTA_NOT_FOUND : QUOTA_OK;
	}
	if (rc == QUOTA_OK && db_commit(db) < 0)
		rc = QUOTA_ERROR;
	if (rc != QUOTA_OK)
		db_rollback(db);
	db_unlock(db);
	return rc;
}
