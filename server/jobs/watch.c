/* watch.c - the job-change registry: how it reads a job and what of it a
 * subscriber hears change; see watch.h. */
#include "jobs/watch.h"

#include <string.h>

#include "labd/app.h"
#include "labd/watch.h"
#include "store/jobs.h"

static int read_job(void *db, int64_t job_id, void *row)
{
	return jobs_find(db, job_id, row);
}

static void release_job(void *row)
{
	jobs_row_free(row);
}

/* What a reader sees move: status, secondary status, attempt, exit code,
 * pool, warm pool status, reused_by, a preemption begun and each one's end
 * (or the job gone). */
static void digest(const void *row, struct watch_digest *d)
{
	const struct job *j = row;

	_Static_assert(sizeof(j->warm_status) <= 2 * sizeof(d->word[0]), "warm_status fits");
	if (!j)
		return;
	d->word[0] = 1;
	d->word[1] = (uint64_t)j->status;
	d->word[2] = (uint64_t)j->secondary;
	d->word[3] = (uint64_t)j->attempt;
	d->word[4] = (uint64_t)j->exit_code;
	d->word[5] = (uint64_t)j->pool_id;
	d->word[6] = (uint64_t)j->reused_by;
	memcpy(&d->word[7], j->warm_status, sizeof(j->warm_status));
	d->word[9] = (uint64_t)j->preemptions << 1 | (j->preempting[0] != '\0');
}

static const struct watch_source job_source = {
	.name = "job",
	.row_size = sizeof(struct job),
	.read = read_job,
	.digest = digest,
	.release = release_job,
	.row_required = true,
};

struct watch *jobs_watch_new(struct db *db, unsigned max_per_user, unsigned max_total)
{
	return watch_new(&job_source, db, max_per_user, max_total);
}

void jobs_watch_notify(struct app *app, int64_t job_id)
{
	watch_notify(app->jobs_watch, job_id);
}
