/* metrics.h - counters, gauges and fixed-bucket histograms that any thread may
 * update without a lock, and their rendering in the Prometheus text exposition
 * format (version 0.0.4).
 *
 * Updates are single relaxed atomic adds: the proxy bumps them once per
 * request, and a scrape may see one metric a request ahead of another, which
 * Prometheus tolerates. Nothing here allocates; rendering appends to a
 * caller's bounded struct buf. Every int function returns 0 or a negative
 * errno (buf_add's: -EMSGSIZE, -ENOMEM).
 *
 *     static const int64_t bounds_us[] = {1000, 10000, 100000};
 *     static struct metrics_histogram h = METRICS_HISTOGRAM(bounds_us, 1e6);
 *     metrics_observe(&h, elapsed_us);
 *     metrics_render_family(&b, "x_seconds", "histogram", "What x took.");
 *     metrics_render_histogram(&b, "x_seconds", NULL, 0, &h);
 */
#ifndef LABD_METRICS_H
#define LABD_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "labd/buf.h"

#define METRICS_BUCKETS_MAX 16 /* finite bounds per histogram; +Inf comes on top */

struct metrics_counter {
	_Atomic uint64_t value;
};

struct metrics_gauge {
	_Atomic int64_t value;
};

struct metrics_histogram {
	const int64_t *bounds; /* ascending upper bounds, in the unit observed */
	size_t n_bounds;       /* at most METRICS_BUCKETS_MAX */
	/* observed units per rendered unit (1e6: microseconds observed, seconds
	 * rendered); a division of exact integers rounds right, 1000 * 1e-6 does not */
	double divisor;
	_Atomic uint64_t buckets[METRICS_BUCKETS_MAX + 1]; /* per bucket, not cumulative; last: +Inf */
	_Atomic int64_t sum;                               /* in the unit observed */
};

/* A static initialiser; bounds must be an array (its size is taken). */
#define METRICS_HISTOGRAM(bounds_array, divisor_)                                                   \
	{                                                                                        \
		.bounds = (bounds_array), .n_bounds = sizeof(bounds_array) / sizeof((bounds_array)[0]), \
		.divisor = (divisor_)                                                                  \
	}

struct metrics_label {
	const char *name;  /* [a-zA-Z_][a-zA-Z0-9_]* */
	const char *value; /* any UTF-8: escaped when rendered */
};

static inline void metrics_add(struct metrics_counter *c, uint64_t n)
{
	atomic_fetch_add_explicit(&c->value, n, memory_order_relaxed);
}

static inline void metrics_gauge_add(struct metrics_gauge *g, int64_t delta)
{
	atomic_fetch_add_explicit(&g->value, delta, memory_order_relaxed);
}

static inline void metrics_gauge_set(struct metrics_gauge *g, int64_t v)
{
	atomic_store_explicit(&g->value, v, memory_order_relaxed);
}

/* Counts v (in the histogram's unit) in the first bucket whose bound is >= v. */
void metrics_observe(struct metrics_histogram *h, int64_t v);
/* Zeroes a histogram's counts and sum (tests; a fresh process starts zeroed). */
void metrics_histogram_clear(struct metrics_histogram *h);
/* CLOCK_MONOTONIC in microseconds, for latencies finer than clock_ms. */
int64_t metrics_now_us(void);

/* True for a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*). */
bool metrics_name_ok(const char *name);
/* The "# HELP" and "# TYPE" lines of a family; type: counter, gauge or histogram.
 * -EINVAL for a bad name or type. */
int metrics_render_family(struct buf *b, const char *name, const char *type, const char *help);
/* One sample line: name{labels} value. -EINVAL for a bad label name. */
int metrics_render_sample(struct buf *b, const char *name, const struct metrics_label *labels,
			  size_t n_labels, double value);
/* A histogram's _bucket (cumulative, le in the rendered unit, +Inf last),
 * _sum and _count lines under the given labels (at most 7). */
int metrics_render_histogram(struct buf *b, const char *name, const struct metrics_label *labels,
			     size_t n_labels, struct metrics_histogram *h);

#endif
