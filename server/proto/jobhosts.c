/* jobhosts.c - a job's hosts: the spec field, the environment, the
 * resourceconfig; see jobhosts.h. */
#include "proto/jobhosts.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* A sandbox's interface on either network path (veth and pasta alike). */
#define DEFAULT_IFNAME "eth0"

void jobhosts_single(struct jobhosts *h)
{
	memset(h, 0, sizeof(*h));
	h->current = h->count = 1;
	snprintf(h->interface, sizeof(h->interface), DEFAULT_IFNAME);
}

static int bad(struct jobhosts *h, char *err, size_t errlen, const char *what)
{
	snprintf(err, errlen, "hosts%s", what);
	jobhosts_single(h);
	return -EINVAL;
}

static bool addr_ok(const char *a)
{
	unsigned char buf[sizeof(struct in6_addr)];

	return inet_pton(AF_INET, a, buf) == 1 || inet_pton(AF_INET6, a, buf) == 1;
}

static bool ifname_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= JOBHOSTS_IFNAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] == '/' || s[i] == ':' || s[i] <= ' ' || s[i] > '~')
			return false;
	return true;
}

/* An integer member in [min, max]: 0, or -1. */
static int int_in(json_t *o, const char *k, int min, int max, int *out)
{
	json_t *v = json_object_get(o, k);

	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return -1;
	*out = (int)json_integer_value(v);
	return 0;
}

int jobhosts_parse(json_t *v, struct jobhosts *h, char *err, size_t errlen)
{
	const char *k, *addr, *ifname;
	json_t *m;

	jobhosts_single(h);
	if (!v)
		return 0;
	if (!json_is_object(v))
		return bad(h, err, errlen, ": must be an object");
	json_object_foreach(v, k, m)
		if (strcmp(k, "current") && strcmp(k, "count") && strcmp(k, "master_addr") &&
		    strcmp(k, "master_port") && strcmp(k, "interface"))
			return bad(h, err, errlen, ": unknown member");
	if (int_in(v, "count", 1, JOBHOSTS_MAX, &h->count) < 0)
		return bad(h, err, errlen, ".count: an integer from 1 to 64");
	if (int_in(v, "current", 1, h->count, &h->current) < 0)
		return bad(h, err, errlen, ".current: an integer from 1 to count");
	ifname = json_string_value(json_object_get(v, "interface"));
	if (ifname && !ifname_ok(ifname))
		return bad(h, err, errlen, ".interface: an interface name");
	snprintf(h->interface, sizeof(h->interface), "%s", ifname ? ifname : DEFAULT_IFNAME);
	if (h->count == 1)
		return json_object_get(v, "master_addr") || json_object_get(v, "master_port")
			       ? bad(h, err, errlen, ".master_addr: only with several hosts")
			       : 0;
	addr = json_string_value(json_object_get(v, "master_addr"));
	if (!addr || strlen(addr) >= JOBHOSTS_ADDR_MAX || !addr_ok(addr))
		return bad(h, err, errlen, ".master_addr: an IPv4 or IPv6 address");
	snprintf(h->master_addr, sizeof(h->master_addr), "%s", addr);
	if (int_in(v, "master_port", 1, 65535, &h->master_port) < 0)
		return bad(h, err, errlen, ".master_port: an integer from 1 to 65535");
	return 0;
}

json_t *jobhosts_json(const struct jobhosts *h)
{
	json_t *o = json_pack("{s:i,s:i,s:s}", "current", h->current, "count", h->count,
			      "interface", h->interface);

	if (o && h->count > 1 &&
	    (json_object_set_new(o, "master_addr", json_string(h->master_addr)) < 0 ||
	     json_object_set_new(o, "master_port", json_integer(h->master_port)) < 0)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ["algo-1","algo-2",...] into buf: 0, or -ENAMETOOLONG. */
static int hosts_list(const struct jobhosts *h, char *buf, size_t len)
{
	size_t at = 0;
	int n;

	for (int i = 1; i <= h->count; i++) {
		n = snprintf(buf + at, len - at, "%s\"algo-%d\"", i == 1 ? "[" : ",", i);
		if (n < 0 || (size_t)n >= len - at)
			return -ENAMETOOLONG;
		at += (size_t)n;
	}
	if (at + 2 > len)
		return -ENAMETOOLONG;
	memcpy(buf + at, "]", 2);
	return 0;
}

int jobhosts_env(const struct jobhosts *h, char out[JOBHOSTS_ENV_MAX][JOBHOSTS_ENV_LEN],
		 size_t *n)
{
	char list[JOBHOSTS_ENV_LEN - 16];
	int rc = hosts_list(h, list, sizeof(list));

	*n = 0;
	if (rc < 0)
		return rc;
	snprintf(out[(*n)++], JOBHOSTS_ENV_LEN, "SM_CURRENT_HOST=algo-%d", h->current);
	snprintf(out[(*n)++], JOBHOSTS_ENV_LEN, "SM_HOSTS=%s", list);
	snprintf(out[(*n)++], JOBHOSTS_ENV_LEN, "SM_NETWORK_INTERFACE_NAME=%s", h->interface);
	if (h->count == 1)
		return 0;
	snprintf(out[(*n)++], JOBHOSTS_ENV_LEN, "MASTER_ADDR=%s", h->master_addr);
	snprintf(out[(*n)++], JOBHOSTS_ENV_LEN, "MASTER_PORT=%d", h->master_port);
	snprintf(out[(*n)++], JOBHOSTS_ENV_LEN, "NNODES=%d", h->count);
	snprintf(out[(*n)++], JOBHOSTS_ENV_LEN, "NODE_RANK=%d", h->current - 1);
	snprintf(out[(*n)++], JOBHOSTS_ENV_LEN, "GLOO_SOCKET_IFNAME=%s", h->interface);
	snprintf(out[(*n)++], JOBHOSTS_ENV_LEN, "NCCL_SOCKET_IFNAME=%s", h->interface);
	return 0;
}

json_t *jobhosts_resourceconfig(const struct jobhosts *h)
{
	json_t *hosts = json_array();
	char name[16];

	for (int i = 1; hosts && i <= h->count; i++) {
		snprintf(name, sizeof(name), "algo-%d", i);
		if (json_array_append_new(hosts, json_string(name)) < 0) {
			json_decref(hosts);
			return NULL;
		}
	}
	snprintf(name, sizeof(name), "algo-%d", h->current);
	return hosts ? json_pack("{s:s,s:o,s:s}", "current_host", name, "hosts", hosts,
				 "network_interface_name", h->interface)
		     : NULL;
}
