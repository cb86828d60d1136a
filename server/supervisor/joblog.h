/* joblog.h - a training job's log: what its command printed (stdout and
 * stderr, relayed by the pool's agent over a pipe the supervisor drains) in
 * <state_dir>/joblogs/<job_id>.log, root:labd 0640 in a root:labd 0750 dir so
 * labd-web reads it live and the user's processes never hold it.
 *
 * Appended, never truncated (a retried job or a re-adopted pool continues the
 * same file); capped: past max_bytes one line "[labd: log capped at N bytes]"
 * is written and the rest dropped, so a job that prints without end costs at
 * most max_bytes of the state file system. */
#ifndef LABD_JOBLOG_H
#define LABD_JOBLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define JOBLOG_PATH_MAX 1024

struct joblog {
	int fd; /* -1 when closed */
	uint64_t size_bytes, max_bytes;
	bool capped; /* the marker line is written: the rest is dropped */
	bool warned; /* a failed write was logged once */
	bool mid_line; /* the last byte written was not a newline */
	char path[JOBLOG_PATH_MAX];
};

/* <state_dir>/joblogs/<job_id>.log */
void joblog_path(const char *state_dir, long long job_id, char *out, size_t len);
/* joblogs/'s mode: 0750 (root writes, labd-web reads), or 0770 on a Slurm head
 * ([backend] kind = slurm), where labd-web writes the logs it pulls from the nodes
 * and no job of this host's writes (docs/slurm.md "Job logs"). */
mode_t joblog_dir_mode(const char *backend_kind);
/* Makes joblogs/ (root:gid, mode) when missing and fixes its owner and mode. 0 or -errno. */
int joblog_prepare_dir(const char *state_dir, gid_t gid, mode_t mode);
/* Opens (creating root:gid 0640) the job's log for appending; its current size
 * counts against max_bytes. 0 or -errno (l->fd stays -1). */
int joblog_open(struct joblog *l, const char *state_dir, long long job_id, uint64_t max_bytes,
		gid_t gid);
/* Takes an open log fd (a keeper's set_log): written_bytes of it are used, and
 * counted against max_bytes; what_for names it in warnings. */
void joblog_adopt(struct joblog *l, int fd, uint64_t max_bytes, uint64_t written_bytes,
		  const char *what_for);
/* Appends n bytes, up to the cap; the first write past it adds the marker line. */
void joblog_append(struct joblog *l, const char *buf, size_t n);
/* Closes the file; safe to call twice or on a log never opened. */
void joblog_close(struct joblog *l);
/* Copies the log at log_path into the folder dfd (an fd of the user's home,
 * O_PATH will do) as name, a new regular file of owner's, 0644: written
 * unnamed (O_TMPFILE), then renamed over name. Whatever the user left at name
 * (a FIFO, a socket, a device node, a symlink) is replaced, never opened, so
 * the copy cannot block and never writes through a link. 0 or -errno
 * (-EISDIR: name is a folder, left as it is). */
int joblog_copy_out(const char *log_path, int dfd, const char *name, uid_t owner);
/* The marker line for max_bytes (with its newline) into out; its length. */
size_t joblog_marker(uint64_t max_bytes, char *out, size_t len);

#endif
