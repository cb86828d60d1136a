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

long long clock_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long clock_ms_at(long long wall_ms)
{
	return clock_ms() + (wall_ms - clock_wall_ms());
}

void clock_deadline(struct timespec *ts, long long ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	if (ms <= 0)
		return;
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}
