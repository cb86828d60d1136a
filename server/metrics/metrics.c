/* metrics.c - the metric primitives; see metrics.h. */
#include "metrics/metrics.h"

#include <time.h>

void metrics_observe(struct metrics_histogram *h, int64_t v)
{
	size_t i = 0;

	/* A handful of bounds: a linear scan beats a binary search's branches. */
	while (i < h->n_bounds && v > h->bounds[i])
		i++;
	atomic_fetch_add_explicit(&h->buckets[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum, v, memory_order_relaxed);
}

void metrics_histogram_clear(struct metrics_histogram *h)
{
	for (size_t i = 0; i <= METRICS_BUCKETS_MAX; i++)
		atomic_store_explicit(&h->buckets[i], 0, memory_order_relaxed);
	atomic_store_explicit(&h->sum, 0, memory_order_relaxed);
}

int64_t metrics_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
