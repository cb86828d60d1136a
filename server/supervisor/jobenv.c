/* jobenv.c - a training job's environment; see jobenv.h. */
#include "supervisor/jobenv.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/jobshare.h"
#include "supervisor/launch.h"

#define ML "/opt/ml"

void jobenv_name(const char *in, char *out, size_t len)
{
	size_t i = 0;

	for (; in[i] && i + 1 < len; i++) {
		char c = in[i];
		out[i] = (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A')
			 : ((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) ? c
									      : '_';
	}
	out[i] = '\0';
}

static bool has_key(const struct jobenv *e, const char *key)
{
	size_t n = strlen(key);

	for (size_t i = 0; i < e->n; i++)
		if (strncmp(e->entries[i], key, n) == 0 && e->entries[i][n] == '=')
			return true;
	return false;
}

static int add(struct jobenv *e, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int rc;

	if (e->n + 1 >= JOBENV_MAX)
		return 0; /* bounded by the spec's limits; the rest would not fit anyway */
	va_start(ap, fmt);
	rc = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return -ENOMEM;
	e->entries[e->n++] = s;
	e->entries[e->n] = NULL;
	return 0;
}

/* Numbers as people write them (0.1, not 0.10000000000000001): 15 digits. */
#define HP_DUMP (JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15))

/* A hyperparameter as text: strings as they are, anything else as JSON. */
static char *hp_text(json_t *v)
{
	return json_is_string(v) ? strdup(json_string_value(v)) : json_dumps(v, HP_DUMP);
}

static int add_channels(const struct jobspec *s, struct jobenv *e)
{
	json_t *names = json_array();
	char up[80], *list;
	int rc = 0;

	for (size_t i = 0; i < s->n_channels && rc == 0; i++) {
		jobenv_name(s->channels[i].name, up, sizeof(up));
		json_array_append_new(names, json_string(s->channels[i].name));
		rc = add(e, "LABD_CHANNEL_%s=" ML "/input/data/%s", up, s->channels[i].name);
		if (rc == 0)
			rc = add(e, "SM_CHANNEL_%s=" ML "/input/data/%s", up, s->channels[i].name);
	}
	list = json_dumps(names, JSON_COMPACT);
	json_decref(names);
	if (!list)
		return -ENOMEM;
	if (rc == 0)
		rc = add(e, "SM_CHANNELS=%s", list);
	free(list);
	return rc;
}

static int add_hyperparameters(const struct jobspec *s, struct jobenv *e)
{
	json_t *hps = s->hyperparameters, *v;
	json_t *none = json_object();
	char *all = json_dumps(hps ? hps : none, HP_DUMP), up[80];
	const char *k;
	int rc;

	json_decref(none);
	if (!all)
		return -ENOMEM;
	rc = add(e, "SM_HPS=%s", all);
	free(all);
	json_object_foreach(hps, k, v) {
		char *text;
		if (rc < 0 || strlen(k) > 64)
			continue; /* SM_HPS carries every one; a name this long gets no SM_HP_ */
		jobenv_name(k, up, sizeof(up));
		if (!(text = hp_text(v)))
			return -ENOMEM;
		rc = add(e, "SM_HP_%s=%s", up, text);
		free(text);
	}
	return rc;
}

/* SM_CURRENT_HOST, SM_HOSTS and, on several hosts, the rendezvous (jobhosts.h). */
static int add_hosts(const struct jobspec *s, struct jobenv *e)
{
	char lines[JOBHOSTS_ENV_MAX][JOBHOSTS_ENV_LEN];
	size_t n;
	int rc = jobhosts_env(&s->hosts, lines, &n);

	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = add(e, "%s", lines[i]);
	return rc;
}

int jobenv_add_share(const struct jobspec *s, const char *user, struct jobenv *e)
{
	char dirs[JOBSPEC_PATH_MAX_BYTES + 64 + JOBSPEC_CHANNELS_MAX * 96] = "";
	size_t n = 0;
	int rc;

	/* room made for both at the cost of the last entries, which the bound drops first
	 * anyway: the copy matters more than one more hyperparameter */
	while (e->n > 0 && e->n + 3 > JOBENV_MAX) {
		free(e->entries[--e->n]);
		e->entries[e->n] = NULL;
	}
	if (s->hosts.count > 1 && s->cwd[0])
		n += (size_t)snprintf(dirs, sizeof(dirs), "/home/%s/%s\n", user, s->cwd);
	for (size_t i = 0; s->hosts.count > 1 && i < s->n_channels && n < sizeof(dirs); i++)
		n += (size_t)snprintf(dirs + n, sizeof(dirs) - n, ML "/input/data/%s\n",
				      s->channels[i].name);
	if (!dirs[0] || n >= sizeof(dirs))
		rc = add(e, "LABD_SHARE=none");
	else if (s->hosts.current == 1)
		rc = add(e, "LABD_SHARE=serve %d %s %d", s->hosts.count - 1, s->hosts.master_addr,
			 JOBSHARE_PORT);
	else
		rc = add(e, "LABD_SHARE=fetch %s %d", s->hosts.master_addr, JOBSHARE_PORT);
	return rc ? rc : add(e, "LABD_SHARE_DIRS=%s", n < sizeof(dirs) ? dirs : "");
}

static int add_labd(const struct jobspec *s, long long job_id, const char *user, int64_t ncpus,
		    struct jobenv *e)
{
	char path[LAUNCH_PATH_MAX];
	int rc;

	launch_path_env(user, NULL, path, sizeof(path));
	if ((rc = add(e, "%s", path)) || (rc = add(e, "HOME=/home/%s", user)) ||
	    (rc = add(e, "USER=%s", user)) || (rc = add(e, "LABD_JOB_ID=%lld", job_id)) ||
	    (rc = add(e, "LABD_JOB_NAME=%s", s->name)) ||
	    (rc = add(e, "LABD_HYPERPARAMETERS=" ML "/input/config/hyperparameters.json")) ||
	    (rc = add(e, "LABD_MODEL_DIR=" ML "/model")) ||
	    (rc = add(e, "LABD_OUTPUT_DIR=" ML "/output")) ||
	    (rc = add(e, "LABD_CHECKPOINT_DIR=" ML "/checkpoints")) ||
	    (rc = add(e, "TRAINING_JOB_NAME=%s", s->name)) ||
	    (rc = add(e, "SM_MODEL_DIR=" ML "/model")) || (rc = add(e, "SM_OUTPUT_DIR=" ML "/output")) ||
	    (rc = add(e, "SM_OUTPUT_DATA_DIR=" ML "/output/data")) ||
	    (rc = add(e, "SM_INPUT_DIR=" ML "/input")) ||
	    (rc = add(e, "SM_INPUT_CONFIG_DIR=" ML "/input/config")) ||
	    (rc = add_hosts(s, e)) ||
	    (rc = add(e, "SM_NUM_GPUS=%lld", (long long)s->gpus)) ||
	    (rc = add(e, "SM_NUM_CPUS=%lld", (long long)(s->cpus > 0 ? s->cpus : ncpus))))
		return rc;
	if ((rc = add_channels(s, e)) < 0)
		return rc;
	return add_hyperparameters(s, e);
}

int jobenv_build(const struct jobspec *s, long long job_id, const char *user, int64_t ncpus,
		 struct jobenv *e)
{
	int rc;

	memset(e, 0, sizeof(*e));
	rc = add_labd(s, job_id, user, ncpus, e);
	/* LABD_SHARE*: the agent's, never the job's (jobenv_add_share) */
	for (size_t i = 0; rc == 0 && i < s->n_env; i++)
		if (!has_key(e, s->env_keys[i]) && strncmp(s->env_keys[i], "LABD_SHARE", 10) != 0)
			rc = add(e, "%s=%s", s->env_keys[i], s->env_values[i]);
	if (rc < 0)
		jobenv_free(e);
	return rc;
}

void jobenv_free(struct jobenv *e)
{
	for (size_t i = 0; i < e->n; i++)
		free(e->entries[i]);
	memset(e, 0, sizeof(*e));
}
