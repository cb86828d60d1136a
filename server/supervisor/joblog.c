/* joblog.c - a training job's capped log file; see joblog.h. */
#include "supervisor/joblog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "labd/log.h"
#include "supervisor/readable.h"

void joblog_path(const char *state_dir, long long job_id, char *out, size_t len)
{
	snprintf(out, len, "%s/joblogs/%lld.log", state_dir, job_id);
}

mode_t joblog_dir_mode(const char *backend_kind)
{
	return strcmp(backend_kind, "slurm") == 0 ? 0770 : 0750;
}

int joblog_prepare_dir(const char *state_dir, gid_t gid, mode_t mode)
{
	char dir[JOBLOG_PATH_MAX];
	struct stat st;

	snprintf(dir, sizeof(dir), "%s/joblogs", state_dir);
	if (mkdir(dir, mode) < 0 && errno != EEXIST)
		return -errno;
	/* never follow a link planted where the dir should be */
	if (lstat(dir, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (chown(dir, 0, gid) < 0 || chmod(dir, mode) < 0)
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
	fd = readable_open_append(l->path, gid, 0640);
	if (fd < 0 || fstat(fd, &st) < 0) {
		int rc = fd < 0 ? fd : -errno;
		if (fd >= 0)
			close(fd);
		log_error("job log %s: %s", l->path, strerror(-rc));
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

/* Writes all of in into out; 0 or -errno. */
static int copy_fd(int in, int out)
{
	char buf[65536];
	ssize_t n;

	for (;;) {
		do
			n = read(in, buf, sizeof(buf));
		while (n < 0 && errno == EINTR);
		if (n <= 0)
			return n < 0 ? -errno : 0;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(out, buf + off, (size_t)(n - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return w < 0 ? -errno : -EIO;
			off += w;
		}
	}
}

/* Gives the unnamed file tmp a fresh hidden name in dfd (into name_out): a
 * random one, so nothing the user made is ever opened or replaced by it. */
static int link_hidden(int tmp, int dfd, const char *name, char *name_out, size_t len)
{
	unsigned char r[6];

	for (int tries = 0; tries < 4; tries++) {
		if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
			return -EIO;
		snprintf(name_out, len, ".%.64s.labd-%02x%02x%02x%02x%02x%02x", name, r[0], r[1],
			 r[2], r[3], r[4], r[5]);
		/* AT_EMPTY_PATH on a file of our own: root's CAP_DAC_READ_SEARCH */
		if (linkat(tmp, "", dfd, name_out, AT_EMPTY_PATH) == 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

int joblog_copy_out(const char *log_path, int dfd, const char *name, uid_t owner)
{
	char hidden[96];
	struct stat st;
	int in = -1, tmp = -1, rc;

	/* root's own log, but opened as anything else would be: never blocking,
	 * never through a link, a regular file only */
	in = open(log_path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (in < 0)
		return -errno;
	if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(in);
		return -EINVAL;
	}
	/* an unnamed file in the user's folder: a FIFO, socket or device node
	 * the user left at name is never opened (an open of a FIFO blocks for a
	 * reader for ever), only replaced by the rename below */
	tmp = openat(dfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
	if (tmp < 0) {
		rc = -errno;
		goto out;
	}
	if (fchown(tmp, owner, owner) < 0 || fchmod(tmp, 0644) < 0) {
		rc = -errno;
		goto out;
	}
	if ((rc = copy_fd(in, tmp)) < 0 ||
	    (rc = link_hidden(tmp, dfd, name, hidden, sizeof(hidden))) < 0)
		goto out;
	/* replaces a file, link, FIFO, socket or node of that name; a folder
	 * there stays (EISDIR), and the copy goes */
	if (renameat(dfd, hidden, dfd, name) < 0) {
		rc = -errno;
		unlinkat(dfd, hidden, 0);
	}
out:
	if (tmp >= 0)
		close(tmp);
	close(in);
	return rc;
}
