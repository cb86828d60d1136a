/* jobagent.h - the protocol of labd-jobagent, the command of a job pool's sandbox
 * (docs/sandbox.md, "The job agent").  Used by the agent (sandbox/jobagent.c) and by
 * the supervisor that drives it; libc only (the agent is linked static).
 *
 * Supervisor -> agent, on the agent's stdin:
 *   run <argc> <envc> <cwd><arg>...<env>...\n  each <...> a netstring "<len>:<bytes>,"
 *                          (bytes may hold anything but NUL); env entries "K=V" are
 *                          added to (or replace those of) the agent's own environment
 *   term\n                 SIGTERM to every process of the job
 *   EOF                    the agent SIGKILLs what is left of the job and exits 0
 * Agent -> supervisor, on the agent's stdout, one line each:
 *   ready                  once, at start
 *   started <pid>          the command was exec'd (pid inside the sandbox)
 *   error <netstring>      the run did not start (no command, bad cwd, exec failed, a
 *                          job already running); the agent waits for the next run
 *   exited <wait-status> <netstring>
 *                          the command ended (its raw wait status: WIFEXITED...); every
 *                          process left in the sandbox has been killed and its output
 *                          relayed; the netstring is the first KiB of
 *                          /opt/ml/output/failure when the job wrote it, else empty
 * The texts of error and exited have control characters replaced by spaces (every
 * status is exactly one line) and are valid UTF-8 (an invalid byte is '?').  The job's
 * stdout and stderr go to the agent's stderr.
 * A malformed command ends the agent (exit 2) after an error line.
 */
#ifndef LABD_SANDBOX_JOBAGENT_H
#define LABD_SANDBOX_JOBAGENT_H

#include <stddef.h>
#include <sys/types.h>

#define JOBAGENT_PATH "/opt/labd/libexec/labd-jobagent"
#define JOBAGENT_FAILURE_PATH "/opt/ml/output/failure"
#define JOBAGENT_FAILURE_MAX 1024
#define JOBAGENT_MAX_ARGS 256
#define JOBAGENT_MAX_ENV 1024
#define JOBAGENT_MAX_COMMAND_BYTES (4u << 20)
#define JOBAGENT_TEXT_MAX 1024 /* error and failure texts, at most */

enum jobagent_cmd_kind { JOBAGENT_RUN, JOBAGENT_TERM };

struct jobagent_cmd {
	enum jobagent_cmd_kind kind;
	char *cwd;     /* RUN: "" = the agent's own */
	char **argv;   /* RUN: NULL-terminated */
	char **envp;   /* RUN: NULL-terminated "K=V" */
	char *mem;     /* what the pointers point into (jobagent_cmd_free) */
};

/* Parses one command at the start of buf.  Returns the bytes it took (> 0) and fills
 * *cmd (free with jobagent_cmd_free), 0 when more bytes are needed, -1 when malformed. */
long jobagent_parse_command(const char *buf, size_t len, struct jobagent_cmd *cmd);
void jobagent_cmd_free(struct jobagent_cmd *cmd);
/* Formats a run command (malloc'd, *len bytes, NUL-terminated); NULL when it would pass
 * the limits above or out of memory.  cwd may be NULL (""), envp NULL (none). */
char *jobagent_format_run(const char *cwd, char *const argv[], char *const envp[], size_t *len);

enum jobagent_status_kind { JOBAGENT_READY, JOBAGENT_STARTED, JOBAGENT_ERROR, JOBAGENT_EXITED };

struct jobagent_status {
	enum jobagent_status_kind kind;
	pid_t pid;                         /* STARTED */
	int wait_status;                   /* EXITED */
	char text[JOBAGENT_TEXT_MAX + 1];  /* ERROR: why; EXITED: the failure file, or "" */
};

/* Parses one status line (len bytes, the "\n" optional); 0 or -1 when malformed. */
int jobagent_parse_status(const char *line, size_t len, struct jobagent_status *st);
/* Writes "<len>:<text>," into buf with control characters as spaces and bytes that
 * are not UTF-8 as '?' (text cut at JOBAGENT_TEXT_MAX); returns the length written
 * (buf must hold 16 + that). */
size_t jobagent_netstring_text(char *buf, size_t size, const char *text, size_t text_len);
/* Makes the len bytes at text valid UTF-8 as JSON takes it, in place: each byte that
 * starts no valid sequence (a cut character, an overlong form, a surrogate, a NUL)
 * becomes '?'.  For every text that goes into the supervisor protocol's JSON, where
 * one invalid byte would drop the whole field (jansson refuses the string). */
void jobagent_utf8_clean(char *text, size_t len);

#endif
