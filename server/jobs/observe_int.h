/* observe_int.h - what observe.c, observe_json.c and observe_rules.c share
 * (jobs/ only: no other folder includes it). */
#ifndef LABD_JOBS_OBSERVE_INT_H
#define LABD_JOBS_OBSERVE_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "jobs/extract.h"
#include "jobs/observe_spec.h"
#include "jobs/rules.h"

struct app;
struct extract_set;
struct follow_hub;
struct labd_config;
struct ticker;

/* Points matched per read at most (a read stops at the line that would
 * pass it and goes on at the next). */
#define OBSERVE_BATCH_POINTS 4096

/* One job being read for metrics, by the extraction thread (observe.c).
 * Other threads add one and set its "asked" fields under o->lock; only the
 * extraction thread removes one or touches the rest, without the lock. */
struct tracked {
	int64_t job_id;
	/* asked, under o->lock */
	bool ended;            /* its log is complete: read to its end, rules, forgotten */
	bool training;         /* the latest live set has it Training (rules run) */
	uint64_t seen_gen;     /* the live set (o->gen) that last had it running */
	int64_t started_at_ms; /* observe_job_started: its attempt began then */
	/* the extraction thread's own */
	bool ready;              /* its row read and definitions compiled */
	bool gpu;
	struct observe_spec rules_spec; /* the job's own "rules" (warm-up, step metric) */
	struct extract_set *set; /* NULL: no definitions could be compiled */
	/* the definition's index in the spec's metric_definitions (the
	 * dropped mask of the store counts in those) */
	uint8_t spec_index[EXTRACT_MAX_DEFS];
	/* points stored per definition (counted once, when tracking began): the
	 * cap is kept here, not by counting rows at each insert */
	int64_t points[EXTRACT_MAX_DEFS];
	uint64_t offset;         /* the log's bytes read (saved in job_observe) */
	uint64_t seen_bytes;     /* the log's size when last read: growth is output */
	uint64_t dropped_saved;  /* the dropped mask as stored */
	int64_t started_ms, first_output_ms, last_output_ms; /* epoch ms, 0 = none */
	int64_t last_rules_ms;
	struct tracked *next;
};

struct observe {
	/* the tracked list's links and asked fields; a leaf lock: nothing else
	 * is taken, and no regex, file or store work is done, while it is held */
	pthread_mutex_t lock;
	struct app *app;
	struct tracked *head;
	uint64_t gen; /* live sets seen (observe_tick) */
	struct follow_hub *follow;
	struct ticker *extractor;
	/* the extraction thread's own: */
	char buf[256 * 1024];
	/* points of one read, matched before the store is locked */
	struct observe_point {
		size_t def;
		double value;
	} batch[OBSERVE_BATCH_POINTS];
	size_t n_batch;
};

#endif
