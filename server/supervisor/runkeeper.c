/* runkeeper.c - a runtime's keeper; see runkeeper.h. */
#include "supervisor/runkeeper.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "labd/clock.h"
#include "labd/fault.h"
#include "labd/log.h"
#include "supervisor/keeper.h"
#include "supervisor/launch.h"

int runkeeper_start(const struct labd_config *cfg, const char *state_dir, const char *user,
		    const struct sandbox_handle *h, int out_fd, pid_t *pid)
{
	char sock[LAUNCH_PATH_MAX], log_path[LAUNCH_PATH_MAX];
	struct keeper_spec ks = {.sock_path = sock, .cgroup_of = h->pid, .drain_fd = out_fd,
				 .log_path = log_path, .log_max_bytes = cfg->log_bytes,
				 .log_gid = launch_labd_gid(cfg)};
	long long t0 = clock_ns();
	int rc;

	/* Failure injection for tests: LABD_FAULT_NO_KEEPER=<user> fails that user's
	 * keeper start, standing in for a host that refuses the cgroup move */
	const char *fault = getenv("LABD_FAULT_NO_KEEPER");

	keeper_sock_path(state_dir, h->id, sock, sizeof(sock));
	launch_log_path(state_dir, user, log_path, sizeof(log_path));
	rc = fault && strcmp(fault, user) == 0 ? -EPERM : keeper_start(&ks, pid);
	if (rc < 0)
		log_error("runtime of %s: its output keeper did not start: %s", user, strerror(-rc));
	else
		log_info("runtime of %s: output keeper %d started in %.2f ms", user, (int)*pid,
			 (double)(clock_ns() - t0) / 1e6);
	FAULT_POINT("runtime.start.keeper");
	return rc;
}

/* "pipe:[N]" -> N; 0 when fd 1 of pid is not an anonymous pipe. */
static ino_t pipe_inode(pid_t pid)
{
	char path[64], link[64];
	uintmax_t ino = 0;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/fd/1", (int)pid);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return 0;
	link[n] = '\0';
	return sscanf(link, "pipe:[%" SCNuMAX "]", &ino) == 1 ? (ino_t)ino : 0;
}

int runkeeper_reopen(pid_t pid)
{
	char path[64];
	ino_t ino = pipe_inode(pid);
	struct stat st;
	int fd;

	if (!ino)
		return -ENOENT;
	/* opening a pipe's /proc link opens that pipe (as a FIFO), for reading */
	snprintf(path, sizeof(path), "/proc/%d/fd/1", (int)pid);
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode) || st.st_ino != ino) {
		close(fd); /* fd 1 changed in between */
		return -ESTALE;
	}
	return fd;
}

/* The read end of Jupyter's output pipe: from Jupyter (a child of the sandbox's
 * init, seen from the host), else from the init, which holds it too. */
static int reopen_output(pid_t init)
{
	char path[64], list[512];
	FILE *f;
	int fd = -ENOENT;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)init, (int)init);
	if ((f = fopen(path, "re"))) {
		if (fgets(list, sizeof(list), f)) {
			char *save = NULL;
			for (char *w = strtok_r(list, " \n", &save); w && fd < 0;
			     w = strtok_r(NULL, " \n", &save))
				fd = runkeeper_reopen((pid_t)strtol(w, NULL, 10));
		}
		fclose(f);
	}
	return fd >= 0 ? fd : runkeeper_reopen(init);
}

int runkeeper_repair(const struct labd_config *cfg, const char *state_dir, const char *user,
		     const struct sandbox_handle *h, pid_t *pid)
{
	char sock[LAUNCH_PATH_MAX];
	int fd, rc;

	keeper_sock_path(state_dir, h->id, sock, sizeof(sock));
	if (keeper_sync(sock, NULL) == 0)
		return 1;
	fd = reopen_output(h->pid);
	if (fd < 0) {
		log_error("runtime of %s: no keeper, and its output pipe could not be opened "
			  "again (%s): new kernels fail until it restarts", user, strerror(-fd));
		return fd;
	}
	rc = runkeeper_start(cfg, state_dir, user, h, fd, pid);
	close(fd);
	if (rc < 0) {
		log_error("runtime of %s: new kernels fail until it restarts (no output keeper)",
			  user);
		return rc;
	}
	log_info("runtime of %s had no output keeper (started by an earlier labd, or its "
		 "keeper died): its output pipe is drained again", user);
	return 0;
}

void runkeeper_end(const char *state_dir, const char *sandbox_id)
{
	char sock[LAUNCH_PATH_MAX];

	keeper_sock_path(state_dir, sandbox_id, sock, sizeof(sock));
	keeper_sync(sock, NULL); /* gone already: nothing held */
	unlink(sock);
}
