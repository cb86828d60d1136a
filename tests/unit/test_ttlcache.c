/* Unit tests: the bounded TTL cache of store reads (store/ttlcache.c): hits,
 * generation and expiry, the bound and which entry a full bucket evicts. */
#include "unit.h"

#include "store/ttlcache.h"

struct value {
	int64_t n;
	char text[40];
};

static void key_of(unsigned n, unsigned char key[TTLCACHE_KEY_LEN])
{
	memset(key, 0, TTLCACHE_KEY_LEN);
	snprintf((char *)key, TTLCACHE_KEY_LEN, "key-%u", n);
}

static void put(struct ttlcache *c, unsigned n, uint64_t gen, long long expires_ms)
{
	unsigned char key[TTLCACHE_KEY_LEN];
	struct value v = {.n = n};

	key_of(n, key);
	snprintf(v.text, sizeof(v.text), "value %u", n);
	ttlcache_put(c, key, gen, expires_ms, &v);
}

/* 1 when key n is there under gen at now_ms with its own value, else 0. */
static int has(struct ttlcache *c, unsigned n, uint64_t gen, long long now_ms)
{
	unsigned char key[TTLCACHE_KEY_LEN];
	struct value v;
	char want[40];

	key_of(n, key);
	if (!ttlcache_get(c, key, gen, now_ms, &v))
		return 0;
	snprintf(want, sizeof(want), "value %u", n);
	assert_int_equal(v.n, n);
	assert_string_equal(v.text, want);
	return 1;
}

static void test_hit_generation_expiry_forget(void **state)
{
	struct ttlcache *c = ttlcache_new(64, sizeof(struct value));
	unsigned char key[TTLCACHE_KEY_LEN];
	(void)state;

	assert_non_null(c);
	assert_int_equal(has(c, 1, 7, 0), 0);
	put(c, 1, 7, 1000);
	assert_int_equal(has(c, 1, 7, 999), 1);
	assert_int_equal(has(c, 1, 7, 1000), 0); /* expired */
	assert_int_equal(has(c, 1, 8, 10), 0);   /* the store changed since */
	put(c, 1, 8, 2000);                      /* replaces, never duplicates */
	assert_int_equal(ttlcache_count(c), 1);
	assert_int_equal(has(c, 1, 8, 10), 1);
	assert_int_equal(has(c, 2, 8, 10), 0);
	key_of(1, key);
	ttlcache_forget(c, key);
	assert_int_equal(has(c, 1, 8, 10), 0);
	assert_int_equal(ttlcache_count(c), 0);
	ttlcache_free(c);
}

static void test_bounded(void **state)
{
	struct ttlcache *c = ttlcache_new(100, sizeof(struct value));
	size_t cap;
	(void)state;

	assert_non_null(c);
	cap = ttlcache_capacity(c);
	assert_true(cap >= 100 && cap <= 512);
	/* Ten times the capacity, each newer than the last: never more than
	 * the capacity, and the newest is always kept. */
	for (unsigned i = 0; i < 10 * cap; i++) {
		put(c, i, 1, 1000 + i);
		assert_true(ttlcache_count(c) <= cap);
		assert_int_equal(has(c, i, 1, 0), 1);
	}
	assert_true(ttlcache_count(c) <= cap);
	ttlcache_free(c);
}

static void test_eviction_order(void **state)
{
	/* Four entries: a single bucket, so every key competes for it. */
	struct ttlcache *c = ttlcache_new(4, sizeof(struct value));
	(void)state;

	assert_non_null(c);
	assert_int_equal(ttlcache_capacity(c), 4);
	put(c, 1, 5, 400);
	put(c, 2, 5, 100);
	put(c, 3, 5, 300);
	put(c, 4, 5, 200);
	/* full: the entry that expires first goes */
	put(c, 5, 5, 500);
	assert_int_equal(has(c, 2, 5, 0), 0);
	assert_int_equal(has(c, 1, 5, 0) + has(c, 3, 5, 0) + has(c, 4, 5, 0) + has(c, 5, 5, 0), 4);
	/* an entry read under an older generation goes before any current one,
	 * even one that expires later */
	put(c, 3, 4, 9000);
	put(c, 6, 5, 600);
	assert_int_equal(has(c, 3, 4, 0), 0);
	assert_int_equal(has(c, 1, 5, 0) + has(c, 4, 5, 0) + has(c, 5, 5, 0) + has(c, 6, 5, 0), 4);
	assert_int_equal(ttlcache_count(c), 4);
	ttlcache_free(c);
}

static void test_null_cache(void **state)
{
	unsigned char key[TTLCACHE_KEY_LEN] = {1};
	struct value v = {.n = 1};
	(void)state;

	ttlcache_put(NULL, key, 1, 100, &v);
	assert_false(ttlcache_get(NULL, key, 1, 0, &v));
	ttlcache_forget(NULL, key);
	ttlcache_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hit_generation_expiry_forget),
		cmocka_unit_test(test_bounded),
		cmocka_unit_test(test_eviction_order),
		cmocka_unit_test(test_null_cache),
	};
	return cmocka_run_group_tests_name("ttlcache", tests, NULL, NULL);
}
