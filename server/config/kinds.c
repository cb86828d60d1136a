/* kinds.c - one parser per kind of config value, and the message a refused value gets.
 * Every parser returns 0 or -EINVAL; kinds[] pairs it with its message. */
#include "config/kinds.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "labd/log.h"
#include "labd/parse.h"

/* Within the key's bounds, stored in the field's width (unsigned or 64 bits). */
static int store_number(const struct config_key *k, void *field, uint64_t v)
{
	if (v < k->min || (k->max && v > k->max))
		return -EINVAL;
	if (k->size == sizeof(uint64_t))
		*(uint64_t *)field = v;
	else if (k->size == sizeof(unsigned))
		*(unsigned *)field = (unsigned)v;
	else
		return -EINVAL;
	return 0;
}

/* A text that fits the field, kept as written. */
static int store_text(const struct config_key *k, void *field, const char *value)
{
	if (strlen(value) >= k->size)
		return -EINVAL;
	snprintf(field, k->size, "%s", value);
	return 0;
}

/* Calls fn on each item of a comma- or space-separated list, with its index;
 * returns the item count, or -EINVAL as soon as fn refuses one. */
static int for_each_item(const char *value, int (*fn)(const char *item, unsigned i, void *ctx),
			 void *ctx)
{
	char buf[1024], *save = NULL;
	unsigned n = 0;

	if (snprintf(buf, sizeof(buf), "%s", value) >= (int)sizeof(buf))
		return -EINVAL;
	for (char *item = strtok_r(buf, ", ", &save); item; item = strtok_r(NULL, ", ", &save))
		if (fn(item, n++, ctx) < 0)
			return -EINVAL;
	return (int)n;
}

/* What a list item's callback sees: its key and the config it fills. */
struct item_ctx {
	const struct config_key *k;
	struct labd_config *cfg;
};

#define KIND_FN(name)                                                                              \
	static int name(struct labd_config *cfg, const struct config_key *k, void *field,          \
			const char *value)

KIND_FN(parse_string)
{
	(void)cfg;
	return strlen(value) < k->min ? -EINVAL : store_text(k, field, value);
}

KIND_FN(parse_bool)
{
	(void)cfg;
	(void)k;
	if (!strcasecmp(value, "true") || !strcasecmp(value, "yes") || !strcmp(value, "1"))
		*(bool *)field = true;
	else if (!strcasecmp(value, "false") || !strcasecmp(value, "no") || !strcmp(value, "0"))
		*(bool *)field = false;
	else
		return -EINVAL;
	return 0;
}

KIND_FN(parse_unsigned)
{
	uint64_t v;

	(void)cfg;
	return parse_uint(value, 0, UINT64_MAX, &v) < 0 ? -EINVAL : store_number(k, field, v);
}

/* "auto" leaves the choice to the start (0, below every key's min); a number as K_UINT */
KIND_FN(parse_unsigned_auto)
{
	if (strcmp(value, "auto") == 0) {
		*(unsigned *)field = 0;
		return k->size == sizeof(unsigned) ? 0 : -EINVAL;
	}
	return parse_unsigned(cfg, k, field, value);
}

KIND_FN(parse_pow2)
{
	uint64_t v;

	(void)cfg;
	if (parse_uint(value, 0, UINT64_MAX, &v) < 0 || (v & (v - 1)))
		return -EINVAL;
	return store_number(k, field, v);
}

KIND_FN(parse_duration)
{
	int64_t d;

	(void)cfg;
	return parse_duration_s(value, &d) < 0 ? -EINVAL : store_number(k, field, (uint64_t)d);
}

/* "250ms" (digits then ms), else a duration in seconds (parse_duration_s), in ms. */
static int duration_ms(const char *s, int64_t *out)
{
	size_t n = strlen(s);
	char *end;
	int64_t sec;

	if (n > 2 && strcmp(s + n - 2, "ms") == 0) {
		if (s[0] < '0' || s[0] > '9')
			return -EINVAL;
		errno = 0;
		unsigned long long v = strtoull(s, &end, 10);
		if (errno || end != s + n - 2 || v > (unsigned long long)INT32_MAX)
			return -EINVAL;
		*out = (int64_t)v;
		return 0;
	}
	if (parse_duration_s(s, &sec) < 0 || sec > INT32_MAX)
		return -EINVAL;
	*out = sec * 1000;
	return 0;
}

KIND_FN(parse_duration_ms)
{
	int64_t d;

	(void)cfg;
	return duration_ms(value, &d) < 0 ? -EINVAL : store_number(k, field, (uint64_t)d);
}

KIND_FN(parse_duration_none)
{
	if (strcmp(value, "none") == 0) {
		*(int64_t *)field = -1;
		return 0;
	}
	return parse_duration(cfg, k, field, value);
}

/* One lead time of warn_before, kept in descending order. */
static int add_warning(const char *item, unsigned n, void *arg)
{
	struct item_ctx *c = arg;
	int64_t d;

	if (n == CONFIG_MAX_WARNINGS || parse_duration_s(item, &d) < 0 ||
	    (uint64_t)d > c->k->max || d == 0)
		return -EINVAL;
	unsigned at = n;
	while (at > 0 && c->cfg->warn_before_s[at - 1] < d) { /* insertion sort */
		c->cfg->warn_before_s[at] = c->cfg->warn_before_s[at - 1];
		at--;
	}
	c->cfg->warn_before_s[at] = d;
	return 0;
}

KIND_FN(parse_durations)
{
	struct item_ctx c = {k, cfg};
	int n = for_each_item(value, add_warning, &c);

	(void)field;
	if (n < 0)
		return -EINVAL;
	cfg->n_warn_before = (unsigned)n;
	return 0;
}

KIND_FN(parse_size)
{
	uint64_t v;

	(void)cfg;
	return parse_size_bytes(value, &v) < 0 ? -EINVAL : store_number(k, field, v);
}

KIND_FN(parse_size_none)
{
	if (strcmp(value, "none") == 0) {
		*(int64_t *)field = -1;
		return 0;
	}
	return parse_size(cfg, k, field, value);
}

KIND_FN(parse_cpus)
{
	uint32_t milli;

	(void)cfg;
	return parse_cpus_milli(value, &milli) < 0 ? -EINVAL : store_number(k, field, milli);
}

KIND_FN(parse_log_level)
{
	enum log_level lvl;

	(void)cfg;
	return log_level_parse(value, &lvl) < 0 ? -EINVAL : store_text(k, field, value);
}

KIND_FN(parse_listen)
{
	char host[64];
	unsigned port;

	(void)cfg;
	if (config_split_listen(value, host, sizeof(host), &port) < 0)
		return -EINVAL;
	return store_text(k, field, value);
}

/* One GPU number of [gpu] devices; duplicates are refused. */
static int add_gpu(const char *item, unsigned n, void *arg)
{
	struct item_ctx *c = arg;
	uint64_t v;

	if (n == CONFIG_MAX_GPUS || parse_uint(item, 0, c->k->max, &v) < 0)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++)
		if (c->cfg->gpu_devices[i] == v)
			return -EINVAL;
	c->cfg->gpu_devices[n] = (unsigned)v;
	return 0;
}

KIND_FN(parse_gpus)
{
	struct item_ctx c = {k, cfg};

	(void)field;
	cfg->gpu_devices_auto = strcmp(value, "auto") == 0;
	if (cfg->gpu_devices_auto) {
		cfg->n_gpu_devices = 0; /* found at the end of config_load */
		return 0;
	}
	int n = for_each_item(value, add_gpu, &c);
	if (n < 0)
		return -EINVAL;
	cfg->n_gpu_devices = (unsigned)n;
	return 0;
}

/* One MINOR:COUNT:SIZE of [gpu] shares: a card (distinct), its share count (1..the
 * key's max) and each share's GPU memory budget (a size above zero). */
static int add_gpu_share(const char *item, unsigned n, void *arg)
{
	struct item_ctx *c = arg;
	char minor[8], count[8], size[24];
	uint64_t m, k, bytes;

	if (n == CONFIG_MAX_GPUS ||
	    sscanf(item, "%7[0-9]:%7[0-9]:%23[0-9A-Za-z]", minor, count, size) != 3 ||
	    strlen(minor) + strlen(count) + strlen(size) + 2 != strlen(item) ||
	    parse_uint(minor, 0, 255, &m) < 0 || parse_uint(count, 1, c->k->max, &k) < 0 ||
	    parse_size_bytes(size, &bytes) < 0 || bytes == 0 || bytes > INT64_MAX)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++)
		if (c->cfg->gpu_shares[i].minor == m)
			return -EINVAL;
	c->cfg->gpu_shares[n] = (struct config_gpu_share){(unsigned)m, (unsigned)k,
							  (int64_t)bytes};
	return 0;
}

KIND_FN(parse_gpu_shares)
{
	struct item_ctx c = {k, cfg};

	(void)field;
	int n = for_each_item(value, add_gpu_share, &c);
	if (n < 0)
		return -EINVAL;
	cfg->n_gpu_shares = (unsigned)n;
	return 0;
}

/* value is one of the words of a NULL-ended list: its index, or -EINVAL. */
static int word_index(const char *value, const char *const *words)
{
	for (int i = 0; words[i]; i++)
		if (strcmp(value, words[i]) == 0)
			return i;
	return -EINVAL;
}

KIND_FN(parse_jupyter)
{
	static const char *const words[] = {"auto", "lab", "notebook", "server", NULL};

	(void)cfg;
	return word_index(value, words) < 0 ? -EINVAL : store_text(k, field, value);
}

KIND_FN(parse_deleted_home)
{
	static const char *const words[] = {"archive", "remove", NULL};

	(void)cfg;
	return word_index(value, words) < 0 ? -EINVAL : store_text(k, field, value);
}

KIND_FN(parse_origin)
{
	static const char *const words[] = {"path", "per_user", NULL};
	int i = word_index(value, words);

	(void)cfg;
	(void)k;
	if (i < 0)
		return -EINVAL;
	*(bool *)field = i == 1;
	return 0;
}

KIND_FN(parse_network)
{
	static const char *const words[] = {"none", "egress", NULL};
	int i = word_index(value, words);

	(void)cfg;
	(void)k;
	if (i < 0)
		return -EINVAL;
	*(unsigned *)field = (unsigned)i;
	return 0;
}

KIND_FN(parse_net_path)
{
	static const char *const words[] = {"pasta", "veth", NULL};
	int i = word_index(value, words);

	(void)cfg;
	(void)k;
	if (i < 0)
		return -EINVAL;
	*(unsigned *)field = (unsigned)i;
	return 0;
}

/* [network] veth_range: one IPv4 network of at least 4 addresses (one /30 a sandbox). */
KIND_FN(parse_veth_range)
{
	char addr[INET_ADDRSTRLEN];
	struct in_addr bin;
	const char *slash = strchr(value, '/');
	char *end;
	unsigned long bits;

	(void)cfg;
	if (strlen(value) >= k->size || !slash || (size_t)(slash - value) >= sizeof(addr) ||
	    !isdigit((unsigned char)slash[1]))
		return -EINVAL;
	snprintf(addr, sizeof(addr), "%.*s", (int)(slash - value), value);
	bits = strtoul(slash + 1, &end, 10);
	if (*end || bits < 8 || bits > 30 || inet_pton(AF_INET, addr, &bin) != 1 ||
	    (bits < 32 && (ntohl(bin.s_addr) & (0xffffffffu >> bits))))
		return -EINVAL;
	snprintf(field, k->size, "%s", value);
	return 0;
}

/* One address or network of trusted_proxies. */
static int add_proxy(const char *item, unsigned n, void *arg)
{
	struct item_ctx *c = arg;

	if (n == CONFIG_MAX_TRUSTED_PROXIES)
		return -EINVAL;
	return cidr_parse(item, &c->cfg->trusted_proxies[n]) < 0 ? -EINVAL : 0;
}

KIND_FN(parse_proxies)
{
	struct item_ctx c = {k, cfg};
	int n = for_each_item(value, add_proxy, &c);

	(void)field;
	if (n < 0)
		return -EINVAL;
	cfg->n_trusted_proxies = (unsigned)n;
	return 0;
}

/* One address or network of [network] deny. */
static int check_cidr_item(const char *item, unsigned n, void *arg)
{
	struct cidr c;

	(void)n;
	(void)arg;
	return cidr_parse(item, &c) < 0 ? -EINVAL : 0;
}

KIND_FN(parse_cidrs)
{
	(void)cfg;
	if (strlen(value) >= k->size || for_each_item(value, check_cidr_item, NULL) < 0)
		return -EINVAL;
	return store_text(k, field, value);
}

/* One path of hidden_paths: absolute, no "..", no odd bytes. */
static int check_path_item(const char *item, unsigned n, void *arg)
{
	const struct config_key *k = arg;

	if (n >= k->max || item[0] != '/' || strstr(item, "/..") || strpbrk(item, "\n\t"))
		return -EINVAL;
	return 0;
}

KIND_FN(parse_paths)
{
	(void)cfg;
	if (strlen(value) >= k->size || for_each_item(value, check_path_item, (void *)k) < 0)
		return -EINVAL;
	return store_text(k, field, value);
}

/* Bound into sandboxes by root: no "..", nothing odd, never the whole root. */
KIND_FN(parse_dir)
{
	(void)cfg;
	if (value[0] && (value[0] != '/' || !value[1] || strstr(value, "/..") ||
			 strstr(value, "//") || strpbrk(value, "\n\t ,")))
		return -EINVAL;
	return store_text(k, field, value);
}

/* Lowercase labels of [a-z0-9-], 1-63 bytes each, joined by single dots:
 * user origins are "<user>." + this, compared byte for byte with Host. */
KIND_FN(parse_domain)
{
	size_t label = 0;

	(void)cfg;
	for (const char *p = value;; p++) {
		if (*p == '.' || *p == '\0') {
			if (label == 0 || label > 63 || p[-1] == '-')
				return -EINVAL;
			if (*p == '\0')
				return store_text(k, field, value);
			label = 0;
		} else if ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
			   (*p == '-' && label > 0)) {
			label++;
		} else {
			return -EINVAL;
		}
	}
}

/* "http://" or "https://", then a host of [A-Za-z0-9.-] and an optional ":port" of at
 * most 5 digits: a redirect target with no path, query or user part. Empty: derived. */
KIND_FN(parse_origin_url)
{
	const char *host = !strncmp(value, "https://", 8)  ? value + 8
			   : !strncmp(value, "http://", 7) ? value + 7
							   : NULL;
	size_t len, port;

	(void)cfg;
	if (!value[0])
		return store_text(k, field, value);
	if (!host || !(len = strspn(host, "abcdefghijklmnopqrstuvwxyz"
					  "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-")))
		return -EINVAL;
	if (host[len] == ':') {
		port = strspn(host + len + 1, "0123456789");
		if (port == 0 || port > 5 || host[len + 1 + port] != '\0')
			return -EINVAL;
	} else if (host[len] != '\0') {
		return -EINVAL;
	}
	return store_text(k, field, value);
}

KIND_FN(parse_address)
{
	unsigned char bin[16];

	(void)cfg;
	if (value[0] && inet_pton(strchr(value, ':') ? AF_INET6 : AF_INET, value, bin) != 1)
		return -EINVAL;
	return store_text(k, field, value);
}

static const struct kind {
	int (*parse)(struct labd_config *cfg, const struct config_key *k, void *field,
		     const char *value);
	const char *message; /* what a refused value must be */
} kinds[K_KINDS] = {
	[K_STRING] = {parse_string, "must be a non-empty string of bounded length"},
	[K_BOOL] = {parse_bool, "must be true or false"},
	[K_UINT] = {parse_unsigned, "must be a whole number in range"},
	[K_UINT_AUTO] = {parse_unsigned_auto, "must be auto or a whole number in range"},
	[K_POW2] = {parse_pow2, "must be a power of two in range"},
	[K_DURATION] = {parse_duration, "must be a duration such as 30s, 15m, 8h or 7d, in range"},
	[K_DURATION_MS] = {parse_duration_ms, "must be a duration such as 250ms or 2s, in range"},
	[K_DURATION_NONE] = {parse_duration_none,
			     "must be a duration such as 30m, 4h or 7d, in range, or none"},
	[K_DURATIONS] = {parse_durations, "must be up to 4 durations such as 30m,5m"},
	[K_SIZE] = {parse_size, "must be a size such as 64K or 1M, in range"},
	[K_SIZE_NONE] = {parse_size_none,
			 "must be a size such as 10M (bytes per second), in range, or none"},
	[K_CPUS] = {parse_cpus, "must be a number of CPUs such as 2 or 0.5"},
	[K_LOGLEVEL] = {parse_log_level, "must be debug, info, warn or error"},
	[K_LISTEN] = {parse_listen, "must be ADDRESS:PORT, e.g. 127.0.0.1:8080 or [::1]:8080"},
	[K_GPUS] = {parse_gpus, "must be auto or distinct GPU numbers such as 0,1 (or empty)"},
	[K_GPU_SHARES] = {parse_gpu_shares,
			  "must be distinct cards as GPU:SHARES:MEMORY such as 0:4:20G, 1:2:60G "
			  "(1 to 64 shares, memory above 0), or empty"},
	[K_JUPYTER] = {parse_jupyter, "must be auto, lab, notebook or server"},
	[K_DELETED_HOME] = {parse_deleted_home, "must be archive or remove"},
	[K_PROXIES] = {parse_proxies, "must be up to 16 addresses or networks such as 127.0.0.1, "
				      "10.0.0.0/8 or ::1"},
	[K_CIDRS] = {parse_cidrs, "must be addresses or networks such as 10.0.0.0/8, fc00::/7, "
				  "separated by commas (or empty)"},
	[K_PATHS] = {parse_paths,
		     "must be absolute paths separated by commas, at most 16 (or empty)"},
	[K_DIR] = {parse_dir, "must be an absolute directory other than / (or empty)"},
	[K_ORIGIN] = {parse_origin, "must be per_user or path"},
	[K_DOMAIN] = {parse_domain,
		      "must be a lowercase DNS name such as localhost or lab.example.org"},
	[K_ORIGIN_URL] = {parse_origin_url, "must be an origin such as https://lab.example.org "
					    "(scheme, host, optional port), or empty"},
	[K_NETWORK] = {parse_network, "must be none or egress"},
	[K_NET_PATH] = {parse_net_path, "must be pasta or veth"},
	[K_VETH_RANGE] = {parse_veth_range, "must be one IPv4 network such as 10.254.0.0/16 "
					    "(host bits zero, /8 to /30)"},
	[K_ADDRESS] = {parse_address, "must be an IPv4 or IPv6 address (or empty)"},
};

const char *config_kind_apply(struct labd_config *cfg, const struct config_key *k,
			      const char *value)
{
	if ((unsigned)k->kind >= K_KINDS || !kinds[k->kind].parse)
		return "has no parser (a defect of labd)";
	if (kinds[k->kind].parse(cfg, k, (char *)cfg + k->offset, value) < 0)
		return kinds[k->kind].message;
	return NULL;
}
