/* reconcile.c - pool rows against the backend's list (job sandboxes are the
 * entries with pool_id > 0), at start-up, when the channel comes up and every
 * minute: what the events of a restart window would have said is recovered
 * from the list. See jobs.h and docs/jobs.md "Restarts". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jobs/lifecycle.h"
#include "jobs/moves.h"
#include "jobs/reconcile.h"
#include "jobs/observe.h"
#include "jobs/preempt.h"
#include "labd/app.h"
#include "labd/clock.h"
#include "labd/log.h"

#define ROWS_MAX 512

struct rows {
	struct pool p[ROWS_MAX];
	int n;
	bool overflow;
};

static int collect(const struct pool *p, void *ctx)
{
	struct rows *r = ctx;

	if (r->n == ROWS_MAX) {
		r->overflow = true;
		return 1;
	}
	r->p[r->n++] = *p;
	return 0;
}

static const struct backend_sandbox *find(const struct backend_sandbox *s, size_t n,
					  const struct pool *p)
{
	for (size_t i = 0; i < n; i++)
		if (s[i].pool_id == p->id && strcmp(s[i].user, p->user_name) == 0)
			return &s[i];
	return NULL;
}

/* The pool runs no job, but the row's job was past Starting: its job_exited
 * was missed (labd-web was down when it ended). Its outcome is unknown: it
 * fails with the reason said plainly; the log in the home tells the rest. */
static void missed_exit(struct app *app, const struct pool *p)
{
	struct job j;

	if (jobs_find(app->db, p->job_id, &j) != 1)
		return;
	if (jobs_live(&j) && j.pool_id == p->id && jobs_preempt_requeue(app, &j)) {
		pools_release(app->db, p->id, time(NULL), time(NULL), false);
	} else if (jobs_live(&j) && j.run_sent && j.pool_id == p->id) {
		struct job_move m = {.status = j.status == JOB_STOPPING ? JOB_STOPPED : JOB_FAILED,
				     .secondary = j.status == JOB_STOPPING ? JOB_S_STOPPED
									   : JOB_S_FAILED,
				     .at_ms = clock_wall_ms(),
				     .message = "labd lost the job's end (labd-web was restarting "
						"when it ended); see its log"};
		m.failure = m.status == JOB_FAILED ? m.message : NULL;
		if (jobs_move(app->db, j.id, &m) == 1) {
			pools_release(app->db, p->id, time(NULL), time(NULL), false);
			observe_job_ended(app, j.id);
			jobs_changed(app, j.id);
		}
	}
	jobs_row_free(&j);
}

/* The first pool this web process asked for (0: none yet). Pool ids only grow
 * (AUTOINCREMENT), so a starting row below it was asked for by a web process
 * before this one, and the list lacking it means that start is gone: the
 * supervisor never heard it, or ended it unfinished when labd stopped
 * (keep_on_shutdown = false). It is lost at once rather than after the grace and
 * the next full pass (~60 s in Starting, billed for nothing). By id, not by time:
 * a restart within the second the pool was asked for (or a clock stepped back)
 * would pass for a start of this process's own. */
static int64_t first_own_pool;

void jobs_reconcile_own_pool(int64_t id)
{
	int64_t none = 0;

	__atomic_compare_exchange_n(&first_own_pool, &none, id, false, __ATOMIC_SEQ_CST,
				    __ATOMIC_SEQ_CST);
}

/* A start this web process asked for, within the grace: the list may not have it yet. */
static bool may_be_unlisted(const struct pool *p, int64_t now)
{
	int64_t own = __atomic_load_n(&first_own_pool, __ATOMIC_SEQ_CST);

	return p->state == POOL_STARTING && now - p->created_at <= JOBS_START_GRACE_S && own &&
	       p->id >= own;
}

static void reconcile_pool(struct app *app, const struct pool *p, const struct backend_sandbox *s,
			   int64_t now)
{
	if (!s || strcmp(s->state, "ended") == 0) {
		if (may_be_unlisted(p, now))
			return;
		jobs_pool_lost(app, p, s && s->reason[0] ? s->reason : "the job's sandbox is gone");
		return;
	}
	if (s->ready && !p->ready)
		pools_set_ready(app->db, p->id); /* pool_ready came before we listened */
	if (p->state == POOL_IN_USE && p->ready && s->ready && s->job_id == 0 && p->job_id)
		missed_exit(app, p);
}

/* A job sandbox that no live row accounts for is stopped. */
static void stop_strays(struct app *app, const struct rows *rows, const struct backend_sandbox *s,
			size_t n)
{
	for (size_t i = 0; i < n; i++) {
		bool owned = false;
		if (s[i].pool_id <= 0 || strcmp(s[i].state, "ended") == 0 ||
		    strcmp(s[i].state, "stopping") == 0)
			continue;
		for (int k = 0; k < rows->n && !owned; k++)
			owned = rows->p[k].id == s[i].pool_id &&
				strcmp(rows->p[k].user_name, s[i].user) == 0;
		if (owned)
			continue;
		log_warn("job sandbox %lld of %s has no pool row; stopping it",
			 (long long)s[i].pool_id, s[i].user);
		backend_pool_stop(app->backend, s[i].user, s[i].pool_id, "no job accounts for it");
	}
}

int jobs_reconcile(struct app *app)
{
	struct backend_sandbox *list = NULL;
	struct rows *rows = calloc(1, sizeof(*rows));
	size_t n = 0;
	int64_t now = time(NULL);
	int rc = -1;

	if (!rows)
		return -1;
	if (backend_list(app->backend, &list, &n) < 0)
		goto out;
	/* past ROWS_MAX live pools nothing is decided, rather than on part of them */
	if (pools_each_live(app->db, collect, rows) < 0 || rows->overflow)
		goto out;
	for (int i = 0; i < rows->n; i++)
		reconcile_pool(app, &rows->p[i], find(list, n, &rows->p[i]), now);
	stop_strays(app, rows, list, n);
	rc = 0;
out:
	free(list);
	free(rows);
	return rc;
}
