/* timing.c - per-step start timings (LABD_SANDBOX_TIMINGS=1); see timing.h. */
#include "sandbox/timing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

uint64_t timing_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void timing_begin(struct timing *t)
{
	const char *v = getenv("LABD_SANDBOX_TIMINGS");
	void *p;

	memset(t, 0, sizeof(*t));
	if (!v || !v[0] || strcmp(v, "0") == 0)
		return;
	p = mmap(NULL, sizeof(struct timing_child), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		 -1, 0);
	if (p == MAP_FAILED)
		return;
	t->child = p;
	t->on = true;
	t->t0_ns = timing_now_ns();
}

static void line(const char *side, const char *name, uint64_t from, uint64_t to, uint64_t t0)
{
	fprintf(stderr, "timing %-6s %-16s %8.3f ms  at %8.3f ms\n", side, name,
		(double)(to - from) / 1e6, (double)(to - t0) / 1e6);
}

void timing_end(struct timing *t, const char *id, const char *(*name)(size_t i),
		const char *(*child_name)(size_t i))
{
	uint64_t prev = t->t0_ns;

	if (!t->on)
		return;
	fprintf(stderr, "timing sandbox %s (LABD_SANDBOX_TIMINGS)\n", id);
	for (size_t i = 0; i < TIMING_MAX_STEPS && name(i) && t->parent_end_ns[i]; i++) {
		line("parent", name(i), prev, t->parent_end_ns[i], t->t0_ns);
		prev = t->parent_end_ns[i];
	}
	prev = t->child->start_ns;
	for (size_t i = 0; i < TIMING_MAX_STEPS && child_name(i) && t->child->end_ns[i]; i++) {
		line("child", child_name(i), prev, t->child->end_ns[i], t->t0_ns);
		prev = t->child->end_ns[i];
	}
	/* from init's fork of the command to its execve, and the execve itself (until
	 * the parent saw the error pipe close: the parent's "child" step ends there) */
	if (t->child->exec_ns && t->parent_end_ns[0]) {
		size_t last = 0, fork = 0;
		for (size_t i = 0; i < TIMING_MAX_STEPS && name(i) && t->parent_end_ns[i]; i++)
			last = i;
		for (size_t i = 1; i < TIMING_MAX_STEPS && child_name(i); i++)
			if (strcmp(child_name(i), "command") == 0)
				fork = i - 1; /* the command's clock starts where init's fork did */
		line("cmd", "before-exec", t->child->end_ns[fork], t->child->exec_ns, t->t0_ns);
		line("cmd", "exec", t->child->exec_ns, t->parent_end_ns[last], t->t0_ns);
	}
	munmap(t->child, sizeof(*t->child));
	t->child = NULL;
	t->on = false;
}
