/* slurmshell.h - a shell into a job on a Slurm node (docs/slurm.md, "Nodes"). Internal
 * to backend/.
 *
 * The node's supervisor answers job_shell with the pty's master; the node's link keeps
 * it under a one-time token and the reply carries the token (proto/link.h). The head
 * claims the terminal through the node's data port ("shell/<token>", a signed line) and
 * hands that TCP connection to labd-web's relay as the shell's fd. A connection is no
 * terminal: a resize is one more signed line, "shell/<token>@<cols>x<rows>", which the
 * node applies to the pty it splices (TIOCSWINSZ) before it closes. */
#ifndef LABD_SLURMSHELL_H
#define LABD_SLURMSHELL_H

#include <stddef.h>

#include "backend/backend.h"

struct slurm;

/* The job's pool must run on a node (its holder placed there) whose link is up. 0 with
 * the data connection in *fd (the caller's), -ENOENT (the pool is not on a node now),
 * -ENOTCONN (its node's link is down), or as the node's job_shell and the connect fail,
 * with a message in err. */
int slurm_shell_open(struct slurm *s, const struct backend_shell *sh, int *fd, char *err,
		     size_t errlen);
/* The backend's job_shell_resize: fd must be one slurm_shell_open returned (and still
 * open). Waits for the node's close (at most the connect's and the answer's 2 s each),
 * so a size set here holds for what the shell reads next. 0, -ENOENT, or the
 * connection's negative errno. */
int slurm_job_shell_resize(struct backend *b, int fd, int cols, int rows);

#endif
