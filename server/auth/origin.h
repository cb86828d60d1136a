/* origin.h - which origin a request was sent to. With [server] origin_mode =
 * per_user, each user's runtime is served on its own origin
 * "<label>.<user_domain>[:port]" (as JupyterHub's subdomain_host), and labd's
 * UI and API on every other host name; the Host header decides. A page one
 * user's code serves then shares no origin, and so no cookie, storage or
 * service worker scope, with labd's pages or another user's runtime. */
#ifndef LABD_ORIGIN_H
#define LABD_ORIGIN_H

#include <stdbool.h>
#include <stddef.h>

#include "store/users.h"

struct http_request;

/* A DNS label is at most 63 characters; a user's is at most 45. */
#define ORIGIN_LABEL_MAX 63

/* The DNS label of a user's origin (origin_label) and back (origin_label_user).
 * A name that is a label as it stands ([a-z0-9-], no "--", no '-' last) is its
 * own label, so names of the old rule keep their origin. Any other name is
 * written with each '.', '_' and '-' as '-', then "--", then those symbols
 * coded three to a character ("john.doe" -> "john-doe--c", "a_b" -> "a-b--b"):
 * a plain name never holds "--", the code holds no '-', and
 * origin_label_user takes only the one label origin_label makes, so two names
 * never share a label and a label names at most one user. Both return 0, or
 * -1 for a name that is not one (parse_user_name_ok), a label that is no
 * user's, or a name whose label would begin "xn--" (an internationalized
 * label's prefix; such names have no origin). */
int origin_label(const char *name, char out[ORIGIN_LABEL_MAX + 1]);
int origin_label_user(const char *label, char user[USER_NAME_MAX + 1]);

enum origin_kind {
	ORIGIN_UI,       /* labd's own pages and API (always, in path mode) */
	ORIGIN_USER,     /* <user>.<user_domain>: that user's runtime only */
	ORIGIN_UNKNOWN,  /* under user_domain but no valid user name: served nothing */
};

/* Classifies host (a Host header value, port allowed; NULL = UI); fills
 * user[] for ORIGIN_USER. Pure: user_domain as in the config. */
enum origin_kind origin_classify(const char *host, const char *user_domain,
				 char user[USER_NAME_MAX + 1]);
/* origin_classify of the request's Host header, honouring origin_mode. */
enum origin_kind origin_of_request(struct http_request *req, char user[USER_NAME_MAX + 1]);
/* True when the request's Origin header names a user origin (a page served
 * by some user's runtime); labd's API refuses such requests whatever they are. */
bool origin_header_is_user(struct http_request *req);
/* Writes "http[s]://<user>.<user_domain>[:port]" for the request's port (from
 * its Host header) into out; -1 when it does not fit. */
int origin_user_url(struct http_request *req, const char *user, char *out, size_t outlen);
/* Writes the UI origin a user origin sends browsers back to: [server]
 * ui_origin, or "http[s]://<user_domain>[:port]"; -1 when it does not fit. */
int origin_ui_url(struct http_request *req, char *out, size_t outlen);

#endif
