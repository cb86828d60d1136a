/* netpeer.c - the peer interface of a sandbox; see netpeer.h.
 *
 * A job on several hosts talks host to host (torch's gloo and NCCL rendezvous and
 * collectives) on the cluster network, which egress denies (a private range) and
 * pasta or a veth would NAT.  Each sandbox gets its own address on that network
 * instead, on an ipvlan slave of the host's cluster interface: ipvlan shares the
 * parent's MAC address, so switches and cloud networks that allow one MAC per port
 * carry it, and in L2 mode a slave never reaches its parent's own addresses (the
 * node itself) through it.  A kernel built without ipvlan (CONFIG_IPVLAN) gets a
 * macvlan in bridge mode instead: the same reach (never the parent's addresses,
 * sandboxes on one parent reach each other), a MAC address of its own on the
 * network.  Root's table labd_peer inside the namespace, installed
 * before the link is up and before any of the user's code runs, drops on peer0 every
 * packet to or from anything but the peers, and anything but IPv4; the sandbox has
 * no capabilities (child.c) and its seccomp filter refuses netfilter netlink, so the
 * user can change neither the table nor the link.  The link lives in the
 * namespace and goes with it: nothing to sweep, nothing to redo on re-adoption. */
#include "sandbox/netpeer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sandbox/egress.h"
#include "sandbox/fail.h"
#include "sandbox/tool.h"


/* One dotted quad, as inet_pton takes it; *out in network order. */
static bool ipv4_ok(const char *text, size_t len, struct in_addr *out)
{
	char addr[INET_ADDRSTRLEN];

	if (len == 0 || len >= sizeof(addr))
		return false;
	memcpy(addr, text, len);
	addr[len] = '\0';
	return inet_pton(AF_INET, addr, out) == 1;
}

/* Not a host's unicast address: 0/8, 127/8, 224/4 and up (multicast, reserved,
 * broadcast). */
static bool special(struct in_addr a)
{
	uint32_t h = ntohl(a.s_addr);

	return (h >> 24) == 0 || (h >> 24) == 127 || (h >> 28) >= 14;
}

int sandbox_peers_check(const char *addr, const char *peers, char *why, size_t whylen)
{
	struct in_addr self, seen[SANDBOX_PEERS_MAX];
	unsigned n = 0;

	if (!addr || !ipv4_ok(addr, strlen(addr), &self) || special(self))
		return snprintf(why, whylen, "peer_addr: not a host's IPv4 address"), -1;
	if (!peers || !peers[0])
		return snprintf(why, whylen, "peers: empty (at least one address)"), -1;
	for (const char *p = peers;; p++) {
		size_t len = strcspn(p, ",");
		struct in_addr a;

		if (!ipv4_ok(p, len, &a) || special(a))
			return snprintf(why, whylen, "peers: %.*s is not a host's IPv4 address",
					(int)(len > 20 ? 20 : len), p), -1;
		if (a.s_addr == self.s_addr)
			return snprintf(why, whylen, "peers: holds peer_addr itself"), -1;
		for (unsigned i = 0; i < n; i++)
			if (seen[i].s_addr == a.s_addr)
				return snprintf(why, whylen, "peers: %.*s is named twice",
						(int)len, p), -1;
		if (n == SANDBOX_PEERS_MAX)
			return snprintf(why, whylen, "peers: more than %d addresses",
					SANDBOX_PEERS_MAX), -1;
		seen[n++] = a;
		p += len;
		if (!*p)
			return 0;
	}
}

int netpeer_spec_check(const struct sandbox_spec *s)
{
	char why[128];
	struct in_addr via;

	if (!s->peer_addr && !s->peers && !s->peer_via)
		return 0;
	if (!s->peer_addr || !s->peers || !s->peer_via)
		return fail_error("peer interface: peer address, peers and the parent's address "
				  "go together");
	if (sandbox_peers_check(s->peer_addr, s->peers, why, sizeof(why)) < 0)
		return fail_error("peer interface: %s", why);
	if (!ipv4_ok(s->peer_via, strlen(s->peer_via), &via) || special(via))
		return fail_error("peer interface: the parent's address %.32s is not an IPv4 "
				  "unicast address (loopback, multicast?)", s->peer_via);
	return 0;
}

int netpeer_ruleset(const char *peers, char *out, size_t len)
{
	/* priority below egress's table (0): a dropped packet never reaches it */
	int n = snprintf(out, len,
			 "table inet labd_peer {\n"
			 "\tchain input {\n"
			 "\t\ttype filter hook input priority -10; policy accept;\n"
			 "\t\tiifname \"" SANDBOX_PEER_IFNAME "\" meta nfproto != ipv4 drop\n"
			 "\t\tiifname \"" SANDBOX_PEER_IFNAME "\" ip saddr != { %s } drop\n"
			 "\t}\n"
			 "\tchain output {\n"
			 "\t\ttype filter hook output priority -10; policy accept;\n"
			 "\t\toifname \"" SANDBOX_PEER_IFNAME "\" meta nfproto != ipv4 drop\n"
			 "\t\toifname \"" SANDBOX_PEER_IFNAME "\" ip daddr != { %s } drop\n"
			 "\t}\n"
			 "}\n",
			 peers, peers);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* The interface holding via and its prefix length. 0 or -1 (fail.h). */
static int find_parent(const char *via, char *ifname, size_t len, unsigned *bits)
{
	struct ifaddrs *all, *a;
	struct in_addr want;
	int rc = -1;

	if (inet_pton(AF_INET, via, &want) != 1 || getifaddrs(&all) < 0)
		return fail_errno("getifaddrs");
	for (a = all; a && rc < 0; a = a->ifa_next) {
		if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || !a->ifa_netmask ||
		    ((struct sockaddr_in *)(void *)a->ifa_addr)->sin_addr.s_addr != want.s_addr)
			continue;
		uint32_t mask = ntohl(((struct sockaddr_in *)(void *)a->ifa_netmask)->sin_addr.s_addr);
		*bits = (unsigned)__builtin_popcount(mask);
		snprintf(ifname, len, "%s", a->ifa_name);
		rc = 0;
	}
	freeifaddrs(all);
	if (rc < 0)
		return fail_error("peer interface: no interface of the host holds %s", via);
	if (strcmp(ifname, "lo") == 0 || *bits < 8 || *bits > 30)
		return fail_error("peer interface: %s on %s (/%u) is no cluster network", via, ifname,
				  *bits);
	return 0;
}

/* Runs argv[0] as root with input on its stdin, in the network namespace nsfd when
 * inside (nsfd is its fd 3 either way, for "/proc/self/fd/3").  What it printed goes
 * into the failure message, unless quiet (a try with a fallback).  0 or -1. */
static int run_tool(char *const argv[], const char *input, int nsfd, bool inside, bool quiet)
{
	struct tool_run t = {.argv = argv, .input = input, .nsfd = inside ? nsfd : -1,
			     .fd3 = nsfd, .quiet = quiet};

	return tool_run(&t);
}

/* The table first (no packet passes peer0 before it holds), then the link, made in
 * the host's namespace on the parent and born in the sandbox's, its address, up. */
static int build(const struct sandbox_spec *s, int nsfd, const char *parent, unsigned bits)
{
	static char rules[NETPEER_RULESET_MAX], script[NETPEER_RULESET_MAX];
	size_t used;
	char *nft[] = {(char *)s->nft_path, "-f", "-", NULL};
	char *ip[] = {(char *)tool_ip_path(), "-batch", "-", NULL};

	if (netpeer_ruleset(s->peers, rules, sizeof(rules)) < 0)
		return fail_error("peer interface: too many peers for the ruleset");
	if (run_tool(nft, rules, nsfd, true, false) < 0)
		return -1;
	for (int kind = 0;; kind++) {
		snprintf(script, sizeof(script),
			 "link add link %s name " SANDBOX_PEER_IFNAME " netns /proc/self/fd/3 type %s\n",
			 parent, kind ? "macvlan mode bridge" : "ipvlan mode l2");
		if (run_tool(ip, script, nsfd, false, kind == 0) == 0)
			break;
		if (kind) /* the message names the macvlan's failure */
			return -1;
	}
	used = (size_t)snprintf(script, sizeof(script),
				"addr add %s/%u dev " SANDBOX_PEER_IFNAME "\nlink set "
				SANDBOX_PEER_IFNAME " up\n", s->peer_addr, bits);
	/* a host route per peer: pasta may give eth0 the node's own address and prefix,
	 * whose route would otherwise take the peers' packets to egress */
	for (const char *p = s->peers; *p && used < sizeof(script);) {
		size_t len = strcspn(p, ",");
		used += (size_t)snprintf(script + used, sizeof(script) - used,
					 "route add %.*s/32 dev " SANDBOX_PEER_IFNAME " src %s\n",
					 (int)len, p, s->peer_addr);
		p += len + (p[len] == ',');
	}
	if (used >= sizeof(script))
		return fail_error("peer interface: too many peers for the routes");
	return run_tool(ip, script, nsfd, true, false);
}

int netpeer_start(const struct sandbox_spec *s, pid_t pid, uint64_t start_ticks)
{
	char parent[IF_NAMESIZE];
	unsigned bits = 0;
	int nsfd, rc;

	if (!s->peers)
		return 0;
	if (find_parent(s->peer_via, parent, sizeof(parent), &bits) < 0)
		return -1;
	if (egress_open_netns(pid, start_ticks, &nsfd) < 0)
		return fail_errno("the network namespace of init %d", (int)pid);
	rc = build(s, nsfd, parent, bits);
	close(nsfd);
	return rc;
}
