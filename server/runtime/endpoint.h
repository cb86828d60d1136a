/* endpoint.h - reaching a runtime that runs on a Slurm node (docs/slurm.md).
 *
 * A runtime's endpoint is "unix:PATH" (this machine) or "tcp:HOST:PORT/PATH" (a
 * node's data port and the Jupyter socket PATH under the node's state dir). A TCP
 * connection opens with the data line (proto/link.h) signed with the link's shared
 * secret, then carries HTTP exactly as a Unix socket would. */
#ifndef LABD_RUNTIME_ENDPOINT_H
#define LABD_RUNTIME_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>

#define ENDPOINT_TCP_PREFIX "tcp:"

/* Keeps a copy of the secret for every later connect (main.c, as root, before the
 * web process forks: it inherits the copy). Not thread-safe: call before threads. */
void endpoint_set_secret(const unsigned char *bytes, size_t len);

/* Whether target (what runtime_socket_path gives) is a node's "tcp:HOST:PORT/PATH". */
bool endpoint_is_tcp(const char *target);

/* Connects to target's node within timeout_ms, then writes the data line for its
 * PATH. The connected socket (non-blocking when nonblock), or a negative errno:
 * -EINVAL for a malformed target, -ENOKEY when no secret was set. */
int endpoint_connect_tcp(const char *target, int timeout_ms, bool nonblock);

#endif
