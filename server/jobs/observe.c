/* observe.c - the observation hooks: metric extraction from running jobs'
 * logs on its own thread, samples, rule evaluation; see observe.h.
 *
 * The users' regexes cost what they cost, so they never run on a thread or
 * under a lock that anyone else waits for: the hooks (the backend's reader
 * thread, the jobs pass, HTTP workers) only note what is asked under the
 * leaf lock o->lock and poke the extraction thread ("metrics"), which reads
 * each job's log on a time budget per pass, stores the points with the
 * store's lock held for the write only, and drops a definition that keeps
 * hitting PCRE2's limits (extract.h). */
#include "jobs/observe.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "config/config.h"
#include "jobs/extract.h"
#include "jobs/follow.h"
#include "jobs/joblog.h"
#include "jobs/live.h"
#include "jobs/observe_int.h"
#include "jobs/observe_rules.h"
#include "labd/app.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "labd/ticker.h"
#include "sched/gpus.h"
#include "store/db.h"
#include "store/job_observe.h"
#include "store/jobs.h"
#include "store/pools.h"

/* Log bytes read for metrics per job and read, at most. */
#define EXTRACT_READ_BYTES sizeof(((struct observe *)0)->buf)
/* Time one job's extraction may take per pass of the extraction thread
 * (checked after each line; one line costs at most 40 definitions at the
 * match limit, a few ms, and only until those definitions are dropped). */
#define EXTRACT_BUDGET_MS 25
/* After a pass that left a job's log unread, the next one comes this much
 * later: a backlog costs the thread at most half a core, the rest of it
 * stays with the jobs it runs beside. */
#define EXTRACT_PAUSE_MS 25
/* While a job runs, its log is read this often. */
#define EXTRACT_EVERY_MS 250
#define FOLLOWERS_MAX 1024
#define FOLLOWERS_PER_USER 16

static long long extract_pass(void *arg);

int observe_init(struct app *app)
{
	struct observe *o = calloc(1, sizeof(*o));

	if (!o) {
		log_errno("observe: calloc");
		return -1;
	}
	pthread_mutex_init(&o->lock, NULL);
	o->app = app;
	o->follow = follow_new(app->cfg, app->db, FOLLOWERS_MAX, FOLLOWERS_PER_USER);
	if (!o->follow || ticker_start("metrics", extract_pass, o, &o->extractor) < 0) {
		follow_free(o->follow);
		pthread_mutex_destroy(&o->lock);
		free(o);
		return -1;
	}
	app->observe = o;
	return 0;
}

void observe_free(struct app *app)
{
	struct observe *o = app->observe;

	if (!o)
		return;
	ticker_stop(o->extractor);
	follow_free(o->follow);
	while (o->head) {
		struct tracked *next = o->head->next;
		extract_free(o->head->set);
		free(o->head);
		o->head = next;
	}
	pthread_mutex_destroy(&o->lock);
	free(o);
	app->observe = NULL;
}

struct follow_hub *observe_follow(struct app *app)
{
	return app->observe ? app->observe->follow : NULL;
}

/* ---- asked by other threads (o->lock only, never held for long) ---- */

/* With o->lock held: the job's entry, added when missing (its fields are
 * read by the extraction thread). NULL when memory is short (logged). */
static struct tracked *ask_locked(struct observe *o, int64_t job_id, bool *added)
{
	struct tracked *t;

	for (t = o->head; t; t = t->next)
		if (t->job_id == job_id)
			return t;
	if (!(t = calloc(1, sizeof(*t)))) {
		log_errno("observe: calloc");
		return NULL;
	}
	t->job_id = job_id;
	t->seen_gen = o->gen; /* running as far as anyone knows, until the next live set */
	t->next = o->head;
	o->head = t;
	if (added)
		*added = true;
	return t;
}

/* The job's log is complete: the extraction thread reads it to its end. */
static void ask_end(struct observe *o, int64_t job_id)
{
	struct tracked *t;

	pthread_mutex_lock(&o->lock);
	if ((t = ask_locked(o, job_id, NULL)))
		t->ended = true;
	pthread_mutex_unlock(&o->lock);
	ticker_poke(o->extractor);
}

/* The extraction thread still has work for the job (or has not begun it). */
static bool pending(struct observe *o, int64_t job_id)
{
	bool found = false;

	pthread_mutex_lock(&o->lock);
	for (struct tracked *t = o->head; t && !found; t = t->next)
		found = t->job_id == job_id;
	pthread_mutex_unlock(&o->lock);
	return found;
}

void observe_job_started(struct app *app, int64_t job_id)
{
	struct observe *o = app->observe;
	struct tracked *t;

	if (!o)
		return;
	pthread_mutex_lock(&o->lock);
	if ((t = ask_locked(o, job_id, NULL)) && !t->started_at_ms)
		t->started_at_ms = clock_wall_ms();
	pthread_mutex_unlock(&o->lock);
	ticker_poke(o->extractor);
}

void observe_job_ended(struct app *app, int64_t job_id)
{
	struct observe *o = app->observe;

	if (!o)
		return;
	ask_end(o, job_id);
	follow_job_ended(o->follow, job_id);
}

bool observe_settle_job(struct app *app, const struct job *j, int64_t log_offset, int64_t size)
{
	struct observe *o = app->observe;

	if (!o || jobs_live(j))
		return false;
	if (pending(o, j->id))
		return false;
	if (log_offset >= size)
		return true;
	ask_end(o, j->id);
	return false;
}

/* The job's command may be writing its log. */
static bool running(enum job_secondary s)
{
	return s == JOB_DOWNLOADING || s == JOB_TRAINING || s == JOB_UPLOADING ||
	       s == JOB_S_STOPPING;
}

void observe_tick(struct app *app, const struct jobs_live *live)
{
	struct observe *o = app->observe;
	bool added = false;

	if (!o)
		return;
	pthread_mutex_lock(&o->lock);
	for (size_t i = 0; i < live->n; i++) {
		const struct jobs_live_row *row = &live->row[i];
		struct tracked *t;
		if (running(row->secondary) && (t = ask_locked(o, row->id, &added))) {
			t->seen_gen = o->gen + 1;
			t->training = row->secondary == JOB_TRAINING;
		}
	}
	o->gen++;
	pthread_mutex_unlock(&o->lock);
	if (added)
		ticker_poke(o->extractor); /* else its own timer comes */
}

/* ---- the extraction thread ---- */

/* The job's metric definitions compiled (docs/jobs.md "Submit": the spec's
 * metric_definitions), each with its index in the spec. A definition that
 * does not compile (it was checked at submit, so only a changed PCRE2
 * could) is logged and left out. */
static struct extract_set *compile_defs(const struct job *j, uint8_t *spec_index)
{
	struct extract_set *set = extract_new();
	json_t *spec = j->spec ? json_loads(j->spec, 0, NULL) : NULL;
	json_t *defs = json_object_get(spec, "metric_definitions"), *d;
	size_t i;
	char err[200];

	if (!set)
		goto out;
	json_array_foreach(defs, i, d)
	{
		const char *name = json_string_value(json_object_get(d, "name"));
		const char *regex = json_string_value(json_object_get(d, "regex"));
		if (!name || !regex || i >= EXTRACT_MAX_DEFS)
			continue;
		if (extract_add(set, name, regex, err, sizeof(err)) < 0)
			log_warn("job %lld: metric %s left out: %s", (long long)j->id, name, err);
		else
			spec_index[extract_count(set) - 1] = (uint8_t)i;
	}
out:
	json_decref(spec);
	return set;
}

/* The dropped definitions as the store keeps them: bits of spec indexes. */
static uint64_t spec_dropped(const struct tracked *t)
{
	uint64_t mask = 0, dropped = t->set ? extract_dropped(t->set) : 0;

	for (size_t i = 0; i < EXTRACT_MAX_DEFS; i++)
		if (dropped & (1ULL << i))
			mask |= 1ULL << t->spec_index[i];
	return mask;
}

static int save(struct observe *o, struct tracked *t)
{
	struct job_observe_row row = {
		.log_offset = (int64_t)t->offset,
		.started_at_ms = t->started_ms,
		.first_output_at_ms = t->first_output_ms,
		.last_output_at_ms = t->last_output_ms,
		.dropped_defs = spec_dropped(t),
	};

	if (job_observe_put(o->app->db, t->job_id, &row) < 0) {
		log_error("job %lld: cannot save where its log was read", (long long)t->job_id);
		return -1;
	}
	t->dropped_saved = row.dropped_defs;
	return 0;
}

/* Reads the job's row and saved place and compiles its definitions (a
 * restarted labd-web goes on where the last one stopped). 0, or -1: the
 * job is gone or the store failed (it is forgotten; asked again later). */
static int begin(struct observe *o, struct tracked *t)
{
	struct job_observe_row row;
	struct job j;

	if (jobs_find(o->app->db, t->job_id, &j) != 1)
		return -1;
	if (job_observe_get(o->app->db, t->job_id, &row) < 0) {
		jobs_row_free(&j);
		return -1;
	}
	t->gpu = j.gpu;
	observe_spec_read(j.spec, &t->rules_spec);
	t->set = compile_defs(&j, t->spec_index);
	jobs_row_free(&j);
	for (size_t i = 0; t->set && i < extract_count(t->set); i++) {
		t->points[i] = job_metrics_count(o->app->db, t->job_id, extract_name(t->set, i));
		if (row.dropped_defs & (1ULL << t->spec_index[i]))
			extract_drop(t->set, i);
	}
	t->dropped_saved = row.dropped_defs;
	t->offset = (uint64_t)row.log_offset;
	t->started_ms = row.started_at_ms;
	t->first_output_ms = row.first_output_at_ms;
	t->last_output_ms = row.last_output_at_ms;
	t->ready = true;
	return 0;
}

/* A point of the line being matched, kept for the batch's write. */
static void on_point(void *ctx, size_t def, const char *name, double value)
{
	struct observe *o = ctx;
	(void)name;

	if (o->n_batch < OBSERVE_BATCH_POINTS)
		o->batch[o->n_batch++] = (struct observe_point){def, value};
}

/* Names the definitions dropped since the last save in the log. */
static void log_dropped(const struct tracked *t)
{
	uint64_t now = spec_dropped(t), fresh = now & ~t->dropped_saved;

	for (size_t i = 0; t->set && i < extract_count(t->set); i++)
		if (fresh & (1ULL << t->spec_index[i]))
			log_warn("job %lld: metric %s dropped: its regex hit PCRE2's limits on %d "
				 "lines",
				 (long long)t->job_id, extract_name(t->set, i), EXTRACT_DROP_AFTER);
}

/* Stores the batch's points (each metric up to its cap) and t's new offset
 * (and dropped definitions) in one transaction: a restarted labd-web
 * resumes exactly where the points stop. The store's lock is held for the
 * writes only. On failure nothing of it is kept, and t goes back to its
 * offset before (the lines are read again). */
static void store_batch(struct observe *o, struct tracked *t, uint64_t old_offset, int64_t at_ms)
{
	struct db *db = o->app->db;
	int64_t points[EXTRACT_MAX_DEFS];
	bool ok;

	memcpy(points, t->points, sizeof(points));
	log_dropped(t);
	db_lock(db);
	ok = db_begin(db) == 0;
	for (size_t i = 0; ok && i < o->n_batch; i++) {
		size_t def = o->batch[i].def;
		if (t->points[def] >= OBSERVE_METRIC_POINTS_MAX)
			continue;
		ok = job_metrics_add(db, t->job_id, extract_name(t->set, def), at_ms,
				     o->batch[i].value) == 0;
		t->points[def]++;
	}
	ok = ok && save(o, t) == 0 && db_commit(db) == 0;
	if (!ok) {
		db_rollback(db);
		memcpy(t->points, points, sizeof(points));
		t->offset = old_offset;
		log_error("job %lld: cannot store its metric points; reading again",
			  (long long)t->job_id);
	}
	db_unlock(db);
	o->n_batch = 0;
}

/* Reads the job's new whole lines (final: the log is complete, a last line
 * without newline counts) and matches them until the batch is full or the
 * clock passes until_ms (at least one line), then stores their points. */
static void read_once(struct observe *o, struct tracked *t, bool final, long long until_ms)
{
	char path[4096];
	int64_t at_ms = clock_wall_ms();
	size_t used = 0, line_len, take, defs = t->set ? extract_count(t->set) : 0;
	uint64_t old_offset = t->offset;
	ssize_t got;

	if (jobs_log_path(o->app->cfg, t->job_id, path, sizeof(path)) < 0)
		return;
	if ((got = joblog_read(path, t->offset, o->buf, EXTRACT_READ_BYTES)) <= 0)
		return;
	/* every new byte is output (a progress bar without newlines is not
	 * quiet), but a partial line read again is not new */
	if (t->offset + (uint64_t)got > t->seen_bytes) {
		t->seen_bytes = t->offset + (uint64_t)got;
		t->last_output_ms = at_ms;
		if (!t->first_output_ms)
			t->first_output_ms = at_ms;
	}
	o->n_batch = 0;
	while (o->n_batch + defs <= OBSERVE_BATCH_POINTS &&
	       (take = joblog_next_line(o->buf + used, (size_t)got - used, final, &line_len)) > 0) {
		if (t->set && extract_matching(t->set) > 0)
			extract_line(t->set, o->buf + used, line_len, on_point, o);
		used += take;
		if (clock_ms() >= until_ms)
			break;
	}
	if (used == 0)
		return;
	t->offset += used;
	store_batch(o, t, old_offset, at_ms);
}

/* Reads t's log on while lines keep coming and its budget of this pass
 * lasts. True when the budget ended it (there may be more). */
static bool read_budgeted(struct observe *o, struct tracked *t, bool final)
{
	long long until_ms = clock_ms() + EXTRACT_BUDGET_MS;
	uint64_t before;

	do {
		before = t->offset;
		read_once(o, t, final, until_ms);
	} while (t->offset > before && clock_ms() < until_ms);
	return t->offset > before;
}

/* What a pass leaves of a job. */
enum work { WORK_IDLE, WORK_MORE, WORK_FORGET };

/* What other threads asked of a job, as read at the start of its turn. */
struct asked {
	bool ended, training, running;
	int64_t started_at_ms;
};

/* One job's turn in a pass. An ended job's log is read to its end over as
 * many passes as it takes, then the rules run a last time over everything
 * it printed and sampled (a job shorter than rules_interval is judged too)
 * and it is forgotten: only then is it no longer pending (its metrics are
 * final). A job no longer running keeps its saved place; its memory goes. */
static enum work work(struct observe *o, struct tracked *t, const struct asked *a)
{
	int64_t now_ms = clock_wall_ms();
	bool more;

	if (!t->ready && begin(o, t) < 0)
		return WORK_FORGET;
	if (!t->started_ms && (a->started_at_ms || (a->running && !a->ended))) {
		/* a job running when labd-web started began "now" */
		t->started_ms = a->started_at_ms ? a->started_at_ms : now_ms;
		save(o, t);
	}
	more = read_budgeted(o, t, a->ended);
	if (a->ended) {
		if (more)
			return WORK_MORE;
		if (t->started_ms)
			observe_rules_run(o, t, clock_wall_ms());
		return WORK_FORGET;
	}
	if (a->training && now_ms - t->last_rules_ms >= o->app->cfg->jobs_rules_interval_s * 1000) {
		t->last_rules_ms = now_ms;
		observe_rules_run(o, t, now_ms);
	}
	if (!a->running)
		return WORK_FORGET;
	return more ? WORK_MORE : WORK_IDLE;
}

/* Unlinks and frees t (the extraction thread only: nobody else unlinks),
 * unless its end or start was asked for since a (its turn's reading):
 * then it stays for the next pass. */
static void forget(struct observe *o, struct tracked *t, const struct asked *a)
{
	bool keep;

	pthread_mutex_lock(&o->lock);
	keep = t->ended != a->ended || t->started_at_ms != a->started_at_ms;
	for (struct tracked **p = &o->head; *p && !keep; p = &(*p)->next)
		if (*p == t) {
			*p = t->next;
			break;
		}
	pthread_mutex_unlock(&o->lock);
	if (keep)
		return;
	extract_free(t->set);
	free(t);
}

/* One pass over every job asked for, each on its own budget. */
static long long extract_pass(void *arg)
{
	struct observe *o = arg;
	struct tracked *t, *next;
	bool more = false, any = false;

	pthread_mutex_lock(&o->lock);
	t = o->head;
	pthread_mutex_unlock(&o->lock);
	for (; t; t = next) {
		struct asked a;
		pthread_mutex_lock(&o->lock);
		a = (struct asked){.ended = t->ended, .training = t->training,
				   .running = t->seen_gen == o->gen,
				   .started_at_ms = t->started_at_ms};
		next = t->next;
		pthread_mutex_unlock(&o->lock);
		switch (work(o, t, &a)) {
		case WORK_FORGET:
			forget(o, t, &a);
			any = true; /* kept when asked for meanwhile: see it again */
			break;
		case WORK_MORE:
			more = true;
			/* fall through */
		case WORK_IDLE:
			any = true;
			break;
		}
	}
	if (more)
		return clock_ms() + EXTRACT_PAUSE_MS;
	if (!any) {
		/* something asked since the walk began: its poke comes */
		return TICKER_IDLE;
	}
	return clock_ms() + EXTRACT_EVERY_MS;
}

/* What NVML read of the GPUs the job's pool holds. */
static void gpu_reading(struct app *app, int64_t pool_id, double *percent, int64_t *memory)
{
	struct gpu_info info[GPUS_DEVICES_MAX];
	struct pool p;
	size_t n;

	*percent = -1;
	*memory = -1;
	if (!app->gpus || pools_find(app->db, pool_id, &p) != 1)
		return;
	n = gpus_snapshot(app->gpus, info, GPUS_DEVICES_MAX);
	observe_gpu_reading(info, n, p.gpus, percent, memory);
}

void observe_sample(struct app *app, const struct job *j, const struct backend_job_sample *s)
{
	struct job_sample_row row, prev;
	int64_t job_id = j->id;
	int had;

	if (!app->observe)
		return;
	row = (struct job_sample_row){
		.at_ms = s->at_ms,
		.cpu_usage_us = s->cpu_usage_us,
		.io_wait_us = s->io_wait_us,
		.cpu_percent = -1,
		.io_wait_percent = -1,
		.memory_bytes = s->memory_bytes,
		.memory_limit_bytes = s->memory_limit_bytes,
		.log_bytes = s->log_bytes,
	};
	had = job_samples_latest(app->db, job_id, &prev);
	if (had == 1 && s->at_ms > prev.at_ms && s->cpu_usage_us >= prev.cpu_usage_us) {
		double wall_us = (double)(s->at_ms - prev.at_ms) * 1000;
		/* CPU percent = cpu time / wall time / the job's CPUs (contract 7) */
		double cpus = j->cpus_milli > 0 ? (double)j->cpus_milli / 1000 : 1;
		row.cpu_percent = (double)(s->cpu_usage_us - prev.cpu_usage_us) / wall_us / cpus * 100;
		if (s->io_wait_us >= 0 && prev.io_wait_us >= 0 && s->io_wait_us >= prev.io_wait_us)
			row.io_wait_percent = (double)(s->io_wait_us - prev.io_wait_us) / wall_us * 100;
	}
	if (j->gpu)
		gpu_reading(app, j->pool_id, &row.gpu_percent, &row.gpu_memory_bytes);
	else
		row.gpu_percent = -1, row.gpu_memory_bytes = -1;
	if (job_samples_add(app->db, job_id, &row, OBSERVE_SAMPLES_KEEP) < 0)
		log_error("job %lld: cannot keep a sample", (long long)job_id);
}
