/* egress_rules.c - the nftables ruleset of a sandbox with egress, as text (pure); see
 * egress.h.  The ruleset lives in the sandbox's own network namespace, where only root
 * outside can change it: the user has no CAP_NET_ADMIN there (child.c drops every
 * capability) and the seccomp filter refuses netfilter netlink (secfilter.c). */
#include "sandbox/egress.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 0/8 reaches the namespace itself, 127/8 and ::1 never leave lo, 169.254/16 and
 * fe80::/10 hold cloud metadata services, 224/4, 240/4 and ff00::/8 are multicast and
 * reserved.  The rest are v6 forms a translator or tunnel turns into a v4 address,
 * which would carry it past the v4 rules: v4-mapped ::ffff:0:0/96, SIIT's
 * ::ffff:0:0:0/96, v4-compatible ::/96, 6to4 2002::/16, Teredo 2001::/32 and the
 * local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215; its embedding depends on the
 * translator's prefix length, so all of it).  The well-known NAT64 prefix
 * 64:ff9b::/96 is denied per v4 range instead (put_nat64): on a v6-only host it is the
 * way to every public v4 address. */
const char egress_always_denied[] = "0.0.0.0/8,127.0.0.0/8,169.254.0.0/16,224.0.0.0/4,"
				    "240.0.0.0/4,::/128,::1/128,::ffff:0:0/96,fe80::/10,ff00::/8,"
				    "::ffff:0:0:0/96,::/96,2002::/16,2001::/32,64:ff9b:1::/48";

/* The bounded text being built; full once anything did not fit. */
struct text {
	char *p;
	size_t len, used;
	bool full;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(t->p + t->used, t->len - t->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= t->len - t->used)
		t->full = true;
	else
		t->used += (size_t)n;
}

static void clear_host_bits(unsigned char *bin, unsigned max_bits, unsigned long bits)
{
	for (unsigned i = 0; i < max_bits / 8; i++) {
		if (i * 8 >= bits)
			bin[i] = 0;
		else if (i * 8 + 8 > bits)
			bin[i] &= (unsigned char)(0xff << (8 - (bits - i * 8)));
	}
}

int egress_cidr(const char *item, char *out, size_t len, bool *v6)
{
	char addr[INET6_ADDRSTRLEN + 1], text[INET6_ADDRSTRLEN + 1];
	unsigned char bin[16];
	const char *slash = strchr(item, '/');
	size_t alen = slash ? (size_t)(slash - item) : strlen(item);
	unsigned long bits;
	int family, n;

	if (alen == 0 || alen >= sizeof(addr))
		return -1;
	memcpy(addr, item, alen);
	addr[alen] = '\0';
	family = strchr(addr, ':') ? AF_INET6 : AF_INET;
	if (inet_pton(family, addr, bin) != 1)
		return -1;
	unsigned max_bits = family == AF_INET6 ? 128 : 32;
	if (slash) {
		char *end;
		/* digits only: strtoul would take "+8", " 8" or "0x8" */
		if (!isdigit((unsigned char)slash[1]) || strlen(slash + 1) > 3)
			return -1;
		bits = strtoul(slash + 1, &end, 10);
		if (*end || bits > max_bits)
			return -1;
	} else {
		bits = max_bits;
	}
	clear_host_bits(bin, max_bits, bits);
	if (!inet_ntop(family, bin, text, sizeof(text)))
		return -1;
	n = snprintf(out, len, "%s/%lu", text, bits);
	if (n < 0 || (size_t)n >= len)
		return -1;
	*v6 = family == AF_INET6;
	return 0;
}

/* A denied v4 range as the well-known NAT64 prefix embeds it (RFC 6052:
 * 64:ff9b::a.b.c.d/96+bits), so a NAT64 gateway cannot be the way to it. */
static void put_nat64(struct text *t, const char *v4cidr)
{
	unsigned char bin[16] = {0x00, 0x64, 0xff, 0x9b};
	char addr[INET_ADDRSTRLEN], text[INET6_ADDRSTRLEN];
	const char *slash = strchr(v4cidr, '/');
	unsigned long bits = strtoul(slash + 1, NULL, 10);

	snprintf(addr, sizeof(addr), "%.*s", (int)(slash - v4cidr), v4cidr);
	if (inet_pton(AF_INET, addr, bin + 12) != 1 || !inet_ntop(AF_INET6, bin, text, sizeof(text)))
		return; /* egress_cidr made it: cannot happen */
	put(t, "\t\tip6 daddr %s/%lu goto deny\n", text, 96 + bits);
}

/* One "goto deny" rule per CIDR of list (commas or blanks between items), and for a
 * v4 one its NAT64 form: one rule each, not a set, because host addresses overlap the
 * configured ranges and an interval set refuses overlapping elements. */
static int put_denied(struct text *t, const char *list, char *why, size_t whylen)
{
	char item[128], cidr[INET6_ADDRSTRLEN + 8];
	const char *p = list ? list : "";
	bool v6;

	while (*p) {
		size_t n = strcspn(p, ", \t");
		if (n == 0) {
			p++;
			continue;
		}
		if (n >= sizeof(item) || (snprintf(item, sizeof(item), "%.*s", (int)n, p),
					  egress_cidr(item, cidr, sizeof(cidr), &v6) < 0)) {
			snprintf(why, whylen, "not an address or network: %.*s", (int)(n > 64 ? 64 : n), p);
			return -1;
		}
		put(t, "\t\t%s daddr %s goto deny\n", v6 ? "ip6" : "ip", cidr);
		if (!v6)
			put_nat64(t, cidr);
		p += n;
	}
	return 0;
}

uint64_t egress_burst_bytes(uint64_t rate_bytes_per_s)
{
	return rate_bytes_per_s / 8 > 65536 ? rate_bytes_per_s / 8 : 65536;
}

/* A token bucket holding an eighth of a second (at least 64 KiB): TCP's bursts pass,
 * the average stays at the rate. */
static void put_rate(struct text *t, uint64_t rate_bytes_per_s)
{
	uint64_t burst = egress_burst_bytes(rate_bytes_per_s);

	put(t, "\t\tlimit rate over %llu bytes/second burst %llu bytes drop\n",
	    (unsigned long long)rate_bytes_per_s, (unsigned long long)burst);
}

int egress_ruleset(const char *deny, const char *host_addrs, const char *peer_ifname,
		   uint32_t max_connections, uint64_t rate_bytes_per_s, char *out, size_t len,
		   char *why, size_t whylen)
{
	struct text t = {out, len, 0, false};

	why[0] = '\0';
	put(&t, "table inet labd_egress {\n"
		"\tchain deny {\n"
		"\t\tmeta l4proto tcp reject with tcp reset\n"
		"\t\treject with icmpx type admin-prohibited\n"
		"\t}\n"
		"\tchain output {\n"
		"\t\ttype filter hook output priority 0; policy accept;\n"
		/* the namespace's own loopback: kernels talk to Jupyter over TCP on it */
		"\t\toifname \"lo\" accept\n");
	/* the peer interface is root's table labd_peer's alone (netpeer.c): its peers are
	 * cluster addresses the deny list holds, and its traffic is neither egress nor
	 * counted against egress's connections and rate */
	if (peer_ifname)
		put(&t, "\t\toifname \"%s\" accept\n", peer_ifname);
	put(&t,
		/* pasta maps UDP only (--dns-forward) */
		"\t\tip daddr " EGRESS_DNS_ADDR " udp dport 53 accept\n");
	if (put_denied(&t, egress_always_denied, why, whylen) < 0 ||
	    put_denied(&t, host_addrs, why, whylen) < 0 || put_denied(&t, deny, why, whylen) < 0)
		return -1;
	if (max_connections)
		put(&t, "\t\tct state new ct count over %u goto deny\n", max_connections);
	if (rate_bytes_per_s)
		put_rate(&t, rate_bytes_per_s);
	put(&t, "\t}\n"
		"\tchain input {\n"
		"\t\ttype filter hook input priority 0; policy accept;\n"
		"\t\tiifname \"lo\" accept\n");
	if (peer_ifname)
		put(&t, "\t\tiifname \"%s\" accept\n", peer_ifname);
	if (rate_bytes_per_s)
		put_rate(&t, rate_bytes_per_s);
	put(&t, "\t}\n}\n");
	if (t.full) {
		snprintf(why, whylen, "ruleset longer than %zu bytes", len);
		return -1;
	}
	return 0;
}

/* The host's side of a veth sandbox (netveth.c): one table of its own, every rule keyed
 * by its host interface.  What arrives on it with another source is dropped before
 * conntrack sees it (no spoofing), as is anything but IPv4; nothing on it reaches the
 * host itself (input: every address of every interface, 127/8 included) but DNS
 * DNATed to a resolver the host itself runs; what it sends on is refused towards the
 * same ranges as inside (the denied lists and the other sandboxes' range), bounded in
 * connections and rate; nothing new goes into it (no other sandbox, nothing outside
 * opens a connection to it); what leaves elsewhere is masqueraded. */
int egress_veth_ruleset(const struct egress_veth *v, const char *deny, uint32_t max_connections,
			uint64_t rate_bytes_per_s, char *out, size_t len, char *why, size_t whylen)
{
	struct text t = {out, len, 0, false};
	const char *i = v->ifname;

	why[0] = '\0';
	put(&t, "table inet %s {\n"
		"\tchain deny {\n"
		"\t\tmeta l4proto tcp reject with tcp reset\n"
		"\t\treject with icmpx type admin-prohibited\n"
		"\t}\n"
		"\tchain spoof {\n"
		"\t\ttype filter hook prerouting priority raw; policy accept;\n"
		"\t\tiifname \"%s\" meta nfproto != ipv4 drop\n"
		"\t\tiifname \"%s\" ip saddr != %s drop\n"
		"\t}\n",
	    v->table, i, i, v->sandbox_addr);
	put(&t, "\tchain dns {\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n");
	if (v->resolver[0])
		put(&t, "\t\tiifname \"%s\" ip daddr " EGRESS_DNS_ADDR " udp dport 53 dnat ip to %s:53\n",
		    i, v->resolver);
	put(&t, "\t}\n\tchain input {\n\t\ttype filter hook input priority filter; policy accept;\n");
	if (v->resolver[0] && v->resolver_local)
		put(&t, "\t\tiifname \"%s\" ct original ip daddr " EGRESS_DNS_ADDR
			" ip daddr %s udp dport 53 accept\n", i, v->resolver);
	put(&t, "\t\tiifname \"%s\" goto deny\n\t}\n"
		"\tchain forward {\n\t\ttype filter hook forward priority filter; policy accept;\n"
		"\t\tiifname \"%s\" jump sent\n"
		"\t\toifname \"%s\" ct state established,related jump received\n"
		"\t\toifname \"%s\" drop\n\t}\n"
		"\tchain sent {\n", i, i, i, i);
	if (v->resolver[0] && !v->resolver_local)
		put(&t, "\t\tct original ip daddr " EGRESS_DNS_ADDR " ip daddr %s udp dport 53 accept\n",
		    v->resolver);
	if (put_denied(&t, egress_always_denied, why, whylen) < 0 ||
	    put_denied(&t, v->range, why, whylen) < 0 || put_denied(&t, deny, why, whylen) < 0)
		return -1;
	if (max_connections)
		put(&t, "\t\tct state new ct count over %u goto deny\n", max_connections);
	if (rate_bytes_per_s)
		put_rate(&t, rate_bytes_per_s);
	put(&t, "\t}\n\tchain received {\n");
	if (rate_bytes_per_s)
		put_rate(&t, rate_bytes_per_s);
	/* accepted here: back in forward, the next rule drops all else towards the sandbox */
	put(&t, "\t\taccept\n\t}\n\tchain masq {\n\t\ttype nat hook postrouting priority srcnat; policy accept;\n"
		"\t\tip saddr %s oifname != \"%s\" masquerade\n\t}\n}\n", v->sandbox_addr, i);
	if (t.full) {
		snprintf(why, whylen, "ruleset longer than %zu bytes", len);
		return -1;
	}
	return 0;
}
