/* moves.c - the row moves jobs/ shares; see moves.h. */
#include "jobs/moves.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "jobs/poke.h"
#include "jobs/watch.h"
#include "labd/app.h"
#include "labd/log.h"
#include "notify/notify.h"

void jobs_changed(struct app *app, int64_t job_id)
{
	jobs_watch_notify(app, job_id);
	/* job.ended or job.failed once it has ended (once: keyed by the job) */
	notify_job_changed(app, job_id);
	/* what is due changed (a wait, a keep-alive, a log to read) */
	jobs_poke(app);
}

void jobs_end_warm(struct app *app, int64_t job_id, const char *reason, int64_t now)
{
	struct job j;
	bool warm;

	if (!job_id || jobs_find(app->db, job_id, &j) != 1)
		return;
	warm = strcmp(j.warm_status, "Available") == 0;
	jobs_row_free(&j);
	if (warm && jobs_set_warm(app->db, job_id, "Terminated", 0, now, 0, reason, 0) == 0)
		jobs_changed(app, job_id);
}

int jobs_release_pool(struct app *app, const struct pool *p, const char *reason)
{
	int64_t now = time(NULL);
	int rc;

	if (p->state != POOL_AVAILABLE)
		return -EBUSY;
	/* ended first, so no job takes it meanwhile; the sandbox follows */
	if (pools_end(app->db, p->id, reason, now) != 1)
		return -EBUSY;
	jobs_end_warm(app, p->last_job_id, reason, now);
	rc = backend_pool_stop(app->backend, p->user_name, p->id, reason);
	log_info("warm pool %lld of %s released: %s", (long long)p->id, p->user_name, reason);
	return rc == -ENOENT ? 0 : rc;
}
