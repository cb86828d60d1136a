/* title.c - the sandbox init's process title; see title.h.
 *
 * Init is a clone() (without CLONE_VM) of the caller, not an exec: it holds a private
 * copy-on-write copy of the caller's memory, argument strings included, and
 * /proc/<pid>/cmdline is read from that copy.  So init overwrites its own copy in place,
 * found through /proc/self/stat, and the caller's title is untouched.  The other ways
 * were worse: PR_SET_MM_ARG_START needs CAP_SYS_RESOURCE in the initial user namespace,
 * which init (in its own user namespace) never has and some hosts deny root; re-exec'ing
 * init would need a host binary reachable inside and its arguments serialised, and
 * brings back the /proc/1/exe concerns (docs/sandbox.md).  The library cannot take the
 * caller's argv either: it is the caller's main()'s, not ours.
 */
#include "sandbox/title.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "sandbox/parse.h"

extern char **environ;

int title_area_parse(const char *stat, struct title_area *area)
{
	if (sandbox_parse_stat_field(stat, 48, &area->arg_start) < 0 ||
	    sandbox_parse_stat_field(stat, 49, &area->arg_end) < 0 ||
	    sandbox_parse_stat_field(stat, 50, &area->env_start) < 0 ||
	    sandbox_parse_stat_field(stat, 51, &area->env_end) < 0)
		return -1;
	/* 0 0 0 0 when the reader may not see them; never true for ourselves */
	if (area->arg_start == 0 || area->arg_end <= area->arg_start)
		return -1;
	return 0;
}

size_t title_room(const struct title_area *area)
{
	if (area->env_start == area->arg_end && area->env_end > area->env_start)
		return (size_t)(area->env_end - area->arg_start);
	return (size_t)(area->arg_end - area->arg_start);
}

static int read_self_stat(char *buf, size_t size)
{
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

static int failed(char *msg, size_t msg_size, const char *what, int err)
{
	snprintf(msg, msg_size, "%s: %s", what, strerror(err));
	return -1;
}

int title_set(const char *user, char *msg, size_t msg_size)
{
	static char *no_env[] = {NULL};
	char comm[16], title[64], stat[2048];
	struct title_area area;
	size_t room, len;
	char *p;

	snprintf(comm, sizeof(comm), "lsbx-%s", user); /* truncated to comm's 15 bytes */
	if (prctl(PR_SET_NAME, comm, 0, 0, 0) < 0)
		return failed(msg, msg_size, "set comm", errno);
	if (read_self_stat(stat, sizeof(stat)) < 0)
		return failed(msg, msg_size, "read /proc/self/stat", errno);
	if (title_area_parse(stat, &area) < 0)
		return failed(msg, msg_size, "parse /proc/self/stat", EINVAL);
	len = (size_t)snprintf(title, sizeof(title), "labd-sandbox %s", user) + 1;
	room = title_room(&area);
	if (len > room)
		len = room; /* a caller started with a very short command line: truncated */
	p = (char *)(uintptr_t)area.arg_start;
	if (len > area.arg_end - area.arg_start)
		environ = no_env; /* its strings are overwritten below; nobody reads them now */
	/* NULs after the title: the kernel shows the area up to its end (or, when the title
	 * runs into the environment, up to the first NUL) */
	memset(p, 0, len > area.arg_end - area.arg_start ? room : area.arg_end - area.arg_start);
	memcpy(p, title, len - 1);
	return 0;
}
