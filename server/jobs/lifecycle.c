/* lifecycle.c - the backend's pool and job events moving rows, job_run for
 * ready pools, warm keep-alive expiry, and the infrastructure-failure path
 * (retry or Interrupted). See lifecycle.h. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "jobs/lifecycle.h"
#include "jobs/live.h"
#include "jobs/moves.h"
#include "jobs/outcome.h"
#include "jobs/poke.h"
#include "jobs/preempt.h"
#include "jobs/spec.h"
#include "jobs/observe.h"
#include "labd/app.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "notify/notify.h"
#include "store/db.h"


/* The live pool row an event names, if it is that user's. */
static bool event_pool(struct app *app, const char *user, int64_t pool_id, struct pool *p)
{
	return pools_find(app->db, pool_id, p) == 1 && p->state != POOL_ENDED &&
	       strcmp(p->user_name, user) == 0;
}

/* The live job an event names, if it runs in that pool. */
static bool event_job(struct app *app, int64_t pool_id, int64_t job_id, struct job *j)
{
	if (jobs_find(app->db, job_id, j) != 1)
		return false;
	if (jobs_live(j) && j->pool_id == pool_id)
		return true;
	jobs_row_free(j);
	return false;
}

static void on_pool_ready(void *ctx, const char *user, int64_t pool_id)
{
	struct app *app = ctx;
	struct pool p;

	if (event_pool(app, user, pool_id, &p) && pools_set_ready(app->db, pool_id) == 1)
		log_info("pool %lld of %s is ready after %lld s", (long long)pool_id, user,
			 (long long)(time(NULL) - p.created_at));
	jobs_poke(app);
}

/* The job's run was lost to labd, not to its own code: it retries on a new
 * pool while attempts are left (its checkpoint folder, in the home, is kept),
 * else ends Interrupted; a job being stopped ends Stopped. */
static void job_lost(struct app *app, const struct job *j, const char *reason)
{
	char message[JOB_REASON_MAX];
	struct job_move m = {.at_ms = clock_wall_ms(), .message = message};

	if (jobs_preempt_requeue(app, j)) /* its preemption's end: no retry used */
		return;
	if (j->status == JOB_STOPPING) {
		m.status = JOB_STOPPED, m.secondary = JOB_S_STOPPED;
		snprintf(message, sizeof(message), "stopped");
	} else if (j->attempt <= j->max_retries) {
		m.status = JOB_IN_PROGRESS, m.secondary = JOB_STARTING;
		m.next_attempt = true, m.clear_pool = true;
		snprintf(message, sizeof(message),
			 "labd lost the job's sandbox (%.300s); retry %d of %d, resuming from the "
			 "checkpoint folder",
			 reason, j->attempt, j->max_retries);
	} else {
		m.status = JOB_FAILED, m.secondary = JOB_INTERRUPTED, m.failure = message;
		snprintf(message, sizeof(message), "labd lost the job's sandbox: %.300s%s", reason,
			 j->max_retries ? "; no retry left" : "");
	}
	if (jobs_move(app->db, j->id, &m) == 1) {
		log_warn("job %lld of %s: %s", (long long)j->id, j->user_name, message);
		if (m.status != JOB_IN_PROGRESS)
			observe_job_ended(app, j->id);
		jobs_changed(app, j->id);
	}
}

void jobs_pool_lost(struct app *app, const struct pool *p, const char *reason)
{
	int64_t now = time(NULL), job_id = p->job_id;
	struct job j;

	pools_end(app->db, p->id, reason, now);
	if (p->state == POOL_AVAILABLE)
		jobs_end_warm(app, p->last_job_id, reason, now);
	if (!job_id || !event_job(app, p->id, job_id, &j))
		return;
	job_lost(app, &j, reason);
	jobs_row_free(&j);
}

static void on_pool_ended(void *ctx, const char *user, int64_t pool_id, const char *cause,
			  bool failed, const char *reason)
{
	struct app *app = ctx;
	struct pool p;
	char why[JOB_REASON_MAX];

	(void)failed;
	if (!event_pool(app, user, pool_id, &p))
		return;
	snprintf(why, sizeof(why), "%.300s", reason && reason[0] ? reason : cause);
	jobs_pool_lost(app, &p, why);
	jobs_poke(app);
}

static void on_job_phase(void *ctx, const char *user, int64_t pool_id, int64_t job_id,
			 const char *phase, int64_t at_ms)
{
	struct app *app = ctx;
	struct job j;
	struct job_move m = {.status = JOB_IN_PROGRESS, .at_ms = at_ms};

	(void)user;
	if (strcmp(phase, "downloading") == 0)
		m.secondary = JOB_DOWNLOADING, m.message = "staging the inputs",
		m.from_mask = 1u << JOB_STARTING;
	else if (strcmp(phase, "training") == 0)
		m.secondary = JOB_TRAINING, m.message = "the command runs",
		m.from_mask = (1u << JOB_STARTING) | (1u << JOB_DOWNLOADING);
	else if (strcmp(phase, "uploading") == 0)
		m.secondary = JOB_UPLOADING, m.message = "making the outputs durable in the home",
		m.from_mask = (1u << JOB_STARTING) | (1u << JOB_DOWNLOADING) | (1u << JOB_TRAINING);
	else
		return;
	if (!event_job(app, pool_id, job_id, &j))
		return;
	/* a stopping job keeps its status; its phases still show in the log */
	if (j.status == JOB_IN_PROGRESS && jobs_move(app->db, job_id, &m) == 1) {
		if (m.secondary == JOB_TRAINING)
			observe_job_started(app, job_id);
		jobs_changed(app, job_id);
	}
	jobs_row_free(&j);
}

/* The job is over and its pool idle: warm for keep_alive_s, else stopped by
 * the next pass (jobs_expire_pools). */
static void keep_or_release(struct app *app, const struct job *j, const struct pool *p,
			    int64_t now)
{
	int64_t until = now + j->keep_alive_s;

	if (j->keep_alive_s <= 0 || until >= p->deadline) {
		pools_release(app->db, p->id, now, now, false);
		jobs_poke(app);
		return;
	}
	if (pools_release(app->db, p->id, until, now, true) == 1)
		jobs_set_warm(app->db, j->id, "Available", now, 0, until, "", 0);
}

/* Job ends that a full state disk kept out of the store, with the time they
 * came: applied again by the runner's pass (jobs_retry_exits) before its
 * reconciliation could take such a job for one whose end was missed. The
 * backend's reader thread holds, the runner's thread retries. */
#define HELD_EXITS_MAX 64

struct held_exit {
	char user[PARSE_USER_NAME_MAX + 1];
	int64_t pool_id, job_id, at_ms, exit_at_ms;
	char kind[16], reason[JOB_REASON_MAX], failure[1100];
	int code, signal;
	bool home_full;
};

static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static struct held_exit held[HELD_EXITS_MAX];
static int held_n;

static void hold_exit(const char *user, int64_t pool_id, int64_t job_id,
		      const struct backend_job_exit *x, int64_t at_ms)
{
	struct held_exit *h;

	pthread_mutex_lock(&held_lock);
	if (held_n == HELD_EXITS_MAX) {
		pthread_mutex_unlock(&held_lock);
		log_error("job %lld of %s: its end (%s: %s) lost: the state disk is full and %d "
			  "ends wait already",
			  (long long)job_id, user, x->kind, x->reason, HELD_EXITS_MAX);
		return;
	}
	h = &held[held_n++];
	snprintf(h->user, sizeof(h->user), "%s", user);
	h->pool_id = pool_id;
	h->job_id = job_id;
	h->at_ms = at_ms;
	h->exit_at_ms = x->at_ms;
	snprintf(h->kind, sizeof(h->kind), "%s", x->kind);
	snprintf(h->reason, sizeof(h->reason), "%s", x->reason ? x->reason : "");
	snprintf(h->failure, sizeof(h->failure), "%s", x->failure ? x->failure : "");
	h->code = x->code;
	h->signal = x->signal;
	h->home_full = x->home_full;
	pthread_mutex_unlock(&held_lock);
	log_warn("job %lld of %s: its end (%s) is held until the state disk has room",
		 (long long)job_id, user, x->kind);
}

/* at_ms: when the event came, not x->at_ms (when the command ended): the
 * event comes once the outputs are uploaded, and Uploading is billed to its end */
static void job_exited(struct app *app, const char *user, int64_t pool_id, int64_t job_id,
		       const struct backend_job_exit *x, int64_t at_ms, bool held_back)
{
	struct job j;
	struct pool p;
	char reason[JOB_REASON_MAX];
	struct job_move m = {.at_ms = at_ms};

	if (db_room(app->db) < 0) {
		hold_exit(user, pool_id, job_id, x, at_ms);
		return;
	}
	if (!event_pool(app, user, pool_id, &p) || !event_job(app, pool_id, job_id, &j))
		return;
	/* stopped, but nobody asked: labd stopped it (its shutdown or a
	 * preemption; any end of a preempted run puts it back in the queue) */
	if ((strcmp(x->kind, "stopped") == 0 && j.status != JOB_STOPPING) ||
	    (j.preempting[0] && j.status == JOB_IN_PROGRESS)) {
		job_lost(app, &j, x->reason && x->reason[0] ? x->reason : "labd stopped the job");
		pools_release(app->db, p.id, time(NULL), time(NULL), false);
		jobs_row_free(&j);
		jobs_poke(app);
		return;
	}
	jobs_outcome(&j, x, j.memory_bytes ? j.memory_bytes : p.memory_bytes, &m, reason,
		     sizeof(reason));
	/* it came while the state disk was full: its log, on that disk, lost lines */
	if (held_back)
		snprintf(reason + strlen(reason), sizeof(reason) - strlen(reason),
			 "; the state disk was full when it ended: its log may be incomplete");
	/* its log is complete now: the rest is read for metrics and the rules
	 * run a last time on observe's own thread (this is the backend's reader
	 * thread: it never waits for that); the job's metrics_complete says when */
	observe_job_ended(app, job_id);
	/* the end and the warm pool's fate in one hold of the store's (recursive)
	 * lock: nobody reads an ended job whose pool is neither warm nor released */
	db_lock(app->db);
	bool moved = jobs_move(app->db, job_id, &m) == 1;
	if (moved)
		keep_or_release(app, &j, &p, time(NULL));
	db_unlock(app->db);
	if (moved) {
		log_info("job %lld of %s: %s", (long long)job_id, user, reason);
		jobs_changed(app, job_id);
	} else if (db_full(app->db)) {
		hold_exit(user, pool_id, job_id, x, at_ms);
	}
	jobs_row_free(&j);
	jobs_poke(app);
}

static void on_job_exited(void *ctx, const char *user, int64_t pool_id, int64_t job_id,
			  const struct backend_job_exit *x)
{
	job_exited(ctx, user, pool_id, job_id, x, clock_wall_ms(), false);
}

void jobs_retry_exits(struct app *app)
{
	struct held_exit h;
	int n;

	pthread_mutex_lock(&held_lock);
	n = held_n;
	pthread_mutex_unlock(&held_lock);
	/* each once: one that meets the full disk again is held again, at the end */
	for (int i = 0; i < n && db_room(app->db) == 0; i++) {
		pthread_mutex_lock(&held_lock);
		h = held[0];
		memmove(held, held + 1, (size_t)--held_n * sizeof(held[0]));
		pthread_mutex_unlock(&held_lock);
		struct backend_job_exit x = {.kind = h.kind, .code = h.code, .signal = h.signal,
					     .at_ms = h.exit_at_ms, .reason = h.reason,
					     .failure = h.failure, .home_full = h.home_full};
		log_info("job %lld of %s: its held end is recorded now", (long long)h.job_id, h.user);
		job_exited(app, h.user, h.pool_id, h.job_id, &x, h.at_ms, true);
	}
}

static void on_job_sample(void *ctx, const char *user, int64_t pool_id, int64_t job_id,
			  const struct backend_job_sample *s)
{
	struct app *app = ctx;
	struct job j;

	(void)user;
	if (!event_job(app, pool_id, job_id, &j))
		return;
	observe_sample(app, &j, s);
	jobs_row_free(&j);
}

void jobs_events_init(struct backend_events *ev, struct app *app)
{
	(void)app; /* ev->ctx is the app already (runtime_events_init) */
	ev->pool_ready = on_pool_ready;
	ev->pool_ended = on_pool_ended;
	ev->job_phase = on_job_phase;
	ev->job_exited = on_job_exited;
	ev->job_sample = on_job_sample;
}

/* ---- from the jobs pass (runner.c) ---- */

struct ids {
	int64_t id[JOBS_LIVE_MAX];
	int n;
};

static void run_one(struct app *app, const struct job *j)
{
	struct pool p;
	char err[200] = "", reason[JOB_REASON_MAX];
	char *spec;
	int rc;

	if (pools_find(app->db, j->pool_id, &p) != 1 || p.state != POOL_IN_USE || !p.ready ||
	    p.job_id != j->id || j->preempting[0]) /* preempted before it ran: its pool goes */
		return;
	spec = jobs_backend_spec(app, j);
	if (!spec)
		return;
	/* marked first: job_phase may come back before job_run's reply */
	jobs_set_run_sent(app->db, j->id, true);
	rc = backend_job_run(app->backend, j->user_name, p.id, j->id, spec, err, sizeof(err));
	free(spec);
	if (rc == 0 || rc == -ETIMEDOUT)
		return; /* a timeout: the list tells whether it runs (reconcile.c) */
	jobs_set_run_sent(app->db, j->id, false);
	if (rc == -EBUSY)
		return; /* the pool is not idle yet: next pass */
	snprintf(reason, sizeof(reason), "the job could not be run: %.300s",
		 err[0] ? err : strerror(-rc));
	struct job_move m = {.status = JOB_FAILED, .secondary = JOB_S_FAILED,
			     .at_ms = clock_wall_ms(), .message = reason, .failure = reason};
	if (jobs_move(app->db, j->id, &m) == 1) {
		pools_release(app->db, p.id, time(NULL), time(NULL), false);
		jobs_changed(app, j->id);
	}
}

void jobs_run_ready(struct app *app, const struct jobs_live *live)
{
	static struct ids ids; /* the jobs ticker's thread only */
	struct job j;

	ids.n = 0;
	for (size_t i = 0; i < live->n; i++) {
		const struct jobs_live_row *r = &live->row[i];
		if (r->status == JOB_IN_PROGRESS && !r->run_sent && r->pool_id > 0 &&
		    (r->secondary == JOB_STARTING || r->secondary == JOB_DOWNLOADING))
			ids.id[ids.n++] = r->id;
	}
	for (int i = 0; i < ids.n; i++) {
		if (jobs_find(app->db, ids.id[i], &j) != 1)
			continue;
		if (j.status == JOB_IN_PROGRESS && !j.run_sent)
			run_one(app, &j);
		jobs_row_free(&j);
	}
}

struct due_pools {
	struct pool p[64];
	int n;
	struct pool soon[16]; /* warm pools within NOTIFY_WARM_LEAD_S of their end */
	int n_soon;
	int64_t now, next; /* next: the earliest keep-alive end still to come (0: none) */
	bool live;         /* any live pool */
};

static int collect_expired(const struct pool *p, void *ctx)
{
	struct due_pools *d = ctx;

	d->live = true;
	if (p->state != POOL_AVAILABLE)
		return 0;
	if (p->available_until <= d->now) {
		if (d->n < 64)
			d->p[d->n++] = *p;
		else
			d->next = d->now + 1; /* the rest on the next pass */
	} else {
		/* warm_pool.expiring is due NOTIFY_WARM_LEAD_S before the end */
		int64_t warn_at = p->available_until - NOTIFY_WARM_LEAD_S, due = p->available_until;
		if (warn_at > d->now)
			due = warn_at;
		else if (d->n_soon < 16)
			d->soon[d->n_soon++] = *p;
		else
			due = d->now + 1; /* the rest on the next pass */
		if (!d->next || due < d->next)
			d->next = due;
	}
	return 0;
}

int64_t jobs_expire_pools(struct app *app)
{
	struct due_pools d = {.n = 0, .now = time(NULL)};
	struct job j;

	if (pools_each_live(app->db, collect_expired, &d) < 0)
		return d.now + 1;
	for (int i = 0; i < d.n_soon; i++)
		notify_warm_pool_expiring(app, d.soon[i].user_id, d.soon[i].id,
					  d.soon[i].last_job_id, d.soon[i].available_until);
	for (int i = 0; i < d.n; i++) {
		const struct pool *p = &d.p[i];
		bool warm = false;
		if (p->last_job_id && jobs_find(app->db, p->last_job_id, &j) == 1) {
			warm = strcmp(j.warm_status, "Available") == 0;
			jobs_row_free(&j);
		}
		jobs_release_pool(app, p, warm ? "keep-alive expired" : "not kept warm");
	}
	/* a live pool not available (in use, starting) keeps the pass coming */
	return d.next ? d.next : d.live ? d.now + 60 : 0;
}
