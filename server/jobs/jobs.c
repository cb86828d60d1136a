/* jobs.c - the entry points: submit, stop, an account's end; see jobs.h. */
#include "jobs/jobs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "labd/app.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "jobs/retention.h"
#include "store/audit.h"
#include "store/db.h"
#include "sched/gpus.h"
#include "store/plans.h"

/* ---- submit ---- */

static bool image_configured(const char *name, void *ctx)
{
	const struct labd_config *cfg = ctx;

	for (unsigned i = 0; i < cfg->n_images; i++)
		if (strcmp(cfg->images[i].name, name) == 0)
			return true;
	return false;
}

static int64_t limit_or(int64_t v, int64_t none)
{
	return v == QUOTA_UNLIMITED || v == QUOTA_UNSET ? none : v;
}

/* The user's limits for a job from their quota status. */
static void job_limits(struct app *app, const struct quota_status *st, const char *image,
		       const char *gpu_kind, struct jobs_limits *lim)
{
	const int64_t *v = st->eff.v;

	*lim = (struct jobs_limits){
		.gpus_max = quota_gpus_per_runtime(st),
		.max_runtime_s = limit_or(v[QL_JOB_MAX_RUNTIME_S], JOBS_MAX_RUNTIME_DEFAULT_S),
		.memory_bytes = limit_or(v[QL_MEMORY_BYTES], 0),
		.cpus_milli = limit_or(v[QL_CPUS_MILLI], 0),
		.image = image,
		.gpu_kind = gpu_kind,
		.keep_alive_max_s = app->cfg->jobs_keep_alive_max_s,
		.max_wait_default_s = app->cfg->jobs_max_wait_default_s,
		.instances_max = strcmp(app->cfg->backend_kind, "slurm") == 0
					 ? (int64_t)app->cfg->slurm_max_instances
					 : 1,
		.instances_no_addresses = strcmp(app->cfg->backend_kind, "slurm") == 0 &&
					  !app->cfg->slurm_job_addresses[0],
		.image_ok = image_configured,
		.image_ctx = (void *)app->cfg,
	};
}

/* How many GPU devices of kind the lab has (docs/gpu.md), busy or not. */
static int devices_of_kind(struct app *app, const char *kind)
{
	return (int)gpus_count_kind(app->gpus, app->cfg, kind);
}

static enum jobs_submit_result invalid(struct jobs_refusal *why, const char *field,
				       const char *message)
{
	snprintf(why->err.field, sizeof(why->err.field), "%s", field);
	snprintf(why->err.message, sizeof(why->err.message), "%s", message);
	return JOBS_SUBMIT_INVALID;
}

/* The quota check of a submit: the windows of the job's kind. */
static enum jobs_submit_result check_windows(const struct quota_status *st, bool gpu,
					     struct jobs_refusal *why)
{
	int64_t deadline;

	switch (quota_check_start(st, gpu ? RUNTIME_GPU : RUNTIME_CPU, &deadline, &why->window)) {
	case QUOTA_START_EXCEEDED:
		return JOBS_SUBMIT_QUOTA;
	case QUOTA_START_NO_GPUS:
		return invalid(why, "type", "your plan allows no GPUs (gpus_per_runtime is 0)");
	case QUOTA_START_ALLOWED:
		break;
	}
	return JOBS_SUBMIT_OK;
}

/* The refusal of a GPU job asking for more devices of its kind than the lab has. */
static enum jobs_submit_result too_few_devices(struct app *app, const struct jobs_submit *s,
					       struct jobs_refusal *why)
{
	char message[160];
	int n = devices_of_kind(app, s->gpu_kind);
	bool whole = strcmp(s->gpu_kind, "whole") == 0;

	if (whole && (unsigned)n == app->cfg->n_gpu_devices)
		snprintf(message, sizeof(message), "this lab has %d GPU%s; the job asks for %d", n,
			 n == 1 ? "" : "s", s->gpu_count);
	else if (whole) /* the other cards are sliced */
		snprintf(message, sizeof(message),
			 "this lab has %d whole GPU%s (its other cards are MIG instances or shares); "
			 "the job asks for %d",
			 n, n == 1 ? "" : "s", s->gpu_count);
	else
		snprintf(message, sizeof(message),
			 "this lab has %d GPU device%s of kind \"%s\"; the job asks for %d", n,
			 n == 1 ? "" : "s", s->gpu_kind, s->gpu_count);
	/* none of the kind at all: the kind is what is wrong, not the count */
	return invalid(why, n == 0 && app->cfg->n_gpu_devices > 0 ? "gpu_kind" : "gpu_count",
		       message);
}

static enum jobs_submit_result insert(struct app *app, int64_t user_id,
				      const struct jobs_submit *s, bool network, int64_t max_live,
				      int64_t max_stored_bytes, struct job *out)
{
	char *spec = json_dumps(s->spec, JSON_COMPACT);
	struct job_new n = {
		.user_id = user_id, .name = s->name, .spec = spec, .gpu = s->gpu,
		.gpu_count = s->gpu_count, .gpu_kind = s->gpu_kind, .image = s->image,
		.memory_bytes = s->memory_bytes,
		.cpus_milli = s->cpus_milli, .network = network, .max_retries = s->max_retries,
		.preemptible = s->preemptible,
		.max_runtime_s = s->max_runtime_s, .max_wait_s = s->max_wait_s,
		.keep_alive_s = s->keep_alive_s, .grace_s = app->cfg->jobs_grace_s,
		.now_ms = clock_wall_ms(), .max_live = max_live, .max_stored_bytes = max_stored_bytes};
	int rc = spec ? jobs_create(app->db, &n, out) : -1;

	free(spec);
	if (rc == DB_CONFLICT)
		return JOBS_SUBMIT_EXISTS;
	if (rc == JOBS_CREATE_QUOTA)
		return JOBS_SUBMIT_CONCURRENT;
	if (rc == JOBS_CREATE_STORAGE)
		return JOBS_SUBMIT_STORAGE;
	return rc == 0 ? JOBS_SUBMIT_OK : JOBS_SUBMIT_ERROR;
}

enum jobs_submit_result jobs_submit(struct app *app, int64_t user_id, const char *user,
				    const char *address, json_t *body, struct job *out,
				    struct jobs_refusal *why)
{
	struct quota_status st;
	struct jobs_limits lim;
	struct jobs_submit s;
	char image[PLAN_IMAGE_MAX + 1], gpu_kind[PLAN_GPU_MAX];
	enum jobs_submit_result res;
	int64_t now = time(NULL);

	memset(why, 0, sizeof(*why));
	if (quota_status_read(app->db, app->cfg, user_id, now, &st) < 0 ||
	    plans_user_image(app->db, user_id, image, sizeof(image)) < 0 ||
	    plans_user_gpu(app->db, user_id, gpu_kind, sizeof(gpu_kind)) < 0)
		return JOBS_SUBMIT_ERROR; /* never a job nobody can bound */
	job_limits(app, &st, image, gpu_kind, &lim);
	if (jobs_submit_check(body, &lim, &s, &why->err) < 0)
		return JOBS_SUBMIT_INVALID;
	if (s.gpu && devices_of_kind(app, s.gpu_kind) < s.gpu_count) {
		res = too_few_devices(app, &s, why); /* it could never start: refused, not queued */
		jobs_submit_release(&s);
		return res;
	}
	res = check_windows(&st, s.gpu, why);
	why->concurrent_limit = st.eff.v[QL_CONCURRENT_JOBS];
	why->storage_limit = st.eff.v[QL_JOB_STORAGE_BYTES];
	/* the job's sandbox has the network the plan gives a runtime; what the
	 * user's kept jobs hold is measured first, so the limit sees it now */
	if (res == JOBS_SUBMIT_OK) {
		jobs_storage_measure(app, user_id);
		res = insert(app, user_id, &s, st.eff.v[QL_NETWORK] == QUOTA_NETWORK_EGRESS,
			     limit_or(st.eff.v[QL_CONCURRENT_JOBS], -1),
			     limit_or(st.eff.v[QL_JOB_STORAGE_BYTES], 0), out);
	}
	if (res == JOBS_SUBMIT_OK) {
		if (audit_add(app->db, now, user, "job.submit", user, address, s.name) < 0)
			log_error("audit: job.submit of %s not recorded", user);
		log_info("job %lld (%s) of %s submitted", (long long)out->id, s.name, user);
		jobs_changed(app, out->id);
		jobs_poke(app);
	}
	jobs_submit_release(&s);
	return res;
}

/* What jobs_submit checks before it inserts, for a caller that makes jobs
 * later (a tuning job's trials): the same limits and quota windows. */
enum jobs_submit_result jobs_submit_validate(struct app *app, int64_t user_id, json_t *body,
					     struct jobs_refusal *why)
{
	struct quota_status st;
	struct jobs_limits lim;
	struct jobs_submit s;
	char image[PLAN_IMAGE_MAX + 1], gpu_kind[PLAN_GPU_MAX];
	enum jobs_submit_result res;

	memset(why, 0, sizeof(*why));
	if (quota_status_read(app->db, app->cfg, user_id, time(NULL), &st) < 0 ||
	    plans_user_image(app->db, user_id, image, sizeof(image)) < 0 ||
	    plans_user_gpu(app->db, user_id, gpu_kind, sizeof(gpu_kind)) < 0)
		return JOBS_SUBMIT_ERROR;
	job_limits(app, &st, image, gpu_kind, &lim);
	if (jobs_submit_check(body, &lim, &s, &why->err) < 0)
		return JOBS_SUBMIT_INVALID;
	res = s.gpu && devices_of_kind(app, s.gpu_kind) < s.gpu_count
		      ? too_few_devices(app, &s, why)
		      : check_windows(&st, s.gpu, why);
	jobs_submit_release(&s);
	return res;
}

/* ---- stop and release ---- */

int jobs_stop(struct app *app, const struct job *j, int64_t grace_s, const char *actor)
{
	struct job_move m = {.status = JOB_STOPPED, .secondary = JOB_S_STOPPED,
			     .at_ms = clock_wall_ms(), .message = "stopped before it started"};
	int rc;

	if (!jobs_live(j) || j->status == JOB_STOPPING)
		return -EALREADY;
	if (grace_s <= 0)
		grace_s = app->cfg->jobs_grace_s;
	if (audit_add(app->db, m.at_ms / 1000, actor, "job.stop", j->user_name, NULL, j->name) < 0)
		log_error("audit: job.stop of %s not recorded", j->user_name);
	if (j->secondary == JOB_PENDING || (j->secondary == JOB_STARTING && j->pool_id == 0)) {
		m.from_mask = 1u << j->secondary;
		rc = jobs_move(app->db, j->id, &m);
		jobs_changed(app, j->id);
		return rc == 1 ? 0 : rc == 0 ? -EALREADY : -EIO;
	}
	m = (struct job_move){.status = JOB_STOPPING, .secondary = JOB_S_STOPPING,
			      .at_ms = m.at_ms, .message = "stop asked for: SIGTERM, then SIGKILL "
							   "after the grace period"};
	if (jobs_set_grace(app->db, j->id, grace_s) < 0 || jobs_move(app->db, j->id, &m) != 1)
		return -EIO;
	jobs_changed(app, j->id);
	/* not yet running its command: the pool goes, and the job with it */
	if (!j->run_sent)
		rc = backend_pool_stop(app->backend, j->user_name, j->pool_id, "the job was stopped");
	else
		rc = backend_job_stop(app->backend, j->user_name, j->pool_id, j->id, grace_s);
	if (rc == -ENOENT) { /* the backend has nothing of it: it is over */
		struct pool p;
		if (pools_find(app->db, j->pool_id, &p) == 1)
			jobs_pool_lost(app, &p, "the job's sandbox is gone");
		rc = 0;
	}
	return rc;
}

/* ---- account end ---- */

struct account_walk {
	int64_t user_id;
	int64_t ids[256];
	int n;
};

static int collect_account_job(const struct job *j, void *ctx)
{
	struct account_walk *w = ctx;

	if (j->user_id == w->user_id && j->status == JOB_IN_PROGRESS && w->n < 256)
		w->ids[w->n++] = j->id;
	return 0;
}

struct account_pools {
	int64_t user_id;
	struct pool p[16];
	int n;
};

static int collect_account_pool(const struct pool *p, void *ctx)
{
	struct account_pools *w = ctx;

	if (p->state == POOL_AVAILABLE && w->n < 16)
		w->p[w->n++] = *p;
	return 0;
}

int jobs_end_account(struct app *app, int64_t user_id, const char *reason)
{
	struct account_walk w = {.user_id = user_id};
	struct account_pools wp = {.user_id = user_id};
	struct job j;
	int rc = 0;

	if (jobs_each_live(app->db, collect_account_job, &w) < 0 ||
	    pools_each_warm(app->db, user_id, collect_account_pool, &wp) < 0) {
		log_error("jobs of user %lld could not be read to stop them", (long long)user_id);
		return -EIO;
	}
	for (int i = 0; i < w.n; i++) {
		if (jobs_find(app->db, w.ids[i], &j) != 1)
			continue;
		if (jobs_stop(app, &j, 1, NULL) < 0 && jobs_live(&j))
			rc = -EIO;
		jobs_row_free(&j);
	}
	for (int i = 0; i < wp.n; i++)
		jobs_release_pool(app, &wp.p[i], reason);
	return rc;
}
