/* wsrelay.h - relays upgraded (WebSocket) connections between the browser and
 * Jupyter in labd's own epoll thread, once libmicrohttpd has handed the client
 * socket over. Each direction buffers at most WSRELAY_BUFFER bytes; a full
 * buffer stops reading from its source (back-pressure), never grows. */
#ifndef LABD_WSRELAY_H
#define LABD_WSRELAY_H

#include <microhttpd.h>
#include <stddef.h>

#define WSRELAY_BUFFER (256 * 1024)

struct wsrelay;

int wsrelay_start(struct wsrelay **out);
/* Closes every relay and joins the thread. */
void wsrelay_stop(struct wsrelay *r);
/* Takes over client_fd (closed only through MHD_upgrade_action on urh) and
 * upstream_fd. to_upstream/to_client are bytes already read from the other
 * side (copied). Returns 0, or -1 after closing both. */
int wsrelay_add(struct wsrelay *r, int client_fd, struct MHD_UpgradeResponseHandle *urh,
		int upstream_fd, const char *to_upstream, size_t n_up, const char *to_client,
		size_t n_client, const char *owner);
/* Closes every relay of owner (their runtime stopped). */
void wsrelay_close_owner(struct wsrelay *r, const char *owner);
/* Open relays of owner (idle culling counts them as activity). */
int wsrelay_count(struct wsrelay *r, const char *owner);

#endif
