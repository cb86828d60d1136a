/* worker.h - slow root work (mkfs.ext4, e2fsck, resize2fs, mounts, teardown)
 * run in a forked child, so the supervisor's loop never blocks on it: one
 * user's slow start never delays another user's request, start or stop.
 *
 * The child runs fn and reports over a SOCK_SEQPACKET socket, optionally
 * passing one descriptor with it; the parent polls the socket and reads the
 * result with worker_recv. The supervisor reaps the child on SIGCHLD. */
#ifndef LABD_WORKER_H
#define LABD_WORKER_H

#include <stddef.h>
#include <sys/types.h>

/* Runs in the child; reports with worker_send(fd, ...) and returns its exit
 * status. */
typedef int (*worker_fn)(void *arg, int fd);

/* Forks a worker running fn(arg). On 0, *pid is the child and *fd the parent's
 * end of the result socket (non-blocking, close-on-exec; caller closes it).
 * A negative errno on failure. */
int worker_spawn(worker_fn fn, void *arg, pid_t *pid, int *fd);
/* In the child: sends len bytes, and pass_fd along when >= 0. 0 or -errno. */
int worker_send(int fd, const void *buf, size_t len, int pass_fd);
/* In the parent: reads one result of at most len bytes. Returns its size, 0
 * when the child ended without one, or a negative errno (-EAGAIN: not yet).
 * *passed_fd is the descriptor sent with it, or -1. */
ssize_t worker_recv(int fd, void *buf, size_t len, int *passed_fd);

#endif
