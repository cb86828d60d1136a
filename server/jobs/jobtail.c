/* jobtail.c - the last lines of a job's log; see jobtail.h. */
#include "jobs/jobtail.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "jobs/joblog.h"

size_t jobtail_start(const char *data, size_t len, int max_lines, int cut)
{
	size_t end = len > 0 && data[len - 1] == '\n' ? len - 1 : len, first = 0;
	int lines = 0;

	if (cut) { /* the bytes before the first newline are the end of an earlier line */
		const char *nl = memchr(data, '\n', len);
		first = nl ? (size_t)(nl - data) + 1 : len;
	}
	for (size_t i = end; i > first; i--)
		if (data[i - 1] == '\n' && ++lines == max_lines)
			return i;
	return first;
}

/* The length of the UTF-8 sequence at s (n bytes left), or 0 when it is not valid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t want = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3
					   : (s[0] & 0xf8) == 0xf0 ? 4 : 0;

	if (want == 0 || want > n || (want == 2 && s[0] < 0xc2) || (s[0] > 0xf4))
		return 0;
	for (size_t i = 1; i < want; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	/* overlong three- and four-byte forms, surrogates */
	if ((want == 3 && s[0] == 0xe0 && s[1] < 0xa0) || (want == 3 && s[0] == 0xed && s[1] > 0x9f) ||
	    (want == 4 && s[0] == 0xf0 && s[1] < 0x90) || (want == 4 && s[0] == 0xf4 && s[1] > 0x8f))
		return 0;
	return want;
}

void jobtail_make_utf8(char *data, size_t len)
{
	unsigned char *s = (unsigned char *)data;

	for (size_t i = 0; i < len;) {
		size_t n = utf8_len(s + i, len - i);
		if (n == 0) {
			s[i++] = '?';
			continue;
		}
		i += n;
	}
}

int jobtail_read(const struct labd_config *cfg, int64_t job_id, char *out, size_t len)
{
	char path[PATH_MAX], data[JOBTAIL_MAX_BYTES];
	int64_t size;
	uint64_t from;
	ssize_t n;
	size_t start;

	out[0] = '\0';
	if (len == 0 || jobs_log_path(cfg, job_id, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	if ((size = joblog_size(path)) <= 0)
		return (int)size;
	from = size > JOBTAIL_MAX_BYTES ? (uint64_t)size - JOBTAIL_MAX_BYTES : 0;
	if ((n = joblog_read(path, from, data, sizeof(data))) < 0)
		return (int)n;
	start = jobtail_start(data, (size_t)n, JOBTAIL_MAX_LINES, from > 0);
	n -= (ssize_t)start;
	if ((size_t)n >= len)
		n = (ssize_t)len - 1;
	memcpy(out, data + start, (size_t)n);
	out[n] = '\0';
	jobtail_make_utf8(out, (size_t)n);
	return (int)n;
}
