/* joblog.c - reading a job's log by byte offset; see joblog.h. */
#include "jobs/joblog.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"

/* Framing an event adds "data: " and a newline to each line. */
#define LINE_FRAMING_BYTES 7

int jobs_log_path(const struct labd_config *cfg, int64_t job_id, char *out, size_t len)
{
	int n = snprintf(out, len, "%s/joblogs/%" PRId64 ".log", cfg->state_dir, job_id);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int64_t joblog_size(const char *path)
{
	struct stat st;

	if (stat(path, &st) == 0)
		return st.st_size;
	return errno == ENOENT ? 0 : -errno;
}

ssize_t joblog_read(const char *path, uint64_t offset, char *out, size_t max)
{
	/* O_NOFOLLOW: the folder is root's, but a reader never follows links
	 * out of it whatever happens there */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	n = pread(fd, out, max, (off_t)offset);
	if (n < 0)
		n = -errno;
	close(fd);
	return n;
}

size_t joblog_next_line(const char *data, size_t len, bool final, size_t *line_len)
{
	size_t scan = len < JOBLOG_LINE_MAX_BYTES ? len : JOBLOG_LINE_MAX_BYTES;
	const char *nl = memchr(data, '\n', scan);

	if (nl) {
		size_t n = (size_t)(nl - data);
		*line_len = n > 0 && data[n - 1] == '\r' ? n - 1 : n;
		return n + 1;
	}
	if (len >= JOBLOG_LINE_MAX_BYTES || (final && len > 0)) {
		*line_len = scan;
		return scan;
	}
	*line_len = 0;
	return 0;
}

size_t joblog_cut(const char *data, size_t len, bool final, size_t max_cost)
{
	size_t used = 0, cost = 0;

	while (used < len) {
		size_t line_len, take = joblog_next_line(data + used, len - used, final, &line_len);
		size_t breaks = 1;

		if (take == 0)
			break;
		for (size_t i = 0; i < take; i++)
			breaks += data[used + i] == '\r';
		if (cost + take + breaks * LINE_FRAMING_BYTES > max_cost) {
			if (used > 0)
				break;
			/* one line alone over the budget: cut it (each byte may
			 * be a CR, costing a framed line of its own, and the
			 * piece's last line is framed too) */
			take = max_cost > LINE_FRAMING_BYTES
				       ? (max_cost - LINE_FRAMING_BYTES) / (LINE_FRAMING_BYTES + 1)
				       : 0;
			if (take == 0)
				break;
		}
		used += take;
		cost += take + breaks * LINE_FRAMING_BYTES;
	}
	return used;
}
