/* jobspec.c - the job spec, checked strictly; see jobspec.h. */
#include "proto/jobspec.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "proto/proto.h"

/* Every key the spec may hold; anything else is refused (a typo in the web
 * process must not silently drop a limit). */
static const char *const known_keys[] = {
	"name",	       "argv",		  "env",	   "cwd",	  "hyperparameters",
	"channels",    "output_path",	  "checkpoint_path", "max_runtime_s", "grace_s",
	"log_max_bytes", "gpus",	  "cpus",	   "hosts",	  NULL,
};

static int bad(char *err, size_t errlen, const char *field, const char *why)
{
	snprintf(err, errlen, "%s: %s", field, why);
	return -EINVAL;
}

static bool in_set(char c, const char *extra)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr(extra, c));
}

bool jobspec_env_key_ok(const char *k)
{
	size_t n = strlen(k);

	if (n < 1 || n > 64 || (k[0] >= '0' && k[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!in_set(k[i], "_"))
			return false;
	return true;
}

bool jobspec_channel_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!in_set(s[i], "._-"))
			return false;
	return true;
}

/* ^[a-z0-9][a-z0-9-]{0,62}$: the API's job name */
static bool job_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > JOBSPEC_NAME_MAX || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

bool jobspec_rel_path_ok(const char *p, bool allow_empty)
{
	size_t n = strlen(p);

	if (n > JOBSPEC_PATH_MAX_BYTES || p[0] == '/' || (n == 0 && !allow_empty))
		return false;
	for (const char *c = p; *c;) {
		size_t len = strcspn(c, "/");
		if (len == 2 && c[0] == '.' && c[1] == '.')
			return false;
		c += len;
		c += *c == '/';
	}
	return true;
}

static int get_int(json_t *root, const char *key, long long lo, long long hi, bool required,
		   int64_t *out, char *err, size_t errlen)
{
	json_t *v = json_object_get(root, key);

	*out = 0;
	if (!v)
		return required ? bad(err, errlen, key, "is missing") : 0;
	if (!json_is_integer(v))
		return bad(err, errlen, key, "must be an integer");
	if (json_integer_value(v) < lo || json_integer_value(v) > hi)
		return bad(err, errlen, key, "is out of bounds");
	*out = json_integer_value(v);
	return 0;
}

static int get_path(json_t *root, const char *key, bool required, bool allow_empty,
		    const char **out, char *err, size_t errlen)
{
	json_t *v = json_object_get(root, key);

	*out = "";
	if (!v)
		return required ? bad(err, errlen, key, "is missing") : 0;
	if (!json_is_string(v))
		return bad(err, errlen, key, "must be a string");
	if (!jobspec_rel_path_ok(json_string_value(v), allow_empty))
		return bad(err, errlen, key,
			   allow_empty ? "must be a home-relative path (no leading /, no .., "
					   "at most 1024 bytes)"
					 : "must be a non-empty home-relative path (no leading /, "
					   "no .., at most 1024 bytes)");
	*out = json_string_value(v);
	return 0;
}

static int read_argv(json_t *root, struct jobspec *s, char *err, size_t errlen)
{
	json_t *a = json_object_get(root, "argv"), *e;
	char field[32];
	size_t i;

	if (!json_is_array(a))
		return bad(err, errlen, "argv", a ? "must be an array" : "is missing");
	if (json_array_size(a) < 1 || json_array_size(a) > JOBSPEC_ARGV_MAX)
		return bad(err, errlen, "argv", "must hold 1 to 64 strings");
	json_array_foreach(a, i, e) {
		snprintf(field, sizeof(field), "argv[%zu]", i);
		if (!json_is_string(e))
			return bad(err, errlen, field, "must be a string");
		if (json_string_length(e) > JOBSPEC_ARG_MAX_BYTES)
			return bad(err, errlen, field, "is longer than 4096 bytes");
		if (i == 0 && json_string_length(e) == 0)
			return bad(err, errlen, field, "must not be empty");
		s->argv[s->argc++] = json_string_value(e);
	}
	s->argv[s->argc] = NULL;
	return 0;
}

static int read_env(json_t *root, struct jobspec *s, char *err, size_t errlen)
{
	json_t *o = json_object_get(root, "env"), *v;
	const char *k;

	if (!o)
		return 0;
	if (!json_is_object(o))
		return bad(err, errlen, "env", "must be an object");
	if (json_object_size(o) > JOBSPEC_ENV_MAX)
		return bad(err, errlen, "env", "holds more than 64 variables");
	json_object_foreach(o, k, v) {
		char field[80];
		snprintf(field, sizeof(field), "env.%.64s", k);
		if (!jobspec_env_key_ok(k))
			return bad(err, errlen, "env", "a name is not ^[A-Za-z_][A-Za-z0-9_]{0,63}$");
		if (!json_is_string(v))
			return bad(err, errlen, field, "must be a string");
		if (json_string_length(v) > JOBSPEC_ENV_VALUE_MAX_BYTES)
			return bad(err, errlen, field, "is longer than 4096 bytes");
		s->env_keys[s->n_env] = k;
		s->env_values[s->n_env++] = json_string_value(v);
	}
	return 0;
}

static int read_channels(json_t *root, struct jobspec *s, char *err, size_t errlen)
{
	json_t *a = json_object_get(root, "channels"), *c;
	char field[48];
	size_t i;

	if (!a)
		return 0;
	if (!json_is_array(a))
		return bad(err, errlen, "channels", "must be an array");
	if (json_array_size(a) > JOBSPEC_CHANNELS_MAX)
		return bad(err, errlen, "channels", "holds more than 8 channels");
	json_array_foreach(a, i, c) {
		json_t *name = json_object_get(c, "name"), *path = json_object_get(c, "path");
		snprintf(field, sizeof(field), "channels[%zu]", i);
		if (!json_is_object(c) || json_object_size(c) != 2 || !json_is_string(name) ||
		    !json_is_string(path))
			return bad(err, errlen, field, "must be {\"name\", \"path\"} strings");
		if (!jobspec_channel_name_ok(json_string_value(name)))
			return bad(err, errlen, field, "name is not ^[A-Za-z0-9._-]{1,64}$");
		if (!jobspec_rel_path_ok(json_string_value(path), true))
			return bad(err, errlen, field, "path is not a home-relative path");
		for (size_t k = 0; k < s->n_channels; k++)
			if (strcmp(s->channels[k].name, json_string_value(name)) == 0)
				return bad(err, errlen, field, "name is used twice");
		s->channels[s->n_channels++] =
			(struct jobspec_channel){json_string_value(name), json_string_value(path)};
	}
	return 0;
}

static int check_keys(json_t *root, char *err, size_t errlen)
{
	const char *k;
	json_t *v;

	json_object_foreach(root, k, v) {
		size_t i = 0;
		while (known_keys[i] && strcmp(known_keys[i], k) != 0)
			i++;
		if (!known_keys[i]) {
			snprintf(err, errlen, "%.64s: unknown field", k);
			return -EINVAL;
		}
	}
	return 0;
}

static int read_name(json_t *root, struct jobspec *s, char *err, size_t errlen)
{
	json_t *n = json_object_get(root, "name"), *hp = json_object_get(root, "hyperparameters");

	if (!json_is_string(n) || !job_name_ok(json_string_value(n)))
		return bad(err, errlen, "name", "must match ^[a-z0-9][a-z0-9-]{0,62}$");
	s->name = json_string_value(n);
	if (hp && !json_is_object(hp))
		return bad(err, errlen, "hyperparameters", "must be an object");
	s->hyperparameters = hp;
	return 0;
}

static int read_all(json_t *root, struct jobspec *s, char *err, size_t errlen)
{
	int rc;

	if ((rc = check_keys(root, err, errlen)) || (rc = read_name(root, s, err, errlen)) ||
	    (rc = read_argv(root, s, err, errlen)) || (rc = read_env(root, s, err, errlen)) ||
	    (rc = read_channels(root, s, err, errlen)) ||
	    (rc = get_path(root, "cwd", false, true, &s->cwd, err, errlen)) ||
	    (rc = get_path(root, "output_path", true, false, &s->output_path, err, errlen)) ||
	    (rc = get_path(root, "checkpoint_path", true, false, &s->checkpoint_path, err,
			   errlen)))
		return rc;
	if ((rc = get_int(root, "max_runtime_s", 1, JOBSPEC_RUNTIME_MAX_S, true,
			  &s->max_runtime_s, err, errlen)) ||
	    (rc = get_int(root, "grace_s", 0, JOBSPEC_GRACE_MAX_S, false, &s->grace_s, err,
			  errlen)) ||
	    (rc = get_int(root, "log_max_bytes", 4096, JOBSPEC_LOG_MAX_BYTES, false,
			  &s->log_max_bytes, err, errlen)) ||
	    (rc = get_int(root, "gpus", 0, JOBSPEC_GPUS_MAX, false, &s->gpus, err, errlen)) ||
	    (rc = get_int(root, "cpus", 0, JOBSPEC_CPUS_MAX, false, &s->cpus, err, errlen)) ||
	    (rc = jobhosts_parse(json_object_get(root, "hosts"), &s->hosts, err, errlen)))
		return rc;
	/* absent: the caller's default (a grace of 0 is a real choice) */
	if (!json_object_get(root, "grace_s"))
		s->grace_s = -1;
	if (!json_object_get(root, "log_max_bytes"))
		s->log_max_bytes = -1;
	return 0;
}

int jobspec_parse(const char *text, struct jobspec *out, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *root;
	int rc;

	memset(out, 0, sizeof(*out));
	jobhosts_single(&out->hosts);
	out->cwd = out->output_path = out->checkpoint_path = "";
	if (strlen(text) > PROTO_JOB_SPEC_MAX)
		return bad(err, errlen, "spec", "is longer than 48 KiB");
	/* NUL inside strings is refused by jansson unless JSON_ALLOW_NUL */
	root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(root)) {
		json_decref(root);
		return bad(err, errlen, "spec", "is not a JSON object");
	}
	out->root = root;
	if ((rc = read_all(root, out, err, errlen)) < 0) {
		jobspec_free(out);
		return rc;
	}
	return 0;
}

void jobspec_free(struct jobspec *s)
{
	json_decref(s->root);
	memset(s, 0, sizeof(*s));
	s->cwd = s->output_path = s->checkpoint_path = "";
}
