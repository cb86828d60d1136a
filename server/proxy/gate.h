/* gate.h - the gate in front of /user/<name>/: authenticates every
 * request (cookie or bearer token), lets only the owner through (and admins
 * when [runtime] admin_access is on), checks Origin on state-changing
 * requests, finds the user's running runtime and hands the request to the
 * proxy; a stopped runtime gets a page (or JSON) that offers to start it. */
#ifndef LABD_GATE_H
#define LABD_GATE_H

#include <stdbool.h>
#include <stddef.h>

struct http_request;

/* The paths the gate serves: GATE_PREFIX "<name>/...". */
#define GATE_PREFIX "/user/"
/* First access-handler call of such a request: either starts proxying
 * (the proxy's stream state set, no reply) or sets the reply. */
void gate_begin(struct http_request *req);
/* Extracts <name> from "/user/<name>[/...]" into out; -1 if malformed. */
int gate_user(const char *path, char *out, size_t outlen);

#endif
