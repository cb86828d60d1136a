/* fuzz_jobspec.c - job_run's spec text, read strictly root-side
 * (proto/jobspec.c): what a job mounts, runs and how long it may run. */
#include <errno.h>

#include "fuzz.h"
#include "proto/jobspec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jobspec s;
	char err[256] = "", *text = fuzz_cstr(data, size);

	if (jobspec_parse(text, &s, err, sizeof(err)) == 0) {
		FUZZ_ASSERT(s.argc >= 1 && s.argc <= JOBSPEC_ARGV_MAX && !s.argv[s.argc]);
		for (size_t i = 0; i < s.argc; i++)
			FUZZ_ASSERT(strlen(s.argv[i]) <= JOBSPEC_ARG_MAX_BYTES);
		FUZZ_ASSERT(s.n_env <= JOBSPEC_ENV_MAX && s.n_channels <= JOBSPEC_CHANNELS_MAX);
		for (size_t i = 0; i < s.n_env; i++)
			FUZZ_ASSERT(jobspec_env_key_ok(s.env_keys[i]) &&
				    strlen(s.env_values[i]) <= JOBSPEC_ENV_VALUE_MAX_BYTES);
		for (size_t i = 0; i < s.n_channels; i++)
			FUZZ_ASSERT(jobspec_channel_name_ok(s.channels[i].name) &&
				    jobspec_rel_path_ok(s.channels[i].path, false));
		FUZZ_ASSERT(jobspec_rel_path_ok(s.cwd, true));
		FUZZ_ASSERT(s.max_runtime_s > 0 && s.max_runtime_s <= JOBSPEC_RUNTIME_MAX_S);
		FUZZ_ASSERT(s.grace_s == -1 || (s.grace_s >= 0 && s.grace_s <= JOBSPEC_GRACE_MAX_S));
		jobspec_free(&s);
	} else {
		FUZZ_ASSERT(err[0] != '\0');
	}
	(void)jobspec_rel_path_ok(text, true);
	(void)jobspec_env_key_ok(text);
	(void)jobspec_channel_name_ok(text);
	free(text);
	return 0;
}
