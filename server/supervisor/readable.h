/* readable.h - a root-written file that labd-web reads while it grows (a job's
 * log, a runtime's jupyter.log): opened for appending, and when missing created
 * as root:gid with its mode already set.
 *
 * The plain way (open with O_CREAT, then fchown) leaves a moment where the new
 * file is root:root and labd-web's read fails with EACCES: a job's log page
 * polled at that moment answered 500. Here the file is made unnamed
 * (O_TMPFILE), given its owner and mode, and only then linked under its name. */
#ifndef LABD_READABLE_H
#define LABD_READABLE_H

#include <sys/types.h>

/* path opened O_WRONLY | O_APPEND without following a link, a regular file of
 * root:gid with mode when this returns. The fd, or -errno. */
int readable_open_append(const char *path, gid_t gid, mode_t mode);

#endif
