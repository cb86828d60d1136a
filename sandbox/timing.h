/* timing.h - how long each start step took, parent and child side, when asked.
 *
 * With LABD_SANDBOX_TIMINGS=1 in the environment of the process that calls
 * sandbox_start() (labbox --timings sets it), every start prints one line per step to
 * stderr: the side (parent, child), the step's name, its duration and when it ended,
 * both in ms from the start of the first step.  The child's steps write their end
 * times into a page shared with the parent (mapped before clone), which the parent
 * reads once the command has been exec'd; the command's own exec is the parent's
 * "child" step.  Off, it costs one getenv() per start.  Internal to sandbox/.
 */
#ifndef LABD_SANDBOX_TIMING_H
#define LABD_SANDBOX_TIMING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TIMING_MAX_STEPS 24

/* The child's end times, in the page shared across clone(). */
struct timing_child {
	uint64_t start_ns;                 /* CLOCK_MONOTONIC, when child_main began */
	uint64_t end_ns[TIMING_MAX_STEPS]; /* 0: not reached */
	uint64_t exec_ns;                  /* the command's side, just before execve */
};

struct timing {
	bool on;
	uint64_t t0_ns;
	uint64_t parent_end_ns[TIMING_MAX_STEPS];
	struct timing_child *child; /* shared page, or NULL */
};

uint64_t timing_now_ns(void);
/* Starts timing a start if LABD_SANDBOX_TIMINGS is set (and not "0"); maps the
 * child's page.  Without it, or if the map fails, t->on is false. */
void timing_begin(struct timing *t);
/* Prints the table to stderr (name(i) and child_name(i): step i's name, NULL past the
 * last) and unmaps the page. */
void timing_end(struct timing *t, const char *id, const char *(*name)(size_t i),
		const char *(*child_name)(size_t i));

#endif
