/* inflight.c - see inflight.h. A small chained table; an entry lives while its owner
 * has requests in flight. */
#include "proxy/inflight.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS 256

struct count {
	char owner[33];
	unsigned n;
	struct count *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct count *table[BUCKETS];

static struct count **slot_of(const char *owner)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (const char *c = owner; *c; c++)
		h = (h ^ (unsigned char)*c) * 16777619u;
	struct count **pc = &table[h % BUCKETS];
	while (*pc && strcmp((*pc)->owner, owner) != 0)
		pc = &(*pc)->next;
	return pc;
}

int inflight_acquire(const char *owner, unsigned max)
{
	int rc = 0;

	pthread_mutex_lock(&lock);
	struct count **pc = slot_of(owner), *c = *pc;
	if (!c && (c = calloc(1, sizeof(*c)))) {
		snprintf(c->owner, sizeof(c->owner), "%s", owner);
		*pc = c;
	}
	if (!c)
		rc = -ENOMEM;
	else if (c->n >= max)
		rc = -EBUSY;
	else
		c->n++;
	pthread_mutex_unlock(&lock);
	return rc;
}

void inflight_release(const char *owner)
{
	pthread_mutex_lock(&lock);
	struct count **pc = slot_of(owner), *c = *pc;
	if (c && c->n > 0 && --c->n == 0) {
		*pc = c->next;
		free(c);
	}
	pthread_mutex_unlock(&lock);
}

unsigned inflight_count(const char *owner)
{
	pthread_mutex_lock(&lock);
	struct count *c = *slot_of(owner);
	unsigned n = c ? c->n : 0;
	pthread_mutex_unlock(&lock);
	return n;
}
