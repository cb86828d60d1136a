/* fault.c - the fault points of the fault build; see include/labd/fault.h.
 * Outside the fault build this file compiles to nothing. */
#include "labd/fault.h"

#ifdef LABD_FAULTS
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "labd/log.h"

#define FAULT_NAME_MAX 96

static pthread_once_t fault_once = PTHREAD_ONCE_INIT;
static char fault_armed[FAULT_NAME_MAX];
static bool fault_group;

static void fault_read_env(void)
{
	const char *v = getenv("LABD_FAULT");
	const char *colon;
	size_t n;

	if (!v || !v[0])
		return;
	colon = strchr(v, ':');
	n = colon ? (size_t)(colon - v) : strlen(v);
	if (n >= sizeof(fault_armed)) {
		log_error("LABD_FAULT: point name longer than %d characters", FAULT_NAME_MAX - 1);
		return;
	}
	if (colon && strcmp(colon + 1, "group") != 0 && strcmp(colon + 1, "self") != 0) {
		log_error("LABD_FAULT: action %s is neither self nor group", colon + 1);
		return;
	}
	memcpy(fault_armed, v, n);
	fault_armed[n] = '\0';
	fault_group = colon && strcmp(colon + 1, "group") == 0;
	log_warn("fault point %s armed (%s)", fault_armed, fault_group ? "group" : "self");
}

/* Whether name (or name.step, name.nth) is the armed point. */
static bool fault_matches(const char *name, const char *step, long nth)
{
	char full[FAULT_NAME_MAX];
	int n;

	if (step)
		n = snprintf(full, sizeof(full), "%s.%s", name, step);
	else if (nth >= 0)
		n = snprintf(full, sizeof(full), "%s.%ld", name, nth);
	else
		n = snprintf(full, sizeof(full), "%s", name);
	return n > 0 && (size_t)n < sizeof(full) && strcmp(full, fault_armed) == 0;
}

void fault_point(const char *name, const char *step, long nth)
{
	pthread_once(&fault_once, fault_read_env);
	if (!fault_armed[0] || !fault_matches(name, step, nth))
		return;
	log_warn("fault point %s: SIGKILL to %s (pid %d)", fault_armed,
		 fault_group ? "group" : "self", (int)getpid());
	if (fault_group)
		kill(0, SIGKILL);
	raise(SIGKILL);
	_exit(137); /* not reached: SIGKILL cannot be caught */
}
#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int fault_build_off;
#endif
