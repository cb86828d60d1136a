/* slurmaddrs.h - the peer addresses of training jobs on several Slurm nodes
 * (docs/slurm.md "Jobs on several nodes"): [slurm] job_addresses handed out as one
 * run of consecutive addresses per pool, its hosts' in order (algo-1 the first).
 *
 * In memory only. The run is named in the pool's Slurm job (its comment,
 * "<user>:<first address>:<count>"), so a restarted head takes each adopted pool's
 * run back before it hands out any. Pure and not locked: the Slurm backend calls it
 * under its lock; unit-tested (tests/unit/test_slurmaddrs.c). */
#ifndef LABD_SLURMADDRS_H
#define LABD_SLURMADDRS_H

#include <stdint.h>

#define SLURMADDRS_MAX 4094       /* the host addresses of a /20, the largest range */
#define SLURMADDRS_TEXT_MAX 16    /* "255.255.255.255" and its NUL */

struct slurmaddrs {
	uint32_t first;                 /* host order; count 0: no range */
	unsigned count;
	int64_t owner[SLURMADDRS_MAX]; /* the pool holding each address, 0 when free */
};

/* The range of cidr ("" = none: every take fails). 0, or -EINVAL. */
int slurmaddrs_init(struct slurmaddrs *a, const char *cidr);
/* A free run of n addresses for pool_id, the lowest that fits: its first in *first.
 * 0, -ENOSPC (no run of n free now), -EINVAL (n outside 1..count, or no range). */
int slurmaddrs_take(struct slurmaddrs *a, int64_t pool_id, unsigned n, uint32_t *first);
/* Marks the run [first, first + n) as pool_id's (a pool adopted after a restart).
 * 0, -ERANGE (not all inside the range), -EBUSY (another pool holds one of them). */
int slurmaddrs_mark(struct slurmaddrs *a, int64_t pool_id, uint32_t first, unsigned n);
/* Frees what pool_id holds (none: nothing). */
void slurmaddrs_release(struct slurmaddrs *a, int64_t pool_id);
/* An address (host order) as dotted text. */
void slurmaddrs_text(uint32_t addr, char out[SLURMADDRS_TEXT_MAX]);

#endif
