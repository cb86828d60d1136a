/* worker.h - slow root work (mkfs.ext4, e2fsck, resize2fs, mounts, teardown)
 * run in a forked child, so the supervisor's loop never blocks on it: one
 * user's slow start never delays another user's request, start or stop.
 *
 * The child runs fn and reports over a SOCK_SEQPACKET socket, optionally
 * passing one descriptor with it; the parent polls the socket and reads the
 * result with worker_recv. The supervisor reaps the child on SIGCHLD and
 * tells worker_reaped.
 *
 * Every worker has a time limit. Work in a user's home can block for ever
 * (a FIFO, a hung file system), and a blocked worker would pin the home's
 * mount and hold copies of every descriptor of the supervisor: worker_tick
 * SIGKILLs a worker past its limit, its socket then reads as ended, and
 * worker_recv says -ETIMEDOUT, so its caller moves on with a clear error. */
#ifndef LABD_WORKER_H
#define LABD_WORKER_H

#include <stddef.h>
#include <sys/types.h>

/* Limits: a home's mkfs.ext4, e2fsck and resize2fs (a sandbox's start and
 * teardown, an online growth) take minutes at most on a large home; a job's
 * staging (mounts) and upload (syncfs, a log of at most 64 MiB) less. */
#define WORKER_HOME_LIMIT_MS (10 * 60 * 1000LL)
#define WORKER_JOB_LIMIT_MS (5 * 60 * 1000LL)
/* Workers alive at once; a spawn beyond it is refused (-EAGAIN). */
#define WORKER_MAX 256

/* Runs in the child; reports with worker_send(fd, ...) and returns its exit
 * status. */
typedef int (*worker_fn)(void *arg, int fd);

/* Forks a worker running fn(arg), SIGKILLed once it runs limit_ms. On 0,
 * *pid is the child and *fd the parent's end of the result socket
 * (non-blocking, close-on-exec; caller closes it). A negative errno on
 * failure. */
int worker_spawn(worker_fn fn, void *arg, long long limit_ms, pid_t *pid, int *fd);
/* In the child: sends len bytes, and pass_fd along when >= 0. 0 or -errno. */
int worker_send(int fd, const void *buf, size_t len, int pass_fd);
/* In the parent: reads one result of at most len bytes. Returns its size, 0
 * when the child ended without one, -ETIMEDOUT when it was killed at its
 * limit, or another negative errno (-EAGAIN: not yet). *passed_fd is the
 * descriptor sent with it, or -1. */
ssize_t worker_recv(int fd, void *buf, size_t len, int *passed_fd);

/* In the parent's loop: kills the workers past their limit (logged, once
 * each). Returns ms until the next limit, or -1 when no worker runs. */
long long worker_tick(long long now_ms);
/* The supervisor reaped pid: if it was a worker, it is forgotten. */
void worker_reaped(pid_t pid);
/* Its result is no longer wanted (its job or box is gone): a worker still
 * running is killed now. pid 0 or a pid that is no live worker: nothing. */
void worker_end(pid_t pid);

#endif
