/* router.c - route table matching; see router.h. */
#include "http/router.h"

#include <stdio.h>
#include <string.h>

/* Matches one pattern against path, collecting "{}" segments into m. */
static int match_pattern(const char *pattern, const char *path, struct route_match *m)
{
	const char *p = pattern, *s = path;

	m->nparams = 0;
	while (*p && *s) {
		if (p[0] == '{' && p[1] == '}') {
			size_t len = strcspn(s, "/");
			if (len == 0 || len >= ROUTER_PARAM_MAX || m->nparams >= ROUTER_MAX_PARAMS)
				return 0;
			memcpy(m->params[m->nparams], s, len);
			m->params[m->nparams][len] = '\0';
			m->nparams++;
			s += len;
			p += 2;
		} else if (*p == *s) {
			p++;
			s++;
		} else {
			return 0;
		}
	}
	return *p == '\0' && *s == '\0';
}

int router_match(const struct route *routes, size_t n, const char *method, const char *path,
		 struct route_match *m)
{
	struct route_match scratch;
	size_t used = 0;

	memset(m, 0, sizeof(*m));
	for (size_t i = 0; i < n; i++) {
		if (!match_pattern(routes[i].pattern, path, &scratch))
			continue;
		if (strcmp(routes[i].method, method) == 0) {
			scratch.route = &routes[i];
			scratch.allow[0] = '\0';
			*m = scratch;
			return 0;
		}
		if (!strstr(m->allow, routes[i].method)) {
			int w = snprintf(m->allow + used, sizeof(m->allow) - used, "%s%s",
					 used ? ", " : "", routes[i].method);
			if (w > 0 && (size_t)w < sizeof(m->allow) - used)
				used += (size_t)w;
		}
	}
	return -1;
}
