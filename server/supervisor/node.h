/* node.h - labd as a Slurm compute node (`labd node`, docs/slurm.md "Nodes"): the same
 * supervisor, but the process it forks and restarts is the link (node_link.c) instead
 * of labd-web, and there is no HTTP listener.
 *
 * The link process dials the head over TLS with the pre-shared key (proto/link.h),
 * says node_hello, then relays the supervisor's channel to the head; beside it, it
 * serves the data port (node_data.h). */
#ifndef LABD_SUPERVISOR_NODE_H
#define LABD_SUPERVISOR_NODE_H

#include <jansson.h>

#include "config/config.h"
#include "labd/privdrop.h"

/* As root, before the supervisor starts: checks the [node] keys (name, head,
 * data_listen set and well-formed; data_listen a specific address, since the hello
 * announces it), fills cgroup_parent's default labd-<name> and reads secret_file into
 * cfg->link_secret. 0, or -1 with the reason in err. */
int node_prepare(struct labd_config *cfg, char *err, size_t errlen);

/* The sandboxes' cgroup parent that `labd node` with cfg uses, for a command that runs
 * without node_prepare (labd doctor): [node] cgroup_parent, else labd-<name> with a
 * [node] name, else "labd" (a host that is no node). */
void node_cgroup_parent(const struct labd_config *cfg, char *out, size_t len);

/* The hello the link sends first (link_hello_check's fields); the caller owns it. */
json_t *node_hello(const struct labd_config *cfg);

/* The link process (forked by the supervisor): drops to the labd user, serves the data
 * port on data_fd and relays channel_fd to the head until the head's stream ends,
 * then exits (the supervisor starts a fresh one). Never returns. */
_Noreturn void node_link_main(const struct labd_config *cfg, const struct privdrop_user *u,
			      int channel_fd, int data_fd);

#endif
