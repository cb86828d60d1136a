/* config.c - the keys of labd.ini as one table (section, name, field, kind, bounds,
 * default), the defaults drawn from it and the INI loading through inih; docs/config.md
 * names every key (test_config checks). The kinds' parsers are in kinds.c. */
#include "config/config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/capacity.h"
#include "config/images.h"
#include "config/kinds.h"
#include "labd/parse.h"
#include "labd/sandbox.h"

/* name: the key in the file; field: where it goes (with its unit in the name); dflt: the
 * default as the file would spell it (kinds.h says what min, max and NULL mean). */
#define KEY(sec, name, field, kind, min, max, dflt)                                                \
	{sec, name, kind, offsetof(struct labd_config, field),                                     \
	 sizeof(((struct labd_config *)0)->field), min, max, dflt}

static const struct config_key keys[] = {
	KEY("server", "listen", listen, K_LISTEN, 0, 0, "127.0.0.1:8080"),
	KEY("server", "state_dir", state_dir, K_STRING, 1, 0, "/var/lib/labd"),
	KEY("server", "web_root", web_root, K_STRING, 1, 0, "/usr/local/share/labd/web"),
	KEY("server", "user", user, K_STRING, 1, 0, "labd"),
	KEY("server", "secure_cookies", secure_cookies, K_BOOL, 0, 0, "false"),
	KEY("server", "threads", threads, K_UINT, 0, 256, "0"),
	KEY("server", "max_connections", max_connections, K_UINT, 1, 100000, "512"),
	KEY("server", "connection_timeout", connection_timeout_s, K_DURATION, 1, 86400, "60s"),
	KEY("server", "max_body", max_body_bytes, K_SIZE, 1024, 1ULL << 30, "1M"),
	KEY("server", "log_level", log_level, K_LOGLEVEL, 0, 0, "info"),
	KEY("server", "trusted_proxies", trusted_proxies, K_PROXIES, 0, 0, ""),
	KEY("server", "max_connections_per_address", max_connections_per_address, K_UINT, 0, 100000, "64"),
	KEY("server", "request_header_timeout", request_header_timeout_s, K_DURATION, 1, 3600, "30s"),
	KEY("server", "request_body_timeout", request_body_timeout_s, K_DURATION, 1, 86400, "60s"),
	KEY("server", "max_unauthenticated_body", max_unauthenticated_body_bytes, K_SIZE, 1024,
	    1ULL << 30, "64K"),
	KEY("proxy", "connect_timeout", upstream_connect_timeout_s, K_DURATION, 1, 600, "5s"),
	KEY("proxy", "header_timeout", upstream_header_timeout_s, K_DURATION, 1, 86400, "2m"),
	KEY("proxy", "idle_timeout", upstream_idle_timeout_s, K_DURATION, 1, 86400, "5m"),
	KEY("proxy", "max_requests_per_user", max_requests_per_user, K_UINT, 1, 100000, "64"),
	KEY("proxy", "max_websockets_per_user", max_websockets_per_user, K_UINT, 1, 100000, "64"),
	KEY("proxy", "websocket_idle_timeout", websocket_idle_timeout_s, K_DURATION, 1, 86400, "5m"),
	KEY("server", "origin_mode", origin_per_user, K_ORIGIN, 0, 0, "per_user"),
	KEY("server", "user_domain", user_domain, K_DOMAIN, 0, 0, "localhost"),
	KEY("server", "ui_origin", ui_origin, K_ORIGIN_URL, 0, 0, ""),
	KEY("auth", "min_password_length", min_password_length, K_UINT, 1, 256, "10"),
	KEY("auth", "session_idle", session_idle_s, K_DURATION, 60, 365 * 86400, "8h"),
	KEY("auth", "session_lifetime", session_lifetime_s, K_DURATION, 60, 365 * 86400, "7d"),
	KEY("auth", "backoff_after", backoff_after, K_UINT, 1, 1000000, "3"),
	KEY("auth", "backoff_base", backoff_base_s, K_DURATION, 0, 3600, "1s"),
	KEY("auth", "backoff_max", backoff_max_s, K_DURATION, 0, 86400, "5m"),
	KEY("auth", "address_backoff_max", address_backoff_max_s, K_DURATION, 0, 86400, "30s"),
	KEY("auth", "alert_after", alert_after, K_UINT, 1, 1000000, "10"),
	KEY("auth", "failure_window", failure_window_s, K_DURATION, 1, 365 * 86400, "15m"),
	KEY("auth", "hash_concurrency", hash_concurrency, K_UINT, 0, 1024, "0"),
	KEY("auth", "scrypt_n", scrypt_n, K_POW2, 2, 1ULL << 24, "32768"),
	KEY("auth", "scrypt_r", scrypt_r, K_UINT, 1, 64, "8"),
	KEY("auth", "scrypt_p", scrypt_p, K_UINT, 1, 64, "1"),
	KEY("auth", "token_reauth", token_reauth_s, K_DURATION, 0, 86400, "5m"),
	KEY("auth", "token_max_lifetime", token_max_lifetime_s, K_DURATION_NONE, 1,
	    10 * 366 * 86400LL, "none"),
	KEY("runtime", "cpu_limit", cpu_limit_s, K_DURATION, 1, 30 * 86400, "12h"),
	KEY("runtime", "gpu_limit", gpu_limit_s, K_DURATION, 1, 30 * 86400, "4h"),
	KEY("runtime", "idle_timeout", idle_timeout_s, K_DURATION, 0, 30 * 86400, "1h"),
	KEY("runtime", "stop_grace", stop_grace_s, K_DURATION, 1, 3600, "15s"),
	KEY("runtime", "start_timeout", start_timeout_s, K_DURATION, 1, 3600, "60s"),
	KEY("runtime", "warn_before", warn_before_s, K_DURATIONS, 0, 30 * 86400, "30m,5m"),
	KEY("runtime", "jupyter", jupyter, K_JUPYTER, 0, 0, "auto"),
	KEY("runtime", "jupyter_env", jupyter_env, K_DIR, 0, 0, "/opt/labd/jupyter"),
	KEY("runtime", "image", image, K_STRING, 1, 0, "/"),
	KEY("runtime", "uid_base", uid_base, K_UINT_AUTO, 1000, 4000000000U, "auto"),
	KEY("runtime", "uid_count", uid_count, K_UINT, 1, 1000000, "65536"),
	KEY("runtime", "subuid_file", subuid_file, K_STRING, 1, 0, "/etc/subuid"),
	KEY("runtime", "subgid_file", subgid_file, K_STRING, 1, 0, "/etc/subgid"),
	KEY("runtime", "deleted_home", deleted_home, K_DELETED_HOME, 0, 0, "archive"),
	KEY("runtime", "archive_retention", archive_retention_s, K_DURATION, 0, 3650 * 86400LL, "30d"),
	/* a course's end (docs/operations.md "Courses") */
	KEY("runtime", "course_notice", course_notice_s, K_DURATION, 0, 366 * 86400LL, "14d"),
	KEY("runtime", "course_retention", course_retention_s, K_DURATION_NONE, 0, 3650 * 86400LL,
	    "30d"),
	KEY("runtime", "home_size", home_size_bytes, K_SIZE, 64ULL << 20, 16ULL << 40, "15G"),
	KEY("runtime", "memory", memory_bytes, K_SIZE, 64ULL << 20, 16ULL << 40, "4G"),
	KEY("runtime", "memory_max", memory_max_bytes, K_SIZE, 64ULL << 20, 16ULL << 40, NULL),
	KEY("runtime", "cpus_max", cpus_max_milli, K_CPUS, 10, PARSE_CPUS_MAX_MILLI, NULL),
	KEY("runtime", "home_size_max", home_size_max_bytes, K_SIZE, 64ULL << 20, 16ULL << 40, "1T"),
	KEY("runtime", "tmp_size", tmp_bytes, K_SIZE, 1ULL << 20, 1ULL << 40, "1G"),
	KEY("runtime", "cpus", cpus_milli, K_CPUS, 10, PARSE_CPUS_MAX_MILLI, "2"),
	KEY("runtime", "pids", pids, K_UINT, 16, 4194304, "512"),
	KEY("runtime", "admin_access", admin_access, K_BOOL, 0, 0, "false"),
	KEY("runtime", "keep_on_shutdown", keep_on_shutdown, K_BOOL, 0, 0, "true"),
	KEY("runtime", "log_size", log_bytes, K_SIZE, 64ULL << 10, 1ULL << 30, "4M"),
	KEY("runtime", "max_sandboxes", max_sandboxes, K_UINT, 0, CAPACITY_SANDBOXES_MAX, "0"),
	KEY("runtime", "hidden_paths", hidden_paths, K_PATHS, 0, CONFIG_MAX_HIDDEN,
	    "/var/tmp,/srv,/opt,/mnt,/media"),
	KEY("quota", "cpu_per_24h", quota_cpu_s_per_24h, K_DURATION_NONE, 0, 64 * 86400LL, "none"),
	KEY("quota", "cpu_per_7d", quota_cpu_s_per_7d, K_DURATION_NONE, 0, 64 * 7 * 86400LL, "none"),
	KEY("quota", "gpu_per_24h", quota_gpu_s_per_24h, K_DURATION_NONE, 0, 64 * 86400LL, "4h"),
	KEY("quota", "gpu_per_7d", quota_gpu_s_per_7d, K_DURATION_NONE, 0, 64 * 7 * 86400LL, "none"),
	KEY("quota", "gpus_per_runtime", quota_gpus_per_runtime, K_UINT, 0, 64, "1"),
	KEY("quota", "concurrent_jobs", quota_concurrent_jobs, K_UINT, 0, 10000, "2"),
	KEY("quota", "job_max_runtime", quota_job_max_runtime_s, K_DURATION, 60, 365 * 86400LL, "24h"),
	KEY("quota", "network", quota_network, K_NETWORK, 0, 1, "egress"),
	KEY("quota", "egress_rate", quota_egress_bytes_per_s, K_SIZE_NONE, 1024, 1ULL << 40, "none"),
	KEY("quota", "gpus_held", quota_gpus_held, K_UINT, 1, 64, "1"),
	KEY("quota", "job_storage", quota_job_storage_bytes, K_SIZE_NONE, 1ULL << 20, 1ULL << 44, "5G"),
	KEY("network", "deny", net_deny, K_CIDRS, 0, 0, SANDBOX_NET_DENY_DEFAULT),
	KEY("network", "max_connections", net_max_connections, K_UINT, 0, 1000000, "512"),
	KEY("network", "pasta", net_pasta, K_STRING, 1, 0, "/usr/bin/pasta"),
	KEY("network", "nft", net_nft, K_STRING, 1, 0, "/usr/sbin/nft"),
	KEY("network", "dns", net_dns, K_ADDRESS, 0, 0, ""),
	KEY("network", "path", net_path, K_NET_PATH, 0, 0, "auto"),
	KEY("network", "veth_range", net_veth_range, K_VETH_RANGE, 0, 0, "10.254.0.0/16"),
	KEY("storage", "home_images", home_images, K_DIR, 0, 0, ""),
	KEY("storage", "mmp", home_mmp, K_BOOL, 0, 0, "false"),
	KEY("gpu", "devices", gpu_devices, K_GPUS, 0, 255, ""),
	KEY("gpu", "dev_prefix", dev_prefix, K_STRING, 1, 0, "/dev"),
	KEY("gpu", "driver_lib_dir", driver_lib_dir, K_STRING, 0, 0, ""),
	KEY("gpu", "shares", gpu_shares, K_GPU_SHARES, 1, 64, ""),
	KEY("gpu", "caps_dir", gpu_caps_dir, K_STRING, 1, 0, "/proc/driver/nvidia/capabilities"),
	KEY("gpu", "caps_dev_dir", gpu_caps_dev_dir, K_STRING, 0, 0, ""),
	KEY("gpu", "share_grace", gpu_share_grace_s, K_DURATION, 1, 86400, "30s"),
	KEY("gpu", "stand_in", gpu_stand_in, K_UINT, 0, CONFIG_MAX_GPUS, "0"),
	KEY("gpu", "nvml_library", nvml_library, K_STRING, 1, 0, "libnvidia-ml.so.1"),
	KEY("gpu", "refresh", gpu_refresh_s, K_DURATION, 1, 3600, "5s"),
	KEY("gpu", "queue_max_wait", gpu_queue_max_wait_s, K_DURATION, 1, 30 * 86400, "30m"),
	/* a Slurm compute node (`labd node`, docs/slurm.md "Nodes") */
	KEY("node", "name", node_name, K_STRING, 0, 0, ""),
	KEY("node", "head", node_head, K_STRING, 0, 0, ""),
	KEY("node", "secret_file", node_secret_file, K_STRING, 0, 0, ""),
	KEY("node", "data_listen", node_data_listen, K_STRING, 0, 0, ""),
	KEY("node", "data_max_connections", node_data_max_connections, K_UINT, 1, 65536, "1024"),
	KEY("node", "cgroup_parent", node_cgroup_parent, K_STRING, 0, 0, ""),
	KEY("metrics", "scrape_token_file", scrape_token_file, K_STRING, 0, 0, ""),
	/* single sign-on with an OpenID Provider (docs/auth.md); issuer "" = off */
	KEY("oidc", "issuer", oidc_issuer, K_STRING, 0, 0, ""),
	KEY("oidc", "name", oidc_name, K_STRING, 1, 0, "SSO"),
	KEY("oidc", "client_id", oidc_client_id, K_STRING, 0, 0, ""),
	KEY("oidc", "client_secret", oidc_client_secret, K_STRING, 0, 0, ""),
	KEY("oidc", "client_secret_file", oidc_client_secret_file, K_STRING, 0, 0, ""),
	KEY("oidc", "scopes", oidc_scopes, K_STRING, 6, 0, "openid profile email"),
	KEY("oidc", "username_claim", oidc_username_claim, K_STRING, 1, 0, "preferred_username"),
	KEY("oidc", "groups_claim", oidc_groups_claim, K_STRING, 0, 0, "groups"),
	KEY("oidc", "provision", oidc_provision, K_BOOL, 0, 0, "true"),
	KEY("oidc", "allowed_domains", oidc_allowed_domains, K_STRING, 0, 0, ""),
	KEY("oidc", "allowed_groups", oidc_allowed_groups, K_STRING, 0, 0, ""),
	KEY("oidc", "timeout", oidc_timeout_s, K_DURATION, 1, 60, "5s"),
	KEY("oidc", "clock_skew", oidc_clock_skew_s, K_DURATION, 0, 600, "60s"),
	KEY("oidc", "keys_refetch", oidc_keys_refetch_s, K_DURATION, 1, 86400, "1m"),
	KEY("oidc", "cache", oidc_cache_s, K_DURATION, 60, 7 * 86400, "1h"),
	KEY("jobs", "keep_alive_max", jobs_keep_alive_max_s, K_DURATION, 0, 7 * 86400, "1h"),
	KEY("jobs", "grace", jobs_grace_s, K_DURATION, 0, 86400, "2m"),
	KEY("jobs", "log_max_bytes", jobs_log_max_bytes, K_SIZE, 64ULL << 10, 1ULL << 40, "64M"),
	KEY("jobs", "sample_interval", jobs_sample_interval_ms, K_DURATION_MS, 100, 60000, "1000ms"),
	KEY("jobs", "max_pools_per_user", jobs_max_pools_per_user, K_UINT, 1, 64, "4"),
	KEY("jobs", "max_wait_default", jobs_max_wait_default_s, K_DURATION, 1, 30 * 86400, "1h"),
	/* what ended jobs keep (docs/jobs.md "Retention") */
	KEY("jobs", "retention", jobs_retention_s, K_DURATION_NONE, 1, 3650 * 86400LL, "30d"),
	KEY("jobs", "max_kept_per_user", jobs_max_kept_per_user, K_UINT, 1, 1000000, "1000"),
	KEY("jobs", "retention_sweep", jobs_retention_sweep_s, K_DURATION, 1, 86400, "10m"),
	/* the profiling rules (docs/jobs.md "Profiling rules") */
	KEY("jobs", "rules_interval", jobs_rules_interval_s, K_DURATION, 1, 3600, "5s"),
	KEY("jobs", "rules_min_samples", jobs_rules_min_samples, K_UINT, 2, 600, "10"),
	KEY("jobs", "rules_warmup", jobs_rules_warmup_s, K_DURATION, 0, 86400, "20s"),
	KEY("jobs", "rules_gpu_low_p95", jobs_rules_gpu_low_p95_percent, K_UINT, 0, 100, "70"),
	KEY("jobs", "rules_gpu_low_p5", jobs_rules_gpu_low_p5_percent, K_UINT, 0, 100, "10"),
	KEY("jobs", "rules_cpu_high", jobs_rules_cpu_high_percent, K_UINT, 0, 100, "90"),
	KEY("jobs", "rules_gpu_idle", jobs_rules_gpu_idle_percent, K_UINT, 0, 100, "10"),
	KEY("jobs", "rules_io_wait", jobs_rules_io_wait_percent, K_UINT, 0, 100, "50"),
	KEY("jobs", "rules_gpu_memory_increase", jobs_rules_gpu_memory_increase_percent, K_UINT,
	    0, 1000, "5"),
	KEY("jobs", "rules_step_metric", jobs_rules_step_metric, K_STRING, 1, 0, "step_time"),
	KEY("jobs", "rules_step_stddev", jobs_rules_step_stddev, K_UINT, 1, 100, "3"),
	KEY("jobs", "rules_memory_near", jobs_rules_memory_near_percent, K_UINT, 1, 100, "90"),
	KEY("jobs", "rules_init", jobs_rules_init_s, K_DURATION, 1, 30 * 86400, "2m"),
	KEY("jobs", "rules_quiet", jobs_rules_quiet_s, K_DURATION, 1, 30 * 86400, "10m"),
	/* notifications (docs/jobs.md "Notifications") */
	KEY("webhooks", "max_per_user", webhooks_max_per_user, K_UINT, 0, 100, "10"),
	KEY("webhooks", "attempts", webhooks_attempts, K_UINT, 1, 20, "6"),
	KEY("webhooks", "retry_base", webhooks_retry_base_ms, K_DURATION_MS, 100, 3600000, "10s"),
	KEY("webhooks", "timeout", webhooks_timeout_s, K_DURATION, 1, 60, "10s"),
	KEY("webhooks", "quota_low", webhooks_quota_low_percent, K_UINT, 1, 100, "90"),
	/* runtimes and pools on a Slurm cluster (docs/slurm.md) */
	KEY("backend", "kind", backend_kind, K_STRING, 1, 0, "local"),
	KEY("slurm", "listen", slurm_listen, K_STRING, 0, 0, ""),
	KEY("slurm", "secret_file", slurm_secret_file, K_STRING, 0, 0, ""),
	KEY("slurm", "poll_interval", slurm_poll_interval_ms, K_DURATION_MS, 100, 60000, "1s"),
	KEY("slurm", "time_grace", slurm_time_grace_s, K_DURATION, 0, 86400, "5m"),
	KEY("slurm", "timeout", slurm_timeout_s, K_DURATION, 1, 600, "30s"),
	KEY("slurm", "partition", slurm_partition, K_STRING, 0, 0, ""),
	KEY("slurm", "max_instances", slurm_max_instances, K_UINT, 1, 64, "8"),
	KEY("slurm", "job_addresses", slurm_job_addresses, K_STRING, 0, 0, ""),
	KEY("slurm", "sbatch", slurm_sbatch, K_STRING, 1, 0, "/usr/bin/sbatch"),
	KEY("slurm", "squeue", slurm_squeue, K_STRING, 1, 0, "/usr/bin/squeue"),
	KEY("slurm", "scontrol", slurm_scontrol, K_STRING, 1, 0, "/usr/bin/scontrol"),
	KEY("slurm", "scancel", slurm_scancel, K_STRING, 1, 0, "/usr/bin/scancel"),
};
#define N_KEYS (sizeof(keys) / sizeof(keys[0]))

const struct config_key *config_keys(size_t *n)
{
	*n = N_KEYS;
	return keys;
}

void config_defaults(struct labd_config *cfg, bool demo)
{
	memset(cfg, 0, sizeof(*cfg));
	/* each default parses within its bounds: test_config walks the table to prove it */
	for (size_t i = 0; i < N_KEYS; i++)
		if (keys[i].dflt)
			(void)config_kind_apply(cfg, &keys[i], keys[i].dflt);
	if (demo) {
		snprintf(cfg->state_dir, sizeof(cfg->state_dir), "./var");
		snprintf(cfg->web_root, sizeof(cfg->web_root), "./web");
	}
}

int config_split_listen(const char *listen, char *host, size_t hostlen, unsigned *port)
{
	const char *colon, *hstart = listen, *hend;
	char *end;
	unsigned long p;

	if (listen[0] == '[') {
		hend = strchr(listen, ']');
		if (!hend || hend[1] != ':')
			return -EINVAL;
		hstart = listen + 1;
		colon = hend + 1;
	} else {
		colon = strrchr(listen, ':');
		if (!colon)
			return -EINVAL;
		hend = colon;
	}
	if (hend == hstart || (size_t)(hend - hstart) >= hostlen)
		return -EINVAL;
	errno = 0;
	p = strtoul(colon + 1, &end, 10);
	if (errno || *end || colon[1] == '\0' || p == 0 || p > 65535)
		return -EINVAL;
	memcpy(host, hstart, (size_t)(hend - hstart));
	host[hend - hstart] = '\0';
	*port = (unsigned)p;
	return 0;
}

int config_cidr4(const char *cidr, uint32_t *first, unsigned *count)
{
	struct cidr c;
	uint32_t net;

	if (!strchr(cidr, '/') || cidr_parse(cidr, &c) < 0 || c.family != AF_INET ||
	    c.prefix_bits < CONFIG_CIDR4_PREFIX_MIN || c.prefix_bits > 30)
		return -EINVAL;
	memcpy(&net, c.addr, 4);
	/* the network's own address and its broadcast address are no host's */
	*first = ntohl(net) + 1;
	*count = (1u << (32 - c.prefix_bits)) - 2;
	return 0;
}

int config_listen_sockaddr(const char *listen, struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	char host[64];
	unsigned port;

	memset(ss, 0, sizeof(*ss));
	if (config_split_listen(listen, host, sizeof(host), &port) < 0)
		return -EINVAL;
	if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		*len = sizeof(*in4);
	} else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*in6);
	} else {
		return -EAFNOSUPPORT;
	}
	return 0;
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
 * and the web process hand out the same GPUs. */
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

/* The GPU inventory is final: found nodes, or stand-ins 0..N-1 (never both with a list). */
static int finish_gpus(struct labd_config *cfg, const char *path, char *err, size_t errlen)
{
	if (cfg->gpu_stand_in && (cfg->n_gpu_devices || cfg->gpu_devices_auto)) {
		snprintf(err, errlen, "%s: [gpu] stand_in and [gpu] devices exclude each other: "
			 "stand-ins are for tests and demos without GPUs", path);
		return -EINVAL;
	}
	if (cfg->gpu_devices_auto)
		find_gpu_nodes(cfg);
	for (unsigned i = 0; i < cfg->gpu_stand_in; i++)
		cfg->gpu_devices[i] = i;
	if (cfg->gpu_stand_in)
		cfg->n_gpu_devices = cfg->gpu_stand_in;
	if (!cfg->gpu_caps_dev_dir[0] &&
	    snprintf(cfg->gpu_caps_dev_dir, sizeof(cfg->gpu_caps_dev_dir), "%s/nvidia-caps",
		     cfg->dev_prefix) >= (int)sizeof(cfg->gpu_caps_dev_dir)) {
		snprintf(err, errlen, "%s: [gpu] dev_prefix is too long", path);
		return -EINVAL;
	}
	for (unsigned i = 0; i < cfg->n_gpu_shares; i++) {
		if (!config_has_gpu(cfg, cfg->gpu_shares[i].minor)) {
			snprintf(err, errlen, "%s: [gpu] shares names GPU %u, which is not in the "
				 "inventory ([gpu] devices or stand_in)", path,
				 cfg->gpu_shares[i].minor);
			return -EINVAL;
		}
	}
	return 0;
}

bool config_has_gpu(const struct labd_config *cfg, unsigned minor)
{
	for (unsigned i = 0; i < cfg->n_gpu_devices; i++)
		if (cfg->gpu_devices[i] == minor)
			return true;
	return false;
}

const struct config_gpu_share *config_gpu_share(const struct labd_config *cfg, unsigned minor)
{
	for (unsigned i = 0; i < cfg->n_gpu_shares; i++)
		if (cfg->gpu_shares[i].minor == minor)
			return &cfg->gpu_shares[i];
	return NULL;
}

/* [backend] kind and what the Slurm backend needs: its listener, its secret, absolute
 * tool paths (the web process runs them without a search path). */
static int check_backend(const struct labd_config *cfg, const char *path, char *err,
			 size_t errlen)
{
	const char *const tools[] = {cfg->slurm_sbatch, cfg->slurm_squeue, cfg->slurm_scontrol,
				     cfg->slurm_scancel};
	static const char *const names[] = {"sbatch", "squeue", "scontrol", "scancel"};
	char host[64];
	unsigned port, count;
	uint32_t first;

	if (strcmp(cfg->backend_kind, "local") && strcmp(cfg->backend_kind, "slurm")) {
		snprintf(err, errlen, "%s: [backend] kind: must be local or slurm", path);
		return -1;
	}
	if (strcmp(cfg->backend_kind, "slurm"))
		return 0;
	if (config_split_listen(cfg->slurm_listen, host, sizeof(host), &port) < 0) {
		snprintf(err, errlen, "%s: [slurm] listen: must be ADDRESS:PORT with [backend] "
			 "kind = slurm", path);
		return -1;
	}
	if (cfg->slurm_secret_file[0] != '/') {
		snprintf(err, errlen, "%s: [slurm] secret_file: must be an absolute path with "
			 "[backend] kind = slurm", path);
		return -1;
	}
	if (cfg->slurm_job_addresses[0] && config_cidr4(cfg->slurm_job_addresses, &first, &count)) {
		snprintf(err, errlen, "%s: [slurm] job_addresses: must be an IPv4 network "
			 "ADDRESS/PREFIX, the prefix from %d to 30", path,
			 CONFIG_CIDR4_PREFIX_MIN);
		return -1;
	}
	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++)
		if (tools[i][0] != '/') {
			snprintf(err, errlen, "%s: [slurm] %s: must be an absolute path", path,
				 names[i]);
			return -1;
		}
	return 0;
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
	for (size_t i = 0; i < N_KEYS; i++) {
		if (strcmp(keys[i].section, section) || strcmp(keys[i].name, name))
			continue;
		why = config_kind_apply(st->cfg, &keys[i], value);
		if (!why)
			return 1;
		snprintf(st->err, st->errlen, "%s:%d: bad value for [%s] %s: %s", st->path, lineno,
			 section, name, why);
		st->failed = 1;
		return 0;
	}
	bool known_section = false;
	for (size_t i = 0; i < N_KEYS; i++)
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
		rc = -errno;
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(-rc));
		return rc;
	}
	rc = ini_parse_stream(read_line, &st, on_ini_value, &st);
	fclose(st.file);
	if (st.failed)
		return -EINVAL;
	if (rc != 0) {
		snprintf(err, errlen, "%s:%d: syntax error", path, rc);
		return -EINVAL;
	}
	if (cfg->backoff_max_s < cfg->backoff_base_s) {
		snprintf(err, errlen, "%s: [auth] backoff_max must not be below backoff_base", path);
		return -EINVAL;
	}
	/* a default above its machine cap would refuse every start of the default plan */
	if ((cfg->memory_max_bytes && cfg->memory_bytes > cfg->memory_max_bytes) ||
	    (cfg->cpus_max_milli && cfg->cpus_milli > cfg->cpus_max_milli) ||
	    cfg->home_size_bytes > cfg->home_size_max_bytes) {
		snprintf(err, errlen,
			 "%s: [runtime] memory, cpus and home_size must not be above memory_max, "
			 "cpus_max and home_size_max",
			 path);
		return -EINVAL;
	}
	if (check_backend(cfg, path, err, errlen) < 0)
		return -EINVAL;
	return finish_gpus(cfg, path, err, errlen);
}
