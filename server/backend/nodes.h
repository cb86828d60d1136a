/* nodes.h - the head's side of the node links (docs/slurm.md): the listener of
 * [slurm] listen, one TLS-PSK link per compute node (proto/link.h), and over each a
 * local backend (backend_local_new) fed through a socketpair by the link's relay, so
 * that a node's supervisor is spoken to exactly as this host's own.
 *
 * A node that goes away is dropped from the table at once; the Slurm backend keeps
 * its sandboxes as they were (unknown) until the node comes back or Slurm says their
 * jobs ended. A node that connects again under the same name replaces the old link. */
#ifndef LABD_NODES_H
#define LABD_NODES_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/backend.h"
#include "proto/link.h"

#define NODES_GPUS_MAX 16

struct nodes;
struct node; /* one live link; held by nodes_hold, let go by nodes_release */

/* What a node said in its hello. */
struct node_info {
	char name[LINK_NAME_MAX + 1];
	char data[128]; /* its data port, "HOST:PORT" */
	unsigned gpus[NODES_GPUS_MAX]; /* device minors in gres.conf order */
	size_t n_gpus;
	long long cpus, memory_bytes;
};

/* Called from the links' threads; they must not call into nodes_* for the same node
 * beyond nodes_hold/nodes_release. ev's events carry the node they came from. */
struct nodes_hooks {
	/* a node's supervisor answered its hello (a new or returning link) */
	void (*up)(void *ctx, const struct node_info *node);
	/* its link ended */
	void (*down)(void *ctx, const char *node);
	/* a node's events, with the node's name first */
	void (*ready)(void *ctx, const char *node, const char *user, int64_t runtime_id,
		      const char *endpoint);
	void (*ended)(void *ctx, const char *node, const char *user, int64_t runtime_id,
		      const char *cause, bool failed, const char *reason);
	void (*pool_ready)(void *ctx, const char *node, const char *user, int64_t pool_id);
	void (*pool_ended)(void *ctx, const char *node, const char *user, int64_t pool_id,
			   const char *cause, bool failed, const char *reason);
	/* a job's events, with the node's name first */
	void (*job_phase)(void *ctx, const char *node, const char *user, int64_t pool_id,
			  int64_t job_id, const char *phase, int64_t at_ms);
	void (*job_exited)(void *ctx, const char *node, const char *user, int64_t pool_id,
			   int64_t job_id, const struct backend_job_exit *x);
	void (*job_sample)(void *ctx, const char *node, const char *user, int64_t pool_id,
			   int64_t job_id, const struct backend_job_sample *s);
	/* passed on as they are: the web's own events (warning) */
	const struct backend_events *web;
	void *ctx;
};

/* Listens on listen ("ADDRESS:PORT") for links keyed by secret (copied). NULL on
 * failure (logged). */
struct nodes *nodes_new(const char *listen, const struct link_secret *secret,
			const struct nodes_hooks *hooks);
/* Ends every link and the listener; waits for their threads. */
void nodes_free(struct nodes *n);

/* The live link of node name (and its hello into info, may be NULL), held until
 * nodes_release; NULL when that node has none now. */
struct node *nodes_hold(struct nodes *n, const char *name, struct node_info *info);
/* Every live link, held, at most max of them; returns how many. */
size_t nodes_hold_all(struct nodes *n, struct node **out, size_t max);
void nodes_release(struct node *node);
/* The node's local backend (valid while held) and its name. */
struct backend *nodes_backend(struct node *node);
const char *nodes_name(const struct node *node);

/* The endpoint a node's ready event names ("unix:runtimes/<user>/run/jupyter.sock",
 * relative to its state dir), as the head reaches it through the node's data port:
 * "tcp:<data>/runtimes/<user>/run/jupyter.sock". 0, or -EINVAL for any other endpoint
 * (link_data_path_ok) or one that does not fit out. */
int nodes_endpoint(const char *data, const char *endpoint, char *out, size_t outlen);

#endif
