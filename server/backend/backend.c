/* backend.c - dispatch through a backend's operations; see backend.h. */
#include "backend/backend.h"

#include <errno.h>

int backend_start(struct backend *b, const struct backend_start *s, char *endpoint, char *err,
		  size_t errlen)
{
	return b->ops->start(b, s, endpoint, err, errlen);
}

int backend_stop(struct backend *b, const char *user, int64_t runtime_id, const char *reason)
{
	return b->ops->stop(b, user, runtime_id, reason);
}

int backend_user_deleted(struct backend *b, const char *user, int64_t user_id)
{
	return b->ops->user_deleted(b, user, user_id);
}

int backend_list(struct backend *b, struct backend_sandbox **out, size_t *n)
{
	return b->ops->list(b, out, n);
}

const char *backend_warnings(struct backend *b)
{
	return b->ops->warnings ? b->ops->warnings(b) : "";
}

int backend_ping(struct backend *b)
{
	return b->ops->ping(b);
}

void backend_free(struct backend *b)
{
	if (b)
		b->ops->free(b);
}

int backend_home_usage(struct backend *b, const char *user, int64_t user_id,
		       struct backend_home *out)
{
	return b->ops->home_usage ? b->ops->home_usage(b, user, user_id, out) : -ENOSYS;
}

int backend_home_resize(struct backend *b, const char *user, int64_t user_id, int64_t size_bytes,
			enum backend_home_applied *applied)
{
	return b->ops->home_resize ? b->ops->home_resize(b, user, user_id, size_bytes, applied)
				   : -ENOSYS;
}

int backend_pool_start(struct backend *b, const struct backend_pool_start *s, char *err,
		       size_t errlen)
{
	return b->ops->pool_start ? b->ops->pool_start(b, s, err, errlen) : -ENOSYS;
}

int backend_pool_stop(struct backend *b, const char *user, int64_t pool_id, const char *reason)
{
	return b->ops->pool_stop ? b->ops->pool_stop(b, user, pool_id, reason) : -ENOSYS;
}

int backend_job_run(struct backend *b, const char *user, int64_t pool_id, int64_t job_id,
		    const char *spec_json, char *err, size_t errlen)
{
	return b->ops->job_run ? b->ops->job_run(b, user, pool_id, job_id, spec_json, err, errlen)
			       : -ENOSYS;
}

int backend_job_stop(struct backend *b, const char *user, int64_t pool_id, int64_t job_id,
		     int64_t grace_s)
{
	return b->ops->job_stop ? b->ops->job_stop(b, user, pool_id, job_id, grace_s) : -ENOSYS;
}

int backend_job_logs_remove(struct backend *b, const int64_t *job_ids, size_t n)
{
	if (n == 0)
		return 0;
	if (n > BACKEND_JOB_LOGS_MAX)
		return -E2BIG;
	return b->ops->job_logs_remove ? b->ops->job_logs_remove(b, job_ids, n) : -ENOSYS;
}

int backend_job_shell(struct backend *b, const struct backend_shell *s, int *fd, char *err,
		      size_t errlen)
{
	*fd = -1;
	if (err && errlen)
		err[0] = '\0';
	return b->ops->job_shell ? b->ops->job_shell(b, s, fd, err, errlen) : -ENOSYS;
}

int backend_job_shell_resize(struct backend *b, int fd, int cols, int rows)
{
	if (!b || fd < 0 || cols < 1 || cols > 1000 || rows < 1 || rows > 1000)
		return -EINVAL;
	return b->ops->job_shell_resize ? b->ops->job_shell_resize(b, fd, cols, rows) : -ENOSYS;
}

int backend_gpu_processes_end(struct backend *b, const char *user, int64_t runtime_id,
			      int64_t pool_id, const unsigned *pids, size_t n)
{
	if (!b)
		return -ENOSYS;
	if (n > BACKEND_GPU_PIDS_MAX)
		n = BACKEND_GPU_PIDS_MAX;
	return b->ops->gpu_processes_end
		       ? b->ops->gpu_processes_end(b, user, runtime_id, pool_id, pids, n)
		       : -ENOSYS;
}
