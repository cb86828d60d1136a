/* ttlcache.h - a bounded in-memory table of fixed-size values keyed by 32
 * bytes (a SHA-256, or a short name padded with zeros), for store reads on
 * the request path: the identity behind a cookie or token, a user's runtime.
 *
 * Each entry carries the store generation it was read under (db_generation)
 * and an expiry: a lookup returns it only while both still hold, so a change
 * that bumps the generation forgets every entry at once and the expiry is a
 * safety net. The table never grows: it is split into buckets of a few
 * entries, and a full bucket evicts a stale entry, else the one that expires
 * first. Thread-safe. */
#ifndef LABD_TTLCACHE_H
#define LABD_TTLCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TTLCACHE_KEY_LEN 32

struct ttlcache;

/* A cache of about `entries` values (rounded up to a power of two, at least one
 * bucket) of value_size bytes each; NULL when out of memory. Caller frees it with
 * ttlcache_free(). */
struct ttlcache *ttlcache_new(size_t entries, size_t value_size);
/* Wipes the values (they may hold secrets) and frees the cache; NULL is a no-op. */
void ttlcache_free(struct ttlcache *c);
/* Copies the value stored for key into out (value_size bytes) and returns true
 * when there is one, it was read under generation gen and now_ms is before its
 * expiry. A NULL cache always misses. */
bool ttlcache_get(struct ttlcache *c, const unsigned char key[TTLCACHE_KEY_LEN], uint64_t gen,
		  long long now_ms, void *out);
/* Stores a copy of value for key (replacing any), read under generation gen,
 * valid until expires_ms. A NULL cache ignores it. */
void ttlcache_put(struct ttlcache *c, const unsigned char key[TTLCACHE_KEY_LEN], uint64_t gen,
		  long long expires_ms, const void *value);
/* Drops the entry for key, if any. */
void ttlcache_forget(struct ttlcache *c, const unsigned char key[TTLCACHE_KEY_LEN]);
/* How many entries the cache holds (stale ones included) and can hold. */
size_t ttlcache_count(struct ttlcache *c);
size_t ttlcache_capacity(const struct ttlcache *c);

#endif
