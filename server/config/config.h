/* config.h - labd's settings: defaults, the INI file (inih), validation.
 * Every key is documented in docs/config.md; keep the two in step. */
#ifndef LABD_CONFIG_H
#define LABD_CONFIG_H

#include <stdbool.h>
#include <sys/socket.h>
#include <stddef.h>
#include <stdint.h>

#include "config/cidr.h"

#define CONFIG_PATH_MAX 512
#define CONFIG_ENV_PATH_MAX 200 /* jupyter_env: <env>/bin/jupyter-notebook fits an argv slot */
#define CONFIG_MAX_WARNINGS 4
#define CONFIG_MAX_GPUS 16
#define CONFIG_MAX_TRUSTED_PROXIES 16
#define CONFIG_MAX_HIDDEN 16
#define CONFIG_MAX_IMAGES 16
#define CONFIG_NET_PATH_AUTO 2 /* [network] path = auto: netpath_settle picks veth or pasta */

/* [gpu] shares: one card handed out as time-sliced shares (gpudev.h), each with a GPU
 * memory budget the web process watches */
struct config_gpu_share {
	unsigned minor, count;
	int64_t memory_bytes;
};

/* [images] NAME = FOLDER (config/images.h) */
struct config_image {
	char name[33];
	char folder[CONFIG_PATH_MAX];
};

struct labd_config {
	/* [server] */
	char listen[128];
	char state_dir[CONFIG_PATH_MAX];
	char web_root[CONFIG_PATH_MAX];
	char user[64];
	bool secure_cookies;
	unsigned threads;
	unsigned max_connections;
	unsigned connection_timeout_s;
	size_t max_body_bytes;
	char log_level[16];
	/* peers whose X-Forwarded-For names the client (a front proxy) */
	struct cidr trusted_proxies[CONFIG_MAX_TRUSTED_PROXIES];
	unsigned n_trusted_proxies;
	/* client limits that hold before and around authentication */
	unsigned max_connections_per_address; /* 0 = no cap */
	int64_t request_header_timeout_s;     /* a whole request head, from connect or last reply */
	int64_t request_body_timeout_s;       /* a whole buffered body, from its head */
	size_t max_unauthenticated_body_bytes;
	/* per_user: each user's runtime on <user>.<user_domain> (true); path: all
	 * runtimes under /user/<name>/ on labd's own origin (an opt-out) */
	bool origin_per_user;
	char user_domain[128]; /* lowercase DNS name of user origins */
	/* labd's UI origin ("https://lab.example.org"), where a user origin sends a
	 * browser without its cookie; "" = http[s]://<user_domain>[:port] */
	char ui_origin[160];
	/* [auth] */
	unsigned min_password_length;
	int64_t session_idle_s;
	int64_t session_lifetime_s;
	unsigned backoff_after;
	int64_t backoff_base_s;
	int64_t backoff_max_s;
	int64_t address_backoff_max_s; /* cap of the per-address delay */
	unsigned alert_after;          /* failures (per name or address) that raise an alert */
	int64_t failure_window_s;      /* failures older than this are forgotten */
	unsigned hash_concurrency;     /* password hashes at once; 0 = CPUs - 1 */
	uint64_t scrypt_n;
	unsigned scrypt_r;
	unsigned scrypt_p;
	/* [proxy] */
	int64_t upstream_connect_timeout_s;
	int64_t upstream_header_timeout_s; /* request sent -> response head */
	int64_t upstream_idle_timeout_s;   /* no byte either way while a body moves */
	unsigned max_requests_per_user;    /* proxied requests in flight */
	unsigned max_websockets_per_user;
	int64_t websocket_idle_timeout_s;  /* no byte either way, pings included */
	int64_t token_reauth_s; /* a login this recent may create a token without the password */
	int64_t token_max_lifetime_s; /* longest expires_in_s, and the default; -1 = none */
	/* [runtime] */
	int64_t cpu_limit_s;     /* how long a CPU runtime may run */
	int64_t gpu_limit_s;     /* how long a GPU runtime may run */
	int64_t idle_timeout_s;  /* without activity before culling; 0 = never */
	int64_t stop_grace_s;    /* between asking Jupyter to stop and killing */
	int64_t start_timeout_s; /* for Jupyter's socket to answer */
	int64_t warn_before_s[CONFIG_MAX_WARNINGS]; /* lead times, descending */
	unsigned n_warn_before;
	char jupyter[16]; /* auto, lab, notebook or server */
	/* labd's JupyterLab venv, bound read-only into sandboxes at the same path and
	 * preferred for the Jupyter command; "" = none (the image's own jupyter) */
	char jupyter_env[CONFIG_ENV_PATH_MAX];
	char image[CONFIG_PATH_MAX];
	unsigned uid_base;               /* 0 = auto until uidmap_settle_base fixes it */
	unsigned uid_count;              /* host uids uid_base .. uid_base + uid_count - 1 */
	char subuid_file[CONFIG_PATH_MAX]; /* ranges given to other accounts, refused */
	char subgid_file[CONFIG_PATH_MAX]; /* the same for gids: auto stays above them */
	char deleted_home[8];            /* archive or remove */
	int64_t archive_retention_s;     /* archived homes older than this are removed */
	int64_t course_notice_s;         /* the dashboard announces a course's end this early */
	int64_t course_retention_s;      /* a course's disabled accounts go this long after; -1 = kept */
	uint64_t home_size_bytes, memory_bytes, tmp_bytes;
	unsigned cpus_milli, pids;
	/* machine caps on what a plan may give one runtime, checked by root;
	 * 0 = the host's memory / online CPUs */
	uint64_t memory_max_bytes, home_size_max_bytes;
	unsigned cpus_max_milli;
	/* live sandboxes (runtimes and job pools, warm included) on the host at once;
	 * 0 = derived from its memory (capacity.h) */
	unsigned max_sandboxes;
	bool admin_access;
	bool keep_on_shutdown; /* runtimes outlive labd's stop and are re-adopted */
	uint64_t log_bytes;    /* Jupyter's log file cap; one rotated copy is kept */
	char hidden_paths[CONFIG_PATH_MAX]; /* host places hidden in sandboxes, comma-separated */
	/* [quota]: the default plan's limits beyond [runtime]'s (cpu_limit,
	 * gpu_limit, home_size, memory, cpus); -1 = none */
	int64_t quota_cpu_s_per_24h, quota_cpu_s_per_7d;
	int64_t quota_gpu_s_per_24h, quota_gpu_s_per_7d;
	unsigned quota_gpus_per_runtime;
	unsigned quota_concurrent_jobs;
	int64_t quota_job_max_runtime_s;
	unsigned quota_network;           /* 0 none, 1 egress */
	int64_t quota_egress_bytes_per_s; /* each way; -1 = none */
	unsigned quota_gpus_held;         /* GPUs one user holds at once across holders */
	int64_t quota_job_storage_bytes;  /* a user's kept job data; -1 = none */
	/* [network]: what an egress runtime may not reach, and its tools */
	char net_deny[1024];          /* CIDRs besides loopback, link-local, host addresses */
	unsigned net_max_connections; /* concurrent per runtime, 0 = no bound */
	char net_pasta[CONFIG_PATH_MAX];
	char net_nft[CONFIG_PATH_MAX];
	char net_dns[64];             /* resolver pasta forwards to; "" = the host's */
	unsigned net_path;            /* enum sandbox_net_path: pasta or veth, or
				       * CONFIG_NET_PATH_AUTO until netpath_settle */
	char net_path_why[200];       /* netpath_settle: the path's reason, for the log,
				       * the doctor and admins' /api/v1/health */
	char net_veth_range[32];      /* veth: the sandboxes' addresses, one /30 each */
	/* [storage]: where home images live ("" = <state_dir>/homes; a shared folder on
	 * the nodes of a cluster) and whether they carry ext4 multiple-mount protection */
	char home_images[CONFIG_PATH_MAX];
	bool home_mmp;
	/* [gpu]: the inventory (gpu_devices) is final after config_load: the listed
	 * devices, the nvidia<N> nodes under dev_prefix (devices = auto), or
	 * 0..stand_in-1 (stand-ins: no device node, for tests and demos) */
	unsigned gpu_devices[CONFIG_MAX_GPUS];
	unsigned n_gpu_devices;
	bool gpu_devices_auto;
	unsigned gpu_stand_in;
	char dev_prefix[CONFIG_PATH_MAX];
	/* cards shared by time-slicing, each in the inventory, minors distinct */
	struct config_gpu_share gpu_shares[CONFIG_MAX_GPUS];
	unsigned n_gpu_shares;
	/* where root reads the MIG instances that exist (<caps_dir>/gpu<M>/mig/gi<G>/access,
	 * .../gi<G>/ci<C>/access: "DeviceFileMinor: <n>") and where the nvidia-cap<n> nodes
	 * are ("" in the file = <dev_prefix>/nvidia-caps, filled by config_load) */
	char gpu_caps_dir[CONFIG_PATH_MAX];
	char gpu_caps_dev_dir[CONFIG_PATH_MAX];
	int64_t gpu_share_grace_s; /* how long a share may stay over its memory budget */
	/* host dir of libcuda/libnvidia-*, bound at /run/nvidia/lib for GPU runtimes on an
	 * [images] image (the host's root has them in place); "" = none */
	char driver_lib_dir[CONFIG_PATH_MAX];
	char nvml_library[CONFIG_PATH_MAX]; /* dlopen'ed by the web process when present */
	int64_t gpu_refresh_s;              /* between NVML readings */
	int64_t gpu_queue_max_wait_s;       /* a queued GPU start fails after this */
	/* [jobs]: training jobs (docs/jobs.md) */
	int64_t jobs_keep_alive_max_s;    /* cap of a job's keep_alive_s (its warm pool) */
	int64_t jobs_grace_s;             /* default stop grace: SIGTERM, then SIGKILL */
	uint64_t jobs_log_max_bytes;      /* a job's log is cut here (one marker line) */
	int64_t jobs_sample_interval_ms;  /* job_sample while a job trains */
	unsigned jobs_max_pools_per_user; /* job sandboxes one user may hold at once */
	int64_t jobs_max_wait_default_s;  /* a job's max_wait_s when it names none */
	int64_t jobs_retention_s;         /* ended jobs older than this go; -1 = kept */
	unsigned jobs_max_kept_per_user;  /* a user's ended jobs beyond the newest this many go */
	int64_t jobs_retention_sweep_s;   /* between retention sweeps */
	/* [images]: runtime images a plan may name (config/images.h) */
	struct config_image images[CONFIG_MAX_IMAGES];
	unsigned n_images;
	/* [oidc]: single sign-on (docs/auth.md "Single sign-on"); issuer "" = off */
	char oidc_issuer[256];
	char oidc_name[64];                         /* "Sign in with <name>" */
	char oidc_client_id[256];
	char oidc_client_secret[256];
	char oidc_client_secret_file[CONFIG_PATH_MAX]; /* read as root at start */
	char oidc_scopes[256];                      /* space-separated, "openid" first */
	char oidc_username_claim[64];
	char oidc_groups_claim[64];                 /* "" = groups not read */
	bool oidc_provision;                        /* create the user on first sign-in */
	char oidc_allowed_domains[512];             /* comma-separated e-mail domains; "" = any */
	char oidc_allowed_groups[1024];             /* comma-separated groups; "" = any */
	int64_t oidc_timeout_s;                     /* each back-channel call, all in */
	int64_t oidc_clock_skew_s;                  /* tolerated on exp and iat */
	int64_t oidc_keys_refetch_s;                /* an unknown key id refetches at most this often */
	int64_t oidc_cache_s;                       /* discovery and keys are fetched again after */
	/* [node]: this labd as a Slurm compute node (`labd node`, docs/slurm.md "Nodes") */
	char node_name[65];                     /* its PSK identity and Slurm node name */
	char node_head[256];                    /* HOST:PORT of the head's link listener */
	char node_secret_file[CONFIG_PATH_MAX]; /* the link's shared secret, read as root */
	char node_data_listen[128];             /* ADDRESS:PORT of the data port */
	unsigned node_data_max_connections;
	char node_cgroup_parent[72];            /* the sandboxes' cgroups; "" = labd-<name> */
	/* [metrics] */
	char scrape_token_file[CONFIG_PATH_MAX]; /* bearer token for GET /metrics; "" = none */
	/* [jobs] rules_*: the profiling rules' thresholds (docs/jobs.md "Profiling rules") */
	int64_t jobs_rules_interval_s;    /* between evaluations of a running job */
	unsigned jobs_rules_min_samples;  /* the sample rules wait for this many */
	int64_t jobs_rules_warmup_s;      /* each run's start the steady-state rules skip */
	unsigned jobs_rules_gpu_low_p95_percent, jobs_rules_gpu_low_p5_percent;
	unsigned jobs_rules_cpu_high_percent, jobs_rules_gpu_idle_percent;
	unsigned jobs_rules_io_wait_percent;
	unsigned jobs_rules_gpu_memory_increase_percent;
	char jobs_rules_step_metric[256]; /* the metric StepOutlier reads */
	unsigned jobs_rules_step_stddev;
	unsigned jobs_rules_memory_near_percent;
	int64_t jobs_rules_init_s, jobs_rules_quiet_s;
	/* [webhooks]: a user's notifications (docs/jobs.md "Notifications") */
	unsigned webhooks_max_per_user;
	unsigned webhooks_attempts;         /* a delivery's tries before it fails */
	int64_t webhooks_retry_base_ms;     /* the first retry's wait; doubled each time */
	int64_t webhooks_timeout_s;         /* one attempt, connect to answer */
	unsigned webhooks_quota_low_percent; /* quota.low past this share of a window */
	/* [backend]: what runs the sandboxes (docs/slurm.md) */
	char backend_kind[8]; /* local or slurm */
	/* [slurm]: the Slurm backend (backend/slurm.c) */
	char slurm_listen[128];                   /* the node links' listener, ADDRESS:PORT */
	char slurm_secret_file[CONFIG_PATH_MAX];  /* the links' shared secret */
	int64_t slurm_poll_interval_ms;           /* one squeue per this */
	int64_t slurm_time_grace_s;               /* Slurm's --time beyond labd's deadline */
	int64_t slurm_timeout_s;                  /* one call of a Slurm tool */
	char slurm_partition[64];                 /* "" = Slurm's default partition */
	unsigned slurm_max_instances;             /* a job's largest instance_count */
	char slurm_job_addresses[48];             /* CIDR the hosts' peer addresses come from */
	char slurm_sbatch[CONFIG_PATH_MAX], slurm_squeue[CONFIG_PATH_MAX];
	char slurm_scontrol[CONFIG_PATH_MAX], slurm_scancel[CONFIG_PATH_MAX];
	/* the secret's bytes, read as root at start (main.c: [node] or [slurm]
	 * secret_file) and inherited by the forked web or link process; not a key */
	unsigned char link_secret[512];
	size_t link_secret_len;
	/* running as `labd node` (node_prepare sets it): a pool start may carry a peer
	 * network and a scratch home; not a key */
	bool node_mode;
};

/* Fills *cfg with the defaults; demo = the `labd --demo` defaults (./var, ./web). */
void config_defaults(struct labd_config *cfg, bool demo);
/* Applies the INI file at path on top of *cfg: 0, or a negative errno (-EINVAL for a bad
 * key or value) with "FILE:LINE: message naming the key" written into err. */
int config_load(struct labd_config *cfg, const char *path, char *err, size_t errlen);
/* Splits "127.0.0.1:8080" / "[::1]:8080" into host and port; -EINVAL when malformed. */
int config_split_listen(const char *listen, char *host, size_t hostlen, unsigned *port);
/* The socket address of a numeric listen address ("127.0.0.1:8080", "[::1]:8080") into
 * *ss and *len: 0, -EINVAL when malformed, -EAFNOSUPPORT when the host is no numeric IP
 * address. */
/* An IPv4 network "A.B.C.D/P" (P from CONFIG_CIDR4_PREFIX_MIN to 30; host bits ignored):
 * its first host address (host order) and how many host addresses it has (without
 * the network's and the broadcast address). 0 or -EINVAL. */
#define CONFIG_CIDR4_PREFIX_MIN 20
int config_cidr4(const char *cidr, uint32_t *first, unsigned *count);
int config_listen_sockaddr(const char *listen, struct sockaddr_storage *ss, socklen_t *len);
/* Whether GPU minor is in the inventory (gpu_devices). */
bool config_has_gpu(const struct labd_config *cfg, unsigned minor);
/* The [gpu] shares entry of card minor, or NULL: the card is not shared. */
const struct config_gpu_share *config_gpu_share(const struct labd_config *cfg, unsigned minor);

#endif
