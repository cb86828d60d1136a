/* offload.c - one detached thread per piece of blocking work; see offload.h. */
#include "http/offload.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "labd/log.h"
#include "labd/thread.h"

static struct {
	pthread_mutex_t lock;
	pthread_cond_t idle;
	unsigned running;
	bool closing;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, false};

struct offloaded {
	void (*fn)(void *arg);
	void *arg;
};

static void finished(void)
{
	pthread_mutex_lock(&pool.lock);
	if (--pool.running == 0)
		pthread_cond_broadcast(&pool.idle);
	pthread_mutex_unlock(&pool.lock);
}

static void *work_main(void *p)
{
	struct offloaded w = *(struct offloaded *)p;

	free(p);
	w.fn(w.arg);
	finished();
	return NULL;
}

static bool reserve(void)
{
	bool ok;

	pthread_mutex_lock(&pool.lock);
	ok = !pool.closing && pool.running < OFFLOAD_MAX;
	if (ok)
		pool.running++;
	pthread_mutex_unlock(&pool.lock);
	return ok;
}

int offload_run(void (*fn)(void *arg), void *arg)
{
	struct offloaded *w;
	int rc;

	if (!reserve())
		return -1;
	if (!(w = malloc(sizeof(*w)))) {
		finished();
		return -1;
	}
	*w = (struct offloaded){fn, arg};
	if ((rc = thread_detached(work_main, w, 0)) != 0) {
		log_warn("offload: no thread (%d): the work runs on the worker", rc);
		free(w);
		finished();
		return -1;
	}
	return 0;
}

void offload_drain(void)
{
	pthread_mutex_lock(&pool.lock);
	pool.closing = true;
	while (pool.running > 0)
		pthread_cond_wait(&pool.idle, &pool.lock);
	pthread_mutex_unlock(&pool.lock);
}
