/* tool.c - see tool.h. */
#include "sandbox/tool.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/fail.h"

#define OUT_MAX 400 /* what a failing tool printed, in its message */

void tool_close_from(int first)
{
	if (syscall(SYS_close_range, first, ~0U, 0) < 0)
		for (int fd = first; fd < 65536; fd++)
			close(fd);
}

/* The child: joins the namespace, takes the socket as stdio, is prepared, keeps only
 * fd 3 when asked, and becomes the tool. */
static _Noreturn void child(const struct tool_run *t, int io)
{
	if ((t->nsfd >= 0 && setns(t->nsfd, CLONE_NEWNET) < 0) || dup2(io, 0) < 0 ||
	    dup2(io, 1) < 0 || dup2(io, 2) < 0)
		_exit(126);
	if (t->prepare && t->prepare(t->arg) < 0)
		_exit(125);
	if (t->fd3 >= 0 && (t->fd3 == 3 ? fcntl(3, F_SETFD, 0) : dup2(t->fd3, 3)) < 0)
		_exit(126);
	tool_close_from(t->fd3 >= 0 ? 4 : 3);
	execv(t->argv[0], t->argv);
	_exit(127);
}

/* Feeds the input, then reads what the tool prints until it closes its end. */
static size_t talk(const struct tool_run *t, int fd, char *out, size_t len)
{
	size_t in = t->input ? strlen(t->input) : 0, got = 0;
	ssize_t n;

	if (in && send(fd, t->input, in, MSG_NOSIGNAL) != (ssize_t)in)
		fail_errno("send input to %s", t->argv[0]);
	shutdown(fd, SHUT_WR);
	while ((n = read(fd, out + got, len - 1 - got)) > 0 || (n < 0 && errno == EINTR))
		if (n > 0 && (got += (size_t)n) == len - 1)
			break;
	out[got] = '\0';
	return got;
}

int tool_run(const struct tool_run *t)
{
	char out[OUT_MAX];
	int sv[2], status;
	size_t got;
	pid_t c;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return fail_errno("socketpair");
	if ((c = fork()) < 0) {
		close(sv[0]);
		close(sv[1]);
		return fail_errno("fork %s", t->argv[0]);
	}
	if (c == 0)
		child(t, sv[1]);
	close(sv[1]);
	got = talk(t, sv[0], out, sizeof(out));
	close(sv[0]);
	while (waitpid(c, &status, 0) < 0)
		if (errno != EINTR)
			return fail_errno("wait for %s", t->argv[0]);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (t->quiet)
		return -1;
	for (char *p = out; *p; p++)
		if (*p == '\n')
			*p = ' ';
	return fail_error("%s %s: exit status %d%s%s", t->argv[0], t->argv[1] ? t->argv[1] : "",
			  WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
			  got ? ": " : "", out);
}

const char *tool_ip_path(void)
{
	static const char *const where[] = {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"};

	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++)
		if (access(where[i], X_OK) == 0)
			return where[i];
	return where[0];
}
