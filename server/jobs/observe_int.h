/* observe_int.h - what observe.c and observe_json.c share (jobs/ only:
 * no other folder includes it). */
#ifndef LABD_JOBS_OBSERVE_INT_H
#define LABD_JOBS_OBSERVE_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "jobs/extract.h"
#include "jobs/rules.h"

struct app;
struct extract_set;
struct follow_hub;
struct labd_config;

/* Points matched per read at most (a read stops at the line that would
 * pass it and goes on at the next). */
#define OBSERVE_BATCH_POINTS 4096

/* One running job being read for metrics. */
struct tracked {
	int64_t job_id;
	bool gpu;
	struct extract_set *set; /* NULL: no definitions could be compiled */
	/* points stored per definition (counted once, when tracking began): the
	 * cap is kept here, not by counting rows at each insert */
	int64_t points[EXTRACT_MAX_DEFS];
	uint64_t offset;         /* the log's bytes read (saved in job_observe) */
	uint64_t seen_bytes;     /* the log's size when last read: growth is output */
	int64_t started_ms, first_output_ms, last_output_ms; /* epoch ms, 0 = none */
	int64_t last_rules_ms;
	uint64_t seen_tick;
	struct tracked *next;
};

struct observe {
	pthread_mutex_t lock; /* the tracked list and the read buffer */
	struct app *app;
	struct rule_limits limits;
	struct tracked *head;
	uint64_t ticks;
	struct follow_hub *follow;
	char buf[256 * 1024];
	/* points of one read, matched before the store is locked */
	struct observe_point {
		size_t def;
		double value;
	} batch[OBSERVE_BATCH_POINTS];
	size_t n_batch;
};

#endif
