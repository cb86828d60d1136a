/* view.c - a tuning job's JSON view; see tuner.h. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "labd/app.h"
#include "tuning/search.h"
#include "tuning/tuner.h"

/* RFC 3339 UTC, or null for 0. */
static json_t *time_json(int64_t at)
{
	char text[32];
	struct tm tm;
	time_t t = (time_t)at;

	if (at <= 0 || !gmtime_r(&t, &tm))
		return json_null();
	strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return json_string(text);
}

static json_t *time_ms_json(int64_t at_ms)
{
	char text[40];
	struct tm tm;
	time_t t = (time_t)(at_ms / 1000);

	if (at_ms <= 0 || !gmtime_r(&t, &tm))
		return json_null();
	strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(text + strlen(text), sizeof(text) - strlen(text), ".%03dZ", (int)(at_ms % 1000));
	return json_string(text);
}

static json_t *trial_json(const struct tuning_trial *tr)
{
	json_t *params = json_loads(tr->parameters, 0, NULL);

	return json_pack("{s:i,s:o,s:s,s:o,s:s,s:o,s:o,s:o,s:o,s:o}", "index", tr->index, "job_id",
			 tr->job_id ? json_integer(tr->job_id) : json_null(), "job_name",
			 tr->job_name, "parameters", params ? params : json_object(), "status",
			 tuning_trial_status_name(tr->status), "objective",
			 tr->has_objective ? json_real(tr->objective) : json_null(), "reason",
			 tr->reason[0] ? json_string(tr->reason) : json_null(), "created_at",
			 time_ms_json(tr->created_at_ms), "started_at", time_json(tr->started_at),
			 "ended_at", time_json(tr->ended_at));
}

struct view_walk {
	const struct search *s;
	json_t *trials; /* NULL: not listed */
	json_t *counts;
	struct tuning_trial best;
	bool have_best;
};

static int add_trial(const struct tuning_trial *tr, void *ctx)
{
	struct view_walk *w = ctx;
	const char *st = tuning_trial_status_name(tr->status);
	json_t *n = json_object_get(w->counts, st);

	json_object_set_new(w->counts, st, json_integer(json_integer_value(n) + 1));
	if (w->trials)
		json_array_append_new(w->trials, trial_json(tr));
	/* the best of the trials that ran to the end (an early-stopped one's value
	 * is from mid-training) */
	if (tr->status == TRIAL_COMPLETED && tr->has_objective &&
	    (!w->have_best || search_better(w->s, tr->objective, w->best.objective))) {
		w->best = *tr;
		w->have_best = true;
	}
	return 0;
}

json_t *tuner_json(struct app *app, const struct tuning_job *t, bool full)
{
	struct jobs_submit_error err;
	struct search s;
	json_t *spec = json_loads(t->spec ? t->spec : "{}", 0, NULL), *norm = json_object();
	struct view_walk w = {.s = &s, .counts = json_object()};
	json_t *out = NULL;

	if (!spec || !norm || search_check(spec, 0, norm, &s, &err) < 0)
		goto done;
	for (int i = 0; i <= TRIAL_EARLY_STOPPED; i++)
		json_object_set_new(w.counts, tuning_trial_status_name(i), json_integer(0));
	w.trials = full ? json_array() : NULL;
	if (tuning_trials_each(app->db, t->id, add_trial, &w) < 0)
		goto done;
	out = json_pack("{s:I,s:s,s:s,s:s,s:o,s:o,s:o,s:O,s:O,s:O,s:O,s:O,s:O,s:O}", "id",
			(json_int_t)t->id, "name", t->name, "user", t->user_name, "status",
			tuning_status_name(t->status), "reason",
			t->reason[0] ? json_string(t->reason) : json_null(), "created_at",
			time_json(t->created_at), "ended_at", time_json(t->ended_at), "strategy",
			json_object_get(norm, "strategy"), "objective",
			json_object_get(norm, "objective"), "parameter_ranges",
			json_object_get(norm, "parameter_ranges"), "max_trials",
			json_object_get(norm, "max_trials"), "max_parallel",
			json_object_get(norm, "max_parallel"), "seed", json_object_get(norm, "seed"),
			"trial_counts", w.counts);
	if (!out)
		goto done;
	json_object_set(out, "hyperband",
			json_object_get(norm, "hyperband") ? json_object_get(norm, "hyperband")
							   : json_null());
	json_object_set_new(out, "best_trial", w.have_best ? trial_json(&w.best) : json_null());
	if (full) {
		json_object_set(out, "job", json_object_get(spec, "job"));
		json_object_set(out, "trials", w.trials);
	}
done:
	json_decref(w.trials);
	json_decref(w.counts);
	json_decref(spec);
	json_decref(norm);
	return out;
}
