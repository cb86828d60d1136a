/* observe.c - the observation hooks: metric extraction from running jobs'
 * logs, samples, rule evaluation; see observe.h. */
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
#include "sched/gpus.h"
#include "store/db.h"
#include "store/job_observe.h"
#include "store/jobs.h"
#include "store/pools.h"

/* Log bytes read for metrics per job and tick, at most. */
#define EXTRACT_READ_BYTES sizeof(((struct observe *)0)->buf)
/* Time one job's extraction may take per tick while its log has more. */
#define EXTRACT_BUDGET_MS 100
#define FOLLOWERS_MAX 1024
#define FOLLOWERS_PER_USER 16

int observe_init(struct app *app)
{
	struct observe *o = calloc(1, sizeof(*o));

	if (!o) {
		log_errno("observe: calloc");
		return -1;
	}
	pthread_mutex_init(&o->lock, NULL);
	o->app = app;
	observe_limits(app->cfg, &o->limits);
	o->follow = follow_new(app->cfg, app->db, FOLLOWERS_MAX, FOLLOWERS_PER_USER);
	if (!o->follow) {
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

/* The job's metric definitions compiled (docs/jobs.md "Submit": the spec's
 * metric_definitions). A definition that does not compile (it was checked
 * at submit, so only a changed PCRE2 could) is logged and left out. */
static struct extract_set *compile_defs(const struct job *j)
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
		if (name && regex && extract_add(set, name, regex, err, sizeof(err)) < 0)
			log_warn("job %lld: metric %s left out: %s", (long long)j->id, name, err);
	}
out:
	json_decref(spec);
	return set;
}

/* With o->lock held: the job's tracking, made (and its saved place read)
 * on first sight. NULL on failure. */
static struct tracked *track_locked(struct observe *o, const struct job *j)
{
	struct tracked *t;
	struct job_observe_row row;

	for (t = o->head; t; t = t->next)
		if (t->job_id == j->id)
			return t;
	if (job_observe_get(o->app->db, j->id, &row) < 0 || !(t = calloc(1, sizeof(*t))))
		return NULL;
	t->job_id = j->id;
	t->gpu = j->gpu;
	t->set = compile_defs(j);
	/* what each definition stored before (a restarted labd-web goes on) */
	for (size_t i = 0; t->set && i < extract_count(t->set); i++)
		t->points[i] = job_metrics_count(o->app->db, j->id, extract_name(t->set, i));
	t->offset = (uint64_t)row.log_offset;
	t->started_ms = row.started_at_ms;
	t->first_output_ms = row.first_output_at_ms;
	t->last_output_ms = row.last_output_at_ms;
	t->next = o->head;
	o->head = t;
	return t;
}

static void untrack_locked(struct observe *o, int64_t job_id)
{
	for (struct tracked **p = &o->head; *p; p = &(*p)->next)
		if ((*p)->job_id == job_id) {
			struct tracked *t = *p;
			*p = t->next;
			extract_free(t->set);
			free(t);
			return;
		}
}

static int save_locked(struct observe *o, const struct tracked *t)
{
	struct job_observe_row row = {
		.log_offset = (int64_t)t->offset,
		.started_at_ms = t->started_ms,
		.first_output_at_ms = t->first_output_ms,
		.last_output_at_ms = t->last_output_ms,
	};

	if (job_observe_put(o->app->db, t->job_id, &row) < 0) {
		log_error("job %lld: cannot save where its log was read", (long long)t->job_id);
		return -1;
	}
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

/* With o->lock held: stores the batch's points (each metric up to its cap)
 * and t's new offset in one transaction: a restarted labd-web resumes
 * exactly where the points stop. On failure nothing of it is kept, and t
 * goes back to its offset before (the lines are read again). */
static void store_batch_locked(struct observe *o, struct tracked *t, uint64_t old_offset,
			       int64_t at_ms)
{
	struct db *db = o->app->db;
	int64_t points[EXTRACT_MAX_DEFS];
	bool ok;

	memcpy(points, t->points, sizeof(points));
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
	ok = ok && save_locked(o, t) == 0 && db_commit(db) == 0;
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

/* With o->lock held: reads the job's new whole lines (final: the log is
 * complete, a last line without newline counts), matches them with the
 * store unlocked, then stores their points. */
static void extract_locked(struct observe *o, struct tracked *t, bool final)
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
		if (t->set)
			extract_line(t->set, o->buf + used, line_len, on_point, o);
		used += take;
	}
	if (used == 0)
		return;
	t->offset += used;
	store_batch_locked(o, t, old_offset, at_ms);
}

/* With o->lock held: reads t's log on while lines keep coming and the
 * tick's time for it lasts, so a burst of output is caught up in a few
 * ticks rather than at one read a tick. */
static void extract_more_locked(struct observe *o, struct tracked *t)
{
	long long until_ms = clock_ms() + EXTRACT_BUDGET_MS;
	uint64_t before;

	do {
		before = t->offset;
		extract_locked(o, t, false);
	} while (t->offset > before && clock_ms() < until_ms);
}

void observe_job_started(struct app *app, int64_t job_id)
{
	struct observe *o = app->observe;
	struct tracked *t;
	struct job j;

	if (!o || jobs_find(app->db, job_id, &j) != 1)
		return;
	pthread_mutex_lock(&o->lock);
	if ((t = track_locked(o, &j)) && !t->started_ms) {
		t->started_ms = clock_wall_ms();
		save_locked(o, t);
	}
	pthread_mutex_unlock(&o->lock);
	jobs_row_free(&j);
}

/* With o->lock held: the job is over: the whole rest of its log, a read at
 * a time (a last line without newline included), then a last evaluation of
 * the rules over everything it printed and sampled (a job shorter than
 * rules_interval is judged too); its tracking goes. */
static void finish_locked(struct observe *o, const struct job *j)
{
	struct tracked *t = track_locked(o, j);

	for (uint64_t before = UINT64_MAX; t && t->offset != before;) {
		before = t->offset;
		extract_locked(o, t, true);
	}
	if (t && t->started_ms)
		observe_rules_locked(o, t, clock_wall_ms());
	untrack_locked(o, j->id);
}

void observe_job_ended(struct app *app, int64_t job_id)
{
	struct observe *o = app->observe;
	struct job j;

	if (!o)
		return;
	pthread_mutex_lock(&o->lock);
	if (jobs_find(app->db, job_id, &j) == 1) {
		finish_locked(o, &j);
		jobs_row_free(&j);
	}
	pthread_mutex_unlock(&o->lock);
	follow_job_ended(o->follow, job_id);
}

void observe_settle(struct app *app, int64_t job_id)
{
	struct observe *o = app->observe;
	struct job_observe_row row;
	char path[4096];
	struct job j;
	int64_t size;

	/* cheap first: nothing of the log is left unread */
	if (!o || jobs_log_path(app->cfg, job_id, path, sizeof(path)) < 0 ||
	    (size = joblog_size(path)) <= 0 || job_observe_get(app->db, job_id, &row) < 0 ||
	    row.log_offset >= size)
		return;
	if (jobs_find(app->db, job_id, &j) != 1)
		return;
	if (!jobs_live(&j)) {
		pthread_mutex_lock(&o->lock);
		finish_locked(o, &j);
		pthread_mutex_unlock(&o->lock);
	}
	jobs_row_free(&j);
}

/* The job's command may be writing its log. */
static bool running(enum job_secondary s)
{
	return s == JOB_DOWNLOADING || s == JOB_TRAINING || s == JOB_UPLOADING ||
	       s == JOB_S_STOPPING;
}

/* gcc 12's -fanalyzer (make analyze) loses the store to o->head along this path and
 * reports the tracking that track_locked made as leaked; it stays on the list, which
 * the sweep below and observe_free free. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wanalyzer-malloc-leak"
#endif
void observe_tick(struct app *app, const struct jobs_live *live)
{
	struct observe *o = app->observe;
	int64_t now_ms = clock_wall_ms();

	if (!o)
		return;
	for (size_t i = 0; i < live->n; i++) {
		const struct jobs_live_row *row = &live->row[i];
		struct tracked *t;
		struct job j;
		if (!running(row->secondary))
			continue;
		pthread_mutex_lock(&o->lock);
		for (t = o->head; t && t->job_id != row->id; t = t->next)
			;
		if (!t && jobs_find(app->db, row->id, &j) == 1) {
			t = track_locked(o, &j);
			jobs_row_free(&j);
		}
		if (t) {
			t->seen_tick = o->ticks + 1;
			if (!t->started_ms) {
				t->started_ms = now_ms; /* a job running when labd-web started */
				save_locked(o, t);
			}
			extract_more_locked(o, t);
			if (row->secondary == JOB_TRAINING &&
			    now_ms - t->last_rules_ms >= app->cfg->jobs_rules_interval_s * 1000) {
				t->last_rules_ms = now_ms;
				observe_rules_locked(o, t, now_ms);
			}
		}
		pthread_mutex_unlock(&o->lock);
	}
	/* a job that ended without observe_job_ended (or not running now)
	 * keeps its saved place; its memory goes */
	pthread_mutex_lock(&o->lock);
	o->ticks++;
	for (struct tracked **p = &o->head; *p;) {
		struct tracked *t = *p;
		if (t->seen_tick == o->ticks) {
			p = &t->next;
			continue;
		}
		*p = t->next;
		extract_free(t->set);
		free(t);
	}
	pthread_mutex_unlock(&o->lock);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/* What NVML read of the GPUs the job's pool holds. */
static void gpu_reading(struct app *app, int64_t pool_id, double *percent, int64_t *memory)
{
	struct gpu_info info[CONFIG_MAX_GPUS];
	struct pool p;
	size_t n;

	*percent = -1;
	*memory = -1;
	if (!app->gpus || pools_find(app->db, pool_id, &p) != 1)
		return;
	n = gpus_snapshot(app->gpus, info, CONFIG_MAX_GPUS);
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
