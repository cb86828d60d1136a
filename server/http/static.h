/* static.h - serving files from the web root (labd's own pages and assets). */
#ifndef LABD_STATIC_H
#define LABD_STATIC_H

#include <stdbool.h>

struct http_request;

/* The /static/ handler: serves web/static/<rest of the path>, cacheable. */
void static_serve(struct http_request *req);
/* Serves web/<name> (an HTML page) with the given status, revalidated. */
void static_serve_html(struct http_request *req, unsigned status, const char *name);

/* The MIME type for a file name by its extension ("application/octet-stream"
 * when unknown). */
const char *static_mime_type(const char *name);
/* True when rel is a safe relative path under web/: no "..", ".", empty or
 * hidden segments, no backslash or control characters. */
bool static_path_safe(const char *rel);

#endif
