/* ticker.c - see include/labd/ticker.h. */
#include "labd/ticker.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "labd/clock.h"
#include "labd/log.h"

struct ticker {
	ticker_pass_fn pass;
	void *ctx;
	char name[TICKER_NAME_MAX + 1];
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake; /* on CLOCK_MONOTONIC: a wall-clock step moves no due time */
	bool stopping, poked;
};

/* Under the lock: sleeps until poked, stopped or due (TICKER_IDLE: untimed). */
static void sleep_locked(struct ticker *t, long long due)
{
	struct timespec until;

	while (!t->stopping && !t->poked) {
		long long left = due - clock_ms();
		if (due == TICKER_IDLE) {
			pthread_cond_wait(&t->wake, &t->lock);
			continue;
		}
		if (left <= 0)
			return;
		clock_deadline(&until, left);
		pthread_cond_timedwait(&t->wake, &t->lock, &until);
	}
}

static void *run(void *arg)
{
	struct ticker *t = arg;

	pthread_setname_np(pthread_self(), t->name);
	pthread_mutex_lock(&t->lock);
	while (!t->stopping) {
		t->poked = false;
		pthread_mutex_unlock(&t->lock);
		long long due = t->pass(t->ctx);
		pthread_mutex_lock(&t->lock);
		sleep_locked(t, due < 0 ? TICKER_IDLE : due);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

int ticker_start(const char *name, ticker_pass_fn pass, void *ctx, struct ticker **out)
{
	struct ticker *t = calloc(1, sizeof(*t));
	pthread_condattr_t ca;
	int rc;

	if (!t) {
		log_errno("ticker %s: calloc", name);
		return -ENOMEM;
	}
	t->pass = pass;
	t->ctx = ctx;
	snprintf(t->name, sizeof(t->name), "%s", name);
	pthread_mutex_init(&t->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->wake, &ca);
	pthread_condattr_destroy(&ca);
	rc = pthread_create(&t->thread, NULL, run, t);
	if (rc != 0) {
		log_error("ticker %s: cannot start its thread: %s", name, strerror(rc));
		pthread_cond_destroy(&t->wake);
		pthread_mutex_destroy(&t->lock);
		free(t);
		return -rc;
	}
	*out = t;
	return 0;
}

void ticker_poke(struct ticker *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	t->poked = true;
	pthread_cond_signal(&t->wake);
	pthread_mutex_unlock(&t->lock);
}

void ticker_stop(struct ticker *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	t->stopping = true;
	pthread_cond_signal(&t->wake);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->thread, NULL);
	pthread_cond_destroy(&t->wake);
	pthread_mutex_destroy(&t->lock);
	free(t);
}
