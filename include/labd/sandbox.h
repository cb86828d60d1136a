/* sandbox.h - start, watch and tear down one user's sandbox (docs/sandbox.md).
 *
 * The supervisor (root) fills a struct sandbox_spec, calls sandbox_start() and receives a
 * struct sandbox_handle back.  Everything the sandbox holds on the host (cgroups, the
 * home mount reference, the per-sandbox run dir) is recorded in a state file under
 * spec->state_dir, so a restarted supervisor can re-adopt it (sandbox_adopt) and
 * sandbox_gc() can clean what a crash left.
 *
 * Threading: sandbox_start() forks; call it from a single-threaded supervisor (or
 * accept that the child only uses what it was given).  Nothing here is thread-safe.
 */
#ifndef LABD_SANDBOX_H
#define LABD_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define SANDBOX_MAX_GPUS 16
#define SANDBOX_MAX_MASKS 32
#define SANDBOX_MAX_HIDDEN 16
#define SANDBOX_MAX_RO_BINDS 4
#define SANDBOX_MAX_BINDS 8
#define SANDBOX_ID_MAX 64
#define SANDBOX_PATH_MAX 4096
/* where spec.driver_lib_dir is seen inside */
#define SANDBOX_DRIVER_LIB_INSIDE "/run/nvidia/lib"
#define SANDBOX_STEP_MAX 32
#define SANDBOX_MESSAGE_MAX 768
#define SANDBOX_FD_NULL (-1) /* a stdio slot that gets /dev/null */

/* A host directory bound at another path inside (docs/sandbox.md, "Binds"). */
struct sandbox_bind {
	const char *src; /* host directory (not followed if it is a symlink); may lie in state_dir */
	const char *dst; /* inside path; may lie under a hidden place (/opt), where its mount
			  * point is made in the scaffold tmpfs; else it must exist in the image */
	bool ro;         /* read-only inside; always nosuid, nodev */
};

enum sandbox_net {
	SANDBOX_NET_NONE,   /* own network namespace with loopback only */
	SANDBOX_NET_EGRESS, /* outbound through pasta, filtered by root's nftables rules */
};

/* How an egress sandbox's packets leave (docs/sandbox.md, "Network"): through pasta, a
 * user-space process, or through a veth pair to the host, forwarded and masqueraded by
 * root's nftables rules in the host's namespace. */
#define SANDBOX_VETH_RANGE_DEFAULT "10.254.0.0/16"
enum sandbox_net_path {
	SANDBOX_NET_PASTA,
	SANDBOX_NET_VETH,
};

/* Denied to SANDBOX_NET_EGRESS besides what always is (loopback, link-local, every
 * host address): the private ranges. */
#define SANDBOX_NET_DENY_DEFAULT "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7"

/* What to run and under which limits.  Every pointer and fd is borrowed: it must stay
 * valid until sandbox_start() returns; the library copies (or dups) what it keeps.
 * Start from sandbox_spec_init(): zero / NULL fields take the defaults it documents,
 * except the stdio fds, where 0 is a real descriptor. */
struct sandbox_spec {
	const char *user;   /* lab user name: hostname, /home/<user>, USER; [a-z_][a-z0-9_-]* */
	uint32_t user_id;   /* lab user id; the host uid/gid is uid_base + user_id */
	uint32_t uid_base;  /* first host uid of the lab's range (default 200000) */
	uint32_t inner_uid; /* uid/gid inside the sandbox (default 1000) */

	const char *home_image; /* sparse ext4 image, created on first use; NULL: no home */
	uint64_t home_size_bytes; /* for creation (default 15 GiB) */
	bool home_mmp; /* give the image ext4 multiple-mount protection (shared homes) */

	uint64_t mem_bytes;  /* memory limit, 0 = none */
	uint32_t cpu_milli;  /* CPU quota in thousandths of a CPU (2000 = 2 CPUs), 0 = none */
	uint32_t pids_max;   /* pids limit, 0 = none */
	uint64_t tmp_bytes;  /* /tmp tmpfs size (default 1 GiB) */
	uint64_t shm_bytes;  /* /dev/shm tmpfs size (default: mem_bytes / 2, or 1 GiB) */
	uint32_t io_weight;  /* 1..10000 (v2 io.weight scale); 0 = leave; v1 maps to 10..1000 */
	uint64_t io_write_bytes_per_s; /* on the home's loop device, 0 = none */
	uint64_t nofile;     /* RLIMIT_NOFILE (default 4096) */

	enum sandbox_net net;
	/* SANDBOX_NET_EGRESS only (docs/sandbox.md, "Network"): */
	const char *net_deny;        /* CIDRs denied besides the built-in set, comma-separated
				      * (default SANDBOX_NET_DENY_DEFAULT; "" = none more) */
	const char *net_dns;         /* resolver pasta forwards DNS to; NULL/"" = the host's */
	uint64_t egress_bytes_per_s; /* each direction, 0 = no limit */
	uint32_t max_connections;    /* concurrent connections, 0 = no bound */
	const char *pasta_path;      /* default "/usr/bin/pasta" */
	const char *nft_path;        /* default "/usr/sbin/nft" */
	enum sandbox_net_path net_path; /* default SANDBOX_NET_PASTA */
	const char *veth_range;      /* SANDBOX_NET_VETH: IPv4 network of the sandboxes' /30s
				      * (default SANDBOX_VETH_RANGE_DEFAULT) */
	/* The peer interface (docs/sandbox.md, "Network"), with either net: "peer0", an
	 * ipvlan (L2) slave of the host interface that holds the address peer_via, with
	 * address peer_addr and that interface's prefix length; root's rules inside let
	 * only the peers (comma-separated IPv4, sandbox_peers_check) through it, both
	 * ways.  All three NULL: no peer interface. */
	const char *peer_addr;
	const char *peers;
	const char *peer_via;
	/* No home image: /home/<user> is an empty tmpfs owned by the user (at most
	 * mem_bytes, else home_size_bytes), which ends with the sandbox. */
	bool scratch_home;
	/* GPU device ids (labd/gpudev.h) to pass through: a whole card or a share gets
	 * its /dev/nvidiaN; a MIG instance its card's node and the cap nodes of its GPU
	 * and compute instance, read from caps_dir (labd/gpucaps.h); each with nvidiactl and
	 * nvidia-uvm, and the device cgroup allows exactly those nodes */
	unsigned gpus[SANDBOX_MAX_GPUS];
	unsigned n_gpus;
	/* parallel to gpus: each device's uuid ("MIG-…", "GPU-…"), set for all or none;
	 * when set, CUDA_VISIBLE_DEVICES names them (else it counts 0..n-1) */
	const char *gpu_uuids[SANDBOX_MAX_GPUS];
	const char *dev_prefix;     /* where the nvidia nodes live (default "/dev") */
	const char *caps_dir;       /* the driver's MIG capability files (default
				     * "/proc/driver/nvidia/capabilities") */
	const char *caps_dev_dir;   /* where the nvidia-cap<N> nodes are (NULL: "<dev_prefix>/
				     * nvidia-caps"); bound inside at /dev/nvidia-caps */
	const char *driver_lib_dir; /* host dir of libcuda/libnvidia-*, bound read-only at
				     * SANDBOX_DRIVER_LIB_INSIDE and on LD_LIBRARY_PATH */

	const char *image;    /* root filesystem, bound read-only (default "/") */
	const char *run_dir;  /* host dir bound at /run/labd; created, removed at destroy */
	const char *state_dir; /* supervisor state (default "/var/lib/labd"), masked inside */
	const char *cgroup_parent; /* cgroup under each hierarchy (default "labd") */
	const char *masks[SANDBOX_MAX_MASKS]; /* extra host paths hidden inside */
	unsigned n_masks;
	/* World-readable host places hidden inside like masks; sandbox_spec_init() fills
	 * sandbox_default_hidden (/var/tmp /srv /opt /mnt /media): a caller that needs one
	 * of them (a runtime's venv under /opt) replaces the list. */
	const char *hidden[SANDBOX_MAX_HIDDEN];
	unsigned n_hidden;
	/* Host directories bound read-only (nosuid, nodev) at the same path inside, even
	 * below a hidden or masked place: a runtime's Python environment under /opt stays
	 * usable while the rest of /opt stays out of sight.  Never "/" nor under state_dir. */
	const char *ro_binds[SANDBOX_MAX_RO_BINDS];
	unsigned n_ro_binds;
	/* Host directories at another path inside (the job agent's dir at /opt/labd/libexec,
	 * a pool's layout at /opt/ml), read-only or not.  dst is never "/" nor in state_dir. */
	struct sandbox_bind binds[SANDBOX_MAX_BINDS];
	unsigned n_binds;

	char *const *argv; /* command run inside; argv[0] is looked up in the sandbox PATH */
	char *const *envp; /* extra "K=V" entries added to the clean environment, or NULL;
			    * a PATH here replaces the default PATH */
	const char *cwd;   /* inside; default the home, else "/" */
	/* The command's stdin, stdout and stderr: fds of the caller, dup'ed onto 0, 1, 2 in
	 * the sandbox (O_CLOEXEC on them is fine), or SANDBOX_FD_NULL for /dev/null.  Every
	 * other fd of the caller is closed there.  Default 0, 1, 2: the caller's own. */
	int stdin_fd, stdout_fd, stderr_fd;
	bool die_with_parent; /* SIGKILL the sandbox when the caller dies (labbox run) */
	bool verbose;
};

/* A running (or finished) sandbox.  Owned by the caller; release with
 * sandbox_destroy() (teardown) or sandbox_handle_clear() (forget, keep running). */
struct sandbox_handle {
	char id[SANDBOX_ID_MAX]; /* "<user>-<hex>", names the state file and cgroup */
	pid_t pid;               /* host pid of the sandbox init (pid 1 inside) */
	uint64_t start_time_ticks; /* /proc/<pid>/stat starttime (clock ticks), against pid reuse */
	int status_fd;           /* pipe carrying the command's wait status, or -1 */
	bool is_child;           /* pid is our child (waitpid works) */
	char state_path[SANDBOX_PATH_MAX];
};

enum sandbox_exit_kind {
	SANDBOX_EXITED,   /* code holds the exit status */
	SANDBOX_SIGNALED, /* signal holds the signal number */
	SANDBOX_OOM,      /* killed by the memory cgroup's OOM killer */
	SANDBOX_UNKNOWN,  /* re-adopted sandbox: only "it ended" is known */
};

/* Why sandbox_start_err() failed: the step that broke and what broke in it. */
struct sandbox_error {
	char step[SANDBOX_STEP_MAX];       /* "spec", "home", "cgroups", "mounts", "exec", ... */
	char message[SANDBOX_MESSAGE_MAX]; /* "step home: mkdir /x: No such file or directory" */
};

struct sandbox_result {
	enum sandbox_exit_kind kind;
	int code;
	int signal;
	uint64_t oom_kills; /* OOM kills counted in the sandbox's memory cgroup */
};

/* The default hidden list, NULL-terminated (static). */
extern const char *const sandbox_default_hidden[];

/* Fills defaults: uid_base 200000, inner_uid 1000, home 15 GiB, tmp 1 GiB, nofile 4096,
 * image "/", dev_prefix "/dev", state_dir "/var/lib/labd", cgroup_parent "labd",
 * hidden sandbox_default_hidden, net none (net_deny SANDBOX_NET_DENY_DEFAULT, pasta
 * /usr/bin/pasta, nft /usr/sbin/nft),
 * stdio 0, 1, 2 (the caller's own). */
void sandbox_spec_init(struct sandbox_spec *spec);
/* Checks names, ranges and paths; 0 or -1 with a logged reason. */
int sandbox_spec_check(const struct sandbox_spec *spec);

/* The peer interface's name inside, and the most peers one sandbox may have. */
#define SANDBOX_PEER_IFNAME "peer0"
#define SANDBOX_PEERS_MAX 63
/* Checks a peer set strictly: addr one dotted-quad IPv4 address, peers 1 to
 * SANDBOX_PEERS_MAX of them comma-separated (no blanks), none named twice, addr not
 * among them, none of them 0.0.0.0, loopback, multicast or broadcast.  Pure.  0, or -1
 * with a sentence naming the field ("peer_addr", "peers") in why. */
int sandbox_peers_check(const char *addr, const char *peers, char *why, size_t whylen);

/* Builds and starts the sandbox in named steps (docs/sandbox.md, "Start-up steps"); on
 * success *h is filled and the command runs.  On failure everything taken is released
 * again, "sandbox <id>: step <name>: <what>" is logged, *err (if not NULL) says the same,
 * and -1 is returned.  The command failing to exec is a failure of step "exec". */
int sandbox_start_err(const struct sandbox_spec *spec, struct sandbox_handle *h,
		      struct sandbox_error *err);
/* sandbox_start_err() without the error record (the log line still names the step). */
int sandbox_start(const struct sandbox_spec *spec, struct sandbox_handle *h);
/* Waits for the sandbox to end (blocking) and fills *res.  Does not tear down. */
int sandbox_wait(struct sandbox_handle *h, struct sandbox_result *res);
/* Sends sig to the command (SIGTERM is forwarded by init) or, for SIGKILL, kills the
 * whole sandbox through its cgroup.  0 or -1. */
int sandbox_kill(struct sandbox_handle *h, int sig);
/* Kills what is left, removes cgroups, drops the home reference, removes the run dir
 * and the state file, and clears *h.  Safe on a half-built or already dead sandbox. */
int sandbox_destroy(struct sandbox_handle *h);
/* Closes fds held by *h without touching the sandbox (it keeps running). */
void sandbox_handle_clear(struct sandbox_handle *h);
/* What this host's cgroups lack that the sandbox limits rely on (v1 without pids or
 * memsw, v2 without memory or pids): up to max static sentences in out; the count.
 * The supervisor logs them at start-up and admins see them in /api/v1/health. */
int sandbox_host_warnings(const char **out, int max);
/* Re-adopts a sandbox from its state file by id; -1 when unknown or no longer alive. */
int sandbox_adopt(const char *state_dir, const char *id, struct sandbox_handle *h);
/* Tears down every sandbox in state_dir whose init is gone (or all with all=true), and
 * drops home references no live sandbox holds.  Returns how many were cleaned, or -1. */
int sandbox_gc(const char *state_dir, bool all);
/* sandbox_gc(state_dir, false) for when no starter can be at work (no labd runs on
 * state_dir): a sandbox whose start stopped before its clone goes at once, not
 * after a minute. */
int sandbox_gc_unstarted(const char *state_dir);

/* Veths, host tables and claims of the veth path ([network] path = veth) that gc would
 * remove (their sandbox not running, their state dir gone, or no claim): counted only,
 * for `labd doctor`. */
int sandbox_veth_leftovers(const char *state_dir);

/* For a running sandbox with egress: when its pasta is gone (its "<id>.net" cgroup
 * holds no process), starts a new one for the namespace, which keeps root's rules; on
 * the veth path, when its veth or host table is gone, makes both again (and opens host
 * interfaces that appeared since).  Of the spec only state_dir, cgroup_parent,
 * net_dns, pasta_path, nft_path and die_with_parent are read.  0 when pasta runs (or the sandbox has no egress), 1 after a restart (a
 * warning is logged), -1 when the restart failed (logged).  Call only while the
 * sandbox runs: its teardown kills pasta on purpose. */
int sandbox_net_check(const struct sandbox_spec *s, const struct sandbox_handle *h);

/* A user's home (the image as sandbox_spec names it, mounted under state_dir by
 * user id, or by name by a sandbox of the release before) for the storage quota:
 * *used_bytes (statfs when mounted, else the image's superblock) and whether a
 * sandbox holds it mounted now. 0, -EBUSY when it is not mounted here but a loop
 * device still holds it (a mount copy is being torn down: the superblock on disk
 * may be stale), or -1. */
int sandbox_home_usage(const char *state_dir, uint32_t user_id, const char *user,
		       const char *image, uint64_t *used_bytes, bool *mounted);
/* Grows the home image to size_bytes: online when mounted (LOOP_SET_CAPACITY +
 * resize2fs), offline otherwise; never shrinks. 0 or -1. */
int sandbox_home_grow(const char *state_dir, uint32_t user_id, const char *user,
		      const char *image, uint64_t size_bytes);

/* SIGKILLs each of the n host pids that is a process of the running sandbox h (in its
 * cgroups; never its init), and no other: how many were ended, or -1 when h is gone. */
int sandbox_end_pids(const struct sandbox_handle *h, const pid_t *pids, unsigned n);

/* What a running sandbox has used, from its cgroups (docs/sandbox.md, "Usage").
 * Each field is -1 when this host cannot say (io_wait_us on a pure cgroup v1 host). */
struct sandbox_usage {
	int64_t cpu_usage_us;       /* CPU time of all its processes, cumulative */
	int64_t memory_bytes;       /* memory charged now (page cache included) */
	int64_t memory_limit_bytes; /* its limit, 0 when none */
	int64_t io_wait_us;         /* cumulative time some task waited on I/O (PSI "some") */
	int64_t oom_kills;          /* cumulative OOM kills in its memory cgroup */
};

/* Fills *u (every field -1 first); 0, or -1 when the sandbox's cgroups are gone. */
int sandbox_usage(const struct sandbox_handle *h, struct sandbox_usage *u);

/* Mounts the directory src_fd names (an O_PATH fd on the host the caller resolved
 * safely, e.g. sandbox_home_open_beneath) into the running sandbox at dst, an existing
 * directory inside resolved from the sandbox's root without following any symlink;
 * read-only when ro, always nosuid and nodev.  Stacks on what dst holds.  A forked
 * child enters the sandbox's mount namespace; the caller's namespaces never change.
 * 0, or -1 with *err (step "inject", may be NULL) saying why (also logged). */
int sandbox_inject(const struct sandbox_handle *h, int src_fd, const char *dst, bool ro,
		   struct sandbox_error *err);
/* Detaches the top mount on dst inside the sandbox (umount MNT_DETACH): what an
 * injection put there.  0 or -1 (logged; EINVAL when nothing is mounted there). */
int sandbox_eject(const struct sandbox_handle *h, const char *dst);
/* Opens <rel> in the home of the running sandbox h (mounted under
 * <state_dir>/homes/ where its state file says: by user id) as an
 * O_PATH|O_DIRECTORY fd into *out_fd, every lookup with openat2 RESOLVE_BENEATH |
 * RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV: a symlink in the user's tree never leads
 * out of the home (EXDEV).  rel is home-relative (no leading "/", no "..", <= 1024
 * bytes; "" is the home itself).  With create, missing folders are made (0755, owned
 * by owner:owner, the sandbox user's host uid).  The home must be mounted (h holds
 * it).  0, or -1 with errno and *err (step "home", may be NULL). */
int sandbox_home_open_beneath(const char *state_dir, const struct sandbox_handle *h,
			      const char *rel, bool create, uid_t owner, int *out_fd,
			      struct sandbox_error *err);
/* The host mount point of the home of sandbox h (into buf): for what needs the
 * file system itself (syncfs, statvfs). 0, or -1 with errno (ENOENT: no home). */
int sandbox_home_mount_path(const char *state_dir, const struct sandbox_handle *h, char *buf,
			    size_t len);

#endif
