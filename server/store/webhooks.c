/* webhooks.c - webhook, delivery and attempt rows; see webhooks.h. */
#include "store/webhooks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/db.h"

static const char *const state_names[] = {"pending", "delivered", "failed"};

const char *webhooks_state_name(enum delivery_state s)
{
	return (unsigned)s < 3 ? state_names[s] : "pending";
}

static enum delivery_state state_parse(const char *text)
{
	for (int i = 0; i < 3; i++)
		if (text && strcmp(text, state_names[i]) == 0)
			return (enum delivery_state)i;
	return DELIVERY_PENDING;
}

static const char *text_col(sqlite3_stmt *st, int i)
{
	const char *t = (const char *)sqlite3_column_text(st, i);
	return t ? t : "";
}

static int webhook_from_row(sqlite3_stmt *st, void *out)
{
	struct webhook *w = out;

	memset(w, 0, sizeof(*w));
	w->id = sqlite3_column_int64(st, 0);
	w->user_id = sqlite3_column_int64(st, 1);
	snprintf(w->url, sizeof(w->url), "%s", text_col(st, 2));
	w->events = (unsigned)sqlite3_column_int64(st, 3);
	snprintf(w->secret, sizeof(w->secret), "%s", text_col(st, 4));
	w->created_at = sqlite3_column_int64(st, 5);
	return 0;
}

int webhooks_create(struct db *db, struct webhook *w, unsigned max)
{
	int rc;

	db_lock(db);
	/* the count and the insert in one statement: two creates at once
	 * cannot both pass the limit */
	rc = db_exec(db,
		     "INSERT INTO webhooks (user_id, url, events, secret, created_at)"
		     " SELECT ?, ?, ?, ?, ? WHERE (SELECT count(*) FROM webhooks WHERE user_id = ?) < ?",
		     "ititiii", w->user_id, w->url, (int64_t)w->events, w->secret, w->created_at,
		     w->user_id, (int64_t)max);
	if (rc == 1)
		w->id = db_last_id(db);
	db_unlock(db);
	return rc < 0 ? -1 : rc;
}

struct webhook_walk {
	int (*fn)(const struct webhook *w, void *ctx);
	void *ctx;
};

static int walk_row(sqlite3_stmt *st, void *ctx)
{
	struct webhook_walk *wk = ctx;
	struct webhook w;

	webhook_from_row(st, &w);
	w.secret[0] = '\0';
	return wk->fn(&w, wk->ctx);
}

int webhooks_each(struct db *db, int64_t user_id,
		  int (*fn)(const struct webhook *w, void *ctx), void *ctx)
{
	struct webhook_walk wk = {fn, ctx};

	return db_each(db,
		       "SELECT id, user_id, url, events, '', created_at FROM webhooks"
		       " WHERE user_id = ? ORDER BY id",
		       "i", walk_row, &wk, user_id) < 0
		       ? -1
		       : 0;
}

int webhooks_find(struct db *db, int64_t user_id, int64_t id, struct webhook *out)
{
	int rc = db_one(db,
			"SELECT id, user_id, url, events, secret, created_at FROM webhooks"
			" WHERE id = ? AND user_id = ?",
			"ii", webhook_from_row, out, id, user_id);
	return rc < 0 ? -1 : rc;
}

int webhooks_delete(struct db *db, int64_t user_id, int64_t id)
{
	int rc;

	db_lock(db);
	rc = db_exec(db, "DELETE FROM webhooks WHERE id = ? AND user_id = ?", "ii", id, user_id);
	db_unlock(db);
	return rc < 0 ? -1 : rc;
}

static int or_events(sqlite3_stmt *st, void *ctx)
{
	*(unsigned *)ctx |= (unsigned)sqlite3_column_int64(st, 0);
	return 0;
}

int webhooks_user_events(struct db *db, int64_t user_id, unsigned *events)
{
	/* SQLite has no bitwise OR aggregate; a user holds a handful of rows */
	*events = 0;
	return db_each(db, "SELECT events FROM webhooks WHERE user_id = ?", "i", or_events, events,
		       user_id) < 0
		       ? -1
		       : 0;
}

int webhooks_enqueue(struct db *db, int64_t user_id, unsigned event_bit, const char *event,
		     const char *key, const char *body, int64_t now_ms)
{
	int rc;

	db_lock(db);
	rc = db_exec(db,
		     "INSERT OR IGNORE INTO webhook_deliveries (webhook_id, event, event_key, body,"
		     " created_at_ms, next_at_ms)"
		     " SELECT w.id, ?, ?, ?, ?, ? FROM webhooks w WHERE w.user_id = ?"
		     " AND (w.events & ?) <> 0 AND (SELECT count(*) FROM webhook_deliveries d"
		     "  WHERE d.webhook_id = w.id AND d.state = 'pending') < ?",
		     "tttiiiii", event, key, body, now_ms, now_ms, user_id, (int64_t)event_bit,
		     (int64_t)WEBHOOK_PENDING_MAX);
	db_unlock(db);
	return rc < 0 ? -1 : rc;
}

#define DELIVERY_COLUMNS                                                                \
	"d.id, d.webhook_id, w.user_id, d.event, d.state, d.attempts, d.created_at_ms,"  \
	" d.next_at_ms, d.last_status, d.last_error"

static void delivery_fill(sqlite3_stmt *st, struct delivery *d)
{
	memset(d, 0, sizeof(*d));
	d->id = sqlite3_column_int64(st, 0);
	d->webhook_id = sqlite3_column_int64(st, 1);
	d->user_id = sqlite3_column_int64(st, 2);
	snprintf(d->event, sizeof(d->event), "%s", text_col(st, 3));
	d->state = state_parse(text_col(st, 4));
	d->attempts = sqlite3_column_int(st, 5);
	d->created_at_ms = sqlite3_column_int64(st, 6);
	d->next_at_ms = sqlite3_column_int64(st, 7);
	d->last_status = sqlite3_column_int(st, 8);
	snprintf(d->last_error, sizeof(d->last_error), "%s", text_col(st, 9));
}

struct due_deliveries {
	struct delivery *out;
	int max, n;
	int64_t now_ms, next_ms;
};

static int due_row(sqlite3_stmt *st, void *ctx)
{
	struct due_deliveries *du = ctx;
	struct delivery d;

	delivery_fill(st, &d);
	if (d.next_at_ms > du->now_ms || du->n == du->max) {
		du->next_ms = d.next_at_ms;
		return 1; /* ordered: the rest are later still */
	}
	d.body = strdup(text_col(st, 10));
	if (!d.body)
		return -1;
	du->out[du->n++] = d;
	return 0;
}

int webhooks_due(struct db *db, int64_t now_ms, struct delivery *out, int max, int64_t *next_ms)
{
	struct due_deliveries du = {out, max, 0, now_ms, 0};
	int rc = db_each(db,
			 "SELECT " DELIVERY_COLUMNS ", d.body FROM webhook_deliveries d"
			 " JOIN webhooks w ON w.id = d.webhook_id"
			 " WHERE d.state = 'pending' ORDER BY d.next_at_ms, d.id",
			 "", due_row, &du);

	*next_ms = du.next_ms;
	if (rc < 0) {
		for (int i = 0; i < du.n; i++)
			webhooks_delivery_release(&out[i]);
		return -1;
	}
	return du.n;
}

void webhooks_delivery_release(struct delivery *d)
{
	free(d->body);
	d->body = NULL;
}

int webhooks_record(struct db *db, const struct delivery *d, const struct delivery_attempt *a,
		    enum delivery_state state, int64_t next_at_ms)
{
	int rc = -1;

	db_lock(db);
	if (db_begin(db) < 0)
		goto out;
	if (db_exec(db,
		    "INSERT OR REPLACE INTO webhook_attempts (delivery_id, attempt, at_ms,"
		    " duration_ms, status, error) VALUES (?, ?, ?, ?, ?, ?)",
		    "iiiiit", d->id, (int64_t)a->attempt, a->at_ms, a->duration_ms,
		    (int64_t)a->status, a->error) < 0 ||
	    db_exec(db,
		    "UPDATE webhook_deliveries SET state = ?, attempts = ?, next_at_ms = ?,"
		    " last_status = ?, last_error = ? WHERE id = ?",
		    "tiiiti", webhooks_state_name(state), (int64_t)a->attempt, next_at_ms,
		    (int64_t)a->status, a->error, d->id) < 0 ||
	    db_exec(db,
		    "DELETE FROM webhook_deliveries WHERE webhook_id = ? AND state <> 'pending'"
		    " AND id NOT IN (SELECT id FROM webhook_deliveries WHERE webhook_id = ?"
		    "  AND state <> 'pending' ORDER BY id DESC LIMIT ?)",
		    "iii", d->webhook_id, d->webhook_id, (int64_t)WEBHOOK_KEPT_MAX) < 0) {
		db_rollback(db);
		goto out;
	}
	rc = db_commit(db) < 0 ? -1 : 0;
out:
	db_unlock(db);
	return rc;
}

struct dwalk {
	int (*fn)(const struct delivery *d, void *ctx);
	void *ctx;
};

static int delivery_row(sqlite3_stmt *st, void *ctx)
{
	struct dwalk *wk = ctx;
	struct delivery d;

	delivery_fill(st, &d);
	return wk->fn(&d, wk->ctx);
}

int webhooks_deliveries_each(struct db *db, int64_t webhook_id, int limit,
			     int (*fn)(const struct delivery *d, void *ctx), void *ctx)
{
	struct dwalk wk = {fn, ctx};

	return db_each(db,
		       "SELECT " DELIVERY_COLUMNS " FROM webhook_deliveries d"
		       " JOIN webhooks w ON w.id = d.webhook_id"
		       " WHERE d.webhook_id = ? ORDER BY d.id DESC LIMIT ?",
		       "ii", delivery_row, &wk, webhook_id, (int64_t)limit) < 0
		       ? -1
		       : 0;
}

struct awalk {
	int (*fn)(const struct delivery_attempt *a, void *ctx);
	void *ctx;
};

static int attempt_row(sqlite3_stmt *st, void *ctx)
{
	struct awalk *wk = ctx;
	struct delivery_attempt a = {0};

	a.delivery_id = sqlite3_column_int64(st, 0);
	a.attempt = sqlite3_column_int(st, 1);
	a.at_ms = sqlite3_column_int64(st, 2);
	a.duration_ms = sqlite3_column_int64(st, 3);
	a.status = sqlite3_column_int(st, 4);
	snprintf(a.error, sizeof(a.error), "%s", text_col(st, 5));
	return wk->fn(&a, wk->ctx);
}

int webhooks_attempts_each(struct db *db, int64_t delivery_id,
			   int (*fn)(const struct delivery_attempt *a, void *ctx), void *ctx)
{
	struct awalk wk = {fn, ctx};

	return db_each(db,
		       "SELECT delivery_id, attempt, at_ms, duration_ms, status, error"
		       " FROM webhook_attempts WHERE delivery_id = ? ORDER BY attempt",
		       "i", attempt_row, &wk, delivery_id) < 0
		       ? -1
		       : 0;
}

static int job_end_row(sqlite3_stmt *st, void *ctx)
{
	struct webhook_job_end *j = ctx;

	memset(j, 0, sizeof(*j));
	j->id = sqlite3_column_int64(st, 0);
	j->user_id = sqlite3_column_int64(st, 1);
	snprintf(j->user_name, sizeof(j->user_name), "%s", text_col(st, 2));
	snprintf(j->name, sizeof(j->name), "%s", text_col(st, 3));
	snprintf(j->status, sizeof(j->status), "%s", text_col(st, 4));
	snprintf(j->secondary, sizeof(j->secondary), "%s", text_col(st, 5));
	snprintf(j->failure_reason, sizeof(j->failure_reason), "%s", text_col(st, 6));
	j->has_exit_code = sqlite3_column_type(st, 7) != SQLITE_NULL;
	j->exit_code = sqlite3_column_int(st, 7);
	j->created_at = sqlite3_column_int64(st, 8);
	j->started_at = sqlite3_column_int64(st, 9);
	j->ended_at = sqlite3_column_int64(st, 10);
	j->training_ms = sqlite3_column_int64(st, 11);
	j->attempt = sqlite3_column_int64(st, 12);
	return 0;
}

int webhooks_job_end(struct db *db, int64_t job_id, struct webhook_job_end *out)
{
	int rc = db_one(db,
			"SELECT j.id, j.user_id, u.name, j.name, j.status, j.secondary,"
			" j.failure_reason, j.exit_code, j.created_at, j.started_at, j.ended_at,"
			" j.training_ms, j.attempt FROM jobs j JOIN users u ON u.id = j.user_id"
			" WHERE j.id = ? AND j.status IN ('Completed', 'Failed', 'Stopped')"
			" AND EXISTS (SELECT 1 FROM webhooks w WHERE w.user_id = j.user_id)",
			"i", job_end_row, out, job_id);
	return rc < 0 ? -1 : rc;
}

struct id_list {
	int64_t *ids;
	int max, n;
};

static int add_id(sqlite3_stmt *st, void *ctx)
{
	struct id_list *l = ctx;

	if (l->n == l->max)
		return 1;
	l->ids[l->n++] = sqlite3_column_int64(st, 0);
	return 0;
}

int webhooks_billed_users(struct db *db, unsigned event_bit, int64_t *ids, int max)
{
	struct id_list l = {ids, max, 0};

	return db_each(db,
		       "SELECT DISTINCT w.user_id FROM webhooks w WHERE (w.events & ?) <> 0"
		       " AND EXISTS (SELECT 1 FROM ledger l WHERE l.user_id = w.user_id"
		       "  AND l.end_at IS NULL) ORDER BY w.user_id",
		       "i", add_id, &l, (int64_t)event_bit) < 0
		       ? -1
		       : l.n;
}
