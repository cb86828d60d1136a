/* agentio.c - the job agent's protocol from the supervisor's side; see agentio.h. */
#include "supervisor/agentio.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/jobagent.h"

int agentio_format_run(char *const argv[], char *const envp[], const char *cwd, char **out,
		       size_t *len)
{
	*out = jobagent_format_run(cwd, argv, envp, len);
	return *out ? 0 : -E2BIG;
}

static int bad(struct agent_status *st)
{
	st->said = AGENT_BAD;
	return -1;
}

int agentio_parse(const char *buf, size_t len, struct agent_status *st)
{
	size_t scan = len < AGENTIO_LINE_MAX ? len : AGENTIO_LINE_MAX;
	const char *nl = memchr(buf, '\n', scan);
	struct jobagent_status js;

	memset(st, 0, sizeof(*st));
	if (!nl)
		return len >= AGENTIO_LINE_MAX ? bad(st) : 0;
	if (memchr(buf, '\0', (size_t)(nl - buf)) ||
	    jobagent_parse_status(buf, (size_t)(nl - buf), &js) < 0)
		return bad(st);
	switch (js.kind) {
	case JOBAGENT_READY:
		st->said = AGENT_READY;
		break;
	case JOBAGENT_STARTED:
		if (js.pid <= 0)
			return bad(st);
		st->said = AGENT_STARTED;
		st->pid = js.pid;
		break;
	case JOBAGENT_ERROR:
	case JOBAGENT_EXITED:
		st->said = js.kind == JOBAGENT_ERROR ? AGENT_ERROR : AGENT_EXITED;
		st->status = js.wait_status;
		st->failure_len = strnlen(js.text, AGENTIO_FAILURE_MAX);
		memcpy(st->failure, js.text, st->failure_len);
		st->failure[st->failure_len] = '\0';
		/* the agent runs as the user: its text is cleaned here, whatever it sent */
		jobagent_utf8_clean(st->failure, st->failure_len);
		break;
	default:
		return bad(st);
	}
	return (int)(nl - buf) + 1;
}
