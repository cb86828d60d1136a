/* jobspec.h - the job spec of job_run (docs/jobs.md, "The job spec"), read
 * strictly root-side: the web process is not trusted with what a job mounts,
 * runs or how long it may run, so every field is checked here again.
 *
 * A pure function of the text: no files, no users; the supervisor resolves
 * the home-relative paths beneath the home later (RESOLVE_BENEATH). */
#ifndef LABD_JOBSPEC_H
#define LABD_JOBSPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/jobhosts.h"

#define JOBSPEC_ARGV_MAX 64
#define JOBSPEC_ARG_MAX_BYTES 4096
#define JOBSPEC_ENV_MAX 64
#define JOBSPEC_ENV_VALUE_MAX_BYTES 4096
#define JOBSPEC_CHANNELS_MAX 8
#define JOBSPEC_PATH_MAX_BYTES 1024
#define JOBSPEC_NAME_MAX 63
#define JOBSPEC_RUNTIME_MAX_S (30LL * 86400)
#define JOBSPEC_GRACE_MAX_S 86400
#define JOBSPEC_LOG_MAX_BYTES (1LL << 40)
#define JOBSPEC_GPUS_MAX 16
#define JOBSPEC_CPUS_MAX 4096

struct jobspec_channel {
	const char *name, *path;
};

/* Strings are borrowed from root (freed by jobspec_free). Optional fields
 * that were absent read as 0 / "" / NULL (hyperparameters), except grace_s and
 * log_max_bytes: -1, where the caller applies the [jobs] defaults. */
struct jobspec {
	json_t *root;
	const char *name;
	const char *argv[JOBSPEC_ARGV_MAX + 1]; /* NULL-terminated */
	size_t argc;
	const char *env_keys[JOBSPEC_ENV_MAX], *env_values[JOBSPEC_ENV_MAX];
	size_t n_env;
	const char *cwd; /* home-relative, "" = the home */
	json_t *hyperparameters; /* an object (borrowed) */
	struct jobspec_channel channels[JOBSPEC_CHANNELS_MAX];
	size_t n_channels;
	const char *output_path, *checkpoint_path;
	int64_t max_runtime_s, grace_s, log_max_bytes, gpus, cpus;
	struct jobhosts hosts; /* one host (algo-1) unless the spec says several */
};

/* Parses and checks text. 0, or -EINVAL with err saying which field and why
 * ("argv[2]: longer than 4096 bytes"); *out is then empty. */
int jobspec_parse(const char *text, struct jobspec *out, char *err, size_t errlen);
void jobspec_free(struct jobspec *s);

/* Home-relative: no leading '/', no ".." component, ≤ 1024 bytes, and
 * non-empty unless allow_empty (NUL cannot reach here: JSON text refuses it). */
bool jobspec_rel_path_ok(const char *p, bool allow_empty);
/* ^[A-Za-z_][A-Za-z0-9_]{0,63}$ */
bool jobspec_env_key_ok(const char *k);
/* ^[A-Za-z0-9._-]{1,64}$ */
bool jobspec_channel_name_ok(const char *n);

#endif
