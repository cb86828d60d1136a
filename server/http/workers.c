/* workers.c - see workers.h. */
#include "http/workers.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/guard.h"
#include "labd/clock.h"
#include "labd/log.h"

#define EVENTS_MAX 64
#define ACCEPT_PAUSE_MS 100 /* out of descriptors or memory: stop accepting a while */
/* How often expired parks and connection deadlines are looked for: deadlines
 * are whole seconds, so a quarter second late is close enough and keeps the
 * sweep (a walk over the parked fds) rare. */
#define SWEEP_EVERY_MS 250
/* New connections are packed onto the first worker that is neither blocked
 * nor this busy (percent of the last window awake), see should_accept. */
#define SATURATED_PCT 80
#define BUSY_WINDOW_NS 100000000LL /* 100 ms */

/* epoll data of the fds that are not upstream sockets (those carry the fd) */
#define TAG_LISTEN (1ull << 32)
#define TAG_STOP (2ull << 32)
#define TAG_KICK (3ull << 32)

/* A connection suspended until its upstream socket is ready. */
struct waiter {
	struct MHD_Connection *conn; /* NULL: nobody waits on this fd */
	uint32_t events;
	long long deadline_ms; /* resumed then even without an event */
	const _Atomic bool *cancelled; /* or when this turns true (NULL: never) */
	bool fired; /* an input event came while nobody was parked (workers_arm) */
};

/* Aligned to a cache line: the workers read each other's connection counts,
 * and a worker's own fields should not share a line with another's. */
struct worker {
	_Alignas(64) struct workers *pool;
	struct MHD_Daemon *daemon;
	int epfd;   /* this worker's own set: listening, upstream, stop, kick */
	int mhd_epfd; /* libmicrohttpd's set (its connections), never inside another */
	int kickfd; /* eventfd: another thread resumed one of our connections */
	bool started, listening;
	pthread_t thread;
	long long accept_paused_until_ms; /* 0: not paused */
	_Atomic unsigned connections;     /* read by the other workers */
	_Atomic unsigned busy_pct;        /* of the last window awake; read by the others */
	_Atomic bool blocked;             /* in slow work (a password hash) */
	long long window_start_ns, slept_ns;
	/* Touched only by the worker's thread, and by workers_stop() after it. */
	struct waiter *waiting; /* indexed by upstream fd */
	size_t nwaiting;
	unsigned parked;          /* waiters with a conn */
	long long next_sweep_ms;
	_Atomic bool sweep_soon; /* workers_sweep_all: sweep in the next turn */
};

struct workers {
	int listen_fd;
	int stopfd; /* eventfd: readable once the pool is stopping */
	unsigned n;
	struct worker w[];
};

/* The worker whose thread this is (NULL on other threads). */
static _Thread_local struct worker *current;
/* The one pool of this process, for workers_resume from any thread. */
static struct workers *_Atomic running;

/* Makes room in w->waiting for fd; -1 when out of memory. */
static int waiter_slot(struct worker *w, int fd)
{
	if ((size_t)fd < w->nwaiting)
		return 0;
	size_t n = w->nwaiting ? w->nwaiting : 256;
	while (n <= (size_t)fd)
		n *= 2;
	struct waiter *grown = realloc(w->waiting, n * sizeof(*grown));
	if (!grown)
		return log_errno("workers: waiter table");
	memset(grown + w->nwaiting, 0, (n - w->nwaiting) * sizeof(*grown));
	w->waiting = grown;
	w->nwaiting = n;
	return 0;
}

int workers_watch(int fd)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
				 .data.u64 = (uint64_t)fd};

	if (!current)
		return log_error("workers: watch outside a worker thread");
	if (fd < 0 || waiter_slot(current, fd) < 0)
		return -1;
	if (epoll_ctl(current->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return log_errno("workers: watch fd %d", fd);
	return 0;
}

void workers_arm(int fd)
{
	if (current && fd >= 0 && (size_t)fd < current->nwaiting)
		current->waiting[fd].fired = false;
}

bool workers_fired(int fd)
{
	return current && fd >= 0 && (size_t)fd < current->nwaiting && current->waiting[fd].fired;
}

void workers_unwatch(int fd)
{
	struct worker *w = current;

	if (!w)
		return;
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, fd, NULL);
	if ((size_t)fd < w->nwaiting && w->waiting[fd].conn) {
		w->waiting[fd].conn = NULL;
		w->parked--;
	}
}

int workers_park(struct MHD_Connection *conn, int fd, uint32_t events, long long deadline_ms,
		 const _Atomic bool *cancelled)
{
	struct worker *w = current;

	if (!w || fd < 0)
		return log_error("workers: park outside a worker thread");
	if (waiter_slot(w, fd) < 0)
		return -1;
	MHD_suspend_connection(conn);
	w->parked += !w->waiting[fd].conn;
	w->waiting[fd] = (struct waiter){conn, events, deadline_ms, cancelled, false};
	return 0;
}

/* An event on an upstream socket: resumes the connection waiting for it, if
 * any (libmicrohttpd calls its handler again in the next MHD_run). Events
 * nobody waits for (an idle pooled socket, a write edge while reading) are
 * dropped, but an input event is remembered (workers_fired): the socket is
 * edge-triggered, and a wait follows an EAGAIN, the write of a request (its
 * answer can only come after), or a turn that looked at workers_fired. */
static void wake(struct worker *w, int fd, uint32_t got)
{
	struct waiter *x = (size_t)fd < w->nwaiting ? &w->waiting[fd] : NULL;

	if (x && !x->conn && (got & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)))
		x->fired = true; /* for a request given a turn to be answered (workers_arm) */
	if (!x || !x->conn || !(got & (x->events | EPOLLERR | EPOLLHUP | EPOLLRDHUP)))
		return;
	struct MHD_Connection *conn = x->conn;
	x->conn = NULL;
	w->parked--;
	MHD_resume_connection(conn);
}

/* Resumes every connection parked past its deadline: libmicrohttpd never
 * times out a suspended connection, so an upstream that stays silent would
 * otherwise hold the client's connection slot for good. The handler, called
 * again, finds its deadline passed and fails the exchange. Also enforces the
 * client connections' own deadlines (guard.c). Returns how many it resumed. */
static unsigned sweep(struct worker *w, long long now_ms)
{
	unsigned resumed = 0;

	if (!atomic_exchange(&w->sweep_soon, false) && now_ms < w->next_sweep_ms)
		return 0;
	w->next_sweep_ms = now_ms + SWEEP_EVERY_MS;
	for (size_t fd = 0; w->parked && fd < w->nwaiting; fd++) {
		struct waiter *x = &w->waiting[fd];
		bool expired = x->deadline_ms && x->deadline_ms <= now_ms;
		if (x->conn && (expired || (x->cancelled && atomic_load(x->cancelled)))) {
			struct MHD_Connection *conn = x->conn;
			x->conn = NULL;
			w->parked--;
			MHD_resume_connection(conn);
			resumed++;
		}
	}
	guard_sweep(now_ms);
	return resumed;
}

/* Whether this worker holds no more than its share (one over the mean) of
 * the connections of the workers not blocked in a password hash: the rule
 * once every worker is saturated. The least loaded of those always
 * qualifies. Counting a blocked worker in could leave nobody accepting: with
 * connections packed onto one saturated worker and the other hashing, the
 * saturated one holds more than its share of all of them. */
static bool fair_to_accept(struct worker *w)
{
	unsigned total = 0, n = 0, mine = atomic_load(&w->connections);

	for (unsigned i = 0; i < w->pool->n; i++) {
		if (atomic_load(&w->pool->w[i].blocked))
			continue;
		total += atomic_load(&w->pool->w[i].connections);
		n++;
	}
	return mine * n <= total + n;
}

static bool has_room(struct worker *w)
{
	return !atomic_load(&w->blocked) && atomic_load(&w->busy_pct) < SATURATED_PCT;
}

/* Whether this worker should take the next connection. New connections are
 * packed onto the first worker with room, as nginx's accept does in effect,
 * rather than spread: each proxied request also needs its client and the
 * runtime's Jupyter to run, and a second busy proxy thread on a small
 * machine preempts them (on 2 cores, spreading cost ~20% more CPU per
 * request and a worse p99). A worker blocked in a password hash or awake
 * most of the time passes them to the next; once all are saturated they
 * are spread by connection count. */
static bool should_accept(struct worker *w)
{
	for (unsigned i = 0; i < w->pool->n; i++)
		if (has_room(&w->pool->w[i]))
			return &w->pool->w[i] == w;
	return !atomic_load(&w->blocked) && fair_to_accept(w);
}

/* Wakes the other workers, so that they decide again whether to accept. */
static void kick_others(struct worker *w)
{
	uint64_t one = 1;

	for (unsigned i = 0; i < w->pool->n; i++)
		if (&w->pool->w[i] != w && w->pool->w[i].kickfd >= 0 &&
		    write(w->pool->w[i].kickfd, &one, sizeof(one)) < 0)
			log_errno("workers: kick");
}

/* Keeps the listening socket in the epoll set only while this worker may
 * accept (level-triggered: every waiting worker sees a pending connection).
 * A worker that starts or stops accepting wakes the others to decide again:
 * one that should take over may be asleep, and then nobody would accept
 * (connections waited in the backlog until some unrelated event woke a
 * worker). */
static void update_listening(struct worker *w)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG_LISTEN};
	bool want = !w->accept_paused_until_ms && should_accept(w);

	if (want == w->listening)
		return;
	if (epoll_ctl(w->epfd, want ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, w->pool->listen_fd, &ev) < 0) {
		log_errno("workers: watch the listening socket");
		return;
	}
	w->listening = want;
	kick_others(w); /* the next one may start, or stop, listening */
}

/* Accepts one connection at a time, so the decision above is taken again
 * before the next. */
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
			w->accept_paused_until_ms = clock_ms() + ACCEPT_PAUSE_MS;
		}
		return; /* EAGAIN: another worker took it */
	}
	/* libmicrohttpd closes the socket itself when it cannot take it. */
	if (MHD_add_connection(w->daemon, fd, (struct sockaddr *)&sa, len) == MHD_YES)
		atomic_fetch_add(&w->connections, 1);
	else
		log_debug("workers: connection refused: %s", strerror(errno));
}

/* How long the loop may sleep: libmicrohttpd's own deadline (connection
 * timeouts, data it already holds), the sweep while anything has a
 * deadline, the end of an accept pause. */
static int wait_ms(struct worker *w)
{
	MHD_UNSIGNED_LONG_LONG mhd_ms;
	long long ms = -1;

	if (MHD_get_timeout(w->daemon, &mhd_ms) == MHD_YES)
		ms = mhd_ms > INT_MAX ? INT_MAX : (long long)mhd_ms;
	if ((w->parked || guard_count()) && (ms < 0 || ms > SWEEP_EVERY_MS))
		ms = SWEEP_EVERY_MS;
	if (w->accept_paused_until_ms) {
		long long left = w->accept_paused_until_ms - clock_ms();
		if (left <= 0)
			w->accept_paused_until_ms = 0;
		else if (ms < 0 || left < ms)
			ms = left;
	}
	return (int)ms;
}

/* Sleeps until libmicrohttpd's epoll set or this worker's has an event.
 * poll() on the two sets, not one set inside the other: the kernel takes a
 * slower, globally locked path for every change to an epoll set that another
 * epoll set watches, and libmicrohttpd changes its set on each park and
 * resume (two calls per proxied request). */
static void sleep_until_events(struct worker *w)
{
	struct pollfd fds[2] = {{.fd = w->mhd_epfd, .events = POLLIN},
				{.fd = w->epfd, .events = POLLIN}};

	long long before = clock_ns();

	if (poll(fds, 2, wait_ms(w)) < 0 && errno != EINTR)
		log_errno("workers: poll");
	w->slept_ns += clock_ns() - before;
}

/* Closes the busy window every BUSY_WINDOW_NS: the share of it this worker
 * spent awake, for should_accept. */
static void account_busy(struct worker *w)
{
	long long now = clock_ns(), span = now - w->window_start_ns;

	if (span < BUSY_WINDOW_NS)
		return;
	long long awake = span - w->slept_ns;
	atomic_store(&w->busy_pct, (unsigned)(awake > 0 ? awake * 100 / span : 0));
	w->window_start_ns = now;
	w->slept_ns = 0;
}

void workers_blocking(bool on)
{
	struct worker *w = current;

	if (!w)
		return;
	atomic_store(&w->blocked, on);
	if (on && w->listening)
		kick_others(w); /* let another take the new connections meanwhile */
}

/* One turn: sleep unless the last turn found work of this worker's (it may
 * have resumed or accepted connections that libmicrohttpd must serve now),
 * let libmicrohttpd serve what is ready, then take this worker's events.
 * Under load neither set is ever empty and the loop never sleeps. */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event events[EVENTS_MAX];
	const union MHD_DaemonInfo *info;
	bool busy = false;

	current = w;
	w->window_start_ns = clock_ns();
	for (;;) {
		account_busy(w);
		update_listening(w);
		if (!busy)
			sleep_until_events(w);
		MHD_run(w->daemon);
		int n = epoll_wait(w->epfd, events, EVENTS_MAX, 0);
		if (n < 0 && errno != EINTR) {
			log_errno("workers: epoll_wait");
			return NULL;
		}
		n = n < 0 ? 0 : n;
		for (int i = 0; i < n; i++) {
			uint64_t tag = events[i].data.u64;
			if (tag == TAG_STOP)
				return NULL; /* parked connections: workers_stop resumes them */
			if (tag == TAG_KICK) {
				uint64_t v;
				if (read(w->kickfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					log_errno("workers: kick");
				continue;
			}
			if (tag == TAG_LISTEN)
				accept_one(w);
			else
				wake(w, (int)tag, events[i].events);
		}
		busy = n > 0;
		busy |= sweep(w, clock_ms()) > 0;
		info = MHD_get_daemon_info(w->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
		if (info && info->num_connections != atomic_load(&w->connections))
			atomic_store(&w->connections, info->num_connections);
	}
}

static int worker_init(struct workers *pool, struct worker *w, struct MHD_Daemon *daemon)
{
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD);
	struct epoll_event ev_stop = {.events = EPOLLIN, .data.u64 = TAG_STOP};
	struct epoll_event ev_kick = {.events = EPOLLIN, .data.u64 = TAG_KICK};

	w->pool = pool;
	w->daemon = daemon;
	w->mhd_epfd = info ? info->epoll_fd : -1;
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	w->kickfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->epfd < 0 || w->kickfd < 0 || !info ||
	    epoll_ctl(w->epfd, EPOLL_CTL_ADD, pool->stopfd, &ev_stop) < 0 ||
	    epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->kickfd, &ev_kick) < 0)
		return log_errno("workers: epoll set");
	return 0;
}

/* After every worker_init: a running worker reads the others' kickfd. */
static int worker_run(struct worker *w)
{
	if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
		return log_error("workers: cannot start a thread");
	w->started = true;
	return 0;
}

struct workers *workers_start(struct MHD_Daemon **daemons, unsigned n, int listen_fd)
{
	size_t bytes = sizeof(struct workers) + n * sizeof(struct worker); /* a multiple of 64 */
	struct workers *pool = aligned_alloc(_Alignof(struct workers), bytes);
	int rc = 0;

	if (!pool) {
		log_errno("workers: allocate");
		for (unsigned i = 0; i < n; i++)
			MHD_stop_daemon(daemons[i]);
		return NULL;
	}
	memset(pool, 0, bytes);
	pool->listen_fd = listen_fd;
	pool->n = n;
	for (unsigned i = 0; i < n; i++) {
		pool->w[i].epfd = pool->w[i].kickfd = -1;
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
	for (unsigned i = 0; rc == 0 && i < n; i++)
		rc = worker_run(&pool->w[i]);
	if (rc < 0) {
		workers_stop(pool);
		return NULL;
	}
	atomic_store(&running, pool);
	return pool;
}

void workers_stop(struct workers *pool)
{
	uint64_t one = 1;

	if (!pool)
		return;
	atomic_store(&running, NULL);
	if (pool->stopfd >= 0 && write(pool->stopfd, &one, sizeof(one)) < 0)
		log_errno("workers: signal stop");
	for (unsigned i = 0; i < pool->n; i++)
		if (pool->w[i].started)
			pthread_join(pool->w[i].thread, NULL);
	for (unsigned i = 0; i < pool->n; i++) {
		struct worker *w = &pool->w[i];
		/* libmicrohttpd must have no suspended connection left. */
		for (size_t fd = 0; fd < w->nwaiting; fd++)
			if (w->waiting[fd].conn)
				MHD_resume_connection(w->waiting[fd].conn);
		free(w->waiting);
		if (w->daemon)
			MHD_stop_daemon(w->daemon);
		if (w->epfd >= 0)
			close(w->epfd);
		if (w->kickfd >= 0)
			close(w->kickfd);
	}
	if (pool->stopfd >= 0)
		close(pool->stopfd);
	free(pool);
}

void workers_sweep_all(void)
{
	struct workers *pool = atomic_load(&running);
	uint64_t one = 1;

	for (unsigned i = 0; pool && i < pool->n; i++) {
		atomic_store(&pool->w[i].sweep_soon, true);
		if (pool->w[i].kickfd >= 0 && write(pool->w[i].kickfd, &one, sizeof(one)) < 0)
			log_errno("workers: kick");
	}
}

void workers_resume(struct MHD_Connection *conn)
{
	struct workers *pool = atomic_load(&running);
	uint64_t one = 1;

	MHD_resume_connection(conn);
	/* libmicrohttpd's own wake-up does not reach a daemon run from an
	 * external epoll loop: wake the workers so the owner runs it now (the
	 * others find nothing to do). */
	for (unsigned i = 0; pool && i < pool->n; i++)
		if (pool->w[i].kickfd >= 0 && write(pool->w[i].kickfd, &one, sizeof(one)) < 0)
			log_errno("workers: kick");
}
