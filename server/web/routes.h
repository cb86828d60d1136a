/* routes.h - the route table and the gate every request passes: routing (404,
 * 405 + Allow), authentication (401 or a login redirect), role checks (403),
 * Origin and CSRF checks (403), then the handler. */
#ifndef LABD_ROUTES_H
#define LABD_ROUTES_H

struct http_request;

#include <stdio.h>

/* Routes req and sets its reply; never fails without a reply. */
void routes_dispatch(struct http_request *req);
/* `labd routes`: one line per route, "METHOD PATTERN ACCESS KIND SCOPE"
 * (ACCESS public|user|admin, KIND api|page, SCOPE a scope name or "-"), so
 * tests can check every route against the OpenAPI file and its scope.
 * Returns the exit status. */
int routes_print(FILE *out);

#endif
