/* dbwatch.c - see dbwatch.h. */
#include "web/dbwatch.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "labd/log.h"

/* Calls are at least this far apart. */
#define BATCH_MS 100

struct dbwatch {
	int inotify, stopfd;
	void (*changed)(void *ctx);
	void *ctx;
	pthread_t thread;
};

static void *run(void *arg)
{
	struct dbwatch *w = arg;
	char events[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct pollfd p[2] = {{.fd = w->inotify, .events = POLLIN}, {.fd = w->stopfd, .events = POLLIN}};

	pthread_setname_np(pthread_self(), "dbwatch");
	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_errno("dbwatch: poll");
			return NULL;
		}
		if (p[1].revents)
			return NULL;
		/* what changed does not matter: drain, then one call for the batch */
		while (read(w->inotify, events, sizeof(events)) > 0)
			;
		w->changed(w->ctx);
		/* the web process's own writes are heard too: under load, at most
		 * one call per batch window (what comes meanwhile waits in the queue) */
		if (poll(&p[1], 1, BATCH_MS) > 0)
			return NULL;
	}
}

int dbwatch_start(const char *dir, void (*changed)(void *ctx), void *ctx, struct dbwatch **out)
{
	struct dbwatch *w = calloc(1, sizeof(*w));
	int rc;

	if (!w)
		return -ENOMEM;
	w->changed = changed;
	w->ctx = ctx;
	w->inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	w->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->inotify < 0 || w->stopfd < 0 ||
	    inotify_add_watch(w->inotify, dir, IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_DELETE) < 0) {
		rc = -errno;
		log_errno("dbwatch: watching %s", dir);
		goto fail;
	}
	rc = -pthread_create(&w->thread, NULL, run, w);
	if (rc == 0) {
		*out = w;
		return 0;
	}
	log_error("dbwatch: cannot start its thread: %s", strerror(-rc));
fail:
	if (w->inotify >= 0)
		close(w->inotify);
	if (w->stopfd >= 0)
		close(w->stopfd);
	free(w);
	return rc;
}

void dbwatch_stop(struct dbwatch *w)
{
	uint64_t one = 1;

	if (!w)
		return;
	if (write(w->stopfd, &one, sizeof(one)) < 0)
		log_errno("dbwatch: stop");
	pthread_join(w->thread, NULL);
	close(w->inotify);
	close(w->stopfd);
	free(w);
}
