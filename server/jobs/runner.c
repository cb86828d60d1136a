/* runner.c - the jobs pass on a ticker; see runner.h. */
#include "jobs/runner.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>

#include "jobs/dispatch.h"
#include "jobs/lifecycle.h"
#include "jobs/live.h"
#include "jobs/observe.h"
#include "jobs/poke.h"
#include "jobs/preempt.h"
#include "jobs/reconcile.h"
#include "labd/app.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "labd/ticker.h"
#include "notify/notify.h"
#include "store/ledger.h"

/* While anything is live, pools are reconciled with the backend's list at
 * least this often, even when nothing asked for it. */
#define SAFETY_NET_S 60
/* While a job's command may write its log: metrics read this often. */
#define LOG_READ_EVERY_MS 250
/* While a job waits (for a pool, GPUs, a pool becoming idle): looked at
 * again this often. What frees a GPU is not always jobs/' to see (a runtime
 * that ends), so a waiting job does not rely on a poke alone. */
#define WAIT_RECHECK_MS 1000

/* The runner: its handle (app->jobs) first, then what the pass keeps. */
struct runner_state {
	struct jobs_runner handle;
	struct app *app;
	time_t last_full, last_beat;
	bool confirmed; /* pools matched to the backend's list since this process started */
	struct jobs_live live; /* this pass's read of the live jobs */
};

static int collect_live(const struct job *j, void *ctx)
{
	struct jobs_live *l = ctx;

	if (l->n >= JOBS_LIVE_MAX)
		return 1;
	l->row[l->n++] = (struct jobs_live_row){
		.id = j->id, .pool_id = j->pool_id, .created_at = j->created_at,
		.max_wait_s = j->max_wait_s, .status = j->status, .secondary = j->secondary,
		.run_sent = j->run_sent};
	return 0;
}

/* Bills on (heartbeat) only once pools were matched to the backend's list
 * since this process started: after a crash a job is billed on only when
 * its sandbox is known to have lived on. */
static void heartbeat(struct runner_state *run)
{
	time_t now = time(NULL);

	if (!run->confirmed || now - run->last_beat < LEDGER_HEARTBEAT_S)
		return;
	if (ledger_heartbeat_jobs(run->app->db, now) < 0) {
		log_error("ledger: jobs heartbeat not recorded; retrying");
	} else {
		run->last_beat = now;
		notify_quota_pass(run->app); /* quota.low for whoever passed the mark */
	}
}

static long long earlier(long long a, long long b)
{
	if (a == TICKER_IDLE)
		return b;
	return b == TICKER_IDLE || a < b ? a : b;
}

/* When epoch second at comes (one already past: in a second, not a busy loop). */
static long long at_second(int64_t at)
{
	long long due = clock_ms_at(at * 1000), now = clock_ms();

	return due > now ? due : now + 1000;
}

/* What the live set asks of the next pass. */
static long long live_due(const struct jobs_live *l)
{
	long long due = TICKER_IDLE;

	for (size_t i = 0; i < l->n; i++) {
		const struct jobs_live_row *r = &l->row[i];
		bool writing = r->secondary == JOB_DOWNLOADING || r->secondary == JOB_TRAINING ||
			       r->secondary == JOB_UPLOADING || r->secondary == JOB_S_STOPPING;
		bool waiting = r->status == JOB_IN_PROGRESS &&
			       (r->secondary == JOB_PENDING || r->secondary == JOB_STARTING ||
				!r->run_sent);
		if (writing)
			due = earlier(due, clock_ms() + LOG_READ_EVERY_MS);
		else if (waiting)
			due = earlier(due, clock_ms() + WAIT_RECHECK_MS);
	}
	return due;
}

/* One pass: a reconciliation when asked for (or the safety net is due), then
 * over one read of the live jobs: waits past max_wait_s, warm pools past
 * their keep-alive, dispatch, job_run, the logs; the heartbeat. */
static long long pass(void *arg)
{
	struct runner_state *run = arg;
	struct app *app = run->app;
	struct jobs_live *l = &run->live;
	int64_t keep_end;

	jobs_retry_exits(app); /* ends a full state disk held back, first */
	if ((jobs_take_wanted(&run->handle) || time(NULL) - run->last_full >= SAFETY_NET_S) &&
	    jobs_reconcile(app) == 0) {
		run->last_full = time(NULL);
		run->confirmed = true;
	}
	l->n = 0;
	if (jobs_each_live(app->db, collect_live, l) < 0)
		return clock_ms() + WAIT_RECHECK_MS; /* the store answers again: no reason to sleep */
	jobs_expire_waits(app);
	keep_end = jobs_expire_pools(app);
	jobs_dispatch(app, l);
	jobs_preempt(app, l);
	jobs_run_ready(app, l);
	observe_tick(app, l);
	if (l->n == 0 && keep_end == 0)
		return TICKER_IDLE; /* nothing live: a submit or an event pokes */
	heartbeat(run);
	long long due = live_due(l);
	if (keep_end)
		due = earlier(due, at_second(keep_end));
	due = earlier(due, at_second(run->last_beat + LEDGER_HEARTBEAT_S));
	return earlier(due, at_second(run->last_full + SAFETY_NET_S));
}

int jobs_runner_start(struct app *app, struct jobs_runner **out)
{
	struct runner_state *run = calloc(1, sizeof(*run));
	struct ticker *t;

	if (!run)
		return log_errno("jobs: calloc");
	run->app = app;
	run->handle.wanted = true;
	if (ticker_start("jobs", pass, run, &t) < 0) {
		free(run);
		return log_error("jobs: cannot start the jobs ticker");
	}
	__atomic_store_n(&run->handle.ticker, t, __ATOMIC_RELEASE);
	__atomic_store_n(out, &run->handle, __ATOMIC_RELEASE);
	/* a poke before the handle was set was lost: one more pass sees its move */
	ticker_poke(t);
	return 0;
}

void jobs_runner_stop(struct jobs_runner *r)
{
	if (!r)
		return;
	ticker_stop(r->ticker);
	free((struct runner_state *)((char *)r - offsetof(struct runner_state, handle)));
}

void jobs_connected(struct app *app)
{
	jobs_wake(app);
}
