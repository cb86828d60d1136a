/* retention.c - stored bytes, deletion and the retention sweep of training
 * jobs; see retention.h. */
#include "jobs/retention.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "config/config.h"
#include "jobs/joblog.h"
#include "jobs/moves.h"
#include "labd/app.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "store/job_storage.h"

/* A job's log and points may still grow for a while after its end (the
 * keeper drains the pipe, the extractor reads the rest of the log): it is
 * measured until this long after. */
#define SETTLE_S 300
/* Bounds of one pass, so the ticker's other work never waits long: rows
 * measured, jobs deleted. A pass that hits one is due again soon. */
#define MEASURE_MAX 256
#define DELETE_MAX 64
#define AGAIN_SOON_MS 1000

/* The cap per user is checked for users with a job ended since the last
 * complete pass, less this slack (an end is stamped with its event's time,
 * which may be written a little later), and for every user once a day. */
#define CAP_SINCE_SLACK_S 3600
#define CAP_FULL_EVERY_S 86400

static long long next_due_ms; /* 0: due now */
/* of the maintenance ticker's thread alone */
static int64_t cap_since_s, cap_full_at_s;

/* ---- measuring ---- */

struct measure {
	struct app *app;
	int64_t now;
};

static int measure_one(const struct job_storage_open *o, void *ctx)
{
	struct measure *m = ctx;
	char path[4096];
	int64_t log_bytes = 0, metric_bytes;

	if (jobs_log_path(m->app->cfg, o->job_id, path, sizeof(path)) == 0)
		log_bytes = joblog_size(path);
	metric_bytes = job_storage_metric_bytes(m->app->db, o->job_id);
	if (log_bytes < 0 || metric_bytes < 0)
		return 0; /* measured again next time */
	job_storage_set(m->app->db, o->job_id, log_bytes, metric_bytes,
			o->ended_at > 0 && m->now - o->ended_at >= SETTLE_S);
	return 0;
}

/* The open rows of user_id (0: everyone), at most MEASURE_MAX; the count or -1. */
static int measure(struct app *app, int64_t user_id)
{
	struct measure m = {app, time(NULL)};

	return job_storage_each_open(app->db, user_id, MEASURE_MAX, measure_one, &m);
}

void jobs_storage_measure(struct app *app, int64_t user_id)
{
	if (user_id > 0 && measure(app, user_id) < 0)
		log_warn("stored bytes of user %lld's jobs not measured", (long long)user_id);
}

/* ---- deleting ---- */

/* Asks the backend to remove these logs; failure is logged, the sweep
 * finds them again as orphans. */
static void remove_logs(struct app *app, const int64_t *ids, size_t n)
{
	int rc = backend_job_logs_remove(app->backend, ids, n);

	if (rc < 0)
		log_warn("%zu job logs not removed now (%s): the next sweep removes them", n,
			 strerror(-rc));
}

int jobs_delete(struct app *app, int64_t job_id)
{
	int rc = job_storage_delete_job(app->db, job_id);

	if (rc == JOB_STORAGE_LIVE)
		return -EBUSY;
	if (rc < 0)
		return -EIO;
	if (rc == 0)
		return -ENOENT;
	jobs_changed(app, job_id); /* its status streams hear it is gone */
	remove_logs(app, &job_id, 1);
	return 0;
}

struct expired {
	int64_t ids[DELETE_MAX];
	size_t n;
};

static int collect_expired(int64_t job_id, void *ctx)
{
	struct expired *e = ctx;

	e->ids[e->n++] = job_id;
	return 0;
}

/* Deletes what retention says, at most DELETE_MAX. The count found or -1. */
static int expire(struct app *app, int64_t now)
{
	const struct labd_config *cfg = app->cfg;
	struct expired e = {.n = 0};
	int64_t before = cfg->jobs_retention_s < 0 ? 0 : now - cfg->jobs_retention_s;
	int64_t since = now >= cap_full_at_s ? 0 : cap_since_s;
	size_t gone = 0;
	int n = job_storage_each_expired(app->db, before, cfg->jobs_max_kept_per_user, since,
					 DELETE_MAX, collect_expired, &e);

	if (n < 0)
		return -1;
	if (n < DELETE_MAX) { /* complete: the next looks at ends from here on */
		cap_since_s = now - CAP_SINCE_SLACK_S;
		if (since == 0)
			cap_full_at_s = now + CAP_FULL_EVERY_S;
	}
	for (size_t i = 0; i < e.n; i++)
		if (job_storage_delete_job(app->db, e.ids[i]) == 1) {
			e.ids[gone++] = e.ids[i];
			jobs_changed(app, e.ids[i]);
		}
	if (gone > 0) {
		log_info("retention: %zu ended jobs deleted", gone);
		remove_logs(app, e.ids, gone);
	}
	return n;
}

/* ---- orphaned logs ---- */

/* The job id of a log's name "<id>.log"; 0 for any other name. */
static int64_t log_name_id(const char *name)
{
	char *end;
	unsigned long long id;

	if (name[0] < '1' || name[0] > '9')
		return 0;
	errno = 0;
	id = strtoull(name, &end, 10);
	if (errno || strcmp(end, ".log") != 0 || id > INT64_MAX)
		return 0;
	return (int64_t)id;
}

/* Removes the logs in joblogs/ whose job row is gone, in batches. A log
 * exists only after its row was made (job_run follows the submit), so a
 * log without a row is one whose job was deleted. */
static void remove_orphans(struct app *app)
{
	char dir[4096];
	int64_t batch[BACKEND_JOB_LOGS_MAX];
	size_t n = 0;
	struct dirent *d;
	DIR *dp;

	snprintf(dir, sizeof(dir), "%s/joblogs", app->cfg->state_dir);
	if (!(dp = opendir(dir))) {
		if (errno != ENOENT)
			log_warn("retention: cannot read %s: %s", dir, strerror(errno));
		return;
	}
	while ((d = readdir(dp))) {
		int64_t id = log_name_id(d->d_name);
		if (id == 0 || job_storage_job_exists(app->db, id) != 0)
			continue; /* not a log, kept, or unknown now */
		batch[n++] = id;
		if (n == BACKEND_JOB_LOGS_MAX) {
			remove_logs(app, batch, n);
			n = 0;
		}
	}
	closedir(dp);
	remove_logs(app, batch, n);
}

void jobs_forget_account(struct app *app)
{
	remove_orphans(app);
}

/* ---- the sweep ---- */

long long jobs_retention_pass(struct app *app)
{
	long long now_ms = clock_ms(), due = __atomic_load_n(&next_due_ms, __ATOMIC_ACQUIRE);
	int64_t now = time(NULL);
	int measured, expired;

	if (now_ms < due)
		return due;
	measured = measure(app, 0);
	expired = expire(app, now);
	remove_orphans(app);
	due = now_ms + app->cfg->jobs_retention_sweep_s * 1000LL;
	if (measured >= MEASURE_MAX || expired >= DELETE_MAX)
		due = now_ms + AGAIN_SOON_MS;
	if (measured < 0 || expired < 0)
		log_warn("retention: the sweep could not read the store; again in %lld s",
			 (long long)app->cfg->jobs_retention_sweep_s);
	__atomic_store_n(&next_due_ms, due, __ATOMIC_RELEASE);
	return due;
}
