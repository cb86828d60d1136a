/* submit.c - POST /api/v1/jobs checked and normalised; see submit.h. */
#include "jobs/submit.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "jobs/observe_spec.h"
#include "jobs/script.h"
#include "proto/jobspec.h"
#include "proto/proto.h"
#include "store/plans.h"

const char *const jobs_submit_fields[] = {
	"name",		"command",	 "working_dir",	  "environment",  "hyperparameters",
	"input_channels", "output_path", "checkpoint_path", "type",	  "gpu_count",
	"image",	"max_runtime_s", "max_wait_s",	  "keep_alive_s", "max_retries",
	"metric_definitions", "memory_bytes", "cpus_milli", "script", "rules", "capacity",
	"gpu_kind", "instance_count", NULL,
};

/* Sets *err and returns -1. */
static int fail(struct jobs_submit_error *err, const char *field, const char *fmt, ...)
{
	va_list ap;

	snprintf(err->field, sizeof(err->field), "%s", field);
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return -1;
}

bool jobs_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > 63 || name[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)name[i]) || isdigit((unsigned char)name[i]) ||
		      name[i] == '-'))
			return false;
	return true;
}

bool jobs_path_ok(const char *path, size_t len)
{
	if (strlen(path) != len || len > JOBS_PATH_MAX_BYTES || path[0] == '/')
		return false;
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return false;
		p += n + (p[n] == '/');
	}
	return true;
}

static bool env_name_ok(const char *k)
{
	size_t n = strlen(k);

	if (n == 0 || n > 64 || !(isalpha((unsigned char)k[0]) || k[0] == '_'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!(isalnum((unsigned char)k[i]) || k[i] == '_'))
			return false;
	return true;
}

/* ^[A-Za-z0-9._-]{1,64}$ */
static bool channel_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || strchr("._-", s[i])))
			return false;
	return true;
}

/* ^[A-Za-z0-9_.:/-]{1,255}$ */
static bool metric_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 255)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || strchr("_.:/-", s[i])))
			return false;
	return true;
}

int jobs_regex_check(const char *regex, char *why, size_t len)
{
	int code;
	PCRE2_SIZE offset;
	pcre2_code *re = pcre2_compile((PCRE2_SPTR)regex, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &code,
				       &offset, NULL);
	PCRE2_UCHAR text[200];

	if (re) {
		pcre2_code_free(re);
		return 0;
	}
	pcre2_get_error_message(code, text, sizeof(text));
	snprintf(why, len, "%s at offset %zu", (const char *)text, (size_t)offset);
	return -1;
}

/* Characters of a UTF-8 text (jansson has checked it is UTF-8). */
static size_t utf8_chars(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xC0) != 0x80;
	return n;
}

/* A string field without NUL: 1 present, 0 absent, -1 (err set). */
static int get_string(json_t *body, const char *field, const char **out,
		      struct jobs_submit_error *err)
{
	json_t *v = json_object_get(body, field);

	if (!v)
		return 0;
	if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
		return fail(err, field, "field \"%s\" must be a string without NUL characters",
			    field);
	*out = json_string_value(v);
	return 1;
}

/* An integer field in [min, max] (def when absent) into *out; -1 with err. */
static int get_int(json_t *body, const char *field, int64_t min, int64_t max, int64_t def,
		   int64_t *out, struct jobs_submit_error *err)
{
	json_t *v = json_object_get(body, field);

	*out = def;
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return fail(err, field, "field \"%s\" must be an integer from %lld to %lld", field,
			    (long long)min, (long long)max);
	*out = json_integer_value(v);
	return 0;
}

/* A script instead of a command (script.h): text, saved and run by the launcher. */
static int check_script(json_t *v, json_t *spec, struct jobs_submit_error *err)
{
	if (!json_is_string(v) || json_string_length(v) == 0 ||
	    json_string_length(v) > JOBS_SCRIPT_MAX_BYTES ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return fail(err, "script",
			    "field \"script\" must be a non-empty text of at most %d bytes without "
			    "NUL characters",
			    JOBS_SCRIPT_MAX_BYTES);
	json_object_set(spec, "script", v);
	json_object_set_new(spec, "command", jobs_script_command());
	return 0;
}

static int check_command(json_t *body, json_t *spec, struct jobs_submit_error *err)
{
	json_t *v = json_object_get(body, "command"), *arg;
	size_t i;

	if (v && json_object_get(body, "script"))
		return fail(err, "script", "give \"command\" or \"script\", not both");
	if (!v && json_object_get(body, "script"))
		return check_script(json_object_get(body, "script"), spec, err);
	if (!v)
		return fail(err, "command",
			    "field \"command\" is required: the argv to run (or \"script\": a "
			    "script's text)");
	if (!json_is_array(v) || json_array_size(v) < 1 || json_array_size(v) > JOBS_ARGV_MAX)
		return fail(err, "command", "field \"command\" must be an array of 1 to %d strings",
			    JOBS_ARGV_MAX);
	json_array_foreach(v, i, arg) {
		char field[32];
		snprintf(field, sizeof(field), "command[%zu]", i);
		if (!json_is_string(arg) || strlen(json_string_value(arg)) != json_string_length(arg) ||
		    json_string_length(arg) > JOBS_ARG_MAX_BYTES || (i == 0 && !json_string_length(arg)))
			return fail(err, field,
				    "%s must be a%s string of at most %d bytes without NUL characters",
				    field, i == 0 ? " non-empty" : "", JOBS_ARG_MAX_BYTES);
	}
	json_object_set(spec, "command", v);
	return 0;
}

static int check_environment(json_t *body, json_t *spec, struct jobs_submit_error *err)
{
	json_t *v = json_object_get(body, "environment"), *val;
	const char *key;
	char field[96];

	if (!v) {
		json_object_set_new(spec, "environment", json_object());
		return 0;
	}
	if (!json_is_object(v) || json_object_size(v) > JOBS_ENV_MAX)
		return fail(err, "environment",
			    "field \"environment\" must be an object of at most %d variables",
			    JOBS_ENV_MAX);
	json_object_foreach(v, key, val) {
		snprintf(field, sizeof(field), "environment.%.70s", key);
		if (!env_name_ok(key))
			return fail(err, field,
				    "variable names match ^[A-Za-z_][A-Za-z0-9_]{0,63}$");
		if (!json_is_string(val) || strlen(json_string_value(val)) != json_string_length(val) ||
		    json_string_length(val) > JOBS_ENV_VALUE_MAX_BYTES)
			return fail(err, field,
				    "a variable's value must be a string of at most %d bytes "
				    "without NUL characters",
				    JOBS_ENV_VALUE_MAX_BYTES);
	}
	json_object_set(spec, "environment", v);
	return 0;
}

static int check_hyperparameters(json_t *body, json_t *spec, struct jobs_submit_error *err)
{
	json_t *v = json_object_get(body, "hyperparameters");
	char *text;
	size_t n;

	if (!v) {
		json_object_set_new(spec, "hyperparameters", json_object());
		return 0;
	}
	if (!json_is_object(v))
		return fail(err, "hyperparameters", "field \"hyperparameters\" must be an object");
	text = json_dumps(v, JSON_COMPACT);
	n = text ? strlen(text) : SIZE_MAX;
	free(text);
	if (n > JOBS_HYPERPARAMETERS_MAX_BYTES)
		return fail(err, "hyperparameters",
			    "field \"hyperparameters\" must be at most %d bytes as JSON",
			    JOBS_HYPERPARAMETERS_MAX_BYTES);
	json_object_set(spec, "hyperparameters", v);
	return 0;
}

/* One {name, path} of input_channels; names must differ. */
static int check_channel(json_t *c, size_t i, json_t *out, struct jobs_submit_error *err)
{
	char field[48];
	json_t *name = json_object_get(c, "name"), *path = json_object_get(c, "path");

	snprintf(field, sizeof(field), "input_channels[%zu]", i);
	if (!json_is_object(c) || json_object_size(c) != 2 || !name || !path)
		return fail(err, field, "%s must be an object with exactly \"name\" and \"path\"",
			    field);
	snprintf(field, sizeof(field), "input_channels[%zu].name", i);
	if (!json_is_string(name) || strlen(json_string_value(name)) != json_string_length(name) ||
	    !channel_name_ok(json_string_value(name)))
		return fail(err, field, "a channel name matches ^[A-Za-z0-9._-]{1,64}$");
	for (size_t k = 0; k < json_array_size(out); k++)
		if (strcmp(json_string_value(json_object_get(json_array_get(out, k), "name")),
			   json_string_value(name)) == 0)
			return fail(err, field, "channel \"%s\" is named twice",
				    json_string_value(name));
	snprintf(field, sizeof(field), "input_channels[%zu].path", i);
	if (!json_is_string(path) || json_string_length(path) == 0 ||
	    !jobs_path_ok(json_string_value(path), json_string_length(path)))
		return fail(err, field,
			    "a channel path is a non-empty folder in your home: no leading /, "
			    "no .., at most %d bytes",
			    JOBS_PATH_MAX_BYTES);
	json_array_append_new(out, json_pack("{s:O,s:O}", "name", name, "path", path));
	return 0;
}

static int check_channels(json_t *body, json_t *spec, struct jobs_submit_error *err)
{
	json_t *v = json_object_get(body, "input_channels"), *c;
	json_t *out = json_array();
	size_t i;

	json_object_set_new(spec, "input_channels", out);
	if (!v)
		return 0;
	if (!json_is_array(v) || json_array_size(v) > JOBS_CHANNELS_MAX)
		return fail(err, "input_channels",
			    "field \"input_channels\" must be an array of at most %d channels",
			    JOBS_CHANNELS_MAX);
	json_array_foreach(v, i, c)
		if (check_channel(c, i, out, err) < 0)
			return -1;
	return 0;
}

/* A home-relative path field with a default; empty allowed only if may_be_empty. */
static int check_path(json_t *body, const char *field, const char *def, bool may_be_empty,
		      json_t *spec, struct jobs_submit_error *err)
{
	json_t *v = json_object_get(body, field);

	if (!v) {
		json_object_set_new(spec, field, json_string(def));
		return 0;
	}
	if (!json_is_string(v) || (!may_be_empty && json_string_length(v) == 0) ||
	    !jobs_path_ok(json_string_value(v), json_string_length(v)))
		return fail(err, field,
			    "field \"%s\" must be a %sfolder in your home: no leading /, no .., "
			    "at most %d bytes",
			    field, may_be_empty ? "" : "non-empty ", JOBS_PATH_MAX_BYTES);
	json_object_set(spec, field, v);
	return 0;
}

static int check_paths(json_t *body, const char *name, json_t *spec, struct jobs_submit_error *err)
{
	char def[JOBS_PATH_MAX_BYTES + 32];

	if (check_path(body, "working_dir", "", true, spec, err) < 0)
		return -1;
	snprintf(def, sizeof(def), "jobs/%s", name);
	if (check_path(body, "output_path", def, false, spec, err) < 0)
		return -1;
	snprintf(def, sizeof(def), "%s/checkpoints",
		 json_string_value(json_object_get(spec, "output_path")));
	if (strlen(def) > JOBS_PATH_MAX_BYTES)
		return fail(err, "checkpoint_path",
			    "the default checkpoint_path (output_path + \"/checkpoints\") is too "
			    "long; name one");
	return check_path(body, "checkpoint_path", def, false, spec, err);
}

static int check_metric(json_t *m, size_t i, json_t *out, struct jobs_submit_error *err)
{
	char field[48], why[160];
	json_t *name = json_object_get(m, "name"), *regex = json_object_get(m, "regex");

	snprintf(field, sizeof(field), "metric_definitions[%zu]", i);
	if (!json_is_object(m) || json_object_size(m) != 2 || !name || !regex)
		return fail(err, field, "%s must be an object with exactly \"name\" and \"regex\"",
			    field);
	snprintf(field, sizeof(field), "metric_definitions[%zu].name", i);
	if (!json_is_string(name) || strlen(json_string_value(name)) != json_string_length(name) ||
	    !metric_name_ok(json_string_value(name)))
		return fail(err, field, "a metric name matches ^[A-Za-z0-9_.:/-]{1,255}$");
	snprintf(field, sizeof(field), "metric_definitions[%zu].regex", i);
	if (!json_is_string(regex) || json_string_length(regex) == 0 ||
	    strlen(json_string_value(regex)) != json_string_length(regex) ||
	    json_string_length(regex) > JOBS_REGEX_MAX_CHARS * 4 ||
	    utf8_chars(json_string_value(regex)) > JOBS_REGEX_MAX_CHARS)
		return fail(err, field, "a metric regex is a non-empty string of at most %d characters",
			    JOBS_REGEX_MAX_CHARS);
	if (jobs_regex_check(json_string_value(regex), why, sizeof(why)) < 0)
		return fail(err, field, "the regex does not compile: %s", why);
	json_array_append_new(out, json_pack("{s:O,s:O}", "name", name, "regex", regex));
	return 0;
}

static int check_metrics(json_t *body, json_t *spec, struct jobs_submit_error *err)
{
	json_t *v = json_object_get(body, "metric_definitions"), *m;
	json_t *out = json_array();
	size_t i;

	json_object_set_new(spec, "metric_definitions", out);
	if (!v)
		return 0;
	if (!json_is_array(v) || json_array_size(v) > JOBS_METRICS_MAX)
		return fail(err, "metric_definitions",
			    "field \"metric_definitions\" must be an array of at most %d metrics",
			    JOBS_METRICS_MAX);
	json_array_foreach(v, i, m)
		if (check_metric(m, i, out, err) < 0)
			return -1;
	return 0;
}

/* gpu_kind: what a GPU job asks within its plan's kind (store/plans.h), the
 * plan's when absent; a CPU job asks none. Into spec and out->gpu_kind. */
static int check_gpu_kind(json_t *body, const struct jobs_limits *lim, json_t *spec,
			  struct jobs_submit *out, struct jobs_submit_error *err)
{
	const char *plan = lim->gpu_kind && lim->gpu_kind[0] ? lim->gpu_kind : PLAN_GPU_WHOLE;
	const char *kind = plan;

	if (get_string(body, "gpu_kind", &kind, err) < 0)
		return -1;
	if (!out->gpu) {
		if (json_object_get(body, "gpu_kind"))
			return fail(err, "gpu_kind", "field \"gpu_kind\" is for a job of type \"gpu\"");
		return 0;
	}
	if (!plans_gpu_ok(kind))
		return fail(err, "gpu_kind", "field \"gpu_kind\" must be " PLAN_GPU_RULE);
	if (!plans_gpu_allows(plan, kind))
		return fail(err, "gpu_kind",
			    "your plan gives GPU devices of kind \"%s\"; a job may ask for %s, "
			    "not \"%.20s\"",
			    plan,
			    strcmp(plan, PLAN_GPU_SHARE) == 0 ? "\"share\" only"
							       : "that kind or a smaller MIG profile",
			    kind);
	json_object_set_new(spec, "gpu_kind", json_string(kind));
	out->gpu_kind = json_string_value(json_object_get(spec, "gpu_kind"));
	return 0;
}

/* type, gpu_count, image, memory_bytes, cpus_milli. */
static int check_resources(json_t *body, const struct jobs_limits *lim, json_t *spec,
			   struct jobs_submit *out, struct jobs_submit_error *err)
{
	const char *type = "cpu", *image = lim->image ? lim->image : "";
	int64_t gpus, mem_max = lim->memory_bytes ? lim->memory_bytes : INT64_MAX / 2;
	int64_t cpus_max = lim->cpus_milli ? lim->cpus_milli : 1000000;

	if (get_string(body, "type", &type, err) < 0)
		return -1;
	if (strcmp(type, "cpu") != 0 && strcmp(type, "gpu") != 0)
		return fail(err, "type", "field \"type\" must be \"cpu\" or \"gpu\"");
	out->gpu = type[0] == 'g';
	if (out->gpu && lim->gpus_max == 0)
		return fail(err, "type", "your plan allows no GPUs (gpus_per_runtime is 0)");
	if (out->gpu ? get_int(body, "gpu_count", 1, lim->gpus_max, 1, &gpus, err) < 0
		     : get_int(body, "gpu_count", 0, 0, 0, &gpus, err) < 0)
		return -1;
	out->gpu_count = (int)gpus;
	if (check_gpu_kind(body, lim, spec, out, err) < 0 || get_string(body, "image", &image, err) < 0)
		return -1;
	if (json_object_get(body, "image") && strcmp(image, lim->image ? lim->image : "") != 0 &&
	    !(lim->image_ok && image[0] && lim->image_ok(image, lim->image_ctx)))
		return fail(err, "image", "no runtime image named \"%.64s\" ([images])", image);
	if (get_int(body, "memory_bytes", JOBS_MEMORY_MIN_BYTES, mem_max, lim->memory_bytes,
		    &out->memory_bytes, err) < 0 ||
	    get_int(body, "cpus_milli", JOBS_CPUS_MIN_MILLI, cpus_max, lim->cpus_milli,
		    &out->cpus_milli, err) < 0)
		return -1;
	json_object_set_new(spec, "type", json_string(type));
	json_object_set_new(spec, "gpu_count", json_integer(out->gpu_count));
	json_object_set_new(spec, "image", json_string(image));
	json_object_set_new(spec, "memory_bytes", json_integer(out->memory_bytes));
	json_object_set_new(spec, "cpus_milli", json_integer(out->cpus_milli));
	return 0;
}

/* instance_count: how many hosts run the job together (docs/jobs.md "Several
 * hosts"); more than one only where the backend has several machines. */
static int check_instances(json_t *body, const struct jobs_limits *lim, json_t *spec,
			   struct jobs_submit *out, struct jobs_submit_error *err)
{
	int64_t max = lim->instances_max > 1 ? lim->instances_max : 1;
	json_t *v = json_object_get(body, "instance_count");

	if (v && max == 1 && json_is_integer(v) && json_integer_value(v) > 1)
		return fail(err, "instance_count",
			    "field \"instance_count\" must be 1 here: this server runs jobs on one "
			    "machine (several hosts need [backend] kind = slurm)");
	if (v && lim->instances_no_addresses && json_is_integer(v) && json_integer_value(v) > 1)
		return fail(err, "instance_count",
			    "field \"instance_count\" must be 1 here: [slurm] job_addresses is not "
			    "set, and the hosts of a job on several nodes need addresses from it");
	if (get_int(body, "instance_count", 1, max, 1, &out->instance_count, err) < 0)
		return -1;
	if (out->instance_count > 1 && out->gpu_count > 0) /* docs/slurm.md "Not built yet" */
		return fail(err, "instance_count",
			    "field \"instance_count\" must be 1 for a GPU job: jobs on several "
			    "hosts run on CPUs only so far");
	json_object_set_new(spec, "instance_count", json_integer(out->instance_count));
	return 0;
}

/* max_runtime_s, max_wait_s, keep_alive_s, max_retries. */
static int check_times(json_t *body, const struct jobs_limits *lim, json_t *spec,
		       struct jobs_submit *out, struct jobs_submit_error *err)
{
	int64_t cap = lim->max_runtime_s > 0 ? lim->max_runtime_s : JOBS_MAX_RUNTIME_DEFAULT_S;
	int64_t retries;

	if (get_int(body, "max_runtime_s", 1, cap, cap, &out->max_runtime_s, err) < 0 ||
	    get_int(body, "max_wait_s", 0, JOBS_MAX_WAIT_MAX_S, lim->max_wait_default_s,
		    &out->max_wait_s, err) < 0 ||
	    get_int(body, "keep_alive_s", 0, lim->keep_alive_max_s, 0, &out->keep_alive_s, err) <
		    0 ||
	    get_int(body, "max_retries", 0, JOBS_RETRIES_MAX, 0, &retries, err) < 0)
		return -1;
	out->max_retries = (int)retries;
	json_object_set_new(spec, "max_runtime_s", json_integer(out->max_runtime_s));
	json_object_set_new(spec, "max_wait_s", json_integer(out->max_wait_s));
	json_object_set_new(spec, "keep_alive_s", json_integer(out->keep_alive_s));
	json_object_set_new(spec, "max_retries", json_integer(out->max_retries));
	return 0;
}

/* capacity: "on-demand" (the default) or "preemptible", which keeps no warm
 * pool (its sandbox goes to whoever asks next; docs/jobs.md "Preemptible
 * capacity"). After check_times. */
static int check_capacity(json_t *body, json_t *spec, struct jobs_submit *out,
			  struct jobs_submit_error *err)
{
	const char *capacity = "on-demand";

	if (get_string(body, "capacity", &capacity, err) < 0)
		return -1;
	if (strcmp(capacity, "on-demand") != 0 && strcmp(capacity, "preemptible") != 0)
		return fail(err, "capacity", "capacity is \"on-demand\" or \"preemptible\"");
	out->preemptible = capacity[0] == 'p';
	if (out->preemptible && out->keep_alive_s > 0)
		return fail(err, "keep_alive_s",
			    "a preemptible job keeps no warm pool: keep_alive_s must be 0");
	/* its max_wait_s bounds its waits from the submit, across preemptions, and so
	 * its runs too (managed spot's wait plus run): at least max_runtime_s */
	if (out->preemptible && out->max_wait_s < out->max_runtime_s) {
		if (json_object_get(body, "max_wait_s"))
			return fail(err, "max_wait_s",
				    "a preemptible job's max_wait_s bounds its waits and runs "
				    "together: at least its max_runtime_s (%lld)",
				    (long long)out->max_runtime_s);
		out->max_wait_s = out->max_runtime_s;
		json_object_set_new(spec, "max_wait_s", json_integer(out->max_wait_s));
	}
	json_object_set_new(spec, "capacity", json_string(capacity));
	return 0;
}

static int check_name(json_t *body, json_t *spec, struct jobs_submit_error *err)
{
	const char *name = NULL;
	int rc = get_string(body, "name", &name, err);

	if (rc < 0)
		return -1;
	if (rc == 0)
		return fail(err, "name", "field \"name\" is required");
	if (!jobs_name_ok(name))
		return fail(err, "name",
			    "a job name is 1 to 63 of a-z, 0-9 and -, starting with a letter or "
			    "digit");
	json_object_set_new(spec, "name", json_string(name));
	return 0;
}

/* The request field a job spec field comes from ("argv[3]" -> "command[3]"). */
static void api_field(const char *spec_field, char *out, size_t len)
{
	static const char *const names[][2] = {
		{"argv", "command"},	     {"env", "environment"}, {"cwd", "working_dir"},
		{"channels", "input_channels"}, {"gpus", "gpu_count"},   {"cpus", "cpus_milli"},
	};
	size_t n = strcspn(spec_field, ".[");

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i][0]) == n && strncmp(spec_field, names[i][0], n) == 0) {
			snprintf(out, len, "%s%.64s", names[i][1], spec_field + n);
			return;
		}
	snprintf(out, len, "%.80s", spec_field);
}

/* The largest of the free-form fields that make up a job spec: the one to
 * name when the whole is too long. */
static const char *largest_field(json_t *spec)
{
	static const char *const fields[] = {"command", "environment", "hyperparameters",
					     "input_channels", "script"};
	const char *pick = fields[0];
	size_t most = 0;

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		char *text = json_dumps(json_object_get(spec, fields[i]), JSON_COMPACT | JSON_ENCODE_ANY);
		size_t n = text ? strlen(text) : 0;
		free(text);
		if (n > most) {
			most = n;
			pick = fields[i];
		}
	}
	return pick;
}

/* The job spec this request makes, read by the supervisor's own reader, with
 * the largest grace, log cap and CPU count dispatch may put in: what root
 * would refuse at run time is refused now, naming the field. */
static int check_runs(json_t *spec, const struct jobs_submit *out, struct jobs_submit_error *err)
{
	int64_t cpus = out->cpus_milli ? (out->cpus_milli + 999) / 1000 : JOBSPEC_CPUS_MAX;
	json_t *whole = jobs_spec_json(json_string_value(json_object_get(spec, "name")), spec,
				       out->max_runtime_s, JOBSPEC_GRACE_MAX_S, JOBSPEC_LOG_MAX_BYTES,
				       out->gpu_count, cpus);
	char *text = whole ? json_dumps(whole, JSON_COMPACT) : NULL;
	char why[256], field[96];
	const char *rule;
	struct jobspec js;
	int rc;

	json_decref(whole);
	if (!text)
		return fail(err, "", "out of memory");
	rc = jobspec_parse(text, &js, why, sizeof(why));
	free(text);
	if (rc == 0) {
		jobspec_free(&js);
		return 0;
	}
	/* why is "<spec field>: <rule>" */
	rule = strchr(why, ':') ? strchr(why, ':') + 1 : "";
	rule += *rule == ' ';
	why[strcspn(why, ":")] = '\0';
	if (strcmp(why, "spec") == 0)
		return fail(err, largest_field(spec),
			    "the job's command, environment, hyperparameters, input channels and "
			    "paths together are longer than the %d KiB a job spec may be",
			    PROTO_JOB_SPEC_MAX / 1024);
	api_field(why, field, sizeof(field));
	return fail(err, field, "field \"%s\" is refused by the job runner: %s", field, rule);
}

int jobs_submit_check(json_t *body, const struct jobs_limits *lim, struct jobs_submit *out,
		      struct jobs_submit_error *err)
{
	json_t *spec = json_object();

	memset(out, 0, sizeof(*out));
	memset(err, 0, sizeof(*err));
	if (!spec)
		return fail(err, "", "out of memory");
	/* in the order of docs/jobs.md, so the first bad field is the one named */
	if (check_name(body, spec, err) < 0 || check_command(body, spec, err) < 0 ||
	    check_paths(body, json_string_value(json_object_get(spec, "name")), spec, err) < 0 ||
	    check_environment(body, spec, err) < 0 || check_hyperparameters(body, spec, err) < 0 ||
	    check_channels(body, spec, err) < 0 || check_resources(body, lim, spec, out, err) < 0 ||
	    check_instances(body, lim, spec, out, err) < 0 ||
	    check_times(body, lim, spec, out, err) < 0 || check_capacity(body, spec, out, err) < 0 ||
	    check_metrics(body, spec, err) < 0 || observe_spec_check(body, spec, err) < 0 ||
	    check_runs(spec, out, err) < 0) {
		json_decref(spec);
		return -1;
	}
	out->spec = spec;
	out->name = json_string_value(json_object_get(spec, "name"));
	out->image = json_string_value(json_object_get(spec, "image"));
	return 0;
}

void jobs_submit_release(struct jobs_submit *s)
{
	json_decref(s->spec);
	s->spec = NULL;
}
