/* shell.h - a shell into a running job (docs/jobs.md, "A shell into a running
 * job"): the backend starts it beside the job's command, in its sandbox, as
 * the user; what reaches the caller is the terminal's master, or (a job on a
 * Slurm node) a connection spliced with it there. */
#ifndef LABD_JOBS_SHELL_H
#define LABD_JOBS_SHELL_H

#include <stdbool.h>
#include <stddef.h>

#include "store/jobs.h"

struct app;

/* Whether j's command runs now (InProgress, Training, on a pool). */
bool jobs_shell_possible(const struct job *j);
/* Starts a shell into j (its owner's) on its host algo-<host> (1..its
 * instance_count) with a terminal of cols x rows (1..1000): 0 with *fd the pty's
 * master (the caller's), -ENOENT when the job is not training (any more, or not on
 * that host), -EBUSY, -ETIMEDOUT, or another negative errno with a message in err. */
int jobs_shell_open(struct app *app, const struct job *j, int host, int cols, int rows,
		    int *fd, char *err, size_t errlen);
/* Resizes the terminal behind a jobs_shell_open fd that is no terminal itself (its
 * TIOCSWINSZ said ENOTTY): the backend sets the size where the pty is. 0 or a
 * negative errno. */
int jobs_shell_resize(struct app *app, int fd, int cols, int rows);

#endif
