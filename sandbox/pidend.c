/* pidend.c - sandbox_end_pids: SIGKILL to named host pids that live in one sandbox (a
 * share's processes over its GPU memory budget, named by NVML to the web process); see
 * labd/sandbox.h. A pid is the sandbox's when its cgroups are exactly its init's (the
 * sandbox cannot move a process: its cgroup file system is not mounted inside). A pidfd
 * taken before the check and signalled after it keeps a pid reused meanwhile safe: the
 * pidfd still names the process that was checked, or a dead one. */
#include "labd/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "labd/log.h"
#include "sandbox/state.h"

#define CGROUP_TEXT_MAX 4096

/* /proc/<pid>/cgroup into buf: its length, or -1. */
static int read_cgroups(pid_t pid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0 || (size_t)n == len - 1)
		return -1;
	buf[n] = '\0';
	return (int)n;
}

static int pidfd_open_pid(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int pidfd_signal(int pidfd, int sig)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* Whether pid is in the sandbox whose init's cgroups are init_cg; then SIGKILLed. */
static bool end_one(const char *init_cg, pid_t init, pid_t pid)
{
	char cg[CGROUP_TEXT_MAX];
	bool ended = false;
	int pidfd;

	if (pid <= 1 || pid == init || (pidfd = pidfd_open_pid(pid)) < 0)
		return false;
	if (read_cgroups(pid, cg, sizeof(cg)) > 0 && strcmp(cg, init_cg) == 0 &&
	    pidfd_signal(pidfd, 0) == 0) /* still the process whose cgroups were read */
		ended = pidfd_signal(pidfd, SIGKILL) == 0;
	close(pidfd);
	return ended;
}

int sandbox_end_pids(const struct sandbox_handle *h, const pid_t *pids, unsigned n)
{
	char init_cg[CGROUP_TEXT_MAX];
	int ended = 0;

	if (h->pid <= 0 || sandbox_proc_start_ticks(h->pid) != h->start_time_ticks ||
	    read_cgroups(h->pid, init_cg, sizeof(init_cg)) < 0)
		return -1; /* the sandbox is gone: nothing of it to end */
	for (unsigned i = 0; i < n; i++)
		if (end_one(init_cg, h->pid, pids[i]))
			ended++;
		else
			log_warn("sandbox %s: pid %d not ended: not one of its processes", h->id,
				 (int)pids[i]);
	return ended;
}
