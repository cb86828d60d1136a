/* jupyter.h - small blocking requests to a runtime's Jupyter over its Unix
 * socket: the reconciler's kernel activity, "Open in labd" (gitopen.c); the
 * user's traffic goes through the proxy instead.
 *
 * The socket lies in a folder the runtime's user writes: a request never
 * follows a link there, connects only to a socket inode, and goes on only
 * when the kernel says the listener runs as peer_uid (the runtime's host uid,
 * uid_base + user id), so a user cannot point labd-web at another socket of
 * the host. */
#ifndef LABD_JUPYTER_H
#define LABD_JUPYTER_H

#include <stddef.h>
#include <sys/types.h>

/* peer_uid meaning "whoever owns the socket file": for a caller that does not
 * know the runtime's uid (links and foreign listeners are still refused). */
#define JUPYTER_PEER_OWNER ((uid_t)-1)

/* Sends METHOD /user/<user>/<api_path> with the token and waits up to
 * timeout_ms for the whole response. Fills *status and up to bodylen-1 bytes
 * of body (NUL-terminated; a longer body is truncated). 0, or -1 when the
 * socket is not the runtime's (a link, not a socket, another listener), does
 * not answer in time or the response is malformed. */
int jupyter_request(const char *socket_path, uid_t peer_uid, const char *method,
		    const char *user, const char *api_path, const char *token, int timeout_ms,
		    int *status, char *body, size_t bodylen);

/* The longest request head (path included) jupyter_send writes. */
#define JUPYTER_HEAD_MAX 4096

/* jupyter_request with a body: json_body (NULL: none) is sent as
 * application/json. The same results. */
int jupyter_send(const char *socket_path, uid_t peer_uid, const char *method, const char *user,
		 const char *api_path, const char *token, const char *json_body, int timeout_ms,
		 int *status, char *body, size_t bodylen);

/* 1 when any kernel reports execution_state "busy", 0 when none, -1 when
 * Jupyter could not be asked. jupyter_kernels_busy checks the listener
 * against the socket file's owner (JUPYTER_PEER_OWNER); _as against the
 * runtime's uid, which callers that know it should use. */
int jupyter_kernels_busy(const char *socket_path, const char *user, const char *token);
int jupyter_kernels_busy_as(const char *socket_path, uid_t peer_uid, const char *user,
			    const char *token);

#endif
