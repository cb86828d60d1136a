/* slurmhosts.h - pieces of a training job on several Slurm nodes (docs/slurm.md
 * "Jobs on several nodes"): the allocation's node list read, and the job spec
 * each node gets. Pure: no I/O, unit-tested.
 *
 * Slurm prints an allocation's nodes as a host list: names and bracketed
 * ranges, "n[1-3,7],gpu05" (numbers keep their zero padding, "n[01-03]"). The
 * order it gives is the hosts' order: the first node is algo-1. */
#ifndef LABD_SLURMHOSTS_H
#define LABD_SLURMHOSTS_H

#include <stddef.h>

#include "proto/link.h"

/* Expands a host list into names[0..*n), at most max of them. 0, -EINVAL
 * (not a host list, or a name that is not a node name), -E2BIG (more than max). */
int slurmhosts_expand(const char *list, char names[][LINK_NAME_MAX + 1], size_t max, size_t *n);

/* The interface of the hosts' network in each host's sandbox. */
#define SLURMHOSTS_IFNAME "peer0"

/* The job spec for host current of count (1-based): spec with its "hosts"
 * member set (proto/jobhosts.h; the interface SLURMHOSTS_IFNAME), the input
 * channels kept for every host (hosts 2..count fetch them from algo-1:
 * sandbox/jobshare.h), a new text in *out (free()). 0, -EINVAL (spec not a JSON
 * object, or the hosts out of bounds), -ENOMEM. */
int slurmhosts_spec(const char *spec, int current, int count, const char *master_addr,
		    int master_port, char **out);

#endif
