/* runlog.c - a pipe into a capped, rotated log file; see runlog.h. */
#include "supervisor/runlog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "labd/log.h"
#include "supervisor/readable.h"

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
	int fd = readable_open_append(l->path, l->gid, 0640);

	if (fd < 0)
		return fd;
	l->out_fd = fd;
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

/* Writes what fits; the count written (0 on an error: *err says which). A
 * short write is a full file system (or a file-size limit): ENOSPC. */
static size_t put(struct runlog *l, const char *buf, size_t n, int *err)
{
	ssize_t w;

	do
		w = write(l->out_fd, buf, n);
	while (w < 0 && errno == EINTR);
	*err = w < 0 ? errno : (size_t)w < n ? ENOSPC : 0;
	w = w < 0 ? 0 : w;
	l->size_bytes += (uint64_t)w;
	return (size_t)w;
}

/* After output was dropped, the first write that has room says so in the log
 * itself (and in labd's), so a reader sees the gap and why. */
static int say_dropped(struct runlog *l)
{
	char line[160];
	int err, len = snprintf(line, sizeof(line), "[labd: %llu bytes of output dropped: %s]\n",
				(unsigned long long)l->dropped_bytes, strerror(l->drop_errno));

	if (put(l, line, (size_t)len, &err) < (size_t)len)
		return -err;
	log_info("runtime log %s: writing again after %llu bytes dropped", l->path,
		 (unsigned long long)l->dropped_bytes);
	l->dropped_bytes = 0;
	l->warned = false;
	return 0;
}

void runlog_write(struct runlog *l, const char *buf, size_t n)
{
	size_t done = 0;
	int rc = 0, err;

	if (l->out_fd < 0)
		rc = open_out(l);
	if (rc == 0 && l->size_bytes > 0 && l->size_bytes + n > l->max_bytes)
		rc = rotate(l);
	if (rc == 0 && l->dropped_bytes > 0)
		rc = say_dropped(l);
	if (rc == 0) {
		done = put(l, buf, n, &err);
		rc = -err;
	}
	if (rc == 0)
		return;
	/* the rest is dropped, never buffered: the pipe keeps draining, so the
	 * runtime runs on whatever the state disk does */
	if (!l->warned)
		log_warn("runtime log %s: %s (output dropped until it can be written)", l->path,
			 strerror(-rc));
	l->warned = true;
	l->dropped_bytes += n - done;
	l->drop_errno = -rc;
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
