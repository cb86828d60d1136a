/* guard.h - what protects the client side of the server before a request is
 * authenticated (slow-loris, connection floods): a cap on connections per
 * client address, and an absolute deadline per connection for the phase it is
 * in (a whole request head, a whole buffered body). libmicrohttpd's own
 * connection timeout restarts at every byte, so a client trickling one byte a
 * second would hold a slot for ever; these deadlines do not restart.
 *
 * Called from libmicrohttpd's callbacks and the worker loop, all on the worker
 * thread that owns the connection: the per-connection records live in a
 * per-thread list, the per-address counts in one table under a lock. */
#ifndef LABD_GUARD_H
#define LABD_GUARD_H

#include <microhttpd.h>
#include <stdbool.h>

#include "config/config.h"

/* Starts guarding a new connection (MHD_CONNECTION_NOTIFY_STARTED) with a
 * deadline of deadline_ms (clock_ms()); stores its record in *socket_context.
 * A connection over cfg's max_connections_per_address (0 = no cap) from the
 * same address is shut down at once, unless the address is one of cfg's
 * trusted_proxies (whose connections carry many clients: those are counted
 * per request by guard_hold_client). cfg is borrowed for the call. */
void guard_open(struct MHD_Connection *conn, void **socket_context, const struct labd_config *cfg,
		long long deadline_ms);
/* For a connection from a trusted front proxy, once a request head names its
 * client (text, from X-Forwarded-For): counts the request against the client's
 * max_per_address (0 = no cap) until guard_release_client or the connection's
 * close (a WebSocket stays counted while it is open). Releases the request
 * before it first. 0, or -EBUSY when the client already has max_per_address
 * (then nothing is counted). */
int guard_hold_client(struct MHD_Connection *conn, const char *client, unsigned max_per_address);
/* The request is over (kept-alive connections carry other clients next). */
void guard_release_client(struct MHD_Connection *conn);
/* The connection's peer address as text, formatted once when it opened
 * ("unknown" when it has none). */
const char *guard_peer(struct MHD_Connection *conn);
/* MHD_CONNECTION_NOTIFY_CLOSED: releases the record and the address count. */
void guard_close(void **socket_context);
/* Sets conn's deadline (0 = none: a proxied or streaming request, which has
 * deadlines of its own). */
void guard_set_deadline(struct MHD_Connection *conn, long long deadline_ms);
/* Shuts down every connection of this thread past its deadline (libmicrohttpd
 * then sees the hang-up and closes it). */
void guard_sweep(long long now_ms);
/* Connections guarded by this thread with a deadline set. */
unsigned guard_count(void);

#endif
