/* node_data.h - a node's data port: the head's proxy reaches a runtime's Jupyter
 * server only through it, and the head pulls a training job's log through it.
 *
 * Each TCP connection must open with one data line (proto/link.h: path, time,
 * nonce, HMAC with the shared secret). A good line for a runtime's socket
 * (link_data_path_ok) is followed by a plain byte relay to that Unix socket under the
 * state dir (the process's working directory), both ways, half-closes passed on. A
 * good line for a job log (link_data_joblog_ok: "joblogs/<id>.log@<offset>") is
 * answered with the log's bytes from offset to its current end, then the close
 * (nothing when the log is missing or shorter). Anything else is closed, logged at
 * most once a minute. */
#ifndef LABD_SUPERVISOR_NODE_DATA_H
#define LABD_SUPERVISOR_NODE_DATA_H

#include <stddef.h>

struct link_secret;

#define NODE_DATA_LINE_MS 10000 /* the line must be there within this */
#define NODE_DATA_SEND_MS 30000 /* a job log's send gives up when the head reads nothing this long */

/* Starts serving listen_fd (a bound, listening TCP socket) on a thread of its own,
 * one more thread per connection, at most max_connections at once. The secret is
 * copied. 0, or -1 (logged). */
int node_data_start(int listen_fd, const struct link_secret *secret, unsigned max_connections);

#endif
