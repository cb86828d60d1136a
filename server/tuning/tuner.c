/* tuner.c - the tuner's pass over live tuning jobs; see tuner.h. */
#include "tuning/tuner.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jobs/observe.h"
#include "labd/app.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "labd/ticker.h"
#include "store/users.h"
#include "tuning/search.h"

/* Trials a pass follows at once per tuning job (at most max_parallel run,
 * and one waits Pending): more wait for a later pass. */
#define TRIALS_FOLLOWED_MAX 64
#define TRIALS_HELD_MAX (TRIALS_FOLLOWED_MAX + SEARCH_PARALLEL_MAX)

struct tuner {
	struct app *app;
	struct ticker *ticker;
	struct tuning_trial live[TRIALS_HELD_MAX]; /* a pass's trials, kept between passes */
	double rung_values[SEARCH_TRIALS_MAX + 1];  /* every trial's value at one rung */
};
/* Live tuning jobs one pass advances; more wait for the next. */
#define PASS_TUNING_MAX 256

/* One live tuning job as a pass sees it. */
struct advance {
	struct app *app;
	struct tuning_job t;
	json_t *spec, *norm;
	struct search s;
	struct tuning_trial *live; /* trials not over yet (Pending or running) */
	double *rung_values;       /* the tuner's, SEARCH_TRIALS_MAX + 1 of them */
	int n_live, n_trials;
};

static void trial_end(struct tuning_trial *tr, enum trial_status st, const char *why)
{
	tr->status = st;
	snprintf(tr->reason, sizeof(tr->reason), "%s", why);
	if (!tr->ended_at)
		tr->ended_at = time(NULL);
}

/* ---- a trial's job ---- */

struct named {
	int64_t id, created_at;
};

static int row_named(const struct job *j, void *ctx)
{
	struct named *n = ctx;

	n->id = j->id;
	n->created_at = j->created_at;
	return 1;
}

/* The job of this trial made by an earlier pass whose row was not
 * updated (labd-web ended between the two): found by its name. */
static int64_t trial_job_by_name(struct advance *a, const struct tuning_trial *tr)
{
	struct named n = {0, 0};
	struct job_filter f = {.user_id = a->t.user_id, .name = tr->job_name, .limit = 1};
	int64_t total;

	if (jobs_list(a->app->db, &f, row_named, &n, &total) < 0)
		return -1;
	return n.id && n.created_at >= a->t.created_at ? n.id : 0;
}

/* The job body of a trial: the base job, its name, its hyperparameters. */
static json_t *trial_body(struct advance *a, const struct tuning_trial *tr)
{
	json_t *body = json_deep_copy(json_object_get(a->spec, "job"));
	json_t *point = json_loads(tr->parameters, 0, NULL);

	if (body && point) {
		json_object_set_new(body, "name", json_string(tr->job_name));
		json_object_set_new(body, "hyperparameters",
				    search_hyperparameters(json_object_get(body, "hyperparameters"),
							   point));
	}
	json_decref(point);
	return body;
}

/* Stops the tuning job's search with reason (a Failed end once its trials stopped). */
static void fail_search(struct advance *a, const char *reason)
{
	if (tuning_move(a->app->db, a->t.id, TUNING_STOPPING, reason, 1u << TUNING_IN_PROGRESS,
			time(NULL)) == 1)
		a->t.status = TUNING_STOPPING;
	log_warn("tuning job %lld of %s: %s", (long long)a->t.id, a->t.user_name, reason);
}

/* Submits a Pending trial's job as the user. */
static void submit_trial(struct advance *a, struct tuning_trial *tr)
{
	struct jobs_refusal why;
	struct job j;
	char reason[TUNING_REASON_MAX];
	json_t *body;
	int64_t found = trial_job_by_name(a, tr);
	enum jobs_submit_result res;

	if (found > 0) {
		tr->job_id = found;
		tr->status = TRIAL_IN_PROGRESS;
		tuning_trial_put(a->app->db, tr);
		return;
	}
	if (found < 0 || !(body = trial_body(a, tr))) {
		log_warn("tuning job %lld: trial %d not submitted: %s", (long long)a->t.id,
			 tr->index, found < 0 ? "the store failed" : "out of memory");
		return; /* the next pass tries again */
	}
	res = jobs_submit(a->app, a->t.user_id, a->t.user_name, NULL, body, &j, &why);
	json_decref(body);
	switch (res) {
	case JOBS_SUBMIT_OK:
		tr->job_id = j.id;
		tr->status = TRIAL_IN_PROGRESS;
		tr->reason[0] = '\0';
		jobs_row_free(&j);
		break;
	case JOBS_SUBMIT_CONCURRENT: /* it waits for one of the user's jobs to end */
		snprintf(reason, sizeof(reason),
			 "waiting: you have %lld jobs in progress, your plan's concurrent_jobs",
			 (long long)why.concurrent_limit);
		if (strcmp(reason, tr->reason) == 0)
			return; /* said so already: no write each pass while it waits */
		memcpy(tr->reason, reason, sizeof(tr->reason));
		break;
	case JOBS_SUBMIT_QUOTA:
	case JOBS_SUBMIT_STORAGE:
		snprintf(reason, sizeof(reason), "a trial's job was refused: %s",
			 res == JOBS_SUBMIT_QUOTA ? "a quota window of its kind is used up"
						  : "your kept jobs hold job_storage_bytes");
		trial_end(tr, TRIAL_FAILED, reason);
		fail_search(a, reason);
		break;
	case JOBS_SUBMIT_INVALID:
		snprintf(reason, sizeof(reason), "its job was refused: %s: %s", why.err.field,
			 why.err.message);
		trial_end(tr, TRIAL_FAILED, reason);
		break;
	case JOBS_SUBMIT_EXISTS:
		snprintf(reason, sizeof(reason), "you have a job named \"%s\" already", tr->job_name);
		trial_end(tr, TRIAL_FAILED, reason);
		break;
	case JOBS_SUBMIT_ERROR:
		log_warn("tuning job %lld: trial %d not submitted (store), tried again",
			 (long long)a->t.id, tr->index);
		return;
	}
	tuning_trial_put(a->app->db, tr);
}

/* ---- hyperband's rungs ---- */

/* Records every rung the trial reached since the last pass; while it runs
 * (judge), stops its job when it trails at one. An ended trial's values
 * count for the trials after it. */
static void judge_rungs(struct advance *a, struct tuning_trial *tr, const struct job *j,
			bool judge)
{
	double *values = a->rung_values;
	struct db *db = a->app->db;
	int64_t points = tuning_metric_count(db, j->id, a->s.metric), at;
	double v;
	int n;

	while ((at = search_rung_points(&a->s, tr->rung)) > 0 && points >= at) {
		if (tuning_metric_point(db, j->id, a->s.metric, at - 1, &v) != 1 ||
		    tuning_rung_put(db, a->t.id, tr->rung, tr->index, v) < 0 ||
		    (n = tuning_rung_values(db, a->t.id, tr->rung, values, SEARCH_TRIALS_MAX + 1)) <
			    0)
			return;
		if (judge && search_rung_stops(&a->s, v, values, n)) {
			tr->status = TRIAL_EARLY_STOPPED;
			tr->has_objective = true;
			tr->objective = v;
			snprintf(tr->reason, sizeof(tr->reason),
				 "EarlyStopped: %s was %g at point %lld, not among the best 1/%d of "
				 "the %d trials that reached that point",
				 a->s.metric, v, (long long)at, a->s.reduction_factor, n);
			tuning_trial_put(db, tr);
			if (jobs_stop(a->app, j, 0, a->t.user_name) < 0)
				log_warn("tuning job %lld: early stop of job %lld did not go out",
					 (long long)a->t.id, (long long)j->id);
			return;
		}
		tr->rung++;
		tuning_trial_put(db, tr);
	}
}

/* ---- following a trial ---- */

/* Whether the ended job's log was read to its end for metrics. */
static bool metrics_complete(struct advance *a, const struct job *j)
{
	json_t *o = json_object();
	bool done = o && observe_extraction_json(a->app, j, o) == 0 &&
		    json_is_true(json_object_get(o, "metrics_complete"));

	json_decref(o);
	return done;
}

/* The trial's job is over: its objective and how it ended. */
static void trial_over(struct advance *a, struct tuning_trial *tr, const struct job *j)
{
	char reason[TUNING_REASON_MAX];
	double v;
	bool has = tuning_metric_point(a->app->db, j->id, a->s.metric, -1, &v) == 1;

	tr->started_at = j->started_at;
	tr->ended_at = j->ended_at ? j->ended_at : time(NULL);
	if (tr->status == TRIAL_EARLY_STOPPED) {
		if (has) { /* the last value it reached before the stop landed */
			tr->has_objective = true;
			tr->objective = v;
		}
	} else if (j->status == JOB_COMPLETED && has) {
		tr->has_objective = true;
		tr->objective = v;
		trial_end(tr, TRIAL_COMPLETED, "");
	} else if (j->status == JOB_COMPLETED) {
		snprintf(reason, sizeof(reason),
			 "its job completed without a value of %s in its log", a->s.metric);
		trial_end(tr, TRIAL_FAILED, reason);
	} else if (j->status == JOB_FAILED) {
		snprintf(reason, sizeof(reason), "its job failed: %.400s", j->failure_reason);
		trial_end(tr, TRIAL_FAILED, reason);
	} else {
		snprintf(reason, sizeof(reason), "its job was stopped%s%.400s",
			 j->failure_reason[0] ? ": " : "", j->failure_reason);
		tr->has_objective = has;
		tr->objective = v;
		trial_end(tr, TRIAL_STOPPED, reason);
	}
	tuning_trial_put(a->app->db, tr);
}

/* One pass over a trial not over yet. */
static void follow_trial(struct advance *a, struct tuning_trial *tr)
{
	struct job j;
	int rc;

	if (tr->status == TRIAL_PENDING && a->t.status == TUNING_STOPPING) {
		/* its job may have been submitted by a pass that raced the stop */
		int64_t found = trial_job_by_name(a, tr);
		if (found > 0) {
			tr->job_id = found;
			tr->status = TRIAL_IN_PROGRESS; /* stopped by the next pass */
		} else if (found == 0) {
			trial_end(tr, TRIAL_STOPPED, "the tuning job stopped before this trial started");
		}
		if (found >= 0)
			tuning_trial_put(a->app->db, tr);
		return;
	}
	if (tr->status == TRIAL_PENDING) {
		submit_trial(a, tr);
		return;
	}
	if ((rc = jobs_find(a->app->db, tr->job_id, &j)) == 0) {
		trial_end(tr, TRIAL_FAILED, "its job was deleted");
		tuning_trial_put(a->app->db, tr);
	}
	if (rc != 1)
		return;
	if (!jobs_live(&j)) {
		if (!metrics_complete(a, &j))
			goto out;
		if (tr->status == TRIAL_IN_PROGRESS && a->s.strategy == SEARCH_HYPERBAND)
			judge_rungs(a, tr, &j, false);
		trial_over(a, tr, &j);
	} else if (a->t.status == TUNING_STOPPING) {
		if (j.status != JOB_STOPPING)
			jobs_stop(a->app, &j, 0, a->t.user_name);
	} else if (tr->status == TRIAL_IN_PROGRESS && a->s.strategy == SEARCH_HYPERBAND) {
		judge_rungs(a, tr, &j, true);
	}
	if (jobs_live(&j) && tr->started_at != j.started_at) {
		tr->started_at = j.started_at;
		tuning_trial_put(a->app->db, tr);
	}
out:
	jobs_row_free(&j);
}

/* ---- a tuning job's pass ---- */

static int collect_trial(const struct tuning_trial *tr, void *ctx)
{
	struct advance *a = ctx;

	a->n_trials++;
	if (!tr->ended_at && a->n_live < TRIALS_FOLLOWED_MAX)
		a->live[a->n_live++] = *tr;
	return 0;
}

/* Makes trial index (0-based) Pending and submits it. */
static void new_trial(struct advance *a, int index)
{
	struct tuning_trial *tr = &a->live[a->n_live];
	json_t *point = search_point(&a->s, index);
	char *text = point ? json_dumps(point, JSON_COMPACT) : NULL;

	memset(tr, 0, sizeof(*tr));
	tr->tuning_id = a->t.id;
	tr->index = index + 1;
	snprintf(tr->job_name, sizeof(tr->job_name), "%.58s-%03u", a->t.name,
		 (unsigned)(index + 1) % 1000u);
	tr->created_at_ms = clock_wall_ms();
	json_decref(point);
	if (!text || strlen(text) >= sizeof(tr->parameters) ||
	    (snprintf(tr->parameters, sizeof(tr->parameters), "%s", text),
	     tuning_trial_add(a->app->db, tr) < 0)) {
		free(text);
		fail_search(a, "the store could not record a trial");
		return;
	}
	free(text);
	a->n_live++;
	a->n_trials++;
	submit_trial(a, tr);
}

static bool trial_live(const struct tuning_trial *tr)
{
	return !tr->ended_at;
}

static int count_running(const struct advance *a)
{
	int n = 0;

	for (int i = 0; i < a->n_live; i++)
		n += trial_live(&a->live[i]) && a->live[i].status != TRIAL_PENDING;
	return n;
}

static bool any_pending(const struct advance *a)
{
	for (int i = 0; i < a->n_live; i++)
		if (trial_live(&a->live[i]) && a->live[i].status == TRIAL_PENDING)
			return true;
	return false;
}

/* Ends the tuning job when no trial is left to run or make. */
static void maybe_end(struct advance *a)
{
	enum tuning_status end = TUNING_COMPLETED;

	for (int i = 0; i < a->n_live; i++)
		if (trial_live(&a->live[i]))
			return;
	if (a->t.status == TUNING_IN_PROGRESS && a->n_trials < a->s.max_trials)
		return;
	if (a->t.status == TUNING_STOPPING)
		end = strncmp(a->t.reason, "stopped", 7) == 0 ? TUNING_STOPPED : TUNING_FAILED;
	if (tuning_move(a->app->db, a->t.id, end, "", 1u << a->t.status, time(NULL)) == 1)
		log_info("tuning job %lld (%s) of %s ended %s after %d trials", (long long)a->t.id,
			 a->t.name, a->t.user_name, tuning_status_name(end), a->n_trials);
}

/* Whether the tuning job's user may still run jobs (an account disabled or at
 * its course's end has its jobs stopped: its search must not start new ones). */
static bool account_enabled(struct advance *a)
{
	struct user u;

	return users_find_by_id(a->app->db, a->t.user_id, &u) != 1 || !u.disabled;
}

static void advance(struct tuner *tu, int64_t id)
{
	struct jobs_submit_error err;
	struct app *app = tu->app;
	struct advance a = {.app = app, .live = tu->live, .rung_values = tu->rung_values};

	if (tuning_find_for(app->db, 0, id, &a.t) != 1)
		return;
	a.spec = json_loads(a.t.spec, 0, NULL);
	a.norm = json_object();
	if (!a.spec || !a.norm)
		goto out;
	if (search_check(a.spec, 0, a.norm, &a.s, &err) < 0) { /* never: it was checked */
		fail_search(&a, "its stored request no longer reads");
		goto out;
	}
	if (a.t.status == TUNING_IN_PROGRESS && !account_enabled(&a))
		fail_search(&a, "the account was disabled: no more trials");
	if (tuning_trials_each(app->db, id, collect_trial, &a) < 0)
		goto out;
	for (int i = 0; i < a.n_live; i++)
		follow_trial(&a, &a.live[i]);
	/* a trial waiting for concurrent_jobs holds its place: no new one meanwhile */
	while (a.t.status == TUNING_IN_PROGRESS && !any_pending(&a) &&
	       a.n_trials < a.s.max_trials && count_running(&a) < a.s.max_parallel &&
	       a.n_live < TRIALS_HELD_MAX)
		new_trial(&a, a.n_trials);
	maybe_end(&a);
out:
	json_decref(a.spec);
	json_decref(a.norm);
	tuning_row_free(&a.t);
}

struct live_ids {
	int64_t ids[PASS_TUNING_MAX];
	int n;
};

static int collect_tuning(const struct tuning_job *t, void *ctx)
{
	struct live_ids *l = ctx;

	if (l->n >= PASS_TUNING_MAX)
		return 1;
	l->ids[l->n++] = t->id;
	return 0;
}

static long long tuner_pass(void *arg)
{
	struct tuner *tu = arg;
	struct live_ids l = {.n = 0};

	/* the ids first: a trial's submit must not run inside the walk */
	if (tuning_each_live(tu->app->db, collect_tuning, &l) < 0)
		return clock_ms() + 1000;
	for (int i = 0; i < l.n; i++)
		advance(tu, l.ids[i]);
	return l.n ? clock_ms() + TUNER_POLL_MS : TICKER_IDLE;
}

int tuner_start(struct app *app)
{
	struct tuner *tu = calloc(1, sizeof(*tu));

	if (!tu)
		return log_error("tuner: out of memory");
	tu->app = app;
	if (ticker_start("tuning", tuner_pass, tu, &tu->ticker) < 0) {
		free(tu);
		return -1;
	}
	__atomic_store_n(&app->tuner, tu, __ATOMIC_RELEASE);
	return 0;
}

void tuner_stop(struct app *app)
{
	struct tuner *tu = __atomic_exchange_n(&app->tuner, NULL, __ATOMIC_SEQ_CST);

	if (!tu)
		return;
	ticker_stop(tu->ticker);
	free(tu);
}

void tuner_poke(struct app *app)
{
	struct tuner *tu = __atomic_load_n(&app->tuner, __ATOMIC_ACQUIRE);

	if (tu)
		ticker_poke(tu->ticker);
}
