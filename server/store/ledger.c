/* ledger.c - usage ledger rows; see ledger.h. */
#include "store/ledger.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "labd/fault.h"
#include "store/db.h"
#include "store/ledger_window.h"

/* Where an entry closes: now, but never more than the slack past the last
 * heartbeat, and never before it started. Binds (now). */
#define CLOSE_AT "max(start_at, min(?, last_heartbeat + " SLACK "))"
#define SLACK_STR(x) #x
#define SLACK_STR2(x) SLACK_STR(x)
#define SLACK SLACK_STR2(LEDGER_CLOSE_SLACK_S)
#define LIVE_BILLED "SELECT id FROM runtimes WHERE state IN ('running', 'stopping')"

static int row_plan(sqlite3_stmt *st, void *ctx)
{
	const unsigned char *name = sqlite3_column_text(st, 0);
	snprintf(ctx, LEDGER_PLAN_MAX, "%s", name ? (const char *)name : "default");
	return 0;
}

/* The plan a row is billed under: the user's own plan, else the plan of their
 * first group (by name) that has one, else "default". Per-user overrides are
 * not named: the plan says which limits the user was on, not each value. */
void ledger_plan_of(struct db *db, int64_t user_id, char out[LEDGER_PLAN_MAX])
{
	snprintf(out, LEDGER_PLAN_MAX, "default");
	if (db_one(db,
		   "SELECT COALESCE("
		   " (SELECT p.name FROM user_quotas q JOIN plans p ON p.id = q.plan_id"
		   "  WHERE q.user_id = ?),"
		   " (SELECT p.name FROM group_members m JOIN groups g ON g.id = m.group_id"
		   "  JOIN plans p ON p.id = g.plan_id WHERE m.user_id = ? ORDER BY g.name LIMIT 1),"
		   " 'default')",
		   "ii", row_plan, out, user_id, user_id) < 0)
		snprintf(out, LEDGER_PLAN_MAX, "default");
}

static int row_rate(sqlite3_stmt *st, void *ctx)
{
	*(double *)ctx = sqlite3_column_double(st, 0);
	return 0;
}

double ledger_preemptible_rate_of(struct db *db, int64_t user_id)
{
	double rate = LEDGER_PREEMPTIBLE_RATE_DEFAULT;

	/* the plan ledger_plan_of names, in the same order */
	if (db_one(db,
		   "SELECT COALESCE("
		   " (SELECT p.preemptible_rate FROM user_quotas q JOIN plans p ON p.id = q.plan_id"
		   "  WHERE q.user_id = ?),"
		   " (SELECT p.preemptible_rate FROM group_members m JOIN groups g"
		   "  ON g.id = m.group_id JOIN plans p ON p.id = g.plan_id WHERE m.user_id = ?"
		   "  ORDER BY g.name LIMIT 1),"
		   " ?)",
		   "iid", row_rate, &rate, user_id, user_id, LEDGER_PREEMPTIBLE_RATE_DEFAULT) < 0)
		rate = LEDGER_PREEMPTIBLE_RATE_DEFAULT;
	return rate;
}

static int row_user_id(sqlite3_stmt *st, void *ctx)
{
	*(int64_t *)ctx = sqlite3_column_int64(st, 0);
	return 0;
}

int ledger_open_runtime(struct db *db, int64_t runtime_id, int64_t now)
{
	FAULT_POINT("ledger.open.runtime");
	char plan[LEDGER_PLAN_MAX];
	int64_t user_id = 0;

	if (db_one(db, "SELECT user_id FROM runtimes WHERE id = ?", "i", row_user_id, &user_id,
		   runtime_id) != 1)
		return -EIO;
	ledger_plan_of(db, user_id, plan);
	/* OR IGNORE: a runtime is billed once, even if it were marked running twice */
	int rc = db_exec(db,
			 "INSERT OR IGNORE INTO ledger (runtime_id, user_id, user_name, kind, gpus,"
			 " plan, start_at, last_heartbeat, fraction_milli)"
			 " SELECT r.id, r.user_id, u.name, r.kind, r.gpus, ?, ?, ?,"
			 " r.gpu_fraction_milli"
			 " FROM runtimes r JOIN users u ON u.id = r.user_id WHERE r.id = ?",
			 "tiii", plan, now, now, runtime_id);
	return rc < 0 ? -EIO : 0;
}

int ledger_close_runtime(struct db *db, int64_t runtime_id, int64_t now)
{
	FAULT_POINT("ledger.close.runtime");
	int rc = db_exec(db,
			 "UPDATE ledger SET end_at = " CLOSE_AT ", billable_s = " CLOSE_AT
			 " - start_at, end_reason = coalesce((SELECT nullif(reason, '')"
			 " FROM runtimes WHERE id = ?), 'the runtime ended')"
			 " WHERE runtime_id = ? AND end_at IS NULL",
			 "iiii", now, now, runtime_id, runtime_id);
	return rc < 0 ? -EIO : 0;
}

int ledger_close_user(struct db *db, const char *name, int64_t now)
{
	int rc = db_exec(db,
			 "UPDATE ledger SET end_at = " CLOSE_AT ", billable_s = " CLOSE_AT
			 " - start_at, end_reason = 'account deleted'"
			 " WHERE user_name = ? AND end_at IS NULL",
			 "iit", now, now, name);
	return rc < 0 ? -EIO : 0;
}

int ledger_heartbeat(struct db *db, int64_t now)
{
	db_lock(db);
	int rc = db_exec(db,
			 "UPDATE ledger SET last_heartbeat = max(last_heartbeat, ?),"
			 " billable_s = max(last_heartbeat, ?) - start_at"
			 " WHERE end_at IS NULL AND runtime_id IN (" LIVE_BILLED ")",
			 "ii", now, now);
	db_unlock(db);
	return rc < 0 ? -EIO : rc;
}

int ledger_close_source(struct db *db, const char *source, int64_t id, int64_t now,
			const char *reason)
{
	int rc = db_exec(db,
			 "UPDATE ledger SET end_at = " CLOSE_AT ", billable_s = " CLOSE_AT
			 " - start_at, end_reason = ?"
			 " WHERE source = ? AND CASE source WHEN 'job' THEN job_id ELSE pool_id END = ?"
			 " AND end_at IS NULL",
			 "iitti", now, now, reason, source, id);
	return rc < 0 ? -EIO : 0;
}

int ledger_open_warm(struct db *db, int64_t pool_id, int64_t now)
{
	char plan[LEDGER_PLAN_MAX];
	int64_t user_id = 0;

	if (db_one(db, "SELECT user_id FROM pools WHERE id = ?", "i", row_user_id, &user_id,
		   pool_id) != 1)
		return -EIO;
	ledger_plan_of(db, user_id, plan);
	int rc = db_exec(db,
			 "INSERT INTO ledger (pool_id, job_id, source, user_id, user_name, kind, gpus,"
			 " plan, start_at, last_heartbeat, fraction_milli)"
			 " SELECT p.id, p.last_job_id, 'warm', p.user_id, u.name,"
			 " CASE WHEN p.gpu THEN 'gpu' ELSE 'cpu' END, p.gpus, ?, ?, ?,"
			 " p.gpu_fraction_milli"
			 " FROM pools p JOIN users u ON u.id = p.user_id WHERE p.id = ?"
			 " AND NOT EXISTS (SELECT 1 FROM ledger WHERE source = 'warm' AND pool_id = p.id"
			 " AND end_at IS NULL)",
			 "tiii", plan, now, now, pool_id);
	return rc < 0 ? -EIO : 0;
}

int ledger_heartbeat_jobs(struct db *db, int64_t now)
{
	db_lock(db);
	int rc = db_exec(db,
			 "UPDATE ledger SET last_heartbeat = max(last_heartbeat, ?),"
			 " billable_s = max(last_heartbeat, ?) - start_at"
			 " WHERE end_at IS NULL AND ((source = 'job' AND job_id IN"
			 " (SELECT id FROM jobs WHERE status IN ('InProgress', 'Stopping')))"
			 " OR (source = 'warm' AND pool_id IN"
			 " (SELECT id FROM pools WHERE state = 'available')))",
			 "ii", now, now);
	db_unlock(db);
	return rc < 0 ? -EIO : rc;
}

static int row_total(sqlite3_stmt *st, void *ctx)
{
	int64_t *totals_s = ctx;
	const unsigned char *kind = sqlite3_column_text(st, 0);

	if (kind)
		totals_s[strcmp((const char *)kind, "gpu") == 0] += sqlite3_column_int64(st, 1);
	return 0;
}

int ledger_totals_s(struct db *db, int64_t totals_s[2])
{
	totals_s[0] = totals_s[1] = 0;
	return db_each(db, "SELECT kind, total(billable_s) FROM ledger GROUP BY kind", "", row_total,
		       totals_s) < 0
		       ? -EIO
		       : 0;
}

int ledger_recover(struct db *db)
{
	db_lock(db);
	int rc = db_exec(db,
			 "UPDATE ledger SET end_at = last_heartbeat,"
			 " billable_s = last_heartbeat - start_at,"
			 " end_reason = 'closed on recovery at its last heartbeat'"
			 " WHERE end_at IS NULL"
			 " AND runtime_id IS NOT NULL AND runtime_id NOT IN (" LIVE_BILLED ")",
			 "");
	db_unlock(db);
	return rc < 0 ? -EIO : rc;
}

static void copy_text(char *dst, size_t len, sqlite3_stmt *st, int col)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	snprintf(dst, len, "%s", t ? (const char *)t : "");
}

struct ledger_walk {
	int (*fn)(const struct ledger_entry *e, void *ctx);
	void *ctx;
};

static int ledger_row(sqlite3_stmt *st, void *arg)
{
	struct ledger_walk *w = arg;
	struct ledger_entry e;

	memset(&e, 0, sizeof(e));
	e.id = sqlite3_column_int64(st, 0);
	e.runtime_id = sqlite3_column_int64(st, 1);
	e.user_id = sqlite3_column_int64(st, 2);
	copy_text(e.user_name, sizeof(e.user_name), st, 3);
	e.kind = strcmp((const char *)sqlite3_column_text(st, 4), "gpu") == 0 ? RUNTIME_GPU
									      : RUNTIME_CPU;
	copy_text(e.gpus, sizeof(e.gpus), st, 5);
	copy_text(e.plan, sizeof(e.plan), st, 6);
	e.start_at = sqlite3_column_int64(st, 7);
	e.end_at = sqlite3_column_int64(st, 8);
	e.billable_s = sqlite3_column_int64(st, 9);
	copy_text(e.end_reason, sizeof(e.end_reason), st, 10);
	e.last_heartbeat = sqlite3_column_int64(st, 11);
	copy_text(e.source, sizeof(e.source), st, 12);
	e.job_id = sqlite3_column_int64(st, 13);
	e.pool_id = sqlite3_column_int64(st, 14);
	copy_text(e.capacity, sizeof(e.capacity), st, 15);
	e.rate = sqlite3_column_double(st, 16);
	e.fraction_milli = (unsigned)sqlite3_column_int(st, 17);
	e.hosts = (unsigned)sqlite3_column_int(st, 18);
	return w->fn(&e, w->ctx);
}

int ledger_each(struct db *db, int64_t user_id, int64_t from_s, int64_t to_s,
		int (*fn)(const struct ledger_entry *e, void *ctx), void *ctx)
{
	struct ledger_walk w = {fn, ctx};
	/* overlap with [from, to): starts before to and has billed past from */
	int rc = db_each(db,
			 "SELECT id, coalesce(runtime_id, 0), user_id, user_name, kind, gpus, plan,"
			 " start_at, coalesce(end_at, 0), billable_s, end_reason, last_heartbeat,"
			 " source, coalesce(job_id, 0), coalesce(pool_id, 0), capacity, rate,"
			 " fraction_milli, hosts"
			 " FROM ledger WHERE (? = 0 OR user_id = ?) AND start_at < ?"
			 " AND coalesce(end_at, last_heartbeat) > ? ORDER BY start_at, id",
			 "iiii", ledger_row, &w, user_id, user_id, to_s, from_s);
	return rc < 0 ? -EIO : rc;
}

void ledger_entry_span(const struct ledger_entry *e, struct ledger_span *out)
{
	out->start_s = e->start_at;
	out->end_s = e->end_at ? e->end_at : e->last_heartbeat;
	out->kind = e->kind;
	out->fraction_milli = e->fraction_milli;
	out->hosts = e->hosts;
	out->gpus = e->kind == RUNTIME_GPU && e->gpus[0]; /* "1,2": one, and one per comma */
	for (const char *c = e->gpus; out->gpus && *c; c++)
		out->gpus += *c == ',';
}
