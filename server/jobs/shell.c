/* shell.c - a shell into a running job; see shell.h. */
#include "jobs/shell.h"

#include <errno.h>

#include "backend/backend.h"
#include "labd/app.h"

bool jobs_shell_possible(const struct job *j)
{
	return j->status == JOB_IN_PROGRESS && j->secondary == JOB_TRAINING && j->pool_id > 0;
}

int jobs_shell_open(struct app *app, const struct job *j, int host, int cols, int rows,
		    int *fd, char *err, size_t errlen)
{
	struct backend_shell s = {.user = j->user_name,
				  .pool_id = j->pool_id,
				  .job_id = j->id,
				  .cols = cols,
				  .rows = rows,
				  .host = host};

	*fd = -1;
	if (!jobs_shell_possible(j))
		return -ENOENT;
	return backend_job_shell(app->backend, &s, fd, err, errlen);
}

int jobs_shell_resize(struct app *app, int fd, int cols, int rows)
{
	return backend_job_shell_resize(app->backend, fd, cols, rows);
}
