/* wsrelay.h - relays upgraded (WebSocket) connections between the browser and
 * Jupyter in labd's own epoll thread, once libmicrohttpd has handed the client
 * socket over. Each direction buffers at most WSRELAY_BUFFER bytes; a full
 * buffer stops reading from its source (back-pressure), never grows. */
#ifndef LABD_WSRELAY_H
#define LABD_WSRELAY_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WSRELAY_BUFFER (256 * 1024)

struct wsrelay;

/* Who a relay belongs to: the runtime's owner, and the credentials that
 * opened it (the registry that account events close relays by). */
struct wsrelay_who {
	char owner[33];     /* the runtime's user name */
	int64_t owner_id;   /* and id */
	int64_t user_id;    /* who opened it (the owner, or an admin) */
	int64_t session_id; /* the session whose cookie opened it, or 0 */
	int64_t token_id;   /* the API token that opened it, or 0 */
};

/* What wsrelay_close closes: relays opened by user id or to id's runtime,
 * those user id opened with any session cookie (a password change), those of
 * one session (a logout), of one API token (its revocation). */
enum wsrelay_scope { WSRELAY_OWNER, WSRELAY_USER, WSRELAY_USER_SESSIONS, WSRELAY_SESSION,
		     WSRELAY_TOKEN };

/* Whether who falls in scope (id: a user, session or token id; owner: the
 * runtime's user name, for WSRELAY_OWNER). The proxy's in-flight requests use
 * the same rule. */
bool wsrelay_who_matches(const struct wsrelay_who *who, enum wsrelay_scope scope, int64_t id,
			 const char *owner);

/* Starts the relay thread; a relay with no byte moving either way (pings
 * included) for idle_timeout_ms is closed. */
int wsrelay_start(struct wsrelay **out, long long idle_timeout_ms);
/* Closes every relay and joins the thread. */
void wsrelay_stop(struct wsrelay *r);
/* Takes over client_fd (closed only through MHD_upgrade_action on urh) and
 * upstream_fd. to_upstream/to_client are bytes already read from the other
 * side (copied). Returns 0, or -1 after closing both. */
int wsrelay_add(struct wsrelay *r, int client_fd, struct MHD_UpgradeResponseHandle *urh,
		int upstream_fd, const char *to_upstream, size_t n_up, const char *to_client,
		size_t n_client, const struct wsrelay_who *who);
/* Closes every relay of owner (their runtime stopped). */
void wsrelay_close_owner(struct wsrelay *r, const char *owner);
/* Closes the relays in scope (not WSRELAY_OWNER) with a going-away close
 * frame, within the relay thread's next turn; returns how many. */
int wsrelay_close(struct wsrelay *r, enum wsrelay_scope scope, int64_t id);
/* Open relays to owner's runtime (the per-user cap). */
int wsrelay_count(struct wsrelay *r, const char *owner);
/* Relays to owner's runtime that carried a data frame (a kernel message, not
 * a ping) since since_ms: what idle culling counts as activity. */
int wsrelay_active(struct wsrelay *r, const char *owner, long long since_ms);

#endif
