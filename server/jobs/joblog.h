/* joblog.h - a training job's log as labd-web sees it: the file the
 * supervisor appends the job's output to (<state_dir>/joblogs/<job_id>.log,
 * root:labd 0640, never truncated: docs/jobs.md "Logs"), read by byte
 * offset, and cut into whole lines for log events and metric extraction.
 *
 * Byte offsets are the one position: an event's id, a range read's next
 * offset and the extractor's saved place all count bytes from the start of
 * the file, so a reader resuming at any of them neither loses nor repeats a
 * byte. */
#ifndef LABD_JOBS_JOBLOG_H
#define LABD_JOBS_JOBLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct labd_config;

/* A line longer than this is cut here (it is delivered, and matched, in
 * pieces), so no reader waits without bound for a newline. */
#define JOBLOG_LINE_MAX_BYTES (16 * 1024)
/* What one log event may cost in the event stream, its framing counted
 * ("data: " and a newline per line), so that it always fits a stream's
 * buffer (HTTP_STREAM_MAX_BYTES) with room to spare. */
#define JOBLOG_EVENT_MAX_BYTES (24 * 1024)

/* Writes <state_dir>/joblogs/<job_id>.log into out. 0, or -ENAMETOOLONG. */
int jobs_log_path(const struct labd_config *cfg, int64_t job_id, char *out, size_t len);

/* The log's size in bytes; 0 when the file does not exist yet (the job has
 * not started: an empty log). -errno on another failure. */
int64_t joblog_size(const char *path);
/* Reads at most max bytes at offset into out. The count read (0 at the end
 * or for a missing file), or -errno. */
ssize_t joblog_read(const char *path, uint64_t offset, char *out, size_t max);

/* Pure. How many of the len bytes at data form whole lines that cost at
 * most max_cost in an event (each line's bytes plus 7 for its framing; a CR
 * counts as a line break too, as event streams split there): every line
 * ended by LF, a line cut at JOBLOG_LINE_MAX_BYTES, and, when final (the
 * log is complete), a last line without LF. 0 when none is complete yet.
 * A single line costlier than max_cost is cut to fit, so the result is 0
 * only when nothing is ready. */
size_t joblog_cut(const char *data, size_t len, bool final, size_t max_cost);
/* Pure. The first line of data: its length without the LF (and a CR before
 * it) in *line_len; returns the bytes it takes (LF included), 0 when no line
 * is complete (see joblog_cut for what is). */
size_t joblog_next_line(const char *data, size_t len, bool final, size_t *line_len);

#endif
