/* slurmlogs.h - a training job's log on the head when the job runs on Slurm nodes
 * (docs/slurm.md "Job logs"). A node's supervisor writes the log in the node's own
 * state dir; the head pulls the bytes it has not got yet through the node's data port
 * (path "joblogs/<id>.log@<offset>") and appends them to its own
 * <state_dir>/joblogs/<id>.log, which the web reads as on one machine.
 *
 * Thread-safe: the poll thread and the nodes' reader threads both pull; two pulls of one
 * (job, host) run one after the other.
 *
 * After a web restart, or at a retry's first pull, a (job, host) starts from what the
 * head already has: the offset of each host is kept in a sidecar
 * <state_dir>/joblogs/<id>.log.hosts (a fixed 21-byte decimal record a host, written
 * after each append, removed with the log; a one-host log of an older release has none,
 * and its size is the offset). A crash between an append and its record repeats that
 * pull's lines once; none is lost. A partial line held back is not in the offset kept:
 * it is read again. The data address of the node that offset counts on is kept beside
 * it (<id>.log.nodes, a fixed 128-byte record a host): a retry placed on another node
 * reads that node's log from its start. */
#ifndef LABD_SLURMLOGS_H
#define LABD_SLURMLOGS_H

/* The sidecars' names after "<id>.log": each host's offset, and the node it counts on.
 * Backups copy them too (web/backup.c). */
#define SLURMLOGS_OFFSETS ".hosts"
#define SLURMLOGS_NODES ".nodes"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "labd/buf.h"
#include "proto/link.h"

#define SLURMLOGS_HOSTS_MAX 64	  /* hosts of one job */
#define SLURMLOGS_LINE_MAX 65536 /* a longer line of one of several hosts is cut */

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
/* Forgets everything about job_id: its offsets, the head's log and its sidecar (waits
 * for a pull of it in flight). */
void slurmlogs_forget(struct slurmlogs *l, int64_t job_id);

/* ---- the pure step of several hosts (unit-tested) ---- */

/* An empty held line (a struct buf bounded by SLURMLOGS_LINE_MAX). */
void slurmlogs_held_init(struct buf *held);
/* Appends to out every complete line of held's bytes followed by in's, each prefixed
 * "[algo-<host>] " (a line of SLURMLOGS_LINE_MAX bytes without its end is cut there);
 * what follows the last newline becomes held, or, when final, is written as a line of
 * its own with a newline. 0, or a negative errno (buf_add's; held as it was). */
int slurmlogs_prefix(int host, struct buf *held, const char *in, size_t len, bool final,
		     struct buf *out);

#endif
