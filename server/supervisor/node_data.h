/* node_data.h - a node's data port: the head's proxy reaches a runtime's Jupyter
 * server only through it.
 *
 * Each TCP connection must open with one data line (proto/link.h: path, time,
 * nonce, HMAC with the shared secret); a good line for a path link_data_path_ok
 * accepts is followed by a plain byte relay to that Unix socket under the state dir
 * (the process's working directory), both ways, half-closes passed on. Anything else
 * is closed, logged at most once a minute. */
#ifndef LABD_SUPERVISOR_NODE_DATA_H
#define LABD_SUPERVISOR_NODE_DATA_H

#include <stddef.h>

struct link_secret;

#define NODE_DATA_LINE_MS 10000 /* the line must be there within this */

/* Starts serving listen_fd (a bound, listening TCP socket) on a thread of its own,
 * one more thread per connection, at most max_connections at once. The secret is
 * copied. 0, or -1 (logged). */
int node_data_start(int listen_fd, const struct link_secret *secret, unsigned max_connections);

#endif
