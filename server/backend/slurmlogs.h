/* slurmlogs.h - a training job's log on the head when the job runs on Slurm nodes
 * (docs/slurm.md "Job logs"). A node's supervisor writes the log in the node's own
 * state dir; the head pulls the bytes it has not got yet through the node's data port
 * (path "joblogs/<id>.log@<offset>") and appends them to its own
 * <state_dir>/joblogs/<id>.log, which the web reads as on one machine.
 *
 * Thread-safe: the poll thread and the nodes' reader threads both pull. */
#ifndef LABD_SLURMLOGS_H
#define LABD_SLURMLOGS_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/link.h"

struct slurmlogs;

/* NULL when out of memory. The secret signs the data lines (copied). */
struct slurmlogs *slurmlogs_new(const char *state_dir, const struct link_secret *secret);
void slurmlogs_free(struct slurmlogs *l);
/* Appends the bytes of job_id's log on host (1-based, of hosts) that the head has not
 * got yet, read from the node's data port at data ("HOST:PORT"), to the head's log.
 * With hosts > 1 every line is prefixed "[algo-<host>] "; a partial last line waits
 * for its end, or is written with a newline when final. final also forgets the
 * (job, host) afterwards. 0, or a negative errno (the node unreachable: the next
 * pull catches up). */
int slurmlogs_pull(struct slurmlogs *l, const char *data, int64_t job_id, int host, int hosts,
		   bool final);
/* Forgets everything about job_id (its log removed). */
void slurmlogs_forget(struct slurmlogs *l, int64_t job_id);

#endif
