/* config.c - defaults and INI loading through inih; see docs/config.md. */
#include "config/config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ini.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/images.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "labd/sandbox.h"

void config_defaults(struct labd_config *cfg, bool demo)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->listen, sizeof(cfg->listen), "127.0.0.1:8080");
	snprintf(cfg->state_dir, sizeof(cfg->state_dir), "%s", demo ? "./var" : "/var/lib/labd");
	snprintf(cfg->web_root, sizeof(cfg->web_root), "%s",
		 demo ? "./web" : "/usr/local/share/labd/web");
	snprintf(cfg->user, sizeof(cfg->user), "labd");
	snprintf(cfg->log_level, sizeof(cfg->log_level), "info");
	cfg->secure_cookies = false;
	cfg->threads = 0;
	cfg->max_connections = 512;
	cfg->connection_timeout_s = 60;
	cfg->max_body_bytes = 1024 * 1024;
	cfg->max_connections_per_address = 64;
	cfg->request_header_timeout_s = 30;
	cfg->request_body_timeout_s = 60;
	cfg->max_unauthenticated_body_bytes = 64 * 1024;
	cfg->upstream_connect_timeout_s = 5;
	cfg->upstream_header_timeout_s = 120;
	cfg->upstream_idle_timeout_s = 300;
	cfg->max_requests_per_user = 64;
	cfg->max_websockets_per_user = 64;
	cfg->websocket_idle_timeout_s = 300;
	cfg->origin_per_user = true;
	snprintf(cfg->user_domain, sizeof(cfg->user_domain), "localhost");
	cfg->min_password_length = 10;
	cfg->session_idle_s = 8 * 3600;
	cfg->session_lifetime_s = 7 * 86400;
	cfg->backoff_after = 3;
	cfg->backoff_base_s = 1;
	cfg->backoff_max_s = 300;
	cfg->address_backoff_max_s = 30;
	cfg->alert_after = 10;
	cfg->failure_window_s = 15 * 60;
	cfg->hash_concurrency = 0;
	cfg->scrypt_n = 32768;
	cfg->scrypt_r = 8;
	cfg->scrypt_p = 1;
	cfg->token_reauth_s = 300;
	cfg->token_max_lifetime_s = -1;
	cfg->cpu_limit_s = 12 * 3600;
	cfg->gpu_limit_s = 4 * 3600;
	cfg->idle_timeout_s = 3600;
	cfg->stop_grace_s = 15;
	cfg->start_timeout_s = 60;
	cfg->warn_before_s[0] = 30 * 60;
	cfg->warn_before_s[1] = 5 * 60;
	cfg->n_warn_before = 2;
	snprintf(cfg->jupyter, sizeof(cfg->jupyter), "auto");
	snprintf(cfg->jupyter_env, sizeof(cfg->jupyter_env), "/opt/labd/jupyter");
	snprintf(cfg->image, sizeof(cfg->image), "/");
	cfg->uid_base = 200000;
	cfg->uid_count = 65536;
	snprintf(cfg->subuid_file, sizeof(cfg->subuid_file), "/etc/subuid");
	snprintf(cfg->deleted_home, sizeof(cfg->deleted_home), "archive");
	cfg->archive_retention_s = 30 * 86400;
	cfg->home_size_bytes = 15ULL << 30;
	cfg->quota_cpu_s_per_24h = -1;
	cfg->quota_cpu_s_per_7d = -1;
	cfg->quota_gpu_s_per_24h = 4 * 3600;
	cfg->quota_gpu_s_per_7d = -1;
	cfg->quota_gpus_per_runtime = 1;
	cfg->quota_concurrent_jobs = 2;
	cfg->quota_job_max_runtime_s = 24 * 3600;
	cfg->memory_bytes = 4ULL << 30;
	cfg->memory_max_bytes = 0; /* the host's memory */
	cfg->cpus_max_milli = 0;   /* the host's online CPUs */
	cfg->home_size_max_bytes = 1ULL << 40;
	cfg->tmp_bytes = 1ULL << 30;
	cfg->cpus_milli = 2000;
	cfg->pids = 512;
	cfg->admin_access = false;
	cfg->keep_on_shutdown = true;
	cfg->log_bytes = 4ULL << 20;
	snprintf(cfg->hidden_paths, sizeof(cfg->hidden_paths), "/var/tmp,/srv,/opt,/mnt,/media");
	cfg->quota_network = 1; /* egress */
	cfg->quota_egress_bytes_per_s = -1;
	snprintf(cfg->net_deny, sizeof(cfg->net_deny), "%s", SANDBOX_NET_DENY_DEFAULT);
	cfg->net_max_connections = 512;
	snprintf(cfg->net_pasta, sizeof(cfg->net_pasta), "/usr/bin/pasta");
	snprintf(cfg->net_nft, sizeof(cfg->net_nft), "/usr/sbin/nft");
	cfg->n_gpu_devices = 0;
	snprintf(cfg->dev_prefix, sizeof(cfg->dev_prefix), "/dev");
	snprintf(cfg->nvml_library, sizeof(cfg->nvml_library), "libnvidia-ml.so.1");
	cfg->gpu_refresh_s = 5;
	cfg->gpu_queue_max_wait_s = 30 * 60;
	cfg->jobs_keep_alive_max_s = 3600;
	cfg->jobs_grace_s = 120;
	cfg->jobs_log_max_bytes = 64ULL << 20;
	cfg->jobs_sample_interval_ms = 1000;
	cfg->jobs_max_pools_per_user = 4;
	cfg->jobs_max_wait_default_s = 3600;
	/* [jobs] rules_*: the profiling rules (B2's block; managed-training defaults) */
	cfg->jobs_rules_interval_s = 5;
	cfg->jobs_rules_min_samples = 10;
	cfg->jobs_rules_gpu_low_p95_percent = 70;
	cfg->jobs_rules_gpu_low_p5_percent = 10;
	cfg->jobs_rules_cpu_high_percent = 90;
	cfg->jobs_rules_gpu_idle_percent = 10;
	cfg->jobs_rules_io_wait_percent = 50;
	cfg->jobs_rules_gpu_memory_increase_percent = 5;
	snprintf(cfg->jobs_rules_step_metric, sizeof(cfg->jobs_rules_step_metric), "step_time");
	cfg->jobs_rules_step_stddev = 3;
	cfg->jobs_rules_memory_near_percent = 90;
	cfg->jobs_rules_init_s = 120;
	cfg->jobs_rules_quiet_s = 600;
}

int config_split_listen(const char *listen, char *host, size_t hostlen, unsigned *port)
{
	const char *colon, *hstart = listen, *hend;
	char *end;
	unsigned long p;

	if (listen[0] == '[') {
		hend = strchr(listen, ']');
		if (!hend || hend[1] != ':')
			return -1;
		hstart = listen + 1;
		colon = hend + 1;
	} else {
		colon = strrchr(listen, ':');
		if (!colon)
			return -1;
		hend = colon;
	}
	if (hend == hstart || (size_t)(hend - hstart) >= hostlen)
		return -1;
	errno = 0;
	p = strtoul(colon + 1, &end, 10);
	if (errno || *end || colon[1] == '\0' || p == 0 || p > 65535)
		return -1;
	memcpy(host, hstart, (size_t)(hend - hstart));
	host[hend - hstart] = '\0';
	*port = (unsigned)p;
	return 0;
}

enum key_kind {
	K_STRING, K_BOOL, K_UINT, K_DURATION, K_SIZE, K_LOGLEVEL, K_LISTEN, K_POW2,
	K_DURATIONS, /* comma-separated durations, stored descending (warn_before) */
	K_GPUS,      /* comma-separated GPU minors */
	K_CPUS,      /* decimal CPU count stored as milli-CPUs */
	K_JUPYTER,   /* auto, lab, notebook or server */
	K_DELETED_HOME, /* archive or remove */
	K_PROXIES,   /* comma-separated addresses or CIDR networks */
	K_PATHS,     /* comma-separated absolute paths (or empty) */
	K_DIR,       /* one absolute directory other than "/", or empty */
	K_ORIGIN,    /* per_user or path, stored as a bool (true = per_user) */
	K_DOMAIN,    /* a lowercase DNS name: labels of [a-z0-9-] joined by dots */
	K_ORIGIN_URL, /* http[s]://host[:port], nothing after */
	K_DURATION_NONE, /* a duration, or "none" (stored as -1: no limit) */
	K_CIDRS,     /* comma-separated addresses or CIDR networks, kept as text (or empty) */
	K_NETWORK,   /* none or egress, stored as 0 or 1 */
	K_SIZE_NONE, /* a size, or "none" (stored as -1: no limit) */
	K_ADDRESS,   /* an IPv4 or IPv6 address, or empty */
	K_DURATION_MS, /* "250ms" or a duration such as 2s, stored in ms (int64_t) */
};

struct key_spec {
	const char *section, *name;
	enum key_kind kind;
	size_t offset, size;
	uint64_t min, max;
};

/* name: the key in the file; field: where it goes (with its unit in the name) */
#define KEYN(sec, name, field, kind, min, max)                                                     \
	{sec, name, kind, offsetof(struct labd_config, field),                                     \
	 sizeof(((struct labd_config *)0)->field), min, max}
#define KEY(sec, field, kind, min, max) KEYN(sec, #field, field, kind, min, max)

static const struct key_spec keys[] = {
	KEY("server", listen, K_LISTEN, 0, 0),
	KEY("server", state_dir, K_STRING, 1, 0),
	KEY("server", web_root, K_STRING, 1, 0),
	KEY("server", user, K_STRING, 1, 0),
	KEY("server", secure_cookies, K_BOOL, 0, 0),
	KEY("server", threads, K_UINT, 0, 256),
	KEY("server", max_connections, K_UINT, 1, 100000),
	KEYN("server", "connection_timeout", connection_timeout_s, K_DURATION, 1, 86400),
	KEYN("server", "max_body", max_body_bytes, K_SIZE, 1024, 1ULL << 30),
	KEY("server", log_level, K_LOGLEVEL, 0, 0),
	KEY("server", trusted_proxies, K_PROXIES, 0, 0),
	KEY("server", max_connections_per_address, K_UINT, 0, 100000),
	KEYN("server", "request_header_timeout", request_header_timeout_s, K_DURATION, 1, 3600),
	KEYN("server", "request_body_timeout", request_body_timeout_s, K_DURATION, 1, 86400),
	KEYN("server", "max_unauthenticated_body", max_unauthenticated_body_bytes, K_SIZE, 1024,
	     1ULL << 30),
	KEYN("proxy", "connect_timeout", upstream_connect_timeout_s, K_DURATION, 1, 600),
	KEYN("proxy", "header_timeout", upstream_header_timeout_s, K_DURATION, 1, 86400),
	KEYN("proxy", "idle_timeout", upstream_idle_timeout_s, K_DURATION, 1, 86400),
	KEY("proxy", max_requests_per_user, K_UINT, 1, 100000),
	KEY("proxy", max_websockets_per_user, K_UINT, 1, 100000),
	KEYN("proxy", "websocket_idle_timeout", websocket_idle_timeout_s, K_DURATION, 1, 86400),
	KEYN("server", "origin_mode", origin_per_user, K_ORIGIN, 0, 0),
	KEY("server", user_domain, K_DOMAIN, 0, 0),
	KEY("server", ui_origin, K_ORIGIN_URL, 0, 0),
	KEY("auth", min_password_length, K_UINT, 1, 256),
	KEYN("auth", "session_idle", session_idle_s, K_DURATION, 60, 365 * 86400),
	KEYN("auth", "session_lifetime", session_lifetime_s, K_DURATION, 60, 365 * 86400),
	KEY("auth", backoff_after, K_UINT, 1, 1000000),
	KEYN("auth", "backoff_base", backoff_base_s, K_DURATION, 0, 3600),
	KEYN("auth", "backoff_max", backoff_max_s, K_DURATION, 0, 86400),
	KEYN("auth", "address_backoff_max", address_backoff_max_s, K_DURATION, 0, 86400),
	KEY("auth", alert_after, K_UINT, 1, 1000000),
	KEYN("auth", "failure_window", failure_window_s, K_DURATION, 1, 365 * 86400),
	KEY("auth", hash_concurrency, K_UINT, 0, 1024),
	KEY("auth", scrypt_n, K_POW2, 2, 1ULL << 24),
	KEY("auth", scrypt_r, K_UINT, 1, 64),
	KEY("auth", scrypt_p, K_UINT, 1, 64),
	KEYN("auth", "token_reauth", token_reauth_s, K_DURATION, 0, 86400),
	KEYN("auth", "token_max_lifetime", token_max_lifetime_s, K_DURATION_NONE, 1,
	     10 * 366 * 86400LL),
	KEYN("runtime", "cpu_limit", cpu_limit_s, K_DURATION, 1, 30 * 86400),
	KEYN("runtime", "gpu_limit", gpu_limit_s, K_DURATION, 1, 30 * 86400),
	KEYN("runtime", "idle_timeout", idle_timeout_s, K_DURATION, 0, 30 * 86400),
	KEYN("runtime", "stop_grace", stop_grace_s, K_DURATION, 1, 3600),
	KEYN("runtime", "start_timeout", start_timeout_s, K_DURATION, 1, 3600),
	KEYN("runtime", "warn_before", warn_before_s, K_DURATIONS, 0, 30 * 86400),
	KEY("runtime", jupyter, K_JUPYTER, 0, 0),
	KEY("runtime", jupyter_env, K_DIR, 0, 0),
	KEY("runtime", image, K_STRING, 1, 0),
	KEY("runtime", uid_base, K_UINT, 1000, 4000000000U),
	KEY("runtime", uid_count, K_UINT, 1, 1000000),
	KEY("runtime", subuid_file, K_STRING, 1, 0),
	KEY("runtime", deleted_home, K_DELETED_HOME, 0, 0),
	KEYN("runtime", "archive_retention", archive_retention_s, K_DURATION, 0, 3650 * 86400LL),
	KEYN("runtime", "home_size", home_size_bytes, K_SIZE, 64ULL << 20, 16ULL << 40),
	KEYN("runtime", "memory", memory_bytes, K_SIZE, 64ULL << 20, 16ULL << 40),
	KEYN("runtime", "memory_max", memory_max_bytes, K_SIZE, 64ULL << 20, 16ULL << 40),
	KEYN("runtime", "cpus_max", cpus_max_milli, K_CPUS, 10, PARSE_CPUS_MAX_MILLI),
	KEYN("runtime", "home_size_max", home_size_max_bytes, K_SIZE, 64ULL << 20, 16ULL << 40),
	KEYN("runtime", "tmp_size", tmp_bytes, K_SIZE, 1ULL << 20, 1ULL << 40),
	KEYN("runtime", "cpus", cpus_milli, K_CPUS, 10, PARSE_CPUS_MAX_MILLI),
	KEY("runtime", pids, K_UINT, 16, 4194304),
	KEY("runtime", admin_access, K_BOOL, 0, 0),
	KEY("runtime", keep_on_shutdown, K_BOOL, 0, 0),
	KEYN("runtime", "log_size", log_bytes, K_SIZE, 64ULL << 10, 1ULL << 30),
	KEY("runtime", hidden_paths, K_PATHS, 0, CONFIG_MAX_HIDDEN),
	KEYN("quota", "cpu_per_24h", quota_cpu_s_per_24h, K_DURATION_NONE, 0, 64 * 86400LL),
	KEYN("quota", "cpu_per_7d", quota_cpu_s_per_7d, K_DURATION_NONE, 0, 64 * 7 * 86400LL),
	KEYN("quota", "gpu_per_24h", quota_gpu_s_per_24h, K_DURATION_NONE, 0, 64 * 86400LL),
	KEYN("quota", "gpu_per_7d", quota_gpu_s_per_7d, K_DURATION_NONE, 0, 64 * 7 * 86400LL),
	KEYN("quota", "gpus_per_runtime", quota_gpus_per_runtime, K_UINT, 0, 64),
	KEYN("quota", "concurrent_jobs", quota_concurrent_jobs, K_UINT, 0, 10000),
	KEYN("quota", "job_max_runtime", quota_job_max_runtime_s, K_DURATION, 60, 365 * 86400LL),
	KEYN("quota", "network", quota_network, K_NETWORK, 0, 1),
	KEYN("quota", "egress_rate", quota_egress_bytes_per_s, K_SIZE_NONE, 1024, 1ULL << 40),
	KEYN("network", "deny", net_deny, K_CIDRS, 0, 0),
	KEYN("network", "max_connections", net_max_connections, K_UINT, 0, 1000000),
	KEYN("network", "pasta", net_pasta, K_STRING, 1, 0),
	KEYN("network", "nft", net_nft, K_STRING, 1, 0),
	KEYN("network", "dns", net_dns, K_ADDRESS, 0, 0),
	KEYN("gpu", "devices", gpu_devices, K_GPUS, 0, 255),
	KEY("gpu", dev_prefix, K_STRING, 1, 0),
	KEY("gpu", driver_lib_dir, K_STRING, 0, 0),
	KEYN("gpu", "stand_in", gpu_stand_in, K_UINT, 0, CONFIG_MAX_GPUS),
	KEY("gpu", nvml_library, K_STRING, 1, 0),
	KEYN("gpu", "refresh", gpu_refresh_s, K_DURATION, 1, 3600),
	KEYN("gpu", "queue_max_wait", gpu_queue_max_wait_s, K_DURATION, 1, 30 * 86400),
	KEY("metrics", scrape_token_file, K_STRING, 0, 0),
	KEYN("jobs", "keep_alive_max", jobs_keep_alive_max_s, K_DURATION, 0, 7 * 86400),
	KEYN("jobs", "grace", jobs_grace_s, K_DURATION, 0, 86400),
	KEYN("jobs", "log_max_bytes", jobs_log_max_bytes, K_SIZE, 64ULL << 10, 1ULL << 40),
	KEYN("jobs", "sample_interval", jobs_sample_interval_ms, K_DURATION_MS, 100, 60000),
	KEYN("jobs", "max_pools_per_user", jobs_max_pools_per_user, K_UINT, 1, 64),
	KEYN("jobs", "max_wait_default", jobs_max_wait_default_s, K_DURATION, 1, 30 * 86400),
	/* the profiling rules (docs/jobs.md "Profiling rules") */
	KEYN("jobs", "rules_interval", jobs_rules_interval_s, K_DURATION, 1, 3600),
	KEYN("jobs", "rules_min_samples", jobs_rules_min_samples, K_UINT, 2, 600),
	KEYN("jobs", "rules_gpu_low_p95", jobs_rules_gpu_low_p95_percent, K_UINT, 0, 100),
	KEYN("jobs", "rules_gpu_low_p5", jobs_rules_gpu_low_p5_percent, K_UINT, 0, 100),
	KEYN("jobs", "rules_cpu_high", jobs_rules_cpu_high_percent, K_UINT, 0, 100),
	KEYN("jobs", "rules_gpu_idle", jobs_rules_gpu_idle_percent, K_UINT, 0, 100),
	KEYN("jobs", "rules_io_wait", jobs_rules_io_wait_percent, K_UINT, 0, 100),
	KEYN("jobs", "rules_gpu_memory_increase", jobs_rules_gpu_memory_increase_percent, K_UINT, 0,
	     1000),
	KEYN("jobs", "rules_step_metric", jobs_rules_step_metric, K_STRING, 1, 0),
	KEYN("jobs", "rules_step_stddev", jobs_rules_step_stddev, K_UINT, 1, 100),
	KEYN("jobs", "rules_memory_near", jobs_rules_memory_near_percent, K_UINT, 1, 100),
	KEYN("jobs", "rules_init", jobs_rules_init_s, K_DURATION, 1, 30 * 86400),
	KEYN("jobs", "rules_quiet", jobs_rules_quiet_s, K_DURATION, 1, 30 * 86400),
};

/* Lowercase labels of [a-z0-9-], 1-63 bytes each, joined by single dots:
 * user origins are "<user>." + this, compared byte for byte with Host. */
static bool domain_ok(const char *d)
{
	size_t label = 0;

	for (const char *p = d;; p++) {
		if (*p == '.' || *p == '\0') {
			if (label == 0 || label > 63 || p[-1] == '-')
				return false;
			if (*p == '\0')
				return true;
			label = 0;
		} else if ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
			   (*p == '-' && label > 0)) {
			label++;
		} else {
			return false;
		}
	}
}

/* "http://" or "https://", then a host of [A-Za-z0-9.-] and an optional
 * ":port": a redirect target with no path, query or user part. */
static bool origin_url_ok(const char *v)
{
	const char *host = !strncmp(v, "https://", 8) ? v + 8 : !strncmp(v, "http://", 7) ? v + 7 : NULL;
	size_t len;

	if (!host)
		return false;
	len = strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-");
	if (len == 0)
		return false;
	if (host[len] == ':')
		return host[len + 1] != '\0' && strspn(host + len + 1, "0123456789") == strlen(host + len + 1) &&
		       strlen(host + len + 1) <= 5;
	return host[len] == '\0';
}

struct load_state {
	struct labd_config *cfg;
	const char *path;
	FILE *file;
	int lineno; /* Debian's inih passes no line number: count lines as we feed them */
	int section_lineno; /* line of the last [section] header */
	char *err;
	size_t errlen;
	int failed;
};

static int store_number(const struct key_spec *k, void *field, uint64_t v)
{
	if (v < k->min || (k->max && v > k->max))
		return -1;
	if (k->size == sizeof(uint64_t))
		*(uint64_t *)field = v;
	else if (k->size == sizeof(unsigned))
		*(unsigned *)field = (unsigned)v;
	else
		return -1;
	return 0;
}

/* Calls fn on each item of a comma- or space-separated list, with its index;
 * returns the item count, or -1 as soon as fn refuses one. */
static int for_each_item(const char *value, int (*fn)(const char *item, unsigned i, void *ctx),
			 void *ctx)
{
	char buf[1024], *save = NULL;
	unsigned n = 0;

	if (snprintf(buf, sizeof(buf), "%s", value) >= (int)sizeof(buf))
		return -1;
	for (char *item = strtok_r(buf, ", ", &save); item; item = strtok_r(NULL, ", ", &save))
		if (fn(item, n++, ctx) < 0)
			return -1;
	return (int)n;
}

struct list_ctx {
	const struct key_spec *k;
	struct labd_config *cfg;
};

/* One lead time of warn_before, kept in descending order. */
static int add_warning(const char *item, unsigned n, void *arg)
{
	struct list_ctx *c = arg;
	int64_t d;

	if (n == CONFIG_MAX_WARNINGS || parse_duration_s(item, &d) < 0 ||
	    (uint64_t)d > c->k->max || d == 0)
		return -1;
	unsigned at = n;
	while (at > 0 && c->cfg->warn_before_s[at - 1] < d) { /* insertion sort */
		c->cfg->warn_before_s[at] = c->cfg->warn_before_s[at - 1];
		at--;
	}
	c->cfg->warn_before_s[at] = d;
	return 0;
}

/* One GPU number of [gpu] devices; duplicates are refused. */
static int add_gpu(const char *item, unsigned n, void *arg)
{
	struct list_ctx *c = arg;
	uint64_t v;

	if (n == CONFIG_MAX_GPUS || parse_uint(item, 0, c->k->max, &v) < 0)
		return -1;
	for (unsigned i = 0; i < n; i++)
		if (c->cfg->gpu_devices[i] == v)
			return -1;
	c->cfg->gpu_devices[n] = (unsigned)v;
	return 0;
}

/* One address or network of [network] deny. */
static int check_cidr_item(const char *item, unsigned n, void *arg)
{
	struct cidr c;

	(void)n;
	(void)arg;
	return cidr_parse(item, &c);
}

/* One path of hidden_paths: absolute, no "..", no odd bytes. */
static int check_path_item(const char *item, unsigned n, void *arg)
{
	const struct key_spec *k = ((struct list_ctx *)arg)->k;

	if (n >= k->max || item[0] != '/' || strstr(item, "/..") || strpbrk(item, "\n\t"))
		return -1;
	return 0;
}

/* "30m,5m" into descending seconds; -1 on a bad or out-of-range item. */
static int parse_duration_list(const char *value, const struct key_spec *k,
			       struct labd_config *cfg)
{
	struct list_ctx c = {k, cfg};
	int n = for_each_item(value, add_warning, &c);
	if (n < 0)
		return -1;
	cfg->n_warn_before = (unsigned)n;
	return 0;
}

/* One address or network of trusted_proxies. */
static int add_proxy(const char *item, unsigned n, void *arg)
{
	struct list_ctx *c = arg;

	if (n == CONFIG_MAX_TRUSTED_PROXIES)
		return -1;
	return cidr_parse(item, &c->cfg->trusted_proxies[n]) < 0 ? -1 : 0;
}

static int parse_proxy_list(const char *value, const struct key_spec *k, struct labd_config *cfg)
{
	struct list_ctx c = {k, cfg};
	int n = for_each_item(value, add_proxy, &c);
	if (n < 0)
		return -1;
	cfg->n_trusted_proxies = (unsigned)n;
	return 0;
}

static int parse_gpu_list(const char *value, const struct key_spec *k, struct labd_config *cfg)
{
	struct list_ctx c = {k, cfg};

	cfg->gpu_devices_auto = strcmp(value, "auto") == 0;
	if (cfg->gpu_devices_auto) {
		cfg->n_gpu_devices = 0; /* found at the end of config_load */
		return 0;
	}
	int n = for_each_item(value, add_gpu, &c);
	if (n < 0)
		return -1;
	cfg->n_gpu_devices = (unsigned)n;
	return 0;
}

/* Returns NULL on success or a static explanation of what the value must be. */
/* "250ms" (digits then ms), else a duration in seconds (parse_duration_s), in ms. */
static int parse_duration_ms(const char *s, int64_t *out)
{
	size_t n = strlen(s);
	char *end;

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
	int64_t sec;
	if (parse_duration_s(s, &sec) < 0 || sec > INT32_MAX)
		return -EINVAL;
	*out = sec * 1000;
	return 0;
}

static const char *apply_key(struct labd_config *cfg, const struct key_spec *k, const char *value)
{
	void *field = (char *)cfg + k->offset;
	uint64_t v;
	int64_t d;
	uint32_t milli;
	char host[64];
	unsigned port;
	enum log_level lvl;

	switch (k->kind) {
	case K_STRING:
		if (strlen(value) < k->min || strlen(value) >= k->size)
			return "must be a non-empty string of bounded length";
		snprintf(field, k->size, "%s", value);
		return NULL;
	case K_LISTEN:
		if (config_split_listen(value, host, sizeof(host), &port) < 0 ||
		    strlen(value) >= k->size)
			return "must be ADDRESS:PORT, e.g. 127.0.0.1:8080 or [::1]:8080";
		snprintf(field, k->size, "%s", value);
		return NULL;
	case K_LOGLEVEL:
		if (log_level_parse(value, &lvl) < 0)
			return "must be debug, info, warn or error";
		snprintf(field, k->size, "%s", value);
		return NULL;
	case K_BOOL:
		if (!strcasecmp(value, "true") || !strcasecmp(value, "yes") || !strcmp(value, "1"))
			*(bool *)field = true;
		else if (!strcasecmp(value, "false") || !strcasecmp(value, "no") ||
			 !strcmp(value, "0"))
			*(bool *)field = false;
		else
			return "must be true or false";
		return NULL;
	case K_UINT:
		if (parse_uint(value, 0, UINT64_MAX, &v) < 0 || store_number(k, field, v) < 0)
			return "must be a whole number in range";
		return NULL;
	case K_POW2:
		if (parse_uint(value, 0, UINT64_MAX, &v) < 0 || (v & (v - 1)) ||
		    store_number(k, field, v) < 0)
			return "must be a power of two in range";
		return NULL;
	case K_SIZE:
		if (parse_size_bytes(value, &v) < 0 || v < k->min || v > k->max)
			return "must be a size such as 64K or 1M, in range";
		*(size_t *)field = (size_t)v;
		return NULL;
	case K_DURATIONS:
		return parse_duration_list(value, k, cfg) < 0
			       ? "must be up to 4 durations such as 30m,5m"
			       : NULL;
	case K_GPUS:
		return parse_gpu_list(value, k, cfg) < 0
			       ? "must be auto or distinct GPU numbers such as 0,1 (or empty)"
			       : NULL;
	case K_PROXIES:
		return parse_proxy_list(value, k, cfg) < 0
			       ? "must be up to 16 addresses or networks such as 127.0.0.1, 10.0.0.0/8 or ::1"
			       : NULL;
	case K_CPUS:
		if (parse_cpus_milli(value, &milli) < 0 || store_number(k, field, milli) < 0)
			return "must be a number of CPUs such as 2 or 0.5";
		return NULL;
	case K_PATHS: {
		struct list_ctx c = {k, cfg};
		if (strlen(value) >= k->size || for_each_item(value, check_path_item, &c) < 0)
			return "must be absolute paths separated by commas, at most 16 (or empty)";
		snprintf(field, k->size, "%s", value);
		return NULL;
	}
	case K_DIR:
		/* bound into sandboxes by root: no "..", nothing odd, never the whole root */
		if (strlen(value) >= k->size ||
		    (value[0] && (value[0] != '/' || !value[1] || strstr(value, "/..") ||
				  strstr(value, "//") || strpbrk(value, "\n\t ,"))))
			return "must be an absolute directory other than / (or empty)";
		snprintf(field, k->size, "%s", value);
		return NULL;
	case K_JUPYTER:
		if (strcmp(value, "auto") && strcmp(value, "lab") && strcmp(value, "notebook") &&
		    strcmp(value, "server"))
			return "must be auto, lab, notebook or server";
		snprintf(field, k->size, "%s", value);
		return NULL;
	case K_DELETED_HOME:
		if (strcmp(value, "archive") && strcmp(value, "remove"))
			return "must be archive or remove";
		snprintf(field, k->size, "%s", value);
		return NULL;
	case K_ORIGIN:
		if (strcmp(value, "per_user") && strcmp(value, "path"))
			return "must be per_user or path";
		*(bool *)field = strcmp(value, "per_user") == 0;
		return NULL;
	case K_DOMAIN:
		if (!domain_ok(value) || strlen(value) >= k->size)
			return "must be a lowercase DNS name such as localhost or lab.example.org";
		snprintf(field, k->size, "%s", value);
		return NULL;
	case K_ORIGIN_URL:
		if (!origin_url_ok(value) || strlen(value) >= k->size)
			return "must be an origin such as https://lab.example.org (scheme, host, "
			       "optional port)";
		snprintf(field, k->size, "%s", value);
		return NULL;
	case K_DURATION_NONE:
		if (!strcmp(value, "none")) {
			*(int64_t *)field = -1;
			return NULL;
		}
		if (parse_duration_s(value, &d) < 0 || (uint64_t)d < k->min ||
		    (uint64_t)d > k->max)
			return "must be a duration such as 30m, 4h or 7d, in range, or none";
		*(int64_t *)field = d;
		return NULL;
	case K_CIDRS: {
		struct list_ctx c = {k, cfg};
		if (strlen(value) >= k->size || for_each_item(value, check_cidr_item, &c) < 0)
			return "must be addresses or networks such as 10.0.0.0/8, fc00::/7, separated "
			       "by commas (or empty)";
		snprintf(field, k->size, "%s", value);
		return NULL;
	}
	case K_NETWORK:
		if (strcmp(value, "none") && strcmp(value, "egress"))
			return "must be none or egress";
		*(unsigned *)field = strcmp(value, "egress") == 0;
		return NULL;
	case K_SIZE_NONE:
		if (!strcmp(value, "none")) {
			*(int64_t *)field = -1;
			return NULL;
		}
		if (parse_size_bytes(value, &v) < 0 || v < k->min || v > k->max)
			return "must be a size such as 10M (bytes per second), in range, or none";
		*(int64_t *)field = (int64_t)v;
		return NULL;
	case K_ADDRESS: {
		unsigned char bin[16];
		if (value[0] && (strlen(value) >= k->size ||
				 inet_pton(strchr(value, ':') ? AF_INET6 : AF_INET, value, bin) != 1))
			return "must be an IPv4 or IPv6 address (or empty)";
		snprintf(field, k->size, "%s", value);
		return NULL;
	}
	case K_DURATION_MS:
		if (parse_duration_ms(value, &d) < 0 || (uint64_t)d < k->min ||
		    (uint64_t)d > k->max)
			return "must be a duration such as 250ms or 2s, in range";
		*(int64_t *)field = d;
		return NULL;
	case K_DURATION:
		if (parse_duration_s(value, &d) < 0 || (uint64_t)d < k->min ||
		    (uint64_t)d > k->max)
			return "must be a duration such as 30s, 15m, 8h or 7d, in range";
		if (k->size == sizeof(unsigned))
			*(unsigned *)field = (unsigned)d;
		else
			*(int64_t *)field = d;
		return NULL;
	}
	return "unsupported";
}

/* True for "nvidia" followed by digits only (not nvidiactl, nvidia-uvm). */
static bool gpu_node_name(const char *name, unsigned *minor)
{
	uint64_t v;

	if (strncmp(name, "nvidia", 6) != 0 || parse_uint(name + 6, 0, 255, &v) < 0)
		return false;
	*minor = (unsigned)v;
	return true;
}

/* devices = auto: the nvidia<N> nodes under dev_prefix, in ascending order.
 * Read once here (as root, before the web process forks) so the supervisor
 * and the web process hand out the same pool. */
static void find_gpu_nodes(struct labd_config *cfg)
{
	DIR *d = opendir(cfg->dev_prefix);
	struct dirent *e;
	unsigned minor;

	cfg->n_gpu_devices = 0;
	while (d && (e = readdir(d)) && cfg->n_gpu_devices < CONFIG_MAX_GPUS) {
		if (!gpu_node_name(e->d_name, &minor))
			continue;
		unsigned at = cfg->n_gpu_devices++;
		while (at > 0 && cfg->gpu_devices[at - 1] > minor) { /* insertion sort */
			cfg->gpu_devices[at] = cfg->gpu_devices[at - 1];
			at--;
		}
		cfg->gpu_devices[at] = minor;
	}
	if (d)
		closedir(d);
}

/* The pool is final: found nodes, or stand-ins 0..N-1 (never both with a list). */
static int finish_gpus(struct labd_config *cfg, const char *path, char *err, size_t errlen)
{
	if (cfg->gpu_stand_in && (cfg->n_gpu_devices || cfg->gpu_devices_auto)) {
		snprintf(err, errlen, "%s: [gpu] stand_in and [gpu] devices exclude each other: "
			 "stand-ins are for tests and demos without GPUs", path);
		return -1;
	}
	if (cfg->gpu_devices_auto)
		find_gpu_nodes(cfg);
	for (unsigned i = 0; i < cfg->gpu_stand_in; i++)
		cfg->gpu_devices[i] = i;
	if (cfg->gpu_stand_in)
		cfg->n_gpu_devices = cfg->gpu_stand_in;
	return 0;
}

/* inih's line reader: fgets that counts lines for error messages. */
static char *read_line(char *buf, int size, void *stream)
{
	struct load_state *st = stream;
	char *line = fgets(buf, size, st->file);
	if (line) {
		st->lineno++;
		if (line[strspn(line, " \t")] == '[')
			st->section_lineno = st->lineno;
	}
	return line;
}

static int on_ini_value(void *user, const char *section, const char *name, const char *value)
{
	struct load_state *st = user;
	const char *why;
	int lineno = st->lineno;

	if (st->failed)
		return 0;
	/* [images] has no fixed keys: each key names an image */
	if (strcmp(section, "images") == 0) {
		if (!(why = images_add(st->cfg, name, value)))
			return 1;
		snprintf(st->err, st->errlen, "%s:%d: bad value for [images] %s: %s", st->path,
			 lineno, name, why);
		st->failed = 1;
		return 0;
	}
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (strcmp(keys[i].section, section) || strcmp(keys[i].name, name))
			continue;
		why = apply_key(st->cfg, &keys[i], value);
		if (!why)
			return 1;
		snprintf(st->err, st->errlen, "%s:%d: bad value for [%s] %s: %s", st->path, lineno,
			 section, name, why);
		st->failed = 1;
		return 0;
	}
	bool known_section = false;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		known_section = known_section || strcmp(keys[i].section, section) == 0;
	if (!known_section)
		snprintf(st->err, st->errlen, "%s:%d: unknown section [%s] (key %s)", st->path,
			 section[0] ? st->section_lineno : lineno, section, name);
	else
		snprintf(st->err, st->errlen, "%s:%d: unknown key [%s] %s", st->path, lineno,
			 section, name);
	st->failed = 1;
	return 0;
}

int config_load(struct labd_config *cfg, const char *path, char *err, size_t errlen)
{
	struct load_state st = {cfg, path, NULL, 0, 0, err, errlen, 0};
	int rc;

	st.file = fopen(path, "re");
	if (!st.file) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return -1;
	}
	rc = ini_parse_stream(read_line, &st, on_ini_value, &st);
	fclose(st.file);
	if (st.failed)
		return -1;
	if (rc != 0) {
		snprintf(err, errlen, "%s:%d: syntax error", path, rc);
		return -1;
	}
	if (cfg->backoff_max_s < cfg->backoff_base_s) {
		snprintf(err, errlen, "%s: [auth] backoff_max must not be below backoff_base", path);
		return -1;
	}
	/* a default above its machine cap would refuse every start of the default plan */
	if ((cfg->memory_max_bytes && cfg->memory_bytes > cfg->memory_max_bytes) ||
	    (cfg->cpus_max_milli && cfg->cpus_milli > cfg->cpus_max_milli) ||
	    cfg->home_size_bytes > cfg->home_size_max_bytes) {
		snprintf(err, errlen,
			 "%s: [runtime] memory, cpus and home_size must not be above memory_max, "
			 "cpus_max and home_size_max",
			 path);
		return -1;
	}
	return finish_gpus(cfg, path, err, errlen);
}
