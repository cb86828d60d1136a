/* router.h - matches a method and path against a static route table.
 * Patterns are literal segments and "{}" for one path segment. Pure logic. */
#ifndef LABD_ROUTER_H
#define LABD_ROUTER_H

#include <stddef.h>

struct http_request;

#define ROUTER_MAX_PARAMS 2
#define ROUTER_PARAM_MAX 128

enum route_access {
	ROUTE_PUBLIC, /* no login needed */
	ROUTE_USER,   /* any enabled user */
	ROUTE_ADMIN,  /* role admin */
};

enum route_kind { ROUTE_API, ROUTE_PAGE };

struct route {
	const char *method;
	const char *pattern;
	enum route_access access;
	enum route_kind kind;
	void (*handler)(struct http_request *req);
	/* The scope a request needs (a bit of enum scope, auth/scope.h); 0 on
	 * public routes. A non-public route without one is refused to every
	 * token (the gate fails closed). */
	unsigned scope;
};

struct route_match {
	const struct route *route;
	char params[ROUTER_MAX_PARAMS][ROUTER_PARAM_MAX];
	int nparams;
	char allow[64]; /* when no route: methods the path does accept, "" if none */
};

/* Finds the route for method+path; returns 0 with m->route set, or -1 with
 * m->allow listing other methods for that path (empty: unknown path).
 * A segment longer than ROUTER_PARAM_MAX-1 never matches "{}". */
int router_match(const struct route *routes, size_t n, const char *method, const char *path,
		 struct route_match *m);

#endif
