/* doctor_host.c - the host's prerequisites for labd, each with a remedy:
 * the kernel, user namespaces, cgroups and their controllers, loop devices and
 * the ext4 tools of the homes, nft and pasta (egress), the GPUs and their driver
 * libraries when [gpu] lists any, the network path egress takes, and the state
 * dir's free space. */
#include "supervisor/doctor.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "config/config.h"
#include "labd/sandbox.h"
#include "supervisor/netpath.h"

#define MIB (1024ull * 1024)

static enum doctor_level worst;

static void say(enum doctor_level level, const char *remedy, const char *what, const char *detail)
{
	if (level > worst)
		worst = level;
	doctor_say(level, remedy, "%s: %s", what, detail);
}

/* The sandbox builds its filesystem with open_tree and mount_setattr (5.12,
 * no fallback); the supervisor watches sandboxes with pidfd_open (5.3). */
static void check_kernel(void)
{
	struct utsname u;
	unsigned major = 0, minor = 0;

	uname(&u);
	sscanf(u.release, "%u.%u", &major, &minor);
	if (major > 5 || (major == 5 && minor >= 12))
		say(DOCTOR_OK, NULL, "kernel", u.release);
	else
		say(DOCTOR_FAIL, "a kernel of 5.12 or later (mount_setattr, open_tree, pidfd_open)",
		    "kernel", u.release);
}

static long read_long(const char *path)
{
	char buf[32];
	FILE *f = fopen(path, "r");
	long v = -1;

	if (f && fgets(buf, sizeof(buf), f))
		v = strtol(buf, NULL, 10);
	if (f)
		fclose(f);
	return v;
}

static void check_userns(void)
{
	long max = read_long("/proc/sys/user/max_user_namespaces");

	if (max == 0)
		say(DOCTOR_FAIL, "sysctl -w user.max_user_namespaces=15000", "user namespaces",
		    "disabled (user.max_user_namespaces = 0)");
	else if (access("/proc/self/ns/user", F_OK) != 0)
		say(DOCTOR_FAIL, "a kernel built with CONFIG_USER_NS", "user namespaces",
		    "not in this kernel");
	else
		say(DOCTOR_OK, NULL, "user namespaces", "enabled");
}

/* /proc/cgroups: the controllers the sandbox limits use, enabled. */
static void check_cgroups(void)
{
	static const char *const need[] = {"cpu", "memory", "pids"};
	const char *gaps[8];
	char line[256], name[64], missing[128] = "";
	bool v2 = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0;
	int n, hier, num, on;

	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
		bool found = false;
		FILE *f = fopen("/proc/cgroups", "r");
		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, "%63s %d %d %d", name, &hier, &num, &on) == 4 &&
			    strcmp(name, need[i]) == 0 && on)
				found = true;
		if (f)
			fclose(f);
		if (!found)
			snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), " %s",
				 need[i]);
	}
	if (missing[0])
		say(DOCTOR_FAIL, "enable them on the kernel command line (cgroup_enable=...)",
		    "cgroup controllers missing", missing);
	else
		say(DOCTOR_OK, NULL, v2 ? "cgroups v2" : "cgroups v1 or hybrid",
		    "cpu, memory and pids enabled");
	n = sandbox_host_warnings(gaps, 8);
	for (int i = 0; i < n; i++)
		say(DOCTOR_WARN, "see docs/sandbox.md on cgroups", "cgroups", gaps[i]);
}

static bool on_path(const char *prog, char *out, size_t len)
{
	const char *path = getenv("PATH");
	char dirs[1024];

	if (strchr(prog, '/')) {
		snprintf(out, len, "%s", prog);
		return access(prog, X_OK) == 0;
	}
	snprintf(dirs, sizeof(dirs), "%s:/usr/sbin:/sbin:/usr/bin:/bin", path ? path : "");
	for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(out, len, "%s/%s", d, prog);
		if (access(out, X_OK) == 0)
			return true;
	}
	snprintf(out, len, "%s", prog);
	return false;
}

static void check_tool(const char *prog, enum doctor_level if_missing, const char *remedy,
		       const char *use)
{
	char found[1100], what[160];

	snprintf(what, sizeof(what), "%s (%s)", prog, use);
	if (on_path(prog, found, sizeof(found)))
		say(DOCTOR_OK, NULL, what, found);
	else
		say(if_missing, remedy, what, "not found");
}

static void check_loop(void)
{
	int fd = open("/dev/loop-control", O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		say(DOCTOR_FAIL, "modprobe loop", "loop devices", "/dev/loop-control cannot be opened");
		return;
	}
	close(fd);
	say(DOCTOR_OK, NULL, "loop devices", "/dev/loop-control");
}

/* Whether the loader's cache names libcuda.so.1: the cache file holds each
 * library's name as a string, so finding it there is what the loader finds. */
static bool in_loader_cache(const char *name)
{
	FILE *f = fopen("/etc/ld.so.cache", "rbe");
	char buf[65536];
	size_t n, keep = 0, len = strlen(name);
	bool found = false;

	if (!f)
		return false;
	/* read in blocks; the last len-1 bytes go before the next block */
	while (!found && (n = fread(buf + keep, 1, sizeof(buf) - keep, f)) > 0) {
		n += keep;
		found = memmem(buf, n, name, len) != NULL;
		keep = n < len ? n : len - 1;
		memmove(buf, buf + n - keep, keep);
	}
	fclose(f);
	return found;
}

/* With no [gpu] driver_lib_dir, a GPU sandbox on the host's root finds the
 * driver's libraries only where the loader's cache does: which case this host
 * is, and the remedy when its libraries are reached through LD_LIBRARY_PATH. */
static void check_driver_libs_found(void)
{
	const char *path = getenv("LD_LIBRARY_PATH");
	char copy[4096], lib[4096 + 32], *save = NULL;

	if (in_loader_cache("libcuda.so.1")) {
		say(DOCTOR_OK, NULL, "GPU driver libraries", "in the loader's cache (ld.so.cache)");
		return;
	}
	snprintf(copy, sizeof(copy), "%s", path ? path : "");
	for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(lib, sizeof(lib), "%s/libcuda.so.1", d);
		if (access(lib, R_OK) == 0) {
			snprintf(lib, sizeof(lib), "set [gpu] driver_lib_dir = %s", d);
			say(DOCTOR_FAIL, lib, "GPU driver libraries only through LD_LIBRARY_PATH",
			    "sandboxes do not inherit it");
			return;
		}
	}
	say(DOCTOR_WARN, "install the NVIDIA driver's libraries, or set [gpu] driver_lib_dir",
	    "GPU driver libraries", "libcuda.so.1 found neither in ld.so.cache nor on LD_LIBRARY_PATH");
}

static void check_gpus(const struct labd_config *cfg)
{
	char node[CONFIG_PATH_MAX + 32], lib[CONFIG_PATH_MAX + 32];
	void *h;

	if (cfg->gpu_stand_in || !cfg->n_gpu_devices) {
		say(DOCTOR_OK, NULL, "GPUs", cfg->gpu_stand_in ? "stand-ins only" : "none configured");
		return;
	}
	for (unsigned i = 0; i < cfg->n_gpu_devices; i++) {
		snprintf(node, sizeof(node), "%s/nvidia%u", cfg->dev_prefix, cfg->gpu_devices[i]);
		if (access(node, F_OK) == 0)
			say(DOCTOR_OK, NULL, "GPU device", node);
		else
			say(DOCTOR_FAIL, "load the NVIDIA driver (nvidia-smi), or fix [gpu] devices",
			    "GPU device missing", node);
	}
	if ((h = dlopen(cfg->nvml_library, RTLD_NOW | RTLD_LOCAL))) {
		dlclose(h);
		say(DOCTOR_OK, NULL, "NVML", cfg->nvml_library);
	} else {
		say(DOCTOR_WARN, "install the driver's libnvidia-ml, or set [gpu] nvml_library",
		    "NVML (GPU use and health) cannot be loaded", cfg->nvml_library);
	}
	if (!cfg->driver_lib_dir[0]) {
		check_driver_libs_found();
		return;
	}
	snprintf(lib, sizeof(lib), "%s/libcuda.so.1", cfg->driver_lib_dir);
	if (access(lib, R_OK) == 0)
		say(DOCTOR_OK, NULL, "GPU driver libraries", cfg->driver_lib_dir);
	else
		say(DOCTOR_FAIL, "set [gpu] driver_lib_dir to the folder of libcuda.so.1",
		    "GPU driver libraries missing", lib);
}

static void check_space(const char *state_dir)
{
	struct statvfs v;
	char detail[CONFIG_PATH_MAX + 64];
	unsigned long long avail;

	char parent[CONFIG_PATH_MAX];
	const char *at = state_dir;

	/* before labd's first start the state dir is not there yet: its parent's space */
	snprintf(parent, sizeof(parent), "%s", state_dir);
	if (statvfs(at, &v) < 0 && strrchr(parent, '/')) {
		*strrchr(parent, '/') = '\0';
		at = parent[0] ? parent : "/";
		if (statvfs(at, &v) < 0) {
			say(DOCTOR_FAIL, "create it, or fix [server] state_dir", "state dir", state_dir);
			return;
		}
	}
	avail = (unsigned long long)v.f_bavail * v.f_frsize;
	snprintf(detail, sizeof(detail), "%llu MiB free on %s", avail / MIB, at);
	if (avail < 256 * MIB)
		say(DOCTOR_FAIL, "free space there (homes, logs, the database)", "state dir space",
		    detail);
	else if (avail < 2048 * MIB)
		say(DOCTOR_WARN, "free space there (homes, logs, the database)", "state dir space",
		    detail);
	else
		say(DOCTOR_OK, NULL, "state dir space", detail);
}

/* The path egress sandboxes take, settled as the daemon settles it (netpath.h).
 * With [network] path = veth set, a firewall that drops forwarded packets (Docker
 * sets a forward policy drop, ufw and firewalld do too) would leave every sandbox
 * without a network, silently: named with its remedy. */
static void check_network_path(const struct labd_config *cfg)
{
	char why[200], detail[sizeof(cfg->net_path_why) + 16];
	bool set_veth = cfg->net_path == SANDBOX_NET_VETH && strncmp(cfg->net_path_why, "auto", 4);

	snprintf(detail, sizeof(detail), "%s (%s)", netpath_name(cfg), cfg->net_path_why);
	say(DOCTOR_OK, NULL, "network path", detail);
	if (!set_veth)
		return;
	if (!netpath_host_blocked(cfg, why, sizeof(why))) {
		say(DOCTOR_OK, NULL, "forwarding (veth path)", "no forward chain drops by default");
		return;
	}
	say(DOCTOR_WARN,
	    "accept forwarding from and to the lbv+ interfaces there (docs/security.md §8 "
	    "\"On the veth path\"), or set [network] path = auto or pasta",
	    "forwarding (veth path)", why);
}

enum doctor_level doctor_host(const struct labd_config *cfg)
{
	worst = DOCTOR_OK;
	check_kernel();
	check_userns();
	check_cgroups();
	check_loop();
	check_tool("mkfs.ext4", DOCTOR_FAIL, "apt-get install e2fsprogs", "homes");
	check_tool("resize2fs", DOCTOR_FAIL, "apt-get install e2fsprogs", "homes");
	check_tool(cfg->net_nft[0] ? cfg->net_nft : "nft", DOCTOR_WARN,
		   "apt-get install nftables (or set [network] nft)", "egress");
	check_tool(cfg->net_pasta[0] ? cfg->net_pasta : "pasta", DOCTOR_WARN,
		   "apt-get install passt (or set [network] pasta)", "egress");
	check_network_path(cfg);
	check_gpus(cfg);
	check_space(cfg->state_dir);
	return worst;
}
