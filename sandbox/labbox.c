/* labbox.c - run one command in a labd sandbox, alone (like bwrap or nsjail).
 *
 *   labbox run --user NAME --user-id N [options] -- CMD [ARGS...]
 *   labbox gc [--state-dir DIR] [--all]
 *   labbox home create|grow|usage|fsck --user NAME --home-image IMG [--size SIZE] [--uid-base B --user-id N]
 *
 * A thin wrapper over include/labd/sandbox.h and home.h; see docs/sandbox.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox/home.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "labd/sandbox.h"
#include "sandbox/parse.h"
#include "sandbox/timing.h"

#define MAX_ENV 48

static void usage(FILE *f)
{
	fputs("usage: labbox run --user NAME --user-id N [options] -- CMD [ARGS...]\n"
	      "       labbox gc [--state-dir DIR] [--all]\n"
	      "       labbox home create|grow|usage|fsck --user NAME --home-image IMG [--size SIZE]\n"
	      "run options:\n"
	      "  --uid-base N       first host uid of the lab range (200000)\n"
	      "  --inner-uid N      uid inside (1000)\n"
	      "  --home-image PATH  ext4 home image, created on first use\n"
	      "  --home-size SIZE   size when created (15G)\n"
	      "  --mem SIZE --cpus N --pids N --tmp SIZE --shm SIZE --nofile N\n"
	      "  --io-weight N --io-wbps SIZE\n"
	      "  --net none|egress  network (none)\n"
	      "  --net-deny CIDRS   egress: also deny these (default: the private ranges)\n"
	      "  --dns ADDR         egress: resolver pasta forwards DNS to (the host's)\n"
	      "  --pasta PATH       egress: the pasta program (/usr/bin/pasta; [network] pasta)\n"
	      "  --net-path pasta|veth  egress: pasta, or a veth pair NATed by the host (pasta)\n"
	      "  --veth-range CIDR  egress on veth: the sandboxes' addresses (10.254.0.0/16)\n"
	      "  --egress-rate SIZE egress: bytes per second each way (no limit)\n"
	      "  --max-connections N  egress: concurrent connections (no bound)\n"
	      "  --peer-addr ADDR   the peer interface peer0 (any net): its IPv4 address\n"
	      "  --peers LIST       the only addresses peer0 reaches and hears (a,b,c)\n"
	      "  --peer-via ADDR    peer0's parent: the host interface holding ADDR\n"
	      "  --scratch-home     /home/USER an empty tmpfs that ends with the sandbox\n"
	      "  --gpu LIST         GPU devices: cards 0 or 1,3, a MIG instance 0/gi1/ci0, a share 0/share1\n"
	      "  --gpu-uuid LIST    their uuids (MIG-..., GPU-...), one each: CUDA_VISIBLE_DEVICES\n"
	      "  --dev-prefix DIR   where nvidia device nodes are (/dev)\n"
	      "  --caps-dir DIR     the driver's MIG capability files (/proc/driver/nvidia/capabilities)\n"
	      "  --caps-dev-dir DIR where the nvidia-cap<N> nodes are (DEV-PREFIX/nvidia-caps)\n"
	      "  --driver-lib-dir DIR  host driver libraries, read-only at /run/nvidia/lib, on LD_LIBRARY_PATH\n"
	      "  --image DIR        root file system (/), bound read-only\n"
	      "  --run-dir DIR      host dir bound at /run/labd\n"
	      "  --state-dir DIR    labd state (/var/lib/labd)\n"
	      "  --cgroup-parent N  cgroup under each hierarchy (labd)\n"
	      "  --mask PATH        also hide PATH (repeatable)\n"
	      "  --show PATH        do not hide PATH, one of /var/tmp /srv /opt /mnt /media\n"
	      "  --ro-bind DIR      bind host DIR read-only at DIR, even under a hidden place\n"
	      "  --bind SRC:DST[:ro]  bind host dir SRC at DST inside (read-only with :ro)\n"
	      "  --env K=V          add to the environment (repeatable)\n"
	      "  --cwd DIR          working directory inside\n"
	      "  --stdin FILE       the command's stdin (default labbox's; /dev/null works too)\n"
	      "  --stdout FILE      the command's stdout, created or truncated (default labbox's)\n"
	      "  --stderr FILE      the command's stderr, likewise\n"
	      "  --keep-with-parent do not kill the sandbox when labbox dies\n"
	      "  --timings          each start step's ms on stderr (= LABD_SANDBOX_TIMINGS=1)\n"
	      "  -v, --verbose\n"
	      "exit status: the command's, 128+N for signal N, 137 with a message for OOM\n",
	      f);
}

/* init forwards SIGTERM/SIGINT/SIGHUP to the command (async-signal-safe kill) */
static volatile pid_t sandbox_pid;
static void on_signal(int sig)
{
	if (sandbox_pid > 0)
		kill(sandbox_pid, sig);
}

static int bad(const char *opt, const char *val)
{
	log_error("invalid value for --%s: %s", opt, val);
	return 2;
}

enum {
	O_USER = 256, O_USER_ID, O_UID_BASE, O_INNER_UID, O_HOME_IMAGE, O_HOME_SIZE, O_MEM, O_CPUS,
	O_PIDS, O_TMP, O_SHM, O_NOFILE, O_IO_WEIGHT, O_IO_WBPS, O_NET, O_GPU, O_DEV_PREFIX, O_DRIVER,
	O_IMAGE, O_RUN_DIR, O_STATE_DIR, O_CGROUP_PARENT, O_MASK, O_SHOW, O_ENV, O_CWD, O_KEEP, O_ALL, O_SIZE,
	O_STDIN, O_STDOUT, O_STDERR, O_RO_BIND, O_BIND, O_NET_DENY, O_DNS, O_PASTA, O_NET_PATH, O_VETH_RANGE, O_EGRESS_RATE, O_MAX_CONN,
	O_TIMINGS, O_GPU_UUID, O_CAPS_DIR, O_CAPS_DEV_DIR, O_PEER_ADDR, O_PEERS, O_PEER_VIA,
	O_SCRATCH_HOME,
};

static const struct option opts[] = {
	{"user", required_argument, NULL, O_USER},
	{"user-id", required_argument, NULL, O_USER_ID},
	{"uid-base", required_argument, NULL, O_UID_BASE},
	{"inner-uid", required_argument, NULL, O_INNER_UID},
	{"home-image", required_argument, NULL, O_HOME_IMAGE},
	{"home-size", required_argument, NULL, O_HOME_SIZE},
	{"mem", required_argument, NULL, O_MEM},
	{"cpus", required_argument, NULL, O_CPUS},
	{"pids", required_argument, NULL, O_PIDS},
	{"tmp", required_argument, NULL, O_TMP},
	{"shm", required_argument, NULL, O_SHM},
	{"nofile", required_argument, NULL, O_NOFILE},
	{"io-weight", required_argument, NULL, O_IO_WEIGHT},
	{"io-wbps", required_argument, NULL, O_IO_WBPS},
	{"net", required_argument, NULL, O_NET},
	{"net-deny", required_argument, NULL, O_NET_DENY},
	{"dns", required_argument, NULL, O_DNS},
	{"pasta", required_argument, NULL, O_PASTA},
	{"net-path", required_argument, NULL, O_NET_PATH},
	{"veth-range", required_argument, NULL, O_VETH_RANGE},
	{"egress-rate", required_argument, NULL, O_EGRESS_RATE},
	{"max-connections", required_argument, NULL, O_MAX_CONN},
	{"peer-addr", required_argument, NULL, O_PEER_ADDR},
	{"peers", required_argument, NULL, O_PEERS},
	{"peer-via", required_argument, NULL, O_PEER_VIA},
	{"scratch-home", no_argument, NULL, O_SCRATCH_HOME},
	{"gpu", required_argument, NULL, O_GPU},
	{"dev-prefix", required_argument, NULL, O_DEV_PREFIX},
	{"gpu-uuid", required_argument, NULL, O_GPU_UUID},
	{"caps-dir", required_argument, NULL, O_CAPS_DIR},
	{"caps-dev-dir", required_argument, NULL, O_CAPS_DEV_DIR},
	{"driver-lib-dir", required_argument, NULL, O_DRIVER},
	{"image", required_argument, NULL, O_IMAGE},
	{"run-dir", required_argument, NULL, O_RUN_DIR},
	{"state-dir", required_argument, NULL, O_STATE_DIR},
	{"cgroup-parent", required_argument, NULL, O_CGROUP_PARENT},
	{"mask", required_argument, NULL, O_MASK},
	{"show", required_argument, NULL, O_SHOW},
	{"ro-bind", required_argument, NULL, O_RO_BIND},
	{"bind", required_argument, NULL, O_BIND},
	{"env", required_argument, NULL, O_ENV},
	{"cwd", required_argument, NULL, O_CWD},
	{"stdin", required_argument, NULL, O_STDIN},
	{"stdout", required_argument, NULL, O_STDOUT},
	{"stderr", required_argument, NULL, O_STDERR},
	{"keep-with-parent", no_argument, NULL, O_KEEP},
	{"timings", no_argument, NULL, O_TIMINGS},
	{"all", no_argument, NULL, O_ALL},
	{"size", required_argument, NULL, O_SIZE},
	{"verbose", no_argument, NULL, 'v'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

struct cli {
	struct sandbox_spec spec;
	char *env[MAX_ENV + 1];
	unsigned n_env;
	bool all, have_user_id;
	uint64_t size_bytes;
};

/* Opens FILE for --stdin (read) or --stdout/--stderr (write) into *fd, as the shell's
 * < and > would; labbox exits soon, so the fd is simply left open until then. */
/* --bind SRC:DST[:ro], split in place (the paths are checked by the spec). */
static int parse_bind(char *arg, struct sandbox_bind *b)
{
	char *dst = strchr(arg, ':'), *mode;

	if (!dst)
		return -1;
	*dst++ = '\0';
	mode = strchr(dst, ':');
	if (mode) {
		*mode++ = '\0';
		if (strcmp(mode, "ro") != 0)
			return -1;
	}
	*b = (struct sandbox_bind){arg, dst, mode != NULL};
	return 0;
}

/* --show PATH: takes PATH off the hidden list; -1 when it is not on it. */
static int show(struct sandbox_spec *s, const char *path)
{
	for (unsigned i = 0; i < s->n_hidden; i++)
		if (strcmp(s->hidden[i], path) == 0) {
			s->hidden[i] = s->hidden[--s->n_hidden];
			return 0;
		}
	return -1;
}

static int open_stdio(const char *opt, const char *path, bool out, int *fd)
{
	int flags = out ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY;

	*fd = open(path, flags | O_CLOEXEC | O_NOCTTY, 0644);
	if (*fd < 0) {
		log_errno("--%s %s", opt, path);
		return 2;
	}
	return 0;
}

static int parse(struct cli *c, int argc, char **argv)
{
	struct sandbox_spec *s = &c->spec;
	uint64_t v;
	int o;

	optind = 1;
	while ((o = getopt_long(argc, argv, "+vh", opts, NULL)) != -1) {
		switch (o) {
		case O_USER: s->user = optarg; break;
		case O_USER_ID:
			if (parse_uint(optarg, 0, 0x7fffffff, &v) < 0)
				return bad("user-id", optarg);
			s->user_id = (uint32_t)v;
			c->have_user_id = true;
			break;
		case O_UID_BASE:
			if (parse_uint(optarg, 1, 0x7fffffff, &v) < 0)
				return bad("uid-base", optarg);
			s->uid_base = (uint32_t)v;
			break;
		case O_INNER_UID:
			if (parse_uint(optarg, 1, 65533, &v) < 0)
				return bad("inner-uid", optarg);
			s->inner_uid = (uint32_t)v;
			break;
		case O_HOME_IMAGE: s->home_image = optarg; break;
		case O_HOME_SIZE:
			if (parse_size_bytes(optarg, &s->home_size_bytes) < 0)
				return bad("home-size", optarg);
			break;
		case O_SIZE:
			if (parse_size_bytes(optarg, &c->size_bytes) < 0)
				return bad("size", optarg);
			break;
		case O_MEM:
			if (parse_size_bytes(optarg, &s->mem_bytes) < 0)
				return bad("mem", optarg);
			break;
		case O_CPUS:
			if (parse_cpus_milli(optarg, &s->cpu_milli) < 0)
				return bad("cpus", optarg);
			break;
		case O_PIDS:
			if (parse_uint(optarg, 1, 4194304, &v) < 0)
				return bad("pids", optarg);
			s->pids_max = (uint32_t)v;
			break;
		case O_TMP:
			if (parse_size_bytes(optarg, &s->tmp_bytes) < 0)
				return bad("tmp", optarg);
			break;
		case O_SHM:
			if (parse_size_bytes(optarg, &s->shm_bytes) < 0)
				return bad("shm", optarg);
			break;
		case O_NOFILE:
			if (parse_uint(optarg, 1, 1 << 20, &s->nofile) < 0)
				return bad("nofile", optarg);
			break;
		case O_IO_WEIGHT:
			if (parse_uint(optarg, 1, 10000, &v) < 0)
				return bad("io-weight", optarg);
			s->io_weight = (uint32_t)v;
			break;
		case O_IO_WBPS:
			if (parse_size_bytes(optarg, &s->io_write_bytes_per_s) < 0)
				return bad("io-wbps", optarg);
			break;
		case O_NET:
			if (sandbox_parse_net(optarg, &s->net) < 0)
				return bad("net", optarg);
			break;
		case O_NET_DENY: s->net_deny = optarg; break;
		case O_DNS: s->net_dns = optarg; break;
		case O_PASTA: s->pasta_path = optarg; break;
		case O_NET_PATH:
			if (strcmp(optarg, "pasta") != 0 && strcmp(optarg, "veth") != 0)
				return bad("net-path", optarg);
			s->net_path = optarg[0] == 'v' ? SANDBOX_NET_VETH : SANDBOX_NET_PASTA;
			break;
		case O_VETH_RANGE: s->veth_range = optarg; break;
		case O_PEER_ADDR: s->peer_addr = optarg; break;
		case O_PEERS: s->peers = optarg; break;
		case O_PEER_VIA: s->peer_via = optarg; break;
		case O_SCRATCH_HOME: s->scratch_home = true; break;
		case O_EGRESS_RATE:
			if (parse_size_bytes(optarg, &s->egress_bytes_per_s) < 0)
				return bad("egress-rate", optarg);
			break;
		case O_MAX_CONN:
			if (parse_uint(optarg, 1, 1000000, &v) < 0)
				return bad("max-connections", optarg);
			s->max_connections = (uint32_t)v;
			break;
		case O_GPU:
			if (sandbox_parse_gpus(optarg, s) < 0)
				return bad("gpu", optarg);
			break;
		case O_DEV_PREFIX: s->dev_prefix = optarg; break;
		case O_GPU_UUID:
			if (sandbox_parse_gpu_uuids(optarg, s) < 0)
				return bad("gpu-uuid", optarg);
			break;
		case O_CAPS_DIR: s->caps_dir = optarg; break;
		case O_CAPS_DEV_DIR: s->caps_dev_dir = optarg; break;
		case O_DRIVER: s->driver_lib_dir = optarg; break;
		case O_IMAGE: s->image = optarg; break;
		case O_RUN_DIR: s->run_dir = optarg; break;
		case O_STATE_DIR: s->state_dir = optarg; break;
		case O_CGROUP_PARENT: s->cgroup_parent = optarg; break;
		case O_MASK:
			if (s->n_masks >= SANDBOX_MAX_MASKS)
				return bad("mask", "too many");
			s->masks[s->n_masks++] = optarg;
			break;
		case O_RO_BIND:
			if (s->n_ro_binds >= SANDBOX_MAX_RO_BINDS)
				return bad("ro-bind", "too many");
			s->ro_binds[s->n_ro_binds++] = optarg;
			break;
		case O_BIND:
			if (s->n_binds >= SANDBOX_MAX_BINDS || parse_bind(optarg, &s->binds[s->n_binds]) < 0)
				return bad("bind", optarg);
			s->n_binds++;
			break;
		case O_SHOW:
			if (show(s, optarg) < 0)
				return bad("show", optarg);
			break;
		case O_ENV:
			if (c->n_env >= MAX_ENV)
				return bad("env", "too many");
			c->env[c->n_env++] = optarg;
			break;
		case O_CWD: s->cwd = optarg; break;
		case O_STDIN:
			if (open_stdio("stdin", optarg, false, &s->stdin_fd))
				return 2;
			break;
		case O_STDOUT:
			if (open_stdio("stdout", optarg, true, &s->stdout_fd))
				return 2;
			break;
		case O_STDERR:
			if (open_stdio("stderr", optarg, true, &s->stderr_fd))
				return 2;
			break;
		case O_KEEP: s->die_with_parent = false; break;
		/* the library reads it at each start (sandbox/timing.h) */
		case O_TIMINGS: setenv("LABD_SANDBOX_TIMINGS", "1", 1); break;
		case O_ALL: c->all = true; break;
		case 'v':
			s->verbose = true;
			log_set_level(LOG_LEVEL_DEBUG);
			break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return 2;
		}
	}
	c->env[c->n_env] = NULL;
	s->envp = c->env;
	return 0;
}

/* --timings: labbox's own parts around the start's steps, ms since main() */
static uint64_t main_ns;
static void timing_mark(const char *part, uint64_t *since)
{
	uint64_t now = timing_now_ns();

	if (!getenv("LABD_SANDBOX_TIMINGS"))
		return;
	fprintf(stderr, "timing labbox %-16s %8.3f ms  at %8.3f ms\n", part, (double)(now - *since) / 1e6,
		(double)(now - main_ns) / 1e6);
	*since = now;
}

static int cmd_run(struct cli *c, int argc, char **argv)
{
	struct sandbox_handle h;
	struct sandbox_result res;
	struct sigaction sa;
	uint64_t t = main_ns;
	int rc;

	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	if (!c->have_user_id)
		return bad("user-id", "(missing)");
	c->spec.argv = argv + optind;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	timing_mark("options", &t);
	if (sandbox_start(&c->spec, &h) < 0)
		return 125;
	timing_mark("start", &t);
	sandbox_pid = h.pid; /* from now on the handler forwards to init */
	rc = sandbox_wait(&h, &res);
	sandbox_pid = 0;
	timing_mark("wait", &t);
	sandbox_destroy(&h);
	timing_mark("destroy", &t);
	if (rc < 0)
		return 125;
	switch (res.kind) {
	case SANDBOX_EXITED: return res.code;
	case SANDBOX_SIGNALED:
		log_error("command killed by signal %d", res.signal);
		return 128 + res.signal;
	case SANDBOX_OOM:
		log_error("command killed by the OOM killer (memory limit, %" PRIu64 " oom kills)", res.oom_kills);
		return 137;
	default: return 125;
	}
}

int main(int argc, char **argv)
{
	struct cli c;
	const char *cmd;

	main_ns = timing_now_ns();
	log_set_tag("labbox");
	memset(&c, 0, sizeof(c));
	sandbox_spec_init(&c.spec);
	c.spec.die_with_parent = true;
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	cmd = argv[1];
	if (strcmp(cmd, "run") == 0) {
		int rc = parse(&c, argc - 1, argv + 1);
		return rc ? rc : cmd_run(&c, argc - 1, argv + 1);
	}
	if (strcmp(cmd, "gc") == 0) {
		int rc = parse(&c, argc - 1, argv + 1), n;
		if (rc)
			return rc;
		n = sandbox_gc(c.spec.state_dir, c.all);
		if (n < 0)
			return 1;
		printf("cleaned %d\n", n);
		return 0;
	}
	if (strcmp(cmd, "home") == 0 && argc >= 3) {
		const char *sub = argv[2];
		struct home_usage u;
		int rc = parse(&c, argc - 2, argv + 2);
		if (rc)
			return rc;
		if (!parse_user_name_ok(c.spec.user) || !c.spec.home_image)
			return bad("user/home-image", "(missing)");
		bool mounted_use = strcmp(sub, "grow") == 0 || strcmp(sub, "usage") == 0;
		if (mounted_use && !c.have_user_id) /* its mount point is keyed by it */
			return bad("user-id", "(missing)");
		char key[HOME_KEY_MAX]; /* where it is mounted: by user id (home.h) */
		home_key_find(c.spec.state_dir, c.spec.user_id, c.spec.user, c.spec.home_image, key,
			      sizeof(key));
		if (strcmp(sub, "create") == 0)
			return home_ensure(c.spec.home_image, c.size_bytes ? c.size_bytes : c.spec.home_size_bytes,
					   c.spec.uid_base + c.spec.user_id) < 0;
		if (strcmp(sub, "grow") == 0) {
			if (!c.size_bytes)
				return bad("size", "(missing)");
			return home_grow(c.spec.state_dir, key, c.spec.home_image, c.size_bytes) < 0;
		}
		if (strcmp(sub, "usage") == 0) {
			if (home_usage(c.spec.state_dir, key, c.spec.home_image, &u) < 0)
				return 1;
			printf("size=%" PRIu64 " used=%" PRIu64 " avail=%" PRIu64 " inodes=%" PRIu64
			       " inodes_free=%" PRIu64 " image=%" PRIu64 "\n",
			       u.size_bytes, u.used_bytes, u.avail_bytes, u.inodes, u.inodes_free, u.image_bytes);
			return 0;
		}
		if (strcmp(sub, "fsck") == 0)
			return home_fsck(c.spec.home_image) < 0;
	}
	usage(stderr);
	return 2;
}
