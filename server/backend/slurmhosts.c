/* slurmhosts.c - host lists and per-host job specs; see slurmhosts.h. */
#include "backend/slurmhosts.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/jobhosts.h"

#define RANGE_MAX 100000 /* numbers in one bracket, a bound against "n[0-999999999]" */

/* Appends prefix + number (width digits) + suffix. 0, -EINVAL, -E2BIG. */
static int add(char names[][LINK_NAME_MAX + 1], size_t max, size_t *n, const char *prefix,
	       size_t plen, long num, int width, const char *suffix, size_t slen)
{
	char name[LINK_NAME_MAX + 2];
	int w;

	if (*n >= max)
		return -E2BIG;
	if (plen + slen + (size_t)width > LINK_NAME_MAX)
		return -EINVAL;
	w = num >= 0 ? snprintf(name, sizeof(name), "%.*s%0*ld%.*s", (int)plen, prefix, width,
				num, (int)slen, suffix)
		     : snprintf(name, sizeof(name), "%.*s%.*s", (int)plen, prefix, (int)slen, suffix);
	if (w < 0 || (size_t)w > LINK_NAME_MAX || !link_name_ok(name))
		return -EINVAL;
	memcpy(names[(*n)++], name, (size_t)w + 1);
	return 0;
}

/* One range "a" or "a-b" of a bracket, [s, e). */
static int expand_range(const char *s, const char *e, const char *prefix, size_t plen,
			const char *suffix, size_t slen, char names[][LINK_NAME_MAX + 1],
			size_t max, size_t *n)
{
	char *end;
	const char *dash = memchr(s, '-', (size_t)(e - s));
	long lo, hi;
	int width = (int)((dash ? dash : e) - s), rc;

	if (width < 1 || s[0] < '0' || s[0] > '9')
		return -EINVAL;
	lo = strtol(s, &end, 10);
	if (end != (dash ? dash : e))
		return -EINVAL;
	hi = lo;
	if (dash) {
		if (dash + 1 >= e || dash[1] < '0' || dash[1] > '9')
			return -EINVAL;
		hi = strtol(dash + 1, &end, 10);
		if (end != e || hi < lo || hi - lo > RANGE_MAX)
			return -EINVAL;
	}
	for (long v = lo; v <= hi; v++)
		if ((rc = add(names, max, n, prefix, plen, v, width, suffix, slen)) < 0)
			return rc;
	return 0;
}

/* One item [s, e): "name" or "prefix[ranges]suffix". */
static int expand_item(const char *s, const char *e, char names[][LINK_NAME_MAX + 1],
		       size_t max, size_t *n)
{
	const char *open = memchr(s, '[', (size_t)(e - s)), *close, *r;
	int rc;

	if (s == e)
		return -EINVAL;
	if (!open)
		return add(names, max, n, s, (size_t)(e - s), -1, 0, "", 0);
	close = memchr(open, ']', (size_t)(e - open));
	if (!close || memchr(close + 1, '[', (size_t)(e - close - 1)))
		return -EINVAL; /* one bracket per item is what Slurm prints for flat names */
	for (r = open + 1; r < close;) {
		const char *c = memchr(r, ',', (size_t)(close - r));
		const char *stop = c ? c : close;
		if ((rc = expand_range(r, stop, s, (size_t)(open - s), close + 1,
				       (size_t)(e - close - 1), names, max, n)) < 0)
			return rc;
		r = stop + 1;
	}
	return r == close + 1 ? 0 : -EINVAL; /* "n[1,]" ends on a comma */
}

int slurmhosts_expand(const char *list, char names[][LINK_NAME_MAX + 1], size_t max, size_t *n)
{
	const char *s = list;
	int rc, depth = 0;

	*n = 0;
	if (!*list)
		return -EINVAL;
	for (const char *p = list;; p++) {
		if (*p == '[')
			depth++;
		else if (*p == ']')
			depth--;
		if (depth < 0 || depth > 1)
			return -EINVAL;
		if ((*p == ',' && depth == 0) || !*p) {
			if ((rc = expand_item(s, p, names, max, n)) < 0)
				return rc;
			s = p + 1;
		}
		if (!*p)
			return depth == 0 ? 0 : -EINVAL;
	}
}

int slurmhosts_spec(const char *spec, int current, int count, const char *master_addr,
		    int master_port, char **out)
{
	struct jobhosts h = {.current = current, .count = count, .master_port = master_port};
	json_t *root = json_loads(spec, JSON_REJECT_DUPLICATES, NULL), *v;
	char err[96];
	int rc = -EINVAL;

	*out = NULL;
	snprintf(h.master_addr, sizeof(h.master_addr), "%s", master_addr ? master_addr : "");
	snprintf(h.interface, sizeof(h.interface), "%s", SLURMHOSTS_IFNAME);
	v = jobhosts_json(&h);
	/* what the node will read back must pass its own reader */
	if (json_is_object(root) && v && jobhosts_parse(v, &h, err, sizeof(err)) == 0) {
		/* channels too: a host past algo-1 fetches them from algo-1 (jobshare.h) */
		json_object_set(root, "hosts", v);
		*out = json_dumps(root, JSON_COMPACT);
		rc = *out ? 0 : -ENOMEM;
	}
	json_decref(v);
	json_decref(root);
	return rc;
}
