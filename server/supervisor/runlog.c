/* runlog.c - a pipe into a capped, rotated log file; see runlog.h. */
#include "supervisor/runlog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "labd/log.h"

void runlog_init_empty(struct runlog *l)
{
	memset(l, 0, sizeof(*l));
	l->in_fd = l->out_fd = -1;
}

void runlog_init(struct runlog *l, int in_fd, const char *path, uint64_t max_bytes, gid_t gid)
{
	runlog_init_empty(l);
	l->in_fd = in_fd;
	l->max_bytes = max_bytes < RUNLOG_READ_BYTES ? RUNLOG_READ_BYTES : max_bytes;
	l->gid = gid;
	snprintf(l->path, sizeof(l->path), "%s", path);
}

void runlog_release(struct runlog *l)
{
	if (l->in_fd >= 0)
		close(l->in_fd);
	if (l->out_fd >= 0)
		close(l->out_fd);
	l->in_fd = l->out_fd = -1;
}

/* The log's directory is root's (runtimes/<user>, 0710 root:labd): no name in it can
 * be planted, and O_NOFOLLOW refuses a link all the same. */
static int open_out(struct runlog *l)
{
	struct stat st;

	l->out_fd = open(l->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
	if (l->out_fd < 0)
		return -errno;
	if (fchown(l->out_fd, 0, l->gid) < 0)
		log_warn("chown %s: %s", l->path, strerror(errno));
	l->size_bytes = fstat(l->out_fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	return 0;
}

/* jupyter.log becomes jupyter.log.1 (the older copy goes) and a new one starts. */
static int rotate(struct runlog *l)
{
	char old[RUNLOG_PATH_MAX + 2];

	snprintf(old, sizeof(old), "%s.1", l->path);
	close(l->out_fd);
	l->out_fd = -1;
	if (rename(l->path, old) < 0)
		return -errno;
	return open_out(l);
}

void runlog_write(struct runlog *l, const char *buf, size_t n)
{
	int rc = 0;

	if (l->out_fd < 0)
		rc = open_out(l);
	if (rc == 0 && l->size_bytes > 0 && l->size_bytes + n > l->max_bytes)
		rc = rotate(l);
	if (rc == 0) {
		ssize_t w = write(l->out_fd, buf, n);
		rc = w == (ssize_t)n ? 0 : w < 0 ? -errno : -ENOSPC;
	}
	if (rc == 0) {
		l->size_bytes += n;
		return;
	}
	/* the output is dropped, never buffered: the pipe keeps draining */
	if (!l->warned)
		log_warn("runtime log %s: %s (output dropped)", l->path, strerror(-rc));
	l->warned = true;
}

int runlog_pump(struct runlog *l)
{
	static char buf[RUNLOG_READ_BYTES]; /* the supervisor's loop is one thread */
	ssize_t n;

	if (l->in_fd < 0)
		return 0;
	do
		n = read(l->in_fd, buf, sizeof(buf));
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		runlog_write(l, buf, (size_t)n);
		return 1;
	}
	if (n < 0 && errno == EAGAIN)
		return 1;
	runlog_release(l); /* EOF: Jupyter and everything that inherited its stdio is gone */
	return 0;
}
