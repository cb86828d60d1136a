/* clock.c - see include/labd/clock.h. */
#include "labd/clock.h"

#include <time.h>

long long clock_ms(void)
{
	return clock_ns() / 1000000;
}

long long clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
