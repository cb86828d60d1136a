/* fuzz_jobagent_command.c - the job agent's command parser (sandbox/jobproto.c).
 * The supervisor writes the commands, but the agent runs in the user's sandbox
 * and must not be made to misbehave by any bytes; a parsed run command must
 * also survive a round trip through the supervisor's formatter. */
#include "fuzz.h"
#include "sandbox/jobagent.h"

static void round_trip(const struct jobagent_cmd *cmd)
{
	struct jobagent_cmd again;
	size_t len, n = 0, e = 0;
	char *text = jobagent_format_run(cmd->cwd, cmd->argv, cmd->envp, &len);

	if (!text)
		return; /* past the formatter's limits */
	FUZZ_ASSERT(jobagent_parse_command(text, len, &again) == (long)len);
	FUZZ_ASSERT(again.kind == JOBAGENT_RUN && strcmp(again.cwd, cmd->cwd) == 0);
	for (; cmd->argv[n]; n++)
		FUZZ_ASSERT(again.argv[n] && strcmp(again.argv[n], cmd->argv[n]) == 0);
	FUZZ_ASSERT(!again.argv[n]);
	for (; cmd->envp[e]; e++)
		FUZZ_ASSERT(again.envp[e] && strcmp(again.envp[e], cmd->envp[e]) == 0);
	FUZZ_ASSERT(!again.envp[e]);
	jobagent_cmd_free(&again);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a heap copy of exactly size bytes, so ASan sees a read past the end */
	char *buf = malloc(size ? size : 1);
	size_t off = 0;

	FUZZ_ASSERT(buf);
	memcpy(buf, data, size);
	while (off < size) {
		struct jobagent_cmd cmd;
		long n = jobagent_parse_command(buf + off, size - off, &cmd);
		if (n <= 0)
			break;
		FUZZ_ASSERT((size_t)n <= size - off);
		if (cmd.kind == JOBAGENT_RUN) {
			FUZZ_ASSERT(cmd.cwd && cmd.argv && cmd.argv[0] && cmd.envp);
			for (char **e = cmd.envp; *e; e++)
				FUZZ_ASSERT((*e)[0] != '=' && strchr(*e, '='));
			round_trip(&cmd);
		}
		jobagent_cmd_free(&cmd);
		off += (size_t)n;
	}
	free(buf);
	return 0;
}
