/* jobtail.h - the last lines of a failed job's log, for its summary (the API's
 * failure_tail, the job page): the reason is usually in the last lines the
 * command wrote, and failure_reason alone says only the exit code. Bounded,
 * cut at line starts, valid UTF-8 (a byte that is not is replaced by '?'). */
#ifndef LABD_JOBS_JOBTAIL_H
#define LABD_JOBS_JOBTAIL_H

#include <stddef.h>
#include <stdint.h>

struct labd_config;

#define JOBTAIL_MAX_BYTES 2048
#define JOBTAIL_MAX_LINES 20

/* Pure. Where the last max_lines lines of the len bytes at data start (a final
 * newline does not open a line); when cut is true the first bytes are a piece of
 * a line (a read from the middle of the file) and are skipped. An offset <= len. */
size_t jobtail_start(const char *data, size_t len, int max_lines, int cut);
/* Pure. Replaces every byte of data that is not part of valid UTF-8 by '?', in place. */
void jobtail_make_utf8(char *data, size_t len);
/* The tail of job_id's log into out (NUL-terminated, at most JOBTAIL_MAX_BYTES bytes
 * of the file): its length, 0 for an empty or missing log, or -errno. */
int jobtail_read(const struct labd_config *cfg, int64_t job_id, char *out, size_t len);

#endif
