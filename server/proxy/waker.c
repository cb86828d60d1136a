/* waker.c - see waker.h. */
#include "proxy/waker.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "labd/log.h"

struct wait_entry {
	struct MHD_Connection *conn;
	int fd;
	struct wait_entry *prev, *next;
};

struct waker {
	int epfd, stopfd;
	pthread_t thread;
	pthread_mutex_t lock;
	bool stopping;
	struct wait_entry *pending; /* parked connections, for waker_stop */
};

static void unlink_entry(struct waker *w, struct wait_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		w->pending = e->next;
	if (e->next)
		e->next->prev = e->prev;
}

/* Removes e (if still pending) and resumes its connection exactly once. */
static void wake(struct waker *w, struct wait_entry *e)
{
	pthread_mutex_lock(&w->lock);
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, e->fd, NULL);
	unlink_entry(w, e);
	pthread_mutex_unlock(&w->lock);
	MHD_resume_connection(e->conn);
	free(e);
}

static void *waker_loop(void *arg)
{
	struct waker *w = arg;
	struct epoll_event events[64];

	for (;;) {
		int n = epoll_wait(w->epfd, events, 64, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			log_errno("waker: epoll_wait");
			return NULL;
		}
		for (int i = 0; i < n; i++) {
			if (events[i].data.ptr == NULL)
				return NULL; /* the stop eventfd */
			wake(w, events[i].data.ptr);
		}
	}
}

int waker_start(struct waker **out)
{
	struct waker *w = calloc(1, sizeof(*w));
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};

	if (!w)
		return log_errno("waker: calloc");
	pthread_mutex_init(&w->lock, NULL);
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	w->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->epfd < 0 || w->stopfd < 0 ||
	    epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->stopfd, &ev) < 0 ||
	    pthread_create(&w->thread, NULL, waker_loop, w) != 0) {
		log_errno("waker: start");
		if (w->epfd >= 0)
			close(w->epfd);
		if (w->stopfd >= 0)
			close(w->stopfd);
		free(w);
		return -1;
	}
	*out = w;
	return 0;
}

void waker_stop(struct waker *w)
{
	uint64_t one = 1;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stopping = true;
	pthread_mutex_unlock(&w->lock);
	if (write(w->stopfd, &one, sizeof(one)) < 0)
		log_errno("waker: signal stop");
	pthread_join(w->thread, NULL);
	while (w->pending)
		wake(w, w->pending);
	close(w->stopfd);
	close(w->epfd);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

int waker_suspend_until(struct waker *w, struct MHD_Connection *conn, int fd, uint32_t events)
{
	struct wait_entry *e = calloc(1, sizeof(*e));
	struct epoll_event ev = {.events = events | EPOLLONESHOT | EPOLLRDHUP};
	int rc = 0;

	if (!e)
		return log_errno("waker: calloc");
	e->conn = conn;
	e->fd = fd;
	ev.data.ptr = e;
	pthread_mutex_lock(&w->lock);
	if (w->stopping) {
		rc = -1;
	} else {
		/* Suspend before watching: the event may fire at once, and resuming a
		 * connection that is not yet suspended is undefined. */
		MHD_suspend_connection(conn);
		if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			log_errno("waker: watch fd %d", fd);
			MHD_resume_connection(conn);
			rc = -1;
		} else {
			e->next = w->pending;
			if (w->pending)
				w->pending->prev = e;
			w->pending = e;
		}
	}
	pthread_mutex_unlock(&w->lock);
	if (rc < 0)
		free(e);
	return rc;
}
