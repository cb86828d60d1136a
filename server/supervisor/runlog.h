/* runlog.h - a runtime's output, read from a pipe into a size-capped log file.
 *
 * Jupyter's stdout and stderr are the write end of a pipe (the sandbox spec's stdio),
 * never a host file: a user process that inherits them can only fill the pipe.  The
 * runtime's keeper (keeper.h, which outlives the supervisor) reads the read end and
 * appends what arrives to runtimes/<user>/jupyter.log with runlog_write; past
 * max_bytes the file is renamed to jupyter.log.1 (replacing the previous one) and a
 * new one started, so a runtime's output takes at most twice max_bytes of the state
 * file system, whatever the user prints.  When the keeper falls behind, the pipe
 * fills and the writer blocks: only that runtime waits.  runlog_pump (read and
 * append in one) serves a caller that owns the pipe itself. */
#ifndef LABD_RUNLOG_H
#define LABD_RUNLOG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define RUNLOG_PATH_MAX 1024
#define RUNLOG_READ_BYTES 65536 /* per wake-up: one runtime never holds the loop long */

struct runlog {
	int in_fd;  /* the pipe's read end (owned, non-blocking), -1 when closed */
	int out_fd; /* the log file, opened at the first output, -1 until then */
	uint64_t size_bytes, max_bytes;
	gid_t gid; /* the log's group (labd's): labd-web may read it */
	bool warned; /* a failed write was logged once (again after a recovery) */
	uint64_t dropped_bytes; /* output lost since the last write that went in */
	int drop_errno;         /* why (ENOSPC: the state disk is full) */
	char path[RUNLOG_PATH_MAX];
};

/* Takes ownership of in_fd; output goes to path (created 0640 root:gid on first use).
 * max_bytes is at least RUNLOG_READ_BYTES. */
void runlog_init(struct runlog *l, int in_fd, const char *path, uint64_t max_bytes, gid_t gid);
/* A runlog that holds nothing (in_fd -1). */
void runlog_init_empty(struct runlog *l);
/* Reads what the pipe holds (at most RUNLOG_READ_BYTES) and appends it, rotating at
 * the cap.  1 while the pipe is open, 0 once every writer is gone (the runlog is then
 * released). */
int runlog_pump(struct runlog *l);
/* Appends n bytes (a whole read) to the log, rotating first when they would take
 * it past the cap; on a failed write (a full state disk) the bytes are dropped
 * and labd's log warned once; the next write that has room first adds a line
 * "[labd: N bytes of output dropped: <why>]". */
void runlog_write(struct runlog *l, const char *buf, size_t n);
/* Closes both fds; safe to call twice. */
void runlog_release(struct runlog *l);

#endif
