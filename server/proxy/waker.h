/* waker.h - parks a libmicrohttpd connection until an upstream fd is ready.
 *
 * The proxy never blocks a worker thread on a slow upstream: when a read or
 * write would block it calls waker_suspend_until() from inside a libmicrohttpd
 * callback, returns, and the waker's epoll thread resumes the connection when
 * the fd becomes ready (MHD then calls the callback again). */
#ifndef LABD_WAKER_H
#define LABD_WAKER_H

#include <microhttpd.h>
#include <stdint.h>

struct waker;

/* Starts the epoll thread; 0 or -1 (logged). Release with waker_stop(). */
int waker_start(struct waker **out);
/* Refuses new waits, resumes every parked connection and joins the thread.
 * Call before MHD_stop_daemon (libmicrohttpd requires no suspended connections). */
void waker_stop(struct waker *w);
/* Suspends conn, then watches fd for events (EPOLLIN and/or EPOLLOUT) once.
 * Must be called from an access-handler or content-reader callback of conn.
 * Returns 0, or -1 (conn not suspended) when stopping or on error. */
int waker_suspend_until(struct waker *w, struct MHD_Connection *conn, int fd, uint32_t events);

#endif
