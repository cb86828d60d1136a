/* request.c - a tuning job's create and stop; see tuner.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "labd/app.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "store/audit.h"
#include "store/db.h"
#include "tuning/search.h"
#include "tuning/tuner.h"

static enum jobs_submit_result invalid(struct jobs_refusal *why, const char *field,
				       const char *message)
{
	snprintf(why->err.field, sizeof(why->err.field), "%s", field);
	snprintf(why->err.message, sizeof(why->err.message), "%s", message);
	return JOBS_SUBMIT_INVALID;
}

static enum jobs_submit_result check_name(json_t *body, struct jobs_refusal *why)
{
	json_t *name = json_object_get(body, "name");
	const char *s = json_string_value(name);

	if (!s || strlen(s) > TUNING_NAME_MAX || !jobs_name_ok(s))
		return invalid(why, "name",
			       "field \"name\" must match ^[a-z0-9][a-z0-9-]{0,57}$ (its trials' "
			       "jobs are named NAME-001, NAME-002...)");
	return JOBS_SUBMIT_OK;
}

static enum jobs_submit_result check_base(json_t *body, struct jobs_refusal *why)
{
	json_t *job = json_object_get(body, "job");

	if (!json_is_object(job))
		return invalid(why, "job",
			       "field \"job\" must be an object: the base job, as POST /api/v1/jobs "
			       "takes it, without \"name\"");
	if (json_object_get(job, "name"))
		return invalid(why, "job.name",
			       "the base job has no name: its trials' jobs are named after the "
			       "tuning job");
	return JOBS_SUBMIT_OK;
}

/* The base job checked by jobs_submit's own code, as the first trial. */
static enum jobs_submit_result check_trial(struct app *app, int64_t user_id, json_t *body,
					   const struct search *s, struct jobs_refusal *why)
{
	char name[64], field[sizeof(why->err.field)];
	json_t *trial = json_deep_copy(json_object_get(body, "job"));
	json_t *point = search_point(s, 0);
	enum jobs_submit_result res = JOBS_SUBMIT_ERROR;

	if (!trial || !point)
		goto out;
	snprintf(name, sizeof(name), "%s-001", json_string_value(json_object_get(body, "name")));
	json_object_set_new(trial, "name", json_string(name));
	json_object_set_new(trial, "hyperparameters",
			    search_hyperparameters(json_object_get(trial, "hyperparameters"), point));
	res = jobs_submit_validate(app, user_id, trial, why);
	if (res == JOBS_SUBMIT_INVALID) {
		snprintf(field, sizeof(field), "job.%.90s", why->err.field);
		memcpy(why->err.field, field, sizeof(field));
	}
out:
	json_decref(trial);
	json_decref(point);
	return res;
}

/* The objective's metric is one of the base job's metric_definitions. */
static enum jobs_submit_result check_metric(json_t *body, const struct search *s,
					    struct jobs_refusal *why)
{
	json_t *defs = json_object_get(json_object_get(body, "job"), "metric_definitions"), *d;
	size_t i;

	json_array_foreach(defs, i, d) {
		const char *name = json_string_value(json_object_get(d, "name"));
		if (name && strcmp(name, s->metric) == 0)
			return JOBS_SUBMIT_OK;
	}
	snprintf(why->err.field, sizeof(why->err.field), "objective.metric");
	snprintf(why->err.message, sizeof(why->err.message),
		 "metric \"%.100s\" is not one of the base job's metric_definitions (job."
		 "metric_definitions[].name)",
		 s->metric);
	return JOBS_SUBMIT_INVALID;
}

enum jobs_submit_result tuner_create(struct app *app, int64_t user_id, const char *user,
				     const char *address, json_t *body, int64_t *id,
				     struct jobs_refusal *why)
{
	struct search s;
	json_t *norm = json_object();
	char *spec = NULL;
	enum jobs_submit_result res;
	int rc;

	memset(why, 0, sizeof(*why));
	if (!norm)
		return JOBS_SUBMIT_ERROR;
	if ((res = check_name(body, why)) != JOBS_SUBMIT_OK ||
	    (res = check_base(body, why)) != JOBS_SUBMIT_OK)
		goto out;
	json_object_set(norm, "name", json_object_get(body, "name"));
	/* a seed nobody gave: the clock's, kept in the request so a restart draws the same */
	if (search_check(body, (uint64_t)clock_wall_ms() * 2654435761ULL, norm, &s, &why->err) < 0) {
		res = JOBS_SUBMIT_INVALID;
		goto out;
	}
	if ((res = check_trial(app, user_id, body, &s, why)) != JOBS_SUBMIT_OK ||
	    (res = check_metric(body, &s, why)) != JOBS_SUBMIT_OK)
		goto out;
	json_object_set(norm, "job", json_object_get(body, "job"));
	if (!(spec = json_dumps(norm, JSON_COMPACT))) {
		res = JOBS_SUBMIT_ERROR;
		goto out;
	}
	rc = tuning_create(app->db, user_id, json_string_value(json_object_get(body, "name")), spec,
			   time(NULL), id);
	res = rc == 0 ? JOBS_SUBMIT_OK : rc == DB_CONFLICT ? JOBS_SUBMIT_EXISTS : JOBS_SUBMIT_ERROR;
	if (res == JOBS_SUBMIT_OK) {
		if (audit_add(app->db, time(NULL), user, "tuning.create", user, address,
			      json_string_value(json_object_get(body, "name"))) < 0)
			log_error("audit: tuning.create of %s not recorded", user);
		log_info("tuning job %lld of %s created: %d trials", (long long)*id, user,
			 s.max_trials);
		tuner_poke(app);
	}
out:
	free(spec);
	json_decref(norm);
	return res;
}

struct stop_walk {
	struct app *app;
	const char *actor;
	int64_t jobs[SEARCH_TRIALS_MAX];
	int n;
};

static int collect_running(const struct tuning_trial *tr, void *ctx)
{
	struct stop_walk *w = ctx;

	if (!tr->ended_at && tr->job_id && w->n < SEARCH_TRIALS_MAX)
		w->jobs[w->n++] = tr->job_id;
	return 0;
}

int tuner_stop_job(struct app *app, const struct tuning_job *t, const char *actor)
{
	struct stop_walk *w = calloc(1, sizeof(*w));
	char reason[80];
	int rc = 0;

	if (!w)
		return -ENOMEM;
	snprintf(reason, sizeof(reason), "stopped by %s", actor);
	if (t->status != TUNING_IN_PROGRESS ||
	    tuning_move(app->db, t->id, TUNING_STOPPING, reason, 1u << TUNING_IN_PROGRESS,
			time(NULL)) != 1) {
		free(w);
		return -EALREADY;
	}
	if (audit_add(app->db, time(NULL), actor, "tuning.stop", t->user_name, NULL, t->name) < 0)
		log_error("audit: tuning.stop of %s not recorded", t->user_name);
	/* the trials' jobs now; ones the tuner makes meanwhile it stops itself */
	if (tuning_trials_each(app->db, t->id, collect_running, w) < 0)
		rc = -EIO;
	for (int i = 0; i < w->n; i++) {
		struct job j;
		if (jobs_find(app->db, w->jobs[i], &j) != 1)
			continue;
		if (jobs_live(&j) && j.status != JOB_STOPPING &&
		    jobs_stop(app, &j, 0, actor) < 0)
			log_warn("tuning job %lld: stop of job %lld did not go out", (long long)t->id,
				 (long long)j.id);
		jobs_row_free(&j);
	}
	free(w);
	tuner_poke(app);
	return rc;
}
