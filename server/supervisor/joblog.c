/* joblog.c - a training job's capped log file; see joblog.h. */
#include "supervisor/joblog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "labd/log.h"

void joblog_path(const char *state_dir, long long job_id, char *out, size_t len)
{
	snprintf(out, len, "%s/joblogs/%lld.log", state_dir, job_id);
}

int joblog_prepare_dir(const char *state_dir, gid_t gid)
{
	char dir[JOBLOG_PATH_MAX];
	struct stat st;

	snprintf(dir, sizeof(dir), "%s/joblogs", state_dir);
	if (mkdir(dir, 0750) < 0 && errno != EEXIST)
		return -errno;
	/* never follow a link planted where the dir should be */
	if (lstat(dir, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (chown(dir, 0, gid) < 0 || chmod(dir, 0750) < 0)
		return -errno;
	return 0;
}

size_t joblog_marker(uint64_t max_bytes, char *out, size_t len)
{
	int n = snprintf(out, len, "[labd: log capped at %llu bytes]\n",
			 (unsigned long long)max_bytes);
	return n < 0 ? 0 : (size_t)n >= len ? len - 1 : (size_t)n;
}

int joblog_open(struct joblog *l, const char *state_dir, long long job_id, uint64_t max_bytes,
		gid_t gid)
{
	struct stat st;
	int fd;

	memset(l, 0, sizeof(*l));
	l->fd = -1;
	l->max_bytes = max_bytes;
	joblog_path(state_dir, job_id, l->path, sizeof(l->path));
	fd = open(l->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
	if (fd < 0)
		return log_errno("open %s", l->path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || fchown(fd, 0, gid) < 0 ||
	    fchmod(fd, 0640) < 0) {
		int rc = -errno ?: -EINVAL;
		close(fd);
		log_error("job log %s: not a regular file of root's", l->path);
		return rc;
	}
	l->fd = fd;
	l->size_bytes = (uint64_t)st.st_size;
	/* a log cut before (this attempt or an earlier one) stays cut */
	l->capped = l->size_bytes >= max_bytes;
	l->mid_line = false; /* a continued log may start a line in the middle: rare, harmless */
	return 0;
}

void joblog_adopt(struct joblog *l, int fd, uint64_t max_bytes, uint64_t written_bytes,
		  const char *what_for)
{
	memset(l, 0, sizeof(*l));
	l->fd = fd;
	l->max_bytes = max_bytes;
	l->size_bytes = written_bytes;
	l->capped = written_bytes >= max_bytes; /* as joblog_open: a cut log stays cut */
	snprintf(l->path, sizeof(l->path), "%s", what_for);
}

static void write_all(struct joblog *l, const char *buf, size_t n)
{
	while (n > 0) {
		ssize_t w = write(l->fd, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (!l->warned)
				log_warn("job log %s: write failed: %s", l->path, strerror(errno));
			l->warned = true;
			return;
		}
		l->mid_line = buf[w - 1] != '\n';
		buf += w;
		n -= (size_t)w;
		l->size_bytes += (uint64_t)w;
	}
}

void joblog_append(struct joblog *l, const char *buf, size_t n)
{
	char marker[80];
	size_t room;

	if (l->fd < 0 || l->capped || n == 0)
		return;
	room = l->size_bytes < l->max_bytes ? (size_t)(l->max_bytes - l->size_bytes) : 0;
	if (n <= room) {
		write_all(l, buf, n);
		return;
	}
	write_all(l, buf, room);
	/* the marker on a line of its own, even when the cut fell inside one */
	if (l->mid_line)
		write_all(l, "\n", 1);
	write_all(l, marker, joblog_marker(l->max_bytes, marker, sizeof(marker)));
	l->capped = true;
}

void joblog_close(struct joblog *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}
