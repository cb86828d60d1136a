/* agentio.h - the supervisor's side of the job agent's protocol
 * (sandbox/jobagent.h defines it; labd-jobagent speaks it in each job pool):
 * run commands for its stdin, and status lines read incrementally from its
 * stdout, with the bounds the supervisor needs. What the agent says is not
 * trusted: it runs in the sandbox beside the user's code, so anything
 * malformed or too long ends the pool. */
#ifndef LABD_AGENTIO_H
#define LABD_AGENTIO_H

#include <stddef.h>
#include <sys/types.h>

#define AGENTIO_FAILURE_MAX 1024 /* the first KiB of /opt/ml/output/failure */
#define AGENTIO_LINE_MAX 2048    /* a status line longer than this is malformed */

enum agent_said { AGENT_NONE, AGENT_READY, AGENT_STARTED, AGENT_ERROR, AGENT_EXITED, AGENT_BAD };

struct agent_status {
	enum agent_said said;
	pid_t pid;  /* started: the command's pid inside the sandbox */
	int status; /* exited: its wait status */
	size_t failure_len;
	/* exited: the failure file's first KiB; error: why the run did not start */
	char failure[AGENTIO_FAILURE_MAX + 1];
};

/* The run command into a new buffer (*out, freed by the caller) of *len bytes.
 * argv and envp NULL-terminated. 0, or -E2BIG / -ENOMEM. */
int agentio_format_run(char *const argv[], char *const envp[], const char *cwd, char **out,
		       size_t *len);
/* Parses the first status line of buf[0..len). Returns the bytes it took (st
 * filled), 0 when more bytes are needed, or -1 with st->said = AGENT_BAD when
 * buf does not start with a valid line. */
int agentio_parse(const char *buf, size_t len, struct agent_status *st);

#endif
