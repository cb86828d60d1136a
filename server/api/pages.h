/* pages.h - HTML routes, the form login/logout, and static files from web/. */
#ifndef LABD_PAGES_H
#define LABD_PAGES_H

#include <stdbool.h>
#include <stddef.h>

struct http_request;

void pages_root(struct http_request *req);
void pages_login_form(struct http_request *req);
void pages_login_post(struct http_request *req);
void pages_logout_post(struct http_request *req);
void pages_dashboard(struct http_request *req);
void pages_admin(struct http_request *req);
void pages_static(struct http_request *req);
/* Serves web/<name> (an HTML page) with the given status. */
void pages_serve_html(struct http_request *req, unsigned status, const char *name);

/* The MIME type for a file name by its extension ("application/octet-stream"
 * when unknown). */
const char *pages_mime_type(const char *name);
/* True when rel is a safe relative path under web/: no "..", ".", empty or
 * hidden segments, no backslash or control characters. */
bool pages_path_safe(const char *rel);

#endif
