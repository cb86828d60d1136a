/* egress.h - outbound network for a sandbox (SANDBOX_NET_EGRESS): root installs an
 * nftables ruleset inside the sandbox's network namespace, then starts pasta for it.
 * Internal to sandbox/; see docs/sandbox.md, "Network" and docs/security.md. */
#ifndef LABD_SANDBOX_EGRESS_H
#define LABD_SANDBOX_EGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "labd/sandbox.h"

/* The address the sandbox's resolv.conf names; pasta maps UDP port 53 sent there to
 * the upstream resolver ([network] dns, else the host's resolv.conf). */
#define EGRESS_DNS_ADDR "169.254.1.53"
#define EGRESS_RULESET_MAX 16384

/* Always denied on every interface but lo: loopback, "this network", link-local,
 * multicast and broadcast, and the v6 forms that carry a v4 address (v4-mapped,
 * SIIT, v4-compatible, 6to4, Teredo, local-use NAT64) (comma-separated CIDRs).  Each
 * denied v4 range is also denied in the well-known NAT64 prefix (64:ff9b::/96). */
extern const char egress_always_denied[];

/* Canonical "address/bits" for one item "ADDRESS" or "ADDRESS/BITS" (host bits
 * cleared) in out, *v6 set; -1 when malformed.  Pure. */
int egress_cidr(const char *item, char *out, size_t len, bool *v6);
/* The nft script for one sandbox: outbound through lo free (and through peer_ifname,
 * when not NULL: the peer interface, filtered by its own table, netpeer.h); to the DNS forward address
 * UDP 53 only; every CIDR of the comma-separated lists deny and host_addrs rejected
 * (TCP reset, else ICMP admin-prohibited); max_connections concurrent connections
 * (0 = no bound); rate_bytes_per_s each way (0 = none).  0, or -1 with the bad item in
 * why.  Pure. */
/* The policer's token bucket for a rate: an eighth of a second of it, at least 64 KiB. */
uint64_t egress_burst_bytes(uint64_t rate_bytes_per_s);
int egress_ruleset(const char *deny, const char *host_addrs, const char *peer_ifname,
		   uint32_t max_connections, uint64_t rate_bytes_per_s, char *out, size_t len,
		   char *why, size_t whylen);
/* The host's side of one veth sandbox (netveth.c). */
struct egress_veth {
	const char *table;        /* nft table, inet family: "labd_veth_<slot>" */
	const char *ifname;       /* the host end: "lbv<slot>" */
	const char *sandbox_addr; /* the sandbox end's IPv4 address */
	const char *range;        /* every sandbox's network ([network] veth_range) */
	const char *resolver;     /* IPv4 address DNS is DNATed to; "" = none */
	bool resolver_local;      /* the host itself (loopback or one of its addresses) */
};
/* The nft script of the host's side of a veth sandbox (egress_rules.c says what it
 * holds): deny, max_connections and rate as for egress_ruleset.  0, or -1 with the bad
 * item in why.  Pure. */
int egress_veth_ruleset(const struct egress_veth *v, const char *deny, uint32_t max_connections,
			uint64_t rate_bytes_per_s, char *out, size_t len, char *why, size_t whylen);
/* Every address of the host (getifaddrs, this network namespace), comma-separated as
 * "a/32" or "a/128".  0 or -1. */
int egress_host_addrs(char *out, size_t len);
/* <state_dir>/egress-resolv.conf naming EGRESS_DNS_ADDR, written when missing or
 * different; its path in out.  0 or -1 (fail.h). */
int egress_resolv_conf(const char *state_dir, char *out, size_t len);
/* The cgroup pasta starts in: "<id>.net" (a user name has no dot, so no sandbox id is
 * ever one); empty once pasta runs in the sandbox's own. */
void egress_cgroup_name(const char *id, char *out, size_t len);
/* Installs the ruleset in pid's network namespace (nft run as root in it), then
 * starts pasta for that namespace (start_ticks: the init's, egress_open_netns) in a
 * cgroup of its own, waits until it has configured the namespace and moves it into
 * the sandbox's cgroup <id>.  Call before any of the sandbox's code runs.  0 or -1
 * (fail.h); on failure what was started is left for the teardown (the cgroups). */
int egress_start(const struct sandbox_spec *s, const char *id, pid_t pid, uint64_t start_ticks);
/* Opens pid's network namespace (O_CLOEXEC fd in *out) only if pid is still the
 * process that started at start_ticks (/proc/<pid>/stat field 22), through a pidfd,
 * so that a pid reused meanwhile never lends its namespace.  0, or -1 with errno
 * (ESRCH: not that process, or ticks 0). */
int egress_open_netns(pid_t pid, uint64_t start_ticks, int *out);
/* Removes pasta's files of sandbox id (pid file, log, root's record). */
void egress_files_remove(const char *state_dir, const char *id);

#endif
