/* netveth.c - the veth path of an egress sandbox; see netveth.h.
 *
 * The packets stay in the kernel: the sandbox's eth0 is one end of a veth pair, the
 * host end forwards (its own forwarding switch, never the host-wide one) and root's
 * table labd_veth_<slot> in the host's namespace filters and masquerades
 * (egress_rules.c, egress_veth_ruleset).  The ruleset inside the namespace
 * (egress.c) is installed first and holds as with pasta; the host's table is a second,
 * independent copy that also holds what the namespace's cannot: the host's own
 * addresses by its input hook, spoofed sources, and other sandboxes.
 *
 * Forwarding in IPv4 is decided by the interface a packet arrives on: the answers
 * coming back to a sandbox arrive on the host's uplink, whose forwarding must be on
 * too.  labd turns it on only where it was off, and for each such interface first adds
 * to its table labd_veth a rule that drops whatever is forwarded from it to anything but
 * a sandbox's veth, so turning it on forwards nothing the host did not forward before.
 * Those interfaces are listed in /run/labd-veth/uplinks and turned off again by the
 * sweep once no veth sandbox is left.  IPv6 is off on both ends: a veth sandbox has
 * IPv4 only. */
#include "sandbox/netveth.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "labd/log.h"
#include "sandbox/egress.h"
#include "sandbox/fail.h"
#include "sandbox/tool.h"

#define VETH_PREFIX "lbv"
#define TABLE_PREFIX "labd_veth_"
#define GUARD_TABLE "labd_veth" /* the uplinks' guard */
/* Interfaces and tables are the host's, not a state directory's: every labd on the host
 * (tests run several) claims its slots in this one directory, which goes at reboot with
 * the veths themselves. */
#define VETH_DIR "/run/labd-veth"
#define SCRIPT_MAX 16384

struct slot {
	unsigned n;
	char ifname[16], table[32], sandbox[INET_ADDRSTRLEN], gateway[INET_ADDRSTRLEN];
};

int netveth_range_parse(const char *range, uint32_t *base, unsigned *slots)
{
	char addr[INET_ADDRSTRLEN];
	struct in_addr bin;
	const char *slash = range ? strchr(range, '/') : NULL;
	char *end;
	unsigned long bits;

	if (!slash || (size_t)(slash - range) >= sizeof(addr) || slash[1] < '0' || slash[1] > '9')
		return -1;
	snprintf(addr, sizeof(addr), "%.*s", (int)(slash - range), range);
	bits = strtoul(slash + 1, &end, 10);
	if (*end || bits < 8 || bits > 30 || inet_pton(AF_INET, addr, &bin) != 1 ||
	    (ntohl(bin.s_addr) & (0xffffffffu >> bits)))
		return -1;
	if (base)
		*base = ntohl(bin.s_addr);
	if (slots)
		*slots = 1u << (30 - bits);
	return 0;
}

static int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t len = (ssize_t)strlen(text);
	bool ok = fd >= 0 && write(fd, text, (size_t)len) == len;

	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

static int sysctl_if(const char *family, const char *ifname, const char *key, const char *value)
{
	char path[128];

	snprintf(path, sizeof(path), "/proc/sys/net/%s/conf/%s/%s", family, ifname, key);
	return write_text(path, value);
}

/* In a sandbox's namespace before its tool: IPv6 off on eth0 (the veth path is IPv4). */
static int ipv6_off(void *arg)
{
	(void)arg;
	return access("/proc/sys/net/ipv6", F_OK) == 0 ? sysctl_if("ipv6", "eth0", "disable_ipv6", "1")
						       : 0;
}

/* Runs argv[0] as root with input on its stdin; with nsfd, in that network namespace
 * (and IPv6 off on eth0 there first); with fd3, that descriptor as its fd 3 (for
 * "/proc/self/fd/3").  What it printed goes into the failure message, unless quiet
 * (a removal of what may be gone already).  0 or -1. */
static int run_tool(char *const argv[], const char *input, int nsfd, int fd3, bool quiet)
{
	struct tool_run t = {.argv = argv, .input = input, .nsfd = nsfd, .fd3 = fd3,
			     .prepare = nsfd >= 0 ? ipv6_off : NULL, .quiet = quiet};

	return tool_run(&t);
}

static int nft_script(const char *nft, const char *script, bool quiet)
{
	char *argv[] = {(char *)nft, "-f", "-", NULL};

	return run_tool(argv, script, -1, -1, quiet);
}

static int ip_batch(const char *script, int nsfd, int fd3, bool quiet)
{
	char *argv[] = {(char *)tool_ip_path(), "-batch", "-", NULL};

	return run_tool(argv, script, nsfd, fd3, quiet);
}

static void slot_names(unsigned n, uint32_t gateway, struct slot *sl)
{
	struct in_addr a;

	sl->n = n;
	snprintf(sl->ifname, sizeof(sl->ifname), VETH_PREFIX "%u", n);
	snprintf(sl->table, sizeof(sl->table), TABLE_PREFIX "%u", n);
	if (gateway) {
		a.s_addr = htonl(gateway);
		inet_ntop(AF_INET, &a, sl->gateway, sizeof(sl->gateway));
		a.s_addr = htonl(gateway + 1);
		inet_ntop(AF_INET, &a, sl->sandbox, sizeof(sl->sandbox));
	}
}

static void claim_path(unsigned n, const char *suffix, char *out, size_t len)
{
	snprintf(out, len, VETH_DIR "/%u%s", n, suffix);
}

/* Slot n's claim: its sandbox id, addresses and state directory (in owner, when
 * given).  0, or -1 when there is none. */
static int read_claim(unsigned n, char *id, size_t idlen, struct slot *sl, char *owner)
{
	char path[SANDBOX_PATH_MAX], text[SANDBOX_ID_MAX + SANDBOX_PATH_MAX + 64], fmt[48];
	ssize_t got;
	int fd, at = 0;

	claim_path(n, "", path, sizeof(path));
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return -1;
	got = read(fd, text, sizeof(text) - 1);
	close(fd);
	text[got > 0 ? got : 0] = '\0';
	slot_names(n, 0, sl);
	snprintf(fmt, sizeof(fmt), "%%%zus %%15s %%15s %%n", idlen - 1);
	if (sscanf(text, fmt, id, sl->sandbox, sl->gateway, &at) != 3 || !at)
		sl->sandbox[0] = sl->gateway[0] = '\0'; /* torn: still the id's, if any */
	if (owner) {
		snprintf(owner, SANDBOX_PATH_MAX, "%s", at ? text + at : "");
		owner[strcspn(owner, "\n")] = '\0';
	}
	return id[0] ? 0 : -1;
}

static bool link_exists(const char *ifname)
{
	char path[64];

	snprintf(path, sizeof(path), "/sys/class/net/%s", ifname);
	return access(path, F_OK) == 0;
}

static void remove_slot(const char *nft, unsigned n)
{
	char path[SANDBOX_PATH_MAX], script[64];
	struct slot sl;

	slot_names(n, 0, &sl);
	snprintf(script, sizeof(script), "delete table inet %s\n", sl.table);
	nft_script(nft, script, true); /* absent already: nothing to do */
	if (link_exists(sl.ifname)) {
		snprintf(script, sizeof(script), "link del %s\n", sl.ifname);
		ip_batch(script, -1, -1, true);
	}
	claim_path(n, ".nft", path, sizeof(path));
	unlink(path);
	claim_path(n, "", path, sizeof(path));
	unlink(path);
}

/* Takes the first free slot from one the id hashes to; 0 or -1. */
static int claim_slot(const struct sandbox_spec *s, const char *id, struct slot *sl)
{
	char path[SANDBOX_PATH_MAX], text[SANDBOX_ID_MAX + SANDBOX_PATH_MAX + 64];
	uint32_t base, h = 2166136261u;
	unsigned slots;

	if (netveth_range_parse(s->veth_range, &base, &slots) < 0)
		return fail_error("bad veth range: %.64s", s->veth_range ? s->veth_range : "");
	if (mkdir(VETH_DIR, 0700) < 0 && errno != EEXIST)
		return fail_errno("mkdir " VETH_DIR);
	for (const char *p = id; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	for (unsigned k = 0; k < slots; k++) {
		unsigned n = (h + k) % slots;
		int fd;

		claim_path(n, "", path, sizeof(path));
		if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0) {
			if (errno == EEXIST)
				continue;
			return fail_errno("create %s", path);
		}
		slot_names(n, base + 4 * n + 1, sl);
		int len = snprintf(text, sizeof(text), "%s %s %s %s\n", id, sl->sandbox, sl->gateway,
				   s->state_dir);
		bool ok = write(fd, text, (size_t)len) == len;
		close(fd);
		if (!ok) {
			unlink(path);
			return fail_errno("write %s", path);
		}
		return 0;
	}
	return fail_error("no free address in veth range %s (one /30 a sandbox)", s->veth_range);
}

/* The range must not hold any of the host's own addresses (but labd's veths'): the
 * host would route its own network into the sandboxes. */
static int range_clear_of_host(const char *range)
{
	struct ifaddrs *all, *a;
	uint32_t base;
	unsigned slots;
	int rc = 0;

	if (netveth_range_parse(range, &base, &slots) < 0 || getifaddrs(&all) < 0)
		return fail_errno("getifaddrs");
	for (a = all; a && rc == 0; a = a->ifa_next) {
		if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET ||
		    strncmp(a->ifa_name, VETH_PREFIX, strlen(VETH_PREFIX)) == 0)
			continue;
		uint32_t x = ntohl(((struct sockaddr_in *)(void *)a->ifa_addr)->sin_addr.s_addr);
		if (x - base < 4u * slots)
			rc = fail_error("veth range %s holds the host's address on %s: set "
					"[network] veth_range to a network the host does not use",
					range, a->ifa_name);
	}
	freeifaddrs(all);
	return rc;
}

/* Whether the host holds IPv4 address a (network order). */
static bool host_has(in_addr_t a)
{
	struct ifaddrs *all, *i;
	bool found = false;

	if (getifaddrs(&all) < 0)
		return false;
	for (i = all; i && !found; i = i->ifa_next)
		found = i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
			((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr.s_addr == a;
	freeifaddrs(all);
	return found;
}

/* The resolver DNS is DNATed to: [network] dns, else the host's first nameserver;
 * IPv4 only ("" when there is none: the sandbox then has no DNS).  *local: the host
 * itself answers (the input hook lets that DNS in); *loopback: on 127/8 (the host
 * end needs route_localnet). */
static void pick_resolver(const struct sandbox_spec *s, char *out, size_t len, bool *local,
			  bool *loopback)
{
	char line[256], word[16], addr[64] = "";
	struct in_addr bin;
	FILE *f;

	out[0] = '\0';
	*local = *loopback = false;
	if (s->net_dns && s->net_dns[0]) {
		snprintf(addr, sizeof(addr), "%s", s->net_dns);
	} else if ((f = fopen("/etc/resolv.conf", "re"))) {
		while (!addr[0] && fgets(line, sizeof(line), f))
			if (sscanf(line, "%15s %63s", word, addr) != 2 || strcmp(word, "nameserver") != 0)
				addr[0] = '\0';
		fclose(f);
	}
	if (addr[0] && inet_pton(AF_INET, addr, &bin) == 1) {
		snprintf(out, len, "%s", addr);
		*loopback = (ntohl(bin.s_addr) >> 24) == 127;
		*local = *loopback || host_has(bin.s_addr);
	} else {
		log_warn("veth: no IPv4 resolver (%s): sandboxes get no DNS", addr[0] ? addr : "none");
	}
}

static bool table_exists(const char *nft, const char *table)
{
	char *argv[] = {(char *)nft, "list", "table", "inet", (char *)table, NULL};
	return run_tool(argv, NULL, -1, -1, true) == 0;
}

/* Whether the uplinks file lists ifname. */
static bool uplink_listed(const char *ifname)
{
	char line[64];
	bool found = false;
	FILE *f;

	if (!(f = fopen(VETH_DIR "/uplinks", "re")))
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		found = strcmp(line, ifname) == 0;
	}
	fclose(f);
	return found;
}

static bool plain_ifname(const char *n)
{
	if (!n[0] || strlen(n) > 15 || !strcmp(n, "all") || !strcmp(n, "default") || !strcmp(n, "lo") ||
	    strncmp(n, VETH_PREFIX, strlen(VETH_PREFIX)) == 0)
		return false;
	for (const char *p = n; *p; p++)
		if (*p == '"' || *p == '\\' || *p <= ' ' || *p > '~')
			return false;
	return true;
}

/* Turns forwarding on for one host interface where it is off, its guard rule first. */
static int open_uplink(const char *nft, const char *ifname)
{
	char path[SANDBOX_PATH_MAX], have[8] = "", script[512];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/sys/net/ipv4/conf/%s/forwarding", ifname);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0; /* gone meanwhile */
	n = read(fd, have, sizeof(have) - 1);
	close(fd);
	if (n <= 0 || have[0] != '0')
		return 0;
	if (!uplink_listed(ifname)) {
		/* the guard's table and chain made when first needed ("add" keeps them) */
		snprintf(script, sizeof(script),
			 "add table inet " GUARD_TABLE "\n"
			 "add chain inet " GUARD_TABLE " forward { type filter hook forward "
			 "priority filter - 1; policy accept; }\n"
			 "add rule inet " GUARD_TABLE " forward iifname \"%s\" oifname != \"" VETH_PREFIX
			 "*\" drop\n", ifname);
		if (nft_script(nft, script, false) < 0)
			return -1;
		FILE *f = fopen(VETH_DIR "/uplinks", "ae");
		if (!f || fprintf(f, "%s\n", ifname) < 0 || fclose(f) != 0)
			return fail_errno("append to " VETH_DIR "/uplinks");
	}
	if (sysctl_if("ipv4", ifname, "forwarding", "1") < 0)
		return fail_errno("turn on forwarding for %s", ifname);
	log_info("veth: forwarding on for %s (labd's guard forwards only to sandboxes)", ifname);
	return 0;
}

/* Every labd on the host opens and closes the uplinks under one lock, so a sweep never
 * removes the guard of an interface a start is turning on.  The fd, or -1. */
static int uplinks_lock(void)
{
	int fd;

	if (mkdir(VETH_DIR, 0700) < 0 && errno != EEXIST)
		return fail_errno("mkdir " VETH_DIR);
	if ((fd = open(VETH_DIR "/lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0)
		return fail_errno("open " VETH_DIR "/lock");
	while (flock(fd, LOCK_EX) < 0)
		if (errno != EINTR) {
			close(fd);
			return fail_errno("lock " VETH_DIR "/lock");
		}
	return fd;
}

static int open_uplinks_locked(const char *nft)
{
	DIR *d;
	struct dirent *e;
	int rc = 0;

	if (!(d = opendir("/proc/sys/net/ipv4/conf")))
		return fail_errno("opendir /proc/sys/net/ipv4/conf");
	while (rc == 0 && (e = readdir(d)))
		if (plain_ifname(e->d_name))
			rc = open_uplink(nft, e->d_name);
	closedir(d);
	return rc;
}

/* The guard again for every listed interface, when its table is gone (a host
 * firewall's reload that flushes the whole ruleset takes labd's tables with it):
 * forwarding stays on for them, so the guard must come back first.  Under the lock. */
static int restore_guard(const char *nft)
{
	char line[64], script[512];
	int rc = 0;
	FILE *f;

	if (!(f = fopen(VETH_DIR "/uplinks", "re")))
		return 0;
	if (table_exists(nft, GUARD_TABLE)) {
		fclose(f);
		return 0;
	}
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!plain_ifname(line))
			continue;
		snprintf(script, sizeof(script),
			 "add table inet " GUARD_TABLE "\n"
			 "add chain inet " GUARD_TABLE " forward { type filter hook forward "
			 "priority filter - 1; policy accept; }\n"
			 "add rule inet " GUARD_TABLE " forward iifname \"%s\" oifname != \"" VETH_PREFIX
			 "*\" drop\n", line);
		rc = nft_script(nft, script, false);
	}
	fclose(f);
	if (rc == 0)
		log_warn("veth: the guard of the host's interfaces was gone: made again");
	return rc;
}

static int open_uplinks(const char *nft)
{
	int lock = uplinks_lock(), rc;

	if (lock < 0)
		return -1;
	rc = restore_guard(nft);
	if (rc == 0)
		rc = open_uplinks_locked(nft);
	close(lock);
	return rc;
}

/* The uplinks labd turned on go off again, and their guard with them, unless a claim
 * appeared meanwhile (a start of another labd): called under the lock. */
static void close_uplinks(const char *nft)
{
	char line[64];
	FILE *f;
	DIR *d;
	struct dirent *e;

	if ((d = opendir(VETH_DIR))) {
		bool any = false;
		while (!any && (e = readdir(d)))
			any = e->d_name[0] >= '0' && e->d_name[0] <= '9';
		closedir(d);
		if (any)
			return;
	}

	if ((f = fopen(VETH_DIR "/uplinks", "re"))) {
		while (fgets(line, sizeof(line), f)) {
			line[strcspn(line, "\n")] = '\0';
			if (plain_ifname(line))
				sysctl_if("ipv4", line, "forwarding", "0");
		}
		fclose(f);
	}
	nft_script(nft, "delete table inet " GUARD_TABLE "\n", true);
	unlink(VETH_DIR "/uplinks");
}

/* The pair, its host end's switches, the host's table (from <slot>.nft), forwarding,
 * both ends' addresses and the sandbox's default route. */
static int make_link(const struct sandbox_spec *s, const struct slot *sl, bool resolver_loopback,
		     int nsfd)
{
	char script[256], path[SANDBOX_PATH_MAX];
	static char rules[SCRIPT_MAX];
	ssize_t n;
	int fd;

	claim_path(sl->n, ".nft", path, sizeof(path));
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return fail_errno("open %s", path);
	n = read(fd, rules, sizeof(rules) - 1);
	close(fd);
	rules[n > 0 ? n : 0] = '\0';
	snprintf(script, sizeof(script), "link add %s type veth peer name eth0 netns /proc/self/fd/3\n",
		 sl->ifname);
	if (ip_batch(script, -1, nsfd, false) < 0)
		return -1;
	/* before any packet: no IPv6, strict reverse-path check, no redirects, and
	 * 127/8 routable only for the DNAT to a resolver on the host's loopback */
	if ((access("/proc/sys/net/ipv6", F_OK) == 0 &&
	     sysctl_if("ipv6", sl->ifname, "disable_ipv6", "1") < 0) ||
	    sysctl_if("ipv4", sl->ifname, "rp_filter", "1") < 0 ||
	    sysctl_if("ipv4", sl->ifname, "send_redirects", "0") < 0 ||
	    sysctl_if("ipv4", sl->ifname, "route_localnet", resolver_loopback ? "1" : "0") < 0)
		return fail_errno("set the switches of %s", sl->ifname);
	if (nft_script(s->nft_path, rules, false) < 0 || open_uplinks(s->nft_path) < 0)
		return -1;
	if (sysctl_if("ipv4", sl->ifname, "forwarding", "1") < 0)
		return fail_errno("turn on forwarding for %s", sl->ifname);
	snprintf(script, sizeof(script), "addr add %s/30 dev %s\nlink set %s up\n", sl->gateway,
		 sl->ifname, sl->ifname);
	if (ip_batch(script, -1, -1, false) < 0)
		return -1;
	snprintf(script, sizeof(script),
		 "addr add %s/30 dev eth0\nlink set eth0 up\nroute add default via %s\n",
		 sl->sandbox, sl->gateway);
	return ip_batch(script, nsfd, -1, false);
}

static int write_rules(const struct sandbox_spec *s, const struct slot *sl, bool *loopback)
{
	char resolver[INET_ADDRSTRLEN], why[160], path[SANDBOX_PATH_MAX];
	static char rules[SCRIPT_MAX];
	struct egress_veth v = {sl->table, sl->ifname, sl->sandbox, s->veth_range, resolver, false};
	int fd;

	pick_resolver(s, resolver, sizeof(resolver), &v.resolver_local, loopback);
	if (egress_veth_ruleset(&v, s->net_deny, s->max_connections, s->egress_bytes_per_s, rules,
				sizeof(rules), why, sizeof(why)) < 0)
		return fail_error("network deny list: %s", why);
	/* a table of that name left by a crash goes first: the script only adds */
	claim_path(sl->n, ".nft", path, sizeof(path));
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0)
		return fail_errno("create %s", path);
	char head[64];
	int hl = snprintf(head, sizeof(head), "table inet %s\ndelete table inet %s\n", sl->table,
			  sl->table);
	bool ok = write(fd, head, (size_t)hl) == hl &&
		  write(fd, rules, strlen(rules)) == (ssize_t)strlen(rules);
	close(fd);
	return ok ? 0 : fail_errno("write %s", path);
}

int netveth_start(const struct sandbox_spec *s, const char *id, pid_t pid, uint64_t start_ticks)
{
	struct slot sl;
	bool loopback = false;
	int nsfd;

	if (range_clear_of_host(s->veth_range) < 0 || claim_slot(s, id, &sl) < 0)
		return -1;
	if (link_exists(sl.ifname)) { /* a crash's leftover without a claim */
		char script[64];
		snprintf(script, sizeof(script), "link del %s\n", sl.ifname);
		if (ip_batch(script, -1, -1, false) < 0)
			goto fail;
	}
	if (write_rules(s, &sl, &loopback) < 0)
		goto fail;
	if (egress_open_netns(pid, start_ticks, &nsfd) < 0) {
		fail_errno("the network namespace of init %d", (int)pid);
		goto fail;
	}
	int rc = make_link(s, &sl, loopback, nsfd);
	close(nsfd);
	if (rc == 0)
		return 0;
fail:
	remove_slot(s->nft_path, sl.n);
	return -1;
}

/* The slot sandbox id holds, or -1. */
static int find_slot(const char *state_dir, const char *id, struct slot *sl)
{
	char who[SANDBOX_ID_MAX + 1], owner[SANDBOX_PATH_MAX];
	struct dirent *e;
	int found = -1;
	DIR *d;

	if (!(d = opendir(VETH_DIR)))
		return -1;
	while (found < 0 && (e = readdir(d))) {
		char *end;
		unsigned long n = strtoul(e->d_name, &end, 10);
		if (e->d_name[0] < '0' || e->d_name[0] > '9' || *end)
			continue;
		who[0] = '\0';
		if (read_claim((unsigned)n, who, sizeof(who), sl, owner) == 0 &&
		    strcmp(who, id) == 0 && strcmp(owner, state_dir) == 0)
			found = (int)n;
	}
	closedir(d);
	return found;
}

int netveth_check(const struct sandbox_spec *s, const struct sandbox_handle *h)
{
	struct slot sl;
	char resolver[INET_ADDRSTRLEN], script[96];
	bool loopback = false, host = false;
	int nsfd, rc;

	if (find_slot(s->state_dir, h->id, &sl) < 0)
		return -1;
	if (open_uplinks(s->nft_path) < 0)
		log_warn("sandbox %s: host interfaces not opened for its answers", h->id);
	if (link_exists(sl.ifname) && table_exists(s->nft_path, sl.table))
		return 0;
	log_warn("sandbox %s: its veth %s or host table %s is gone: making them again", h->id,
		 sl.ifname, sl.table);
	if (!sl.sandbox[0])
		return -2;
	pick_resolver(s, resolver, sizeof(resolver), &host, &loopback);
	snprintf(script, sizeof(script), "link del %s\n", sl.ifname);
	if (link_exists(sl.ifname))
		ip_batch(script, -1, -1, true);
	if (egress_open_netns(h->pid, h->start_time_ticks, &nsfd) < 0)
		return -2;
	rc = make_link(s, &sl, loopback, nsfd);
	close(nsfd);
	return rc == 0 ? 1 : -2;
}

void netveth_remove(const char *state_dir, const char *id)
{
	struct slot sl;
	int n;

	while ((n = find_slot(state_dir, id, &sl)) >= 0)
		remove_slot("/usr/sbin/nft", (unsigned)n);
}

/* Numbers after prefix in name (lbv12, labd_veth_12), or -1. */
static long numbered(const char *name, const char *prefix)
{
	size_t pl = strlen(prefix);
	char *end;
	long n;

	if (strncmp(name, prefix, pl) != 0 || name[pl] < '0' || name[pl] > '9')
		return -1;
	n = strtol(name + pl, &end, 10);
	return *end || n < 0 || n > 1 << 22 ? -1 : n;
}

static bool claimed(long n)
{
	char path[SANDBOX_PATH_MAX];

	claim_path((unsigned)n, "", path, sizeof(path));
	return access(path, F_OK) == 0;
}

/* labd's veths and host tables that no claim holds (a crash between their making and
 * the claim's removal). */
static int sweep_unclaimed(const char *nft, bool remove)
{
	char path[64], line[128];
	struct dirent *e;
	int removed = 0;
	DIR *d;
	FILE *p;

	if ((d = opendir("/sys/class/net"))) {
		while ((e = readdir(d))) {
			long n = numbered(e->d_name, VETH_PREFIX);
			if (n >= 0 && !claimed(n)) {
				if (remove)
					remove_slot(nft, (unsigned)n);
				removed++;
			}
		}
		closedir(d);
	}
	snprintf(path, sizeof(path), "%s list tables inet 2>/dev/null", nft);
	if (!(p = popen(path, "re")))
		return removed;
	while (fgets(line, sizeof(line), p)) {
		char name[64];
		long n;
		if (sscanf(line, "table inet %63s", name) == 1 &&
		    (n = numbered(name, TABLE_PREFIX)) >= 0 && !claimed(n)) {
			if (remove)
				remove_slot(nft, (unsigned)n);
			removed++;
		}
	}
	pclose(p);
	return removed;
}

/* A claim still empty a minute after it was taken is a start that died. */
static bool just_claimed(unsigned n)
{
	char path[SANDBOX_PATH_MAX];
	struct stat st;

	claim_path(n, "", path, sizeof(path));
	return stat(path, &st) == 0 && st.st_mtime + 60 > time(NULL);
}

static int sweep(const char *state_dir, bool (*live)(const char *id, void *arg), void *arg,
		 bool remove)
{
	const char *nft = "/usr/sbin/nft";
	char who[SANDBOX_ID_MAX + 1], owner[SANDBOX_PATH_MAX];
	struct dirent *e;
	int removed = 0, left = 0;
	struct slot sl;
	DIR *d;

	if ((d = opendir(VETH_DIR))) {
		while ((e = readdir(d))) {
			char *end;
			unsigned long n = strtoul(e->d_name, &end, 10);
			if (e->d_name[0] < '0' || e->d_name[0] > '9' || *end)
				continue;
			who[0] = '\0';
			if (read_claim((unsigned)n, who, sizeof(who), &sl, owner) == 0
				    ? (strcmp(owner, state_dir) != 0 && access(owner, F_OK) == 0) ||
					      (strcmp(owner, state_dir) == 0 && live(who, arg))
				    : just_claimed((unsigned)n)) {
				left++; /* running, another labd's, or being written */
				continue;
			}
			removed++;
			if (!remove)
				continue;
			log_info("veth: removing slot %lu of sandbox %s (not running)", n,
				 who[0] ? who : "?");
			remove_slot(nft, (unsigned)n);
		}
		closedir(d);
	}
	if (access(nft, X_OK) == 0)
		removed += sweep_unclaimed(nft, remove);
	if (remove && !left && d) {
		int lock = uplinks_lock();
		if (lock >= 0) {
			close_uplinks(nft);
			close(lock);
		}
	}
	return removed;
}

int netveth_sweep(const char *state_dir, bool (*live)(const char *id, void *arg), void *arg)
{
	return sweep(state_dir, live, arg, true);
}

int netveth_leftovers(const char *state_dir, bool (*live)(const char *id, void *arg), void *arg)
{
	return sweep(state_dir, live, arg, false);
}
