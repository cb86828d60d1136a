/* boxsh.h - a shell inside a real sandbox that the tests drive line by line: each
 * command's output comes back followed by "#rc=N".  Shared by the tests that need a
 * live sandbox (binds, injection, usage); they run under tests/security/run.sh, which
 * exports SANDBOX_TEST_STATE_DIR and SANDBOX_TEST_CGROUP_PARENT and cleans up after. */
#ifndef LABD_TESTS_BOXSH_H
#define LABD_TESTS_BOXSH_H

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "labd/sandbox.h"

static char *boxsh_argv[] = {
	"/bin/sh", "-c", "while IFS= read -r l; do eval \"$l\" 2>&1; echo \"#rc=$?\"; done", NULL};

struct boxsh {
	struct sandbox_handle h;
	int in, out; /* our ends: commands in, output back */
};

static inline bool boxsh_can_start(void)
{
	return geteuid() == 0 && getenv("SANDBOX_TEST_STATE_DIR") &&
	       getenv("SANDBOX_TEST_CGROUP_PARENT");
}

static inline void boxsh_spec(struct sandbox_spec *s, const char *user, uint32_t user_id)
{
	sandbox_spec_init(s);
	s->user = user;
	s->user_id = user_id;
	s->argv = boxsh_argv;
	s->die_with_parent = true;
	s->state_dir = getenv("SANDBOX_TEST_STATE_DIR");
	s->cgroup_parent = getenv("SANDBOX_TEST_CGROUP_PARENT");
}

/* Starts the spec's sandbox with the shell loop on pipes; 0 or -1. */
static inline int boxsh_start(struct boxsh *b, struct sandbox_spec *s)
{
	int in[2], out[2], rc;

	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		return -1;
	s->argv = boxsh_argv;
	s->stdin_fd = in[0];
	s->stdout_fd = out[1];
	s->stderr_fd = out[1];
	rc = sandbox_start_err(s, &b->h, NULL);
	close(in[0]);
	close(out[1]);
	b->in = in[1];
	b->out = out[0];
	return rc;
}

/* Runs cmd (one line) inside; its output into out (NUL-terminated), returns its exit
 * status, or -1 when the shell is gone. */
static inline int boxsh_run(struct boxsh *b, const char *cmd, char *out, size_t size)
{
	size_t used = 0;
	char *mark;

	if (write(b->in, cmd, strlen(cmd)) < 0 || write(b->in, "\n", 1) != 1)
		return -1;
	out[0] = '\0';
	for (;;) {
		ssize_t n = read(b->out, out + used, size - 1 - used);
		if (n <= 0)
			return -1;
		used += (size_t)n;
		out[used] = '\0';
		if ((mark = strstr(out, "#rc=")) && strchr(mark, '\n')) {
			int rc = (int)strtol(mark + 4, NULL, 10);
			*mark = '\0';
			return rc;
		}
		if (used >= size - 1)
			return -1;
	}
}

static inline void boxsh_stop(struct boxsh *b)
{
	struct sandbox_result res;

	close(b->in);
	close(b->out);
	sandbox_kill(&b->h, SIGKILL);
	sandbox_wait(&b->h, &res);
	sandbox_destroy(&b->h);
}

#endif
