/* ttlcache.c - see ttlcache.h. */
#include "store/ttlcache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define WAYS 4 /* entries per bucket */

struct entry {
	unsigned char key[TTLCACHE_KEY_LEN];
	bool used;
	uint64_t gen;
	long long expires_ms;
	/* value_size bytes follow, aligned as the struct is */
};

struct ttlcache {
	pthread_mutex_t lock;
	size_t buckets; /* a power of two */
	size_t value_size, entry_size;
	unsigned char *entries; /* buckets * WAYS entries of entry_size bytes */
};

static struct entry *entry_at(const struct ttlcache *c, size_t i)
{
	return (struct entry *)(c->entries + i * c->entry_size);
}

static void *value_of(struct entry *e)
{
	return e + 1;
}

/* FNV-1a over the whole key: keys padded with zeros (names) spread as well
 * as hashes do. */
static size_t bucket_of(const struct ttlcache *c, const unsigned char *key)
{
	uint64_t h = 14695981039346656037ull;

	for (int i = 0; i < TTLCACHE_KEY_LEN; i++)
		h = (h ^ key[i]) * 1099511628211ull;
	return (size_t)(h ^ (h >> 32)) & (c->buckets - 1);
}

/* Which of two entries to evict first: one read under an older generation
 * (never valid again), else the one that expires first. */
static bool evict_before(const struct entry *x, const struct entry *e, uint64_t gen)
{
	bool x_stale = x->gen != gen, e_stale = e->gen != gen;

	if (x_stale != e_stale)
		return x_stale;
	return x->expires_ms < e->expires_ms;
}

/* The entry of key in its bucket, or NULL; caller holds the lock. */
static struct entry *find_locked(struct ttlcache *c, const unsigned char *key)
{
	size_t first = bucket_of(c, key) * WAYS;

	for (size_t i = first; i < first + WAYS; i++) {
		struct entry *e = entry_at(c, i);
		if (e->used && memcmp(e->key, key, TTLCACHE_KEY_LEN) == 0)
			return e;
	}
	return NULL;
}

struct ttlcache *ttlcache_new(size_t entries, size_t value_size)
{
	struct ttlcache *c = calloc(1, sizeof(*c));
	size_t align = _Alignof(struct entry);

	if (!c)
		return NULL;
	c->buckets = 1;
	while (c->buckets * WAYS < entries)
		c->buckets *= 2;
	c->value_size = value_size;
	c->entry_size = (sizeof(struct entry) + value_size + align - 1) / align * align;
	c->entries = calloc(c->buckets * WAYS, c->entry_size);
	if (!c->entries) {
		free(c);
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

void ttlcache_free(struct ttlcache *c)
{
	if (!c)
		return;
	explicit_bzero(c->entries, c->buckets * WAYS * c->entry_size);
	free(c->entries);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

bool ttlcache_get(struct ttlcache *c, const unsigned char key[TTLCACHE_KEY_LEN], uint64_t gen,
		  long long now_ms, void *out)
{
	bool hit = false;

	if (!c)
		return false;
	pthread_mutex_lock(&c->lock);
	struct entry *e = find_locked(c, key);
	if (e && e->gen == gen && now_ms < e->expires_ms) {
		memcpy(out, value_of(e), c->value_size);
		hit = true;
	}
	pthread_mutex_unlock(&c->lock);
	return hit;
}

void ttlcache_put(struct ttlcache *c, const unsigned char key[TTLCACHE_KEY_LEN], uint64_t gen,
		  long long expires_ms, const void *value)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	struct entry *e = find_locked(c, key);
	if (!e) {
		/* A free slot, else the best one to evict (the bucket's first way
		 * unless a later one is better). */
		size_t first = bucket_of(c, key) * WAYS;
		e = entry_at(c, first);
		for (size_t i = first; i < first + WAYS; i++) {
			struct entry *x = entry_at(c, i);
			if (!x->used) {
				e = x;
				break;
			}
			if (evict_before(x, e, gen))
				e = x;
		}
	}
	memcpy(e->key, key, TTLCACHE_KEY_LEN);
	e->used = true;
	e->gen = gen;
	e->expires_ms = expires_ms;
	memcpy(value_of(e), value, c->value_size);
	pthread_mutex_unlock(&c->lock);
}

void ttlcache_forget(struct ttlcache *c, const unsigned char key[TTLCACHE_KEY_LEN])
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	struct entry *e = find_locked(c, key);
	if (e)
		explicit_bzero(e, c->entry_size);
	pthread_mutex_unlock(&c->lock);
}

size_t ttlcache_count(struct ttlcache *c)
{
	size_t n = 0;

	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->buckets * WAYS; i++)
		n += entry_at(c, i)->used;
	pthread_mutex_unlock(&c->lock);
	return n;
}

size_t ttlcache_capacity(const struct ttlcache *c)
{
	return c->buckets * WAYS;
}
