/* spec.c - the job spec the supervisor runs (contract §3, docs/jobs.md
 * "The job spec"), made from the job's normalised request. */
#include <jansson.h>
#include <stdlib.h>

#include "config/config.h"
#include "jobs/script.h"
#include "jobs/spec.h"
#include "jobs/submit.h"
#include "store/jobs.h"
#include "labd/app.h"

/* The argv to run: the command, and for a script job its pieces after the launcher. */
static json_t *argv_of(json_t *req)
{
	json_t *script = json_object_get(req, "script");

	if (!json_is_string(script))
		return json_incref(json_object_get(req, "command"));
	return jobs_script_argv(json_object_get(req, "command"), json_string_value(script));
}

json_t *jobs_spec_json(const char *name, json_t *req, int64_t max_runtime_s, int64_t grace_s,
		       int64_t log_max_bytes, int gpus, int64_t cpus)
{
	return json_pack("{s:s,s:o,s:O,s:O,s:O,s:O,s:O,s:O,s:I,s:I,s:I,s:i,s:I}", "name", name,
			 "argv", argv_of(req),
			 "env", json_object_get(req, "environment"), "cwd",
			 json_object_get(req, "working_dir"), "hyperparameters",
			 json_object_get(req, "hyperparameters"), "channels",
			 json_object_get(req, "input_channels"), "output_path",
			 json_object_get(req, "output_path"), "checkpoint_path",
			 json_object_get(req, "checkpoint_path"), "max_runtime_s",
			 (json_int_t)max_runtime_s, "grace_s", (json_int_t)grace_s, "log_max_bytes",
			 (json_int_t)log_max_bytes, "gpus", gpus, "cpus", (json_int_t)cpus);
}

int64_t jobs_runtime_left_s(const struct job *j)
{
	return j->max_runtime_s - j->training_ms / 1000;
}

char *jobs_backend_spec(const struct app *app, const struct job *j)
{
	json_error_t err;
	json_t *req = json_loads(j->spec ? j->spec : "", 0, &err);
	int64_t cpus_milli = j->cpus_milli ? j->cpus_milli : (int64_t)app->cfg->cpus_milli;
	int64_t left_s = jobs_runtime_left_s(j);
	json_t *spec;
	char *text;

	if (!req)
		return NULL;
	spec = jobs_spec_json(j->name, req, left_s > 0 ? left_s : 1, j->grace_s,
			      (int64_t)app->cfg->jobs_log_max_bytes, j->gpu_count,
			      (cpus_milli + 999) / 1000);
	json_decref(req);
	text = spec ? json_dumps(spec, JSON_COMPACT) : NULL;
	json_decref(spec);
	return text;
}
