/* Unit tests: config defaults, INI loading and every kind of bad value. */
#include "unit.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "config/images.h"
#include "config/kinds.h"
#include "http/forwarded.h"

static void load_text(const char *text, struct labd_config *cfg, int *rc, char *err, size_t len)
{
	char dir[64], path[128];
	unit_tempdir(dir);
	unit_write(dir, "labd.ini", text, path);
	config_defaults(cfg, false);
	*rc = config_load(cfg, path, err, len);
	unit_rmdir(dir);
}

static void test_defaults(void **state)
{
	struct labd_config cfg;
	(void)state;
	config_defaults(&cfg, false);
	assert_string_equal(cfg.listen, "127.0.0.1:8080");
	assert_string_equal(cfg.state_dir, "/var/lib/labd");
	assert_int_equal(cfg.max_body_bytes, 1024 * 1024);
	assert_int_equal(cfg.alert_after, 10);
	assert_int_equal(cfg.failure_window_s, 900);
	assert_int_equal(cfg.n_trusted_proxies, 0);
	assert_int_equal(cfg.scrypt_n, 32768);
	config_defaults(&cfg, true);
	assert_string_equal(cfg.state_dir, "./var");
	assert_string_equal(cfg.web_root, "./web");
}

static void test_load_values(void **state)
{
	struct labd_config cfg;
	char err[256];
	int rc;
	(void)state;
	load_text("; comment\n[server]\nlisten = [::1]:9000\nmax_body = 64K\nsecure_cookies = yes\n"
		  "connection_timeout = 2m\n[auth]\nsession_idle = 8h\nscrypt_n = 1024\n",
		  &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_string_equal(cfg.listen, "[::1]:9000");
	assert_int_equal(cfg.max_body_bytes, 65536);
	assert_true(cfg.secure_cookies);
	assert_int_equal(cfg.connection_timeout_s, 120);
	assert_int_equal(cfg.session_idle_s, 8 * 3600);
	assert_int_equal(cfg.scrypt_n, 1024);
}

static void test_unknown_key_names_file_line_key(void **state)
{
	struct labd_config cfg;
	char err[256];
	int rc;
	(void)state;
	load_text("[server]\nlisten = 127.0.0.1:1\n\nbogus_key = 3\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, -EINVAL);
	assert_non_null(strstr(err, "labd.ini:4:"));
	assert_non_null(strstr(err, "bogus_key"));
	load_text("[nosuch]\nlisten = 1\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, -EINVAL);
	assert_non_null(strstr(err, ":1: unknown section [nosuch]"));
}

static void test_bad_values(void **state)
{
	static const char *const bad[] = {
		"[server]\nthreads = lots\n",	      "[server]\nthreads = 9999\n",
		"[server]\nlisten = localhost\n",     "[server]\nlisten = 1.2.3.4:70000\n",
		"[server]\nmax_body = 12X\n",	      "[server]\nsecure_cookies = maybe\n",
		"[auth]\nscrypt_n = 1000\n",	      "[auth]\nsession_idle = -5\n",
		"[server]\nlog_level = loud\n",	      "[auth]\nbackoff_base = 10m\nbackoff_max = 1m\n",
		"[server]\nstate_dir = \n",
	};
	struct labd_config cfg;
	char err[256];
	int rc;
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		load_text(bad[i], &cfg, &rc, err, sizeof(err));
		assert_int_equal(rc, -EINVAL);
		assert_non_null(strstr(err, "labd.ini"));
	}
	load_text("[server]\nthreads = lots\n", &cfg, &rc, err, sizeof(err));
	assert_non_null(strstr(err, ":2: bad value for [server] threads"));
}

/* [runtime] jupyter_env: root binds it into every sandbox, so only a plain
 * absolute directory other than "/" (or empty: none). */
static void test_jupyter_env(void **state)
{
	static const char *const bad[] = {"/", "opt/labd/jupyter", "/opt/../etc", "/opt//x",
					  "/opt/a b", "/opt/a,b"};
	struct labd_config cfg;
	char err[256], text[256];
	int rc;
	(void)state;
	config_defaults(&cfg, false);
	assert_string_equal(cfg.jupyter_env, "/opt/labd/jupyter");
	load_text("[runtime]\njupyter_env =\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_string_equal(cfg.jupyter_env, "");
	load_text("[runtime]\njupyter_env = /srv/envs/lab4\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_string_equal(cfg.jupyter_env, "/srv/envs/lab4");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "[runtime]\njupyter_env = %s\n", bad[i]);
		load_text(text, &cfg, &rc, err, sizeof(err));
		assert_int_equal(rc, -EINVAL);
		assert_non_null(strstr(err, "[runtime] jupyter_env"));
	}
}

static void test_runtime_keys(void **state)
{
	struct labd_config cfg;
	char err[256];
	int rc;
	(void)state;
	config_defaults(&cfg, false);
	assert_int_equal(cfg.cpu_limit_s, 12 * 3600);
	assert_int_equal(cfg.gpu_limit_s, 4 * 3600);
	assert_int_equal(cfg.home_size_bytes, 15ULL << 30);
	assert_int_equal(cfg.n_gpu_devices, 0);
	load_text("[runtime]\ncpus = 0.5\nwarn_before = 5m, 1h, 30s\nidle_timeout = 0\n"
		  "keep_on_shutdown = false\n[gpu]\ndevices = 1,0\n",
		  &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_int_equal(cfg.cpus_milli, 500);
	assert_int_equal(cfg.n_warn_before, 3);
	assert_int_equal(cfg.warn_before_s[0], 3600); /* sorted, longest first */
	assert_int_equal(cfg.warn_before_s[2], 30);
	assert_int_equal(cfg.idle_timeout_s, 0);
	assert_false(cfg.keep_on_shutdown);
	assert_int_equal(cfg.n_gpu_devices, 2);
	assert_int_equal(cfg.gpu_devices[0], 1);
	load_text("[gpu]\ndevices = 0,0\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, -EINVAL);
	assert_non_null(strstr(err, "[gpu] devices"));
	load_text("[runtime]\njupyter = emacs\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, -EINVAL);
	load_text("[runtime]\ncpus_milli = 5\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, -EINVAL); /* the field behind an alias is not a key */
	assert_non_null(strstr(err, "unknown key [runtime] cpus_milli"));
}

/* [gpu]: the pool is final after config_load: a list, the nvidia<N> nodes
 * under dev_prefix (auto; not nvidiactl or nvidia-uvm), or stand-ins 0..N-1;
 * stand-ins never mix with devices. */
static void test_gpu_keys(void **state)
{
	struct labd_config cfg;
	char err[512], dir[64], text[256], node[128];
	int rc;
	(void)state;
	config_defaults(&cfg, false);
	assert_int_equal(cfg.gpu_queue_max_wait_s, 30 * 60);
	assert_int_equal(cfg.gpu_refresh_s, 5);
	assert_string_equal(cfg.nvml_library, "libnvidia-ml.so.1");
	load_text("[gpu]\nstand_in = 3\nqueue_max_wait = 2m\nrefresh = 10s\n", &cfg, &rc, err,
		  sizeof(err));
	assert_int_equal(rc, 0);
	assert_int_equal(cfg.n_gpu_devices, 3);
	assert_int_equal(cfg.gpu_devices[2], 2);
	assert_int_equal(cfg.gpu_stand_in, 3);
	assert_int_equal(cfg.gpu_queue_max_wait_s, 120);
	assert_int_equal(cfg.gpu_refresh_s, 10);
	load_text("[gpu]\ndevices = 0\nstand_in = 1\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, -EINVAL);
	assert_non_null(strstr(err, "[gpu] stand_in and [gpu] devices exclude each other"));
	load_text("[gpu]\nstand_in = 17\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, -EINVAL);
	load_text("[gpu]\nqueue_max_wait = 0\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, -EINVAL);
	assert_non_null(strstr(err, "[gpu] queue_max_wait"));

	unit_tempdir(dir);
	static const char *const names[] = {"nvidia2", "nvidia0", "nvidiactl", "nvidia-uvm",
					    "nvidia-uvm-tools", "nvidia1x", "nvidia"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		unit_write(dir, names[i], "", node); /* plain files: only the names count */
	snprintf(text, sizeof(text), "[gpu]\ndevices = auto\ndev_prefix = %s\n", dir);
	load_text(text, &cfg, &rc, err, sizeof(err));
	unit_rmdir(dir);
	assert_int_equal(rc, 0);
	assert_true(cfg.gpu_devices_auto);
	assert_int_equal(cfg.n_gpu_devices, 2);
	assert_int_equal(cfg.gpu_devices[0], 0); /* ascending */
	assert_int_equal(cfg.gpu_devices[1], 2);
	load_text("[gpu]\ndevices = auto\nstand_in = 1\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, -EINVAL);
}

/* [gpu] shares, caps_dir, caps_dev_dir, share_grace: shares name cards of the inventory,
 * each once, with a count and a memory budget; caps_dev_dir follows dev_prefix. */
static void test_gpu_share_keys(void **state)
{
	static const char *const bad[] = {
		"[gpu]\nstand_in = 2\nshares = 0:4\n",        "[gpu]\nstand_in = 2\nshares = 0:0:1G\n",
		"[gpu]\nstand_in = 2\nshares = 0:65:1G\n",    "[gpu]\nstand_in = 2\nshares = 0:2:0\n",
		"[gpu]\nstand_in = 2\nshares = 0:2:1G,0:3:1G\n", "[gpu]\nstand_in = 2\nshares = 0:2:1Gx:\n",
		"[gpu]\nstand_in = 2\nshares = 2:2:1G\n",     "[gpu]\nshare_grace = 0\n",
	};
	struct labd_config cfg;
	char err[512];
	int rc;
	(void)state;
	config_defaults(&cfg, false);
	assert_int_equal(cfg.n_gpu_shares, 0);
	assert_int_equal(cfg.gpu_share_grace_s, 30);
	assert_string_equal(cfg.gpu_caps_dir, "/proc/driver/nvidia/capabilities");
	load_text("[gpu]\nstand_in = 2\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_string_equal(cfg.gpu_caps_dev_dir, "/dev/nvidia-caps");
	load_text("[gpu]\nstand_in = 2\nshares = 1:4:20G, 0:2:512M\nshare_grace = 2m\n"
		  "dev_prefix = /tmp/d\ncaps_dir = /tmp/caps\n",
		  &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_int_equal(cfg.n_gpu_shares, 2);
	assert_int_equal(cfg.gpu_shares[0].minor, 1);
	assert_int_equal(cfg.gpu_shares[0].count, 4);
	assert_int_equal(cfg.gpu_shares[0].memory_bytes, 20LL << 30);
	assert_int_equal(cfg.gpu_shares[1].memory_bytes, 512LL << 20);
	assert_int_equal(cfg.gpu_share_grace_s, 120);
	assert_string_equal(cfg.gpu_caps_dir, "/tmp/caps");
	assert_string_equal(cfg.gpu_caps_dev_dir, "/tmp/d/nvidia-caps");
	assert_ptr_equal(config_gpu_share(&cfg, 0), &cfg.gpu_shares[1]);
	assert_null(config_gpu_share(&cfg, 2));
	assert_true(config_has_gpu(&cfg, 1));
	assert_false(config_has_gpu(&cfg, 2));
	load_text("[gpu]\nstand_in = 1\ncaps_dev_dir = /x/caps\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_string_equal(cfg.gpu_caps_dev_dir, "/x/caps");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		load_text(bad[i], &cfg, &rc, err, sizeof(err));
		assert_int_equal(rc, -EINVAL);
		assert_true(strstr(err, "[gpu] shares") || strstr(err, "[gpu] share_grace"));
	}
}

/* [quota]: the default plan's windows take a duration or "none" (-1). */
/* [jobs] rules_*: the profiling rules' defaults, values and bounds. */
static void test_jobs_rules_keys(void **state)
{
	struct labd_config cfg;
	char err[256];
	int rc;
	(void)state;
	config_defaults(&cfg, false);
	assert_int_equal(cfg.jobs_rules_interval_s, 5);
	assert_int_equal(cfg.jobs_rules_gpu_low_p95_percent, 70);
	assert_int_equal(cfg.jobs_rules_init_s, 120);
	assert_int_equal(cfg.jobs_rules_quiet_s, 600);
	assert_string_equal(cfg.jobs_rules_step_metric, "step_time");
	load_text("[jobs]\nrules_init = 2s\nrules_step_metric = iter_s\nrules_io_wait = 30\n"
		  "rules_min_samples = 2\n",
		  &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_int_equal(cfg.jobs_rules_init_s, 2);
	assert_string_equal(cfg.jobs_rules_step_metric, "iter_s");
	assert_int_equal(cfg.jobs_rules_io_wait_percent, 30);
	assert_int_equal(cfg.jobs_rules_min_samples, 2);
	const char *bad[] = {"[jobs]\nrules_gpu_low_p95 = 101\n", "[jobs]\nrules_min_samples = 1\n",
			     "[jobs]\nrules_step_metric =\n", "[jobs]\nrules_interval = 0\n",
			     "[jobs]\nrules_step_stddev = 0\n"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		load_text(bad[i], &cfg, &rc, err, sizeof(err));
		assert_int_equal(rc, -EINVAL);
		assert_non_null(strstr(err, "rules_"));
	}
}

static void test_quota_keys(void **state)
{
	static const char *const bad[] = {
		"[quota]\ngpu_per_24h = never\n", "[quota]\ngpu_per_24h = 65d\n",
		"[quota]\ngpus_per_runtime = 65\n", "[quota]\njob_max_runtime = none\n",
		"[quota]\njob_max_runtime = 10s\n",
	};
	struct labd_config cfg;
	char err[256];
	int rc;
	(void)state;
	config_defaults(&cfg, false);
	assert_int_equal(cfg.quota_gpu_s_per_24h, 4 * 3600);
	assert_int_equal(cfg.quota_gpu_s_per_7d, -1);
	assert_int_equal(cfg.quota_cpu_s_per_24h, -1);
	assert_int_equal(cfg.quota_gpus_per_runtime, 1);
	load_text("[quota]\ngpu_per_24h = none\ncpu_per_7d = 40h\ngpu_per_7d = 0\n"
		  "concurrent_jobs = 0\njob_max_runtime = 2h\n",
		  &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_int_equal(cfg.quota_gpu_s_per_24h, -1);
	assert_int_equal(cfg.quota_cpu_s_per_7d, 40 * 3600);
	assert_int_equal(cfg.quota_gpu_s_per_7d, 0);
	assert_int_equal(cfg.quota_concurrent_jobs, 0);
	assert_int_equal(cfg.quota_job_max_runtime_s, 7200);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		load_text(bad[i], &cfg, &rc, err, sizeof(err));
		assert_int_equal(rc, -EINVAL);
		assert_non_null(strstr(err, "[quota] "));
	}
}

/* [jobs]: defaults, values, and every bound (sample_interval in ms). */
static void test_jobs_keys(void **state)
{
	static const char *const bad[] = {
		"[jobs]\nkeep_alive_max = 8d\n",     "[jobs]\ngrace = soon\n",
		"[jobs]\nlog_max_bytes = 1K\n",      "[jobs]\nsample_interval = 50ms\n",
		"[jobs]\nsample_interval = 2m\n",    "[jobs]\nsample_interval = ms\n",
		"[jobs]\nsample_interval = 1.5s\n",  "[jobs]\nmax_pools_per_user = 0\n",
		"[jobs]\nmax_wait_default = 0\n",    "[jobs]\nkeep_alive = 1h\n",
	};
	struct labd_config cfg;
	char err[256];
	int rc;
	(void)state;
	config_defaults(&cfg, false);
	assert_int_equal(cfg.jobs_keep_alive_max_s, 3600);
	assert_int_equal(cfg.jobs_grace_s, 120);
	assert_int_equal(cfg.jobs_log_max_bytes, 64 << 20);
	assert_int_equal(cfg.jobs_sample_interval_ms, 1000);
	assert_int_equal(cfg.jobs_max_pools_per_user, 4);
	assert_int_equal(cfg.jobs_max_wait_default_s, 3600);
	load_text("[jobs]\nkeep_alive_max = 2h\ngrace = 5s\nlog_max_bytes = 1M\n"
		  "sample_interval = 250ms\nmax_pools_per_user = 2\nmax_wait_default = 10m\n",
		  &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_int_equal(cfg.jobs_keep_alive_max_s, 7200);
	assert_int_equal(cfg.jobs_grace_s, 5);
	assert_int_equal(cfg.jobs_log_max_bytes, 1 << 20);
	assert_int_equal(cfg.jobs_sample_interval_ms, 250);
	assert_int_equal(cfg.jobs_max_pools_per_user, 2);
	assert_int_equal(cfg.jobs_max_wait_default_s, 600);
	load_text("[jobs]\nsample_interval = 2s\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_int_equal(cfg.jobs_sample_interval_ms, 2000);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		load_text(bad[i], &cfg, &rc, err, sizeof(err));
		if (rc != -EINVAL || !strstr(err, "[jobs] "))
			fail_msg("accepted or unnamed: %s -> %s", bad[i], err);
	}
}

/* [network] and the plan defaults of egress ([quota] network, egress_rate). */
static void test_network_keys(void **state)
{
	static const char *const bad[] = {
		"[quota]\nnetwork = yes\n",          "[quota]\negress_rate = fast\n",
		"[quota]\negress_rate = 10\n",       "[network]\ndeny = 10.0.0.0/33\n",
		"[network]\ndeny = example.org\n",   "[network]\ndns = 198.18.0.256\n",
		"[network]\nmax_connections = -1\n",   "[network]\npath = tap\n",
		"[network]\nveth_range = 10.254.0.1/16\n", "[network]\nveth_range = 10.254.0.0/31\n",
		"[network]\nveth_range = fc00::/64\n",     "[network]\nveth_range = 10.254.0.0\n",
	};
	struct labd_config cfg;
	char err[256];
	int rc;
	(void)state;
	config_defaults(&cfg, false);
	assert_int_equal(cfg.quota_network, 1);
	assert_int_equal(cfg.quota_egress_bytes_per_s, -1);
	assert_int_equal(cfg.net_max_connections, 512);
	assert_string_equal(cfg.net_deny, "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7");
	assert_string_equal(cfg.net_dns, "");
	assert_int_equal(cfg.net_path, CONFIG_NET_PATH_AUTO);
	assert_string_equal(cfg.net_veth_range, "10.254.0.0/16");
	load_text("[network]\npath = veth\nveth_range = 172.31.0.0/20\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_int_equal(cfg.net_path, 1);
	assert_string_equal(cfg.net_veth_range, "172.31.0.0/20");
	load_text("[network]\npath = pasta\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_int_equal(cfg.net_path, 0);
	load_text("[network]\npath = slirp\n", &cfg, &rc, err, sizeof(err));
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(err, "must be auto, pasta or veth"));
	config_defaults(&cfg, false);
	load_text("[quota]\nnetwork = none\negress_rate = 10M\n[network]\ndeny = 198.19.0.0/16, "
		  "fc00::/7\nmax_connections = 0\ndns = 198.18.3.2\npasta = /opt/pasta\n",
		  &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_int_equal(cfg.quota_network, 0);
	assert_int_equal(cfg.quota_egress_bytes_per_s, 10 << 20);
	assert_string_equal(cfg.net_deny, "198.19.0.0/16, fc00::/7");
	assert_int_equal(cfg.net_max_connections, 0);
	assert_string_equal(cfg.net_dns, "198.18.3.2");
	assert_string_equal(cfg.net_pasta, "/opt/pasta");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		load_text(bad[i], &cfg, &rc, err, sizeof(err));
		assert_int_equal(rc, -EINVAL);
	}
}

/* Per-user origins (docs/security.md §3): on by default, path mode an opt-out. */
static void test_origin_keys(void **state)
{
	struct labd_config cfg;
	char err[256];
	int rc;
	(void)state;
	config_defaults(&cfg, false);
	assert_true(cfg.origin_per_user);
	assert_string_equal(cfg.user_domain, "localhost");
	assert_int_equal(cfg.token_reauth_s, 300);
	load_text("[server]\norigin_mode = path\nuser_domain = lab.example.org\n"
		  "ui_origin = https://lab.example.org:8443\n[auth]\ntoken_reauth = 2m\n", &cfg, &rc,
		  err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_false(cfg.origin_per_user);
	assert_string_equal(cfg.user_domain, "lab.example.org");
	assert_int_equal(cfg.token_reauth_s, 120);
	assert_string_equal(cfg.ui_origin, "https://lab.example.org:8443");
	const char *bad[] = {"[server]\norigin_mode = subdomain\n", "[server]\nuser_domain = Lab.org\n",
			     "[server]\nuser_domain = .org\n", "[server]\nuser_domain = a..b\n",
			     "[server]\nuser_domain = a-.b\n", "[server]\nuser_domain = a_b.org\n",
			     "[server]\nui_origin = lab.example.org\n",
			     "[server]\nui_origin = https://lab.example.org/x\n",
			     "[server]\nui_origin = https://a@lab.example.org\n"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		load_text(bad[i], &cfg, &rc, err, sizeof(err));
		assert_int_equal(rc, -EINVAL);
		const char *key = bad[i][9] == 'o' ? "origin_mode" : bad[i][9] == 'u' && bad[i][10] == 'i' ? "ui_origin" : "user_domain";
		assert_non_null(strstr(err, key));
	}
}

/* [backend] kind and what the Slurm backend needs with it. */
static void test_backend_keys(void **state)
{
	struct labd_config cfg;
	char err[256];
	int rc;
	(void)state;
	config_defaults(&cfg, false);
	assert_string_equal(cfg.backend_kind, "local");
	assert_int_equal(cfg.slurm_poll_interval_ms, 1000);
	assert_int_equal(cfg.slurm_time_grace_s, 300);
	load_text("[backend]\nkind = slurm\n[slurm]\nlisten = 10.0.0.1:7443\n"
		  "secret_file = /etc/labd/link.key\npoll_interval = 250ms\npartition = gpu\n",
		  &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_string_equal(cfg.slurm_listen, "10.0.0.1:7443");
	assert_int_equal(cfg.slurm_poll_interval_ms, 250);
	assert_string_equal(cfg.slurm_partition, "gpu");
	assert_string_equal(cfg.slurm_job_addresses, "");
	load_text("[backend]\nkind = slurm\n[slurm]\nlisten = 10.0.0.1:7443\n"
		  "secret_file = /k\njob_addresses = 10.1.0.192/26\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	uint32_t first;
	unsigned count;
	assert_int_equal(config_cidr4(cfg.slurm_job_addresses, &first, &count), 0);
	assert_int_equal(first, (10u << 24) | (1u << 16) | 193u);
	assert_int_equal(count, 62);
	assert_int_equal(config_cidr4("10.1.0.0/19", &first, &count), -EINVAL);
	assert_int_equal(config_cidr4("10.1.0.0/31", &first, &count), -EINVAL);
	assert_int_equal(config_cidr4("10.1.0.1", &first, &count), -EINVAL);
	assert_int_equal(config_cidr4("fd00::/120", &first, &count), -EINVAL);
	const struct {
		const char *text, *names;
	} bad[] = {
		{"[backend]\nkind = k8s\n", "[backend] kind"},
		{"[backend]\nkind = slurm\n[slurm]\nsecret_file = /k\n", "[slurm] listen"},
		{"[backend]\nkind = slurm\n[slurm]\nlisten = 10.0.0.1:7443\n", "[slurm] secret_file"},
		{"[backend]\nkind = slurm\n[slurm]\nlisten = 10.0.0.1:7443\nsecret_file = /k\n"
		 "squeue = squeue\n", "[slurm] squeue"},
		{"[slurm]\npoll_interval = 10ms\n", "[slurm] poll_interval"},
		{"[backend]\nkind = slurm\n[slurm]\nlisten = 10.0.0.1:7443\nsecret_file = /k\n"
		 "job_addresses = 10.1.0.0/8\n", "[slurm] job_addresses"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		load_text(bad[i].text, &cfg, &rc, err, sizeof(err));
		assert_int_equal(rc, -EINVAL);
		assert_non_null(strstr(err, bad[i].names));
	}
	/* a local lab reads none of [slurm]'s requirements */
	load_text("[backend]\nkind = local\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
}

static void test_missing_file(void **state)
{
	struct labd_config cfg;
	char err[256];
	(void)state;
	config_defaults(&cfg, false);
	assert_int_equal(config_load(&cfg, "/nonexistent/labd.ini", err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "cannot open"));
}

/* Sizes, durations and CPU counts go through labd/parse.h (tested in test_parse.c);
 * here: that config uses it, with each key's own range on top. */
static void test_value_syntax(void **state)
{
	static const char *const good[] = {
		"[server]\nmax_body = 64k\n",	    "[server]\nmax_body = 1MiB\n",
		"[runtime]\nmemory = 4GB\n",	    "[runtime]\ncpus = 1024\n",
		"[runtime]\ncpus = 0.01\n",	    "[runtime]\ncpus = 2.125\n",
		"[auth]\nsession_idle = 90\n",	    "[runtime]\ncpu_limit = 12h\n",
	};
	static const char *const bad[] = {
		"[server]\nmax_body = 64KK\n",	    "[server]\nmax_body = 1B\n",
		"[runtime]\nmemory = -4G\n",	    "[runtime]\nhome_size = 99999999999T\n",
		"[runtime]\ncpus = 1025\n",	    "[runtime]\ncpus = 1e3\n",
		"[runtime]\ncpus = 0.0005\n",	    "[runtime]\ncpus = 0.005\n", /* below 10 milli */
		"[runtime]\ncpus = -1\n",	    "[auth]\nsession_idle = 1w\n",
		"[auth]\nsession_idle = 5mm\n",    "[runtime]\ncpu_limit = 2147483648d\n",
		"[server]\nthreads = +4\n",	    "[gpu]\ndevices = 0,256\n",
	};
	struct labd_config cfg;
	char err[256];
	int rc;
	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		load_text(good[i], &cfg, &rc, err, sizeof(err));
		if (rc != 0)
			fail_msg("refused %s: %s", good[i], err);
	}
	load_text("[runtime]\ncpus = 2.125\nmemory = 4GB\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(cfg.cpus_milli, 2125);
	assert_true(cfg.memory_bytes == 4ULL << 30);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		load_text(bad[i], &cfg, &rc, err, sizeof(err));
		if (rc != -EINVAL || !strstr(err, "bad value"))
			fail_msg("accepted %s", bad[i]);
	}
}

/* The shipped example must keep loading (unit tests run from the repository root). */
static void test_deploy_example_loads(void **state)
{
	struct labd_config cfg;
	char err[256];
	(void)state;
	if (access("deploy/labd.ini", R_OK) != 0)
		skip();
	config_defaults(&cfg, false);
	if (config_load(&cfg, "deploy/labd.ini", err, sizeof(err)) != 0)
		fail_msg("deploy/labd.ini: %s", err);
	assert_int_equal(cfg.session_idle_s, 8 * 3600);
	assert_int_equal(cfg.session_lifetime_s, 7 * 86400);
}

static void test_split_listen(void **state)
{
	char host[64];
	unsigned port;
	(void)state;
	assert_int_equal(config_split_listen("0.0.0.0:443", host, sizeof(host), &port), 0);
	assert_string_equal(host, "0.0.0.0");
	assert_int_equal(port, 443);
	assert_int_equal(config_split_listen("[::]:80", host, sizeof(host), &port), 0);
	assert_string_equal(host, "::");
	assert_int_equal(config_split_listen(":80", host, sizeof(host), &port), -EINVAL);
	assert_int_equal(config_split_listen("1.2.3.4:", host, sizeof(host), &port), -EINVAL);
	assert_int_equal(config_split_listen("1.2.3.4:0", host, sizeof(host), &port), -EINVAL);
}

static void test_trusted_proxies(void **state)
{
	static const char *const bad[] = {
		"[server]\ntrusted_proxies = nginx\n",
		"[server]\ntrusted_proxies = 10.0.0.0/33\n",
		"[server]\ntrusted_proxies = ::1/129\n",
		"[server]\ntrusted_proxies = 10.0.0.1/\n",
		"[server]\ntrusted_proxies = 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17\n",
	};
	struct labd_config cfg;
	char err[256];
	int rc;
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		load_text(bad[i], &cfg, &rc, err, sizeof(err));
		assert_int_equal(rc, -EINVAL);
		assert_non_null(strstr(err, "bad value for [server] trusted_proxies"));
	}
	load_text("[server]\ntrusted_proxies = 127.0.0.1, 10.1.2.3/8 fd00::/8\n", &cfg, &rc, err,
		  sizeof(err));
	assert_int_equal(rc, 0);
	assert_int_equal(cfg.n_trusted_proxies, 3);
	assert_true(cidr_contains(&cfg.trusted_proxies[0], "127.0.0.1"));
	assert_true(cidr_contains(&cfg.trusted_proxies[0], "::ffff:127.0.0.1"));
	assert_false(cidr_contains(&cfg.trusted_proxies[0], "127.0.0.2"));
	assert_true(cidr_contains(&cfg.trusted_proxies[1], "10.200.0.1")); /* host bits cleared */
	assert_false(cidr_contains(&cfg.trusted_proxies[1], "11.0.0.1"));
	assert_true(cidr_contains(&cfg.trusted_proxies[2], "fd12::1"));
	assert_false(cidr_contains(&cfg.trusted_proxies[2], "fe80::1"));
	assert_false(cidr_contains(&cfg.trusted_proxies[2], "10.0.0.1"));
	assert_false(cidr_contains(&cfg.trusted_proxies[1], "not an address"));
}

/* X-Forwarded-For is believed only from a trusted peer, read from the right. */
static void test_forwarded_client(void **state)
{
	struct labd_config cfg;
	char out[64], err[256];
	int rc;
	(void)state;
	load_text("[server]\ntrusted_proxies = 127.0.0.1, 10.0.0.0/8\n", &cfg, &rc, err,
		  sizeof(err));
	assert_int_equal(rc, 0);
	/* an untrusted peer's header is only words */
	assert_int_equal(forwarded_client(&cfg, "192.0.2.7", "198.51.100.1", out, sizeof(out)), 0);
	assert_string_equal(out, "192.0.2.7");
	/* no header: the peer */
	assert_int_equal(forwarded_client(&cfg, "127.0.0.1", NULL, out, sizeof(out)), 0);
	assert_string_equal(out, "127.0.0.1");
	/* the right-most untrusted entry; what the client put on the left is ignored */
	assert_int_equal(forwarded_client(&cfg, "127.0.0.1", "6.6.6.6, 198.51.100.9, 10.0.0.2",
					  out, sizeof(out)),
			 1);
	assert_string_equal(out, "198.51.100.9");
	assert_int_equal(forwarded_client(&cfg, "127.0.0.1", "2001:db8::5", out, sizeof(out)), 1);
	assert_string_equal(out, "2001:db8::5");
	/* every hop trusted: the left-most */
	assert_int_equal(forwarded_client(&cfg, "127.0.0.1", "10.0.0.9,10.0.0.2", out, sizeof(out)),
			 1);
	assert_string_equal(out, "10.0.0.9");
	/* garbage met before an untrusted address: the peer */
	assert_int_equal(forwarded_client(&cfg, "127.0.0.1", "198.51.100.9, evil<script>", out,
					  sizeof(out)),
			 0);
	assert_string_equal(out, "127.0.0.1");
	assert_int_equal(forwarded_client(&cfg, "127.0.0.1", "", out, sizeof(out)), 0);
	assert_string_equal(out, "127.0.0.1");
	assert_int_equal(forwarded_client(&cfg, "127.0.0.1", "1.2.3.4,", out, sizeof(out)), 0);
	assert_string_equal(out, "127.0.0.1");
	/* garbage left of the client's address is never read */
	assert_int_equal(forwarded_client(&cfg, "127.0.0.1", "junk, 198.51.100.9", out, sizeof(out)),
			 1);
	assert_string_equal(out, "198.51.100.9");
}

/* A default above its machine cap would refuse every start: labd does not start. */
static void test_runtime_default_above_machine_cap(void **state)
{
	(void)state;
	struct labd_config cfg;
	char err[256];
	int rc;

	config_defaults(&cfg, false);
	load_text("[runtime]\nmemory = 2G\nmemory_max = 1G\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, -EINVAL);
	assert_non_null(strstr(err, "memory_max"));
	config_defaults(&cfg, false);
	load_text("[runtime]\ncpus = 2\ncpus_max = 1.5\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, -EINVAL);
	config_defaults(&cfg, false);
	load_text("[runtime]\nhome_size = 2T\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, -EINVAL); /* home_size_max defaults to 1T */
	config_defaults(&cfg, false);
	load_text("[runtime]\nmemory = 1G\nmemory_max = 1G\ncpus_max = 2\nhome_size_max = 15G\n",
		  &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_true(cfg.memory_max_bytes == 1ULL << 30 && cfg.cpus_max_milli == 2000 &&
		    cfg.home_size_max_bytes == 15ULL << 30);
}

/* [images]: each key names an image; bad names, relative folders and repeats are refused
 * with the file, line and key; labd-image.json gives the hash and versions. */
static void test_images(void **state)
{
	struct labd_config cfg;
	struct image_meta m;
	char err[256], dir[64], path[128];
	int rc;
	(void)state;
	load_text("[images]\nsmall = /srv/img/small\nml-2 = /srv/img/ml\n", &cfg, &rc, err,
		  sizeof(err));
	assert_int_equal(rc, 0);
	assert_int_equal(cfg.n_images, 2);
	assert_string_equal(images_folder(&cfg, "ml-2"), "/srv/img/ml");
	assert_null(images_folder(&cfg, "nope"));
	load_text("[images]\nsmall = img/small\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, -EINVAL);
	assert_non_null(strstr(err, ":2: bad value for [images] small: an image folder must be"));
	load_text("[images]\nBig = /x\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, -EINVAL);
	assert_non_null(strstr(err, "[images] Big"));
	load_text("[images]\na = /x\na = /y\n", &cfg, &rc, err, sizeof(err));
	assert_int_equal(rc, -EINVAL);
	assert_non_null(strstr(err, ":3: bad value for [images] a: image named twice"));

	unit_tempdir(dir);
	assert_int_equal(images_read_meta(dir, &m), -ENOENT);
	unit_write(dir, "labd-image.json", "{\"name\":\"x\"}", path);
	assert_int_equal(images_read_meta(dir, &m), -EINVAL); /* no hash */
	unit_write(dir, "labd-image.json",
		   "{\"hash\":\"sha256:ab\",\"debian\":\"12.8\",\"jupyterlab\":\"4.6.6\","
		   "\"size_bytes\":123}",
		   path);
	assert_int_equal(images_read_meta(dir, &m), 0);
	assert_string_equal(m.hash, "sha256:ab");
	assert_string_equal(m.debian, "12.8");
	assert_string_equal(m.python, "");
	assert_int_equal(m.size_bytes, 123);
	/* the supervisor runs an image only from a folder that is root's alone */
	assert_null(images_folder_unsafe(dir));
	assert_int_equal(chmod(dir, 0777), 0);
	assert_string_equal(images_folder_unsafe(dir), "is writable by its group or others");
	assert_int_equal(chmod(dir, 0755), 0);
	if (geteuid() == 0) {
		assert_int_equal(chown(dir, 65534, 0), 0);
		assert_string_equal(images_folder_unsafe(dir), "is not owned by root");
		assert_int_equal(chown(dir, 0, 0), 0);
	}
	assert_string_equal(images_folder_unsafe(path), "is not a directory");
	unit_rmdir(dir);
}

/* Every key of the table takes its own default: parsed by its kind, so within its bounds.
 * Only the machine caps have none: their zero means "the host's", which no value spells. */
static void test_key_defaults_within_bounds(void **state)
{
	size_t n;
	const struct config_key *keys = config_keys(&n);
	struct labd_config cfg;
	const char *why;
	(void)state;
	assert_true(n >= 100);
	for (size_t i = 0; i < n; i++) {
		const struct config_key *k = &keys[i];
		for (size_t j = 0; j < i; j++)
			if (!strcmp(keys[j].section, k->section) && !strcmp(keys[j].name, k->name))
				fail_msg("[%s] %s is in the table twice", k->section, k->name);
		if (k->max && k->min > k->max)
			fail_msg("[%s] %s: min above max", k->section, k->name);
		if (!k->dflt) {
			if (strcmp(k->name, "memory_max") && strcmp(k->name, "cpus_max"))
				fail_msg("[%s] %s has no default", k->section, k->name);
			continue;
		}
		memset(&cfg, 0, sizeof(cfg));
		if ((why = config_kind_apply(&cfg, k, k->dflt)))
			fail_msg("[%s] %s: default \"%s\" %s", k->section, k->name, k->dflt, why);
	}
}

/* A row of docs/config.md's key tables: "[section] name", and its default cell: the first
 * `code` in it, or the cell's prose (prose = true) such as "(empty)" or "the host's memory". */
struct doc_row {
	char key[128];
	char dflt[256];
	bool prose;
};

static size_t read_doc_rows(FILE *f, struct doc_row *rows, size_t max)
{
	char line[4096], section[32] = "";
	size_t n = 0;

	while (fgets(line, sizeof(line), f) && n < max) {
		if (!strncmp(line, "## ", 3)) {
			snprintf(section, sizeof(section), "%.*s", (int)strcspn(line + 3, "]\n") + 1,
				 line + 3);
			continue;
		}
		if (strncmp(line, "| `", 3))
			continue;
		struct doc_row *r = &rows[n++];
		snprintf(r->key, sizeof(r->key), "%s %.*s", section, (int)strcspn(line + 3, "`"),
			 line + 3);
		const char *cell = strchr(line + 1, '|') + 1;
		cell += strspn(cell, " ");
		r->prose = cell[0] != '`';
		if (r->prose)
			snprintf(r->dflt, sizeof(r->dflt), "%.*s", (int)strcspn(cell, "|"), cell);
		else
			snprintf(r->dflt, sizeof(r->dflt), "%.*s", (int)strcspn(cell + 1, "`"),
				 cell + 1);
	}
	return n;
}

/* The doc's default for k means what the table's does: the same bytes once parsed; "(empty)"
 * or "(none)" for an empty default; other prose for none the file can spell (NULL). */
static void check_doc_default(const struct config_key *k, const struct doc_row *r)
{
	static struct labd_config a, b;

	if (r->prose) {
		bool empty = !strncmp(r->dflt, "(empty)", 7) || !strncmp(r->dflt, "(none)", 6);
		if (empty ? !k->dflt || k->dflt[0] : k->dflt != NULL)
			fail_msg("docs/config.md: %s default \"%s\", the table's \"%s\"", r->key,
				 r->dflt, k->dflt ? k->dflt : "(NULL)");
		return;
	}
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	if (!k->dflt || config_kind_apply(&a, k, r->dflt) || config_kind_apply(&b, k, k->dflt) ||
	    memcmp(&a, &b, sizeof(a)))
		fail_msg("docs/config.md: %s default `%s`, the table's \"%s\"", r->key, r->dflt,
			 k->dflt ? k->dflt : "(NULL)");
}

/* docs/config.md names every key in a row "| `name` | default |" under its section's
 * heading ("## [jobs]" or "## [jobs] profiling rules ..."), with the table's default.
 * Unit tests run from the repository root (tests/run.sh), as test_deploy_example_loads
 * reads deploy/labd.ini. */
static void test_docs_name_every_key(void **state)
{
	static struct doc_row rows[512];
	size_t n_rows, n;
	const struct config_key *keys = config_keys(&n);
	FILE *f = fopen("docs/config.md", "re");
	(void)state;
	if (!f)
		fail_msg("docs/config.md: %s (run from the repository root)", strerror(errno));
	n_rows = read_doc_rows(f, rows, 512);
	fclose(f);
	for (size_t i = 0; i < n; i++) {
		char want[128];
		const struct doc_row *found = NULL;
		snprintf(want, sizeof(want), "[%s] %s", keys[i].section, keys[i].name);
		for (size_t r = 0; r < n_rows && !found; r++)
			if (strcmp(rows[r].key, want) == 0)
				found = &rows[r];
		if (!found)
			fail_msg("docs/config.md names no key %s", want);
		else
			check_doc_default(&keys[i], found);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_runtime_default_above_machine_cap),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_key_defaults_within_bounds),
		cmocka_unit_test(test_docs_name_every_key),
		cmocka_unit_test(test_jupyter_env),
		cmocka_unit_test(test_images),
		cmocka_unit_test(test_load_values),
		cmocka_unit_test(test_unknown_key_names_file_line_key),
		cmocka_unit_test(test_bad_values),
		cmocka_unit_test(test_runtime_keys),
		cmocka_unit_test(test_quota_keys),
		cmocka_unit_test(test_jobs_rules_keys),
		cmocka_unit_test(test_jobs_keys),
		cmocka_unit_test(test_network_keys),
		cmocka_unit_test(test_gpu_keys),
		cmocka_unit_test(test_gpu_share_keys),
		cmocka_unit_test(test_origin_keys),
		cmocka_unit_test(test_backend_keys),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_value_syntax),
		cmocka_unit_test(test_deploy_example_loads),
		cmocka_unit_test(test_split_listen),
		cmocka_unit_test(test_trusted_proxies),
		cmocka_unit_test(test_forwarded_client),
	};
	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
