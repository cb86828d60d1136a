/* jupyter.h - small blocking requests to a runtime's Jupyter over its Unix
 * socket, for the reconciler (kernel activity); the user's
 * traffic goes through the proxy instead. */
#ifndef LABD_JUPYTER_H
#define LABD_JUPYTER_H

#include <stddef.h>

/* Sends METHOD /user/<user>/<api_path> with the token and waits up to
 * timeout_ms for the whole response. Fills *status and up to bodylen-1 bytes
 * of body (NUL-terminated; a longer body is truncated). 0, or -1 when the
 * socket does not answer in time or the response is malformed. */
int jupyter_request(const char *socket_path, const char *method, const char *user,
		    const char *api_path, const char *token, int timeout_ms, int *status,
		    char *body, size_t bodylen);

/* The longest request head (path included) jupyter_send writes. */
#define JUPYTER_HEAD_MAX 4096

/* jupyter_request with a body: json_body (NULL: none) is sent as
 * application/json. The same results. */
int jupyter_send(const char *socket_path, const char *method, const char *user,
		 const char *api_path, const char *token, const char *json_body, int timeout_ms,
		 int *status, char *body, size_t bodylen);

/* 1 when any kernel reports execution_state "busy", 0 when none, -1 when
 * Jupyter could not be asked. */
int jupyter_kernels_busy(const char *socket_path, const char *user, const char *token);

#endif
