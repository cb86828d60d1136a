/* upstream.h - keep-alive connections to Jupyter's Unix sockets, or to a Slurm node's
 * data port for a "tcp:HOST:PORT/PATH" target (runtime/endpoint.h).
 * Connections are non-blocking; idle ones are kept per socket path so a
 * page load does not pay a connect per asset. Each thread keeps its own:
 * a connection is only ever reused by the thread that made it (the worker
 * whose epoll set watches it). Thread-safe. */
#ifndef LABD_UPSTREAM_H
#define LABD_UPSTREAM_H

#include <stdbool.h>
#include <sys/types.h>

#define UPSTREAM_PATH_MAX 200 /* a tcp: endpoint (RUNTIME_ENDPOINT_MAX); sun_path is 108 */
#define UPSTREAM_TCP_CONNECT_MS 2000

/* Returns a non-blocking fd for path (kept idle, or new: connected or still
 * connecting, never waited for), or -1 (a full backlog is -1 at once).
 * *reused tells whether it was kept idle: it may have gone stale. With
 * probe, a kept one is first checked with a syscall (for a request that
 * could not be resent); without, the caller resends on a fresh connection
 * when a reused one fails before any response byte. A new connection whose
 * peer (SO_PEERCRED) is not peer_uid is refused (logged): -1. */
int upstream_get(const char *path, uid_t peer_uid, bool probe, bool *reused);
/* Returns a healthy idle connection to the calling thread's idle set (or closes
 * it when full). */
void upstream_put(const char *path, uid_t peer_uid, int fd);
/* Closes every idle connection to path, in every thread's set (its
 * runtime stopped). */
void upstream_forget(const char *path);
/* Closes every idle connection (shutdown). */
void upstream_clear(void);

#endif
