/* workers.c - see workers.h. */
#include "http/workers.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "labd/clock.h"
#include "labd/log.h"

#define EVENTS_MAX 64
#define SPARE_MAX 64            /* parked entries kept for reuse, per worker */
#define ACCEPT_PAUSE_MS 100     /* out of descriptors or memory: stop accepting a while */

/* A connection suspended until its upstream fd is ready. */
struct parked {
	struct MHD_Connection *conn;
	int fd;
	struct parked *prev, *next;
};

struct worker {
	struct workers *pool;
	struct MHD_Daemon *daemon;
	int epfd;
	bool started;
	pthread_t thread;
	long long accept_paused_until_ms; /* 0: accepting */
	/* Touched only by the worker's thread, and by workers_stop() after it. */
	struct parked *parked;
	struct parked *spare;
	unsigned nspare;
};

struct workers {
	int listen_fd;
	int stopfd; /* eventfd: readable once the pool is stopping */
	unsigned n;
	struct worker w[];
};

/* epoll tags for the fds that are not parked connections */
static char tag_listen, tag_stop, tag_daemon;

/* The worker whose thread this is (NULL on other threads). */
static _Thread_local struct worker *current;

static struct parked *entry_new(struct worker *w)
{
	struct parked *e = w->spare;

	if (!e)
		return calloc(1, sizeof(*e));
	w->spare = e->next;
	w->nspare--;
	return e;
}

static void entry_release(struct worker *w, struct parked *e)
{
	if (w->nspare >= SPARE_MAX) {
		free(e);
		return;
	}
	e->next = w->spare;
	w->spare = e;
	w->nspare++;
}

static void entry_unlink(struct worker *w, struct parked *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		w->parked = e->next;
	if (e->next)
		e->next->prev = e->prev;
}

int workers_park(struct MHD_Connection *conn, int fd, uint32_t events)
{
	struct worker *w = current;
	struct epoll_event ev = {.events = events | EPOLLONESHOT | EPOLLRDHUP};
	struct parked *e;

	if (!w)
		return log_error("workers: park outside a worker thread");
	if (!(e = entry_new(w)))
		return log_errno("workers: park");
	e->conn = conn;
	e->fd = fd;
	ev.data.ptr = e;
	MHD_suspend_connection(conn);
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		log_errno("workers: watch fd %d", fd);
		MHD_resume_connection(conn);
		entry_release(w, e);
		return -1;
	}
	e->prev = NULL;
	e->next = w->parked;
	if (w->parked)
		w->parked->prev = e;
	w->parked = e;
	return 0;
}

/* The upstream fd of a parked connection is ready: libmicrohttpd calls its
 * handler again in the next MHD_run. */
static void wake(struct worker *w, struct parked *e)
{
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, e->fd, NULL);
	entry_unlink(w, e);
	MHD_resume_connection(e->conn);
	entry_release(w, e);
}

static int watch_listen(struct worker *w)
{
	/* EPOLLEXCLUSIVE: a new connection wakes one idle worker, not all. */
	struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = &tag_listen};

	return epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->pool->listen_fd, &ev);
}

/* Accepts one connection: a busy worker comes back here less often than an
 * idle one, so new connections go to whoever has time for them. */
static void accept_one(struct worker *w)
{
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	int fd = accept4(w->pool->listen_fd, (struct sockaddr *)&sa, &len,
			 SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
			/* The listening socket stays readable: without a pause this
			 * worker would spin on it. */
			log_errno("workers: accept (pausing for %d ms)", ACCEPT_PAUSE_MS);
			epoll_ctl(w->epfd, EPOLL_CTL_DEL, w->pool->listen_fd, NULL);
			w->accept_paused_until_ms = clock_ms() + ACCEPT_PAUSE_MS;
		}
		return; /* EAGAIN: another worker took it */
	}
	/* libmicrohttpd closes the socket itself when it cannot take it. */
	if (MHD_add_connection(w->daemon, fd, (struct sockaddr *)&sa, len) != MHD_YES)
		log_debug("workers: connection refused: %s", strerror(errno));
}

/* How long epoll_wait may block: libmicrohttpd's own deadline (connection
 * timeouts, data it already holds) and the end of an accept pause. */
static int wait_ms(struct worker *w)
{
	MHD_UNSIGNED_LONG_LONG mhd_ms;
	long long ms = -1;

	if (MHD_get_timeout(w->daemon, &mhd_ms) == MHD_YES)
		ms = mhd_ms > INT_MAX ? INT_MAX : (long long)mhd_ms;
	if (w->accept_paused_until_ms) {
		long long left = w->accept_paused_until_ms - clock_ms();
		if (left <= 0) {
			w->accept_paused_until_ms = 0;
			if (watch_listen(w) < 0)
				log_errno("workers: watch the listening socket");
		} else if (ms < 0 || left < ms) {
			ms = left;
		}
	}
	return (int)ms;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event events[EVENTS_MAX];

	current = w;
	for (;;) {
		int n = epoll_wait(w->epfd, events, EVENTS_MAX, wait_ms(w));
		if (n < 0 && errno != EINTR) {
			log_errno("workers: epoll_wait");
			return NULL;
		}
		for (int i = 0; i < n; i++) {
			void *tag = events[i].data.ptr;
			if (tag == &tag_stop)
				return NULL; /* parked connections: workers_stop resumes them */
			if (tag == &tag_listen)
				accept_one(w);
			else if (tag != &tag_daemon)
				wake(w, tag);
		}
		MHD_run(w->daemon);
	}
}

static int worker_init(struct workers *pool, struct worker *w, struct MHD_Daemon *daemon)
{
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD);
	struct epoll_event ev_daemon = {.events = EPOLLIN, .data.ptr = &tag_daemon};
	struct epoll_event ev_stop = {.events = EPOLLIN, .data.ptr = &tag_stop};

	w->pool = pool;
	w->daemon = daemon;
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epfd < 0 || !info ||
	    epoll_ctl(w->epfd, EPOLL_CTL_ADD, info->epoll_fd, &ev_daemon) < 0 ||
	    epoll_ctl(w->epfd, EPOLL_CTL_ADD, pool->stopfd, &ev_stop) < 0 || watch_listen(w) < 0)
		return log_errno("workers: epoll set");
	if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
		return log_error("workers: cannot start a thread");
	w->started = true;
	return 0;
}

struct workers *workers_start(struct MHD_Daemon **daemons, unsigned n, int listen_fd)
{
	struct workers *pool = calloc(1, sizeof(*pool) + n * sizeof(pool->w[0]));
	int rc = 0;

	if (!pool) {
		log_errno("workers: calloc");
		for (unsigned i = 0; i < n; i++)
			MHD_stop_daemon(daemons[i]);
		return NULL;
	}
	pool->listen_fd = listen_fd;
	pool->n = n;
	for (unsigned i = 0; i < n; i++) {
		pool->w[i].epfd = -1;
		pool->w[i].daemon = daemons[i];
	}
	/* Several workers wait on the socket and one may find nothing left. */
	if (fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK) < 0 ||
	    (pool->stopfd = eventfd(0, EFD_CLOEXEC)) < 0) {
		log_errno("workers: set up");
		pool->stopfd = -1;
		rc = -1;
	}
	for (unsigned i = 0; rc == 0 && i < n; i++)
		rc = worker_init(pool, &pool->w[i], daemons[i]);
	if (rc < 0) {
		workers_stop(pool);
		return NULL;
	}
	return pool;
}

void workers_stop(struct workers *pool)
{
	uint64_t one = 1;

	if (!pool)
		return;
	if (pool->stopfd >= 0 && write(pool->stopfd, &one, sizeof(one)) < 0)
		log_errno("workers: signal stop");
	for (unsigned i = 0; i < pool->n; i++)
		if (pool->w[i].started)
			pthread_join(pool->w[i].thread, NULL);
	for (unsigned i = 0; i < pool->n; i++) {
		struct worker *w = &pool->w[i];
		/* libmicrohttpd must have no suspended connection left. */
		while (w->parked) {
			struct parked *e = w->parked;
			entry_unlink(w, e);
			MHD_resume_connection(e->conn);
			free(e);
		}
		while (w->spare) {
			struct parked *e = w->spare;
			w->spare = e->next;
			free(e);
		}
		if (w->daemon)
			MHD_stop_daemon(w->daemon);
		if (w->epfd >= 0)
			close(w->epfd);
	}
	if (pool->stopfd >= 0)
		close(pool->stopfd);
	free(pool);
}
