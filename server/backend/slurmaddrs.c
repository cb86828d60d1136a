/* slurmaddrs.c - peer addresses of jobs on several nodes; see slurmaddrs.h. */
#include "backend/slurmaddrs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"

int slurmaddrs_init(struct slurmaddrs *a, const char *cidr)
{
	memset(a, 0, sizeof(*a));
	if (!cidr[0])
		return 0;
	if (config_cidr4(cidr, &a->first, &a->count) < 0 || a->count > SLURMADDRS_MAX) {
		a->count = 0;
		return -EINVAL;
	}
	return 0;
}

int slurmaddrs_take(struct slurmaddrs *a, int64_t pool_id, unsigned n, uint32_t *first)
{
	unsigned run = 0;

	if (n < 1 || n > a->count || pool_id <= 0)
		return -EINVAL;
	for (unsigned i = 0; i < a->count; i++) {
		run = a->owner[i] ? 0 : run + 1;
		if (run == n) {
			for (unsigned k = i + 1 - n; k <= i; k++)
				a->owner[k] = pool_id;
			*first = a->first + (i + 1 - n);
			return 0;
		}
	}
	return -ENOSPC;
}

int slurmaddrs_mark(struct slurmaddrs *a, int64_t pool_id, uint32_t first, unsigned n)
{
	uint32_t at = first - a->first; /* wraps below the range: then too large */

	if (n < 1 || at >= a->count || n > a->count - at || pool_id <= 0)
		return -ERANGE;
	for (unsigned i = at; i < at + n; i++)
		if (a->owner[i] && a->owner[i] != pool_id)
			return -EBUSY;
	for (unsigned i = at; i < at + n; i++)
		a->owner[i] = pool_id;
	return 0;
}

void slurmaddrs_release(struct slurmaddrs *a, int64_t pool_id)
{
	for (unsigned i = 0; i < a->count; i++)
		if (a->owner[i] == pool_id)
			a->owner[i] = 0;
}

void slurmaddrs_text(uint32_t addr, char out[SLURMADDRS_TEXT_MAX])
{
	snprintf(out, SLURMADDRS_TEXT_MAX, "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 255,
		 (addr >> 8) & 255, addr & 255);
}
