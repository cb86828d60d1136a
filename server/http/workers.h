/* workers.h - the web process's worker threads. Each runs its own
 * libmicrohttpd daemon (epoll, no thread of its own) beside an epoll set of
 * its own that watches:
 *  - the shared listening socket, accepting one connection per wake-up and
 *    only while this worker is the first with room (not blocked in a
 *    password hash, awake less than 80% of the time): connections are
 *    packed onto as few workers as keep up with them, so that a small
 *    machine's other cores stay with the runtimes (see should_accept);
 *  - the upstream sockets of the requests it proxies, each registered once
 *    (edge-triggered) when the worker connects it, so that parking a
 *    connection on one (workers_park) costs no system call of ours.
 * The two epoll sets are never nested (the thread sleeps in poll() on both):
 * libmicrohttpd changes its set on every park and resume, and changes to a
 * set that another set watches take the kernel's slow, globally locked path.
 * A connection lives on one thread from accept to close, and that thread
 * parks and resumes it itself: no lock and no hand-off to another thread
 * between a request and its upstream's answer. An upstream socket stays with
 * the worker that connected it (upstream.c pools idle ones per thread). */
#ifndef LABD_WORKERS_H
#define LABD_WORKERS_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>

struct workers;

/* Starts one thread per daemon. The daemons must have been started with
 * MHD_USE_EPOLL, MHD_USE_NO_LISTEN_SOCKET and MHD_ALLOW_SUSPEND_RESUME and no
 * internal thread; they are owned by the pool from here on, even on failure.
 * listen_fd is borrowed until workers_stop(). NULL on error (logged). */
struct workers *workers_start(struct MHD_Daemon **daemons, unsigned n, int listen_fd);
/* Stops accepting, joins the threads, resumes every parked connection, stops
 * the daemons (closing their connections) and frees the pool. NULL is a no-op. */
void workers_stop(struct workers *w);
/* Watches a new upstream socket in the calling worker's epoll set, for
 * workers_park; closing it ends the watch. -1 off a worker thread or on error. */
int workers_watch(int fd);
/* Ends the watch before fd goes to another thread (the WebSocket relay). */
void workers_unwatch(int fd);
/* A request was just written to fd (a watched upstream socket): forget the
 * input events seen on it so far. The caller may then return from its
 * handler without a reply and without parking: libmicrohttpd calls it again
 * in its next run (as it does while a request has no reply), after this
 * worker has taken its own events, and workers_fired says whether the
 * answer came meanwhile. If not, the caller parks. Under load this spares
 * libmicrohttpd's park and resume (two epoll_ctl per request). */
void workers_arm(int fd);
/* Whether fd had an input event (data, hang-up, error) since workers_arm. */
bool workers_fired(int fd);
/* Suspends conn until fd (watched by this worker) becomes ready for events
 * (EPOLLIN and/or EPOLLOUT), an error or a hang-up, or until deadline_ms
 * (clock_ms(); 0 = none) passes, or *cancelled (NULL: never) turns true and
 * workers_sweep_all() is called: then conn is resumed without an event and
 * its handler must check its deadline and *cancelled itself. *cancelled must
 * stay valid while conn is parked. fd is edge-triggered: call
 * this only after the read or write that is waited for returned EAGAIN, right
 * after writing a request, or when workers_fired said no; a wake-up may be
 * spurious (the caller then tries again and parks again).
 * Only from a libmicrohttpd callback of conn on a worker thread. Returns 0,
 * or -1 (conn not suspended). */
int workers_park(struct MHD_Connection *conn, int fd, uint32_t events, long long deadline_ms,
		 const _Atomic bool *cancelled);
/* Makes every worker look at its parked connections at once (some were
 * cancelled), from any thread. */
void workers_sweep_all(void);

/* Resumes conn from any thread (a suspended event stream that got data) and
 * wakes the worker that runs its daemon. */
void workers_resume(struct MHD_Connection *conn);

/* The calling worker thread is about to block in slow work (a password
 * hash; on = true) or is done with it: while blocked it takes no new
 * connections and another worker accepts them. No-op on other threads. */
void workers_blocking(bool on);

#endif
