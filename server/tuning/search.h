/* search.h - the search of a tuning job (pure: no store, no backend;
 * docs/jobs.md "Tuning jobs"): its parameter ranges, objective, strategy
 * and bounds checked and normalised, the parameters of its n-th trial, and
 * the early-stopping rule of hyperband.
 *
 * Trials are a function of the request alone: random and hyperband draw the
 * n-th trial's values from a generator seeded with (seed, n), grid takes the
 * n-th point of the grid in order, so a restarted labd-web goes on with the
 * same search. */
#ifndef LABD_TUNING_SEARCH_H
#define LABD_TUNING_SEARCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "jobs/submit.h"

#define SEARCH_RANGES_MAX 20
#define SEARCH_VALUES_MAX 30      /* a categorical range's values */
#define SEARCH_VALUE_MAX_CHARS 256
#define SEARCH_TRIALS_MAX 999     /* a trial's job name ends in -NNN */
#define SEARCH_PARALLEL_MAX 50
#define SEARCH_GRID_POINTS_MAX 100
#define SEARCH_NAME_MAX_CHARS 64
#define SEARCH_RUNGS_MAX 16
#define SEARCH_POINT_MAX_BYTES 4000 /* one trial's parameters as compact JSON */

enum search_kind { SEARCH_CONTINUOUS, SEARCH_INTEGER, SEARCH_CATEGORICAL };
enum search_strategy { SEARCH_RANDOM, SEARCH_GRID, SEARCH_HYPERBAND };

struct search_range {
	const char *name; /* borrowed from the request */
	enum search_kind kind;
	bool log;           /* scaling "log" (continuous and integer) */
	double min, max;    /* continuous and integer */
	int grid_points;    /* grid: the values a continuous or integer range takes */
	json_t *values;     /* categorical: borrowed array of strings */
};

struct search {
	struct search_range ranges[SEARCH_RANGES_MAX];
	int n_ranges;
	enum search_strategy strategy;
	const char *metric; /* borrowed */
	bool maximize;
	int max_trials, max_parallel;
	uint64_t seed;
	int min_points, reduction_factor; /* hyperband */
};

/* The tuning fields a request may have (NULL-terminated). */
extern const char *const search_fields[];

/* Checks the search fields of req (all but "name" and "job"), filling
 * defaults into norm (a JSON object the caller owns: the normalised
 * request; seed_default is used when "seed" is absent). 0 with *out
 * (borrowing from req and norm), or -1 with *err naming the field. */
int search_check(json_t *req, uint64_t seed_default, json_t *norm, struct search *out,
		 struct jobs_submit_error *err);
/* The number of points of the grid of s (its ranges' values multiplied;
 * capped at SEARCH_TRIALS_MAX + 1). */
int64_t search_grid_size(const struct search *s);
/* The parameters of trial index (0-based) as a JSON object of numbers and
 * strings (NULL when out of memory). */
json_t *search_point(const struct search *s, int index);
/* The hyperparameters a trial's job gets: base's (may be NULL) with each
 * parameter set as a string (as managed training passes them). */
json_t *search_hyperparameters(json_t *base, json_t *point);
/* The points of the metric that rung r (0-based) is judged at:
 * min_points * reduction_factor^r; 0 past SEARCH_RUNGS_MAX or INT32_MAX. */
int64_t search_rung_points(const struct search *s, int rung);
/* Whether a trial whose value at a rung is value stops there, given the
 * values of every trial at that rung (value included, n of them): it goes
 * on only when it is among the best n / reduction_factor (successive
 * halving), or while fewer than reduction_factor trials reached it. */
bool search_rung_stops(const struct search *s, double value, const double *values, int n);
/* Whether a is a better objective value than b. */
bool search_better(const struct search *s, double a, double b);

#endif
