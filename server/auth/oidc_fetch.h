/* oidc_fetch.h - the back channel to the OpenID Provider through libcurl: one
 * bounded request (time, body size, http/https only, no redirects) that
 * answers JSON. Called from labd-web's worker threads and its key-fetching
 * thread; at most OIDC_FETCH_MAX_CALLS run at once, so a slow provider holds
 * only that many workers, each for at most the timeout, and a worker waiting
 * on the provider takes no new connections meanwhile (workers_blocking). */
#ifndef LABD_OIDC_FETCH_H
#define LABD_OIDC_FETCH_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define OIDC_FETCH_MAX_CALLS 4
#define OIDC_FETCH_MAX_BYTES (256 * 1024)

/* The call: GET url, or POST form (application/x-www-form-urlencoded) when form is
 * set, with HTTP Basic client authentication (RFC 6749 2.3.1) when user is set. */
struct oidc_request {
	const char *url;
	const char *form;             /* NULL: GET */
	const char *user, *password;  /* NULL: no client authentication */
	int64_t timeout_s;
};

/* Makes the call: 0 with *status and *body (a JSON object, new reference) when
 * the provider answered JSON; -EBUSY when OIDC_FETCH_MAX_CALLS are running;
 * -EIO (err says why: connect, timeout, size, not JSON) otherwise. */
int oidc_fetch(const struct oidc_request *rq, long *status, json_t **body, char *err,
	       size_t errlen);

#endif
