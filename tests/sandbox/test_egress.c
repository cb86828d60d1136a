/* test_egress.c - the egress ruleset text and its address parser (pure logic), and
 * how a pasta restart opens the sandbox's network namespace (a child of the test). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "sandbox/egress.h"
#include "sandbox/netpeer.h"
#include "sandbox/state.h"

static void test_cidr(void **st)
{
	char out[64];
	bool v6;
	(void)st;
	assert_int_equal(egress_cidr("10.1.2.3/8", out, sizeof(out), &v6), 0);
	assert_string_equal(out, "10.0.0.0/8"); /* host bits cleared */
	assert_false(v6);
	assert_int_equal(egress_cidr("198.18.0.1", out, sizeof(out), &v6), 0);
	assert_string_equal(out, "198.18.0.1/32");
	assert_int_equal(egress_cidr("FC00::1/7", out, sizeof(out), &v6), 0);
	assert_string_equal(out, "fc00::/7");
	assert_true(v6);
	assert_int_equal(egress_cidr("172.16.0.0/12", out, sizeof(out), &v6), 0);
	assert_string_equal(out, "172.16.0.0/12");
	assert_int_equal(egress_cidr("10.0.0.0/33", out, sizeof(out), &v6), -1);
	assert_int_equal(egress_cidr("::/129", out, sizeof(out), &v6), -1);
	assert_int_equal(egress_cidr("10.0.0.0/+8", out, sizeof(out), &v6), -1);
	assert_int_equal(egress_cidr("10.0.0.0/", out, sizeof(out), &v6), -1);
	assert_int_equal(egress_cidr("/8", out, sizeof(out), &v6), -1);
	assert_int_equal(egress_cidr("example.org", out, sizeof(out), &v6), -1);
	assert_int_equal(egress_cidr("10.0.0.0/8;", out, sizeof(out), &v6), -1);
}

static void test_ruleset(void **st)
{
	char out[EGRESS_RULESET_MAX], why[128];
	(void)st;
	assert_int_equal(egress_ruleset("198.19.0.0/16, 10.0.0.0/8", "192.0.2.2/32,fd00::2/128", NULL,
					12, 4 << 20, out, sizeof(out), why, sizeof(why)),
			 0);
	/* lo first, then the DNS forward address, then the denied */
	const char *lo = strstr(out, "oifname \"lo\" accept");
	const char *dns = strstr(out, "ip daddr " EGRESS_DNS_ADDR " udp dport 53 accept");
	const char *ll = strstr(out, "ip daddr 169.254.0.0/16 goto deny");
	assert_non_null(lo);
	assert_non_null(dns);
	assert_non_null(ll);
	assert_true(lo < dns && dns < ll);
	assert_non_null(strstr(out, "ip daddr 127.0.0.0/8 goto deny"));
	assert_non_null(strstr(out, "ip6 daddr fe80::/10 goto deny"));
	assert_non_null(strstr(out, "ip daddr 192.0.2.2/32 goto deny"));
	assert_non_null(strstr(out, "ip6 daddr fd00::2/128 goto deny"));
	assert_non_null(strstr(out, "ip daddr 198.19.0.0/16 goto deny"));
	assert_non_null(strstr(out, "ip daddr 10.0.0.0/8 goto deny"));
	/* v6 forms of a v4 address: the translated prefixes, and each denied v4 range
	 * (built in, configured, the host's) in the well-known NAT64 prefix */
	assert_non_null(strstr(out, "ip6 daddr 2002::/16 goto deny"));
	assert_non_null(strstr(out, "ip6 daddr 2001::/32 goto deny"));
	assert_non_null(strstr(out, "ip6 daddr 64:ff9b:1::/48 goto deny"));
	assert_non_null(strstr(out, "ip6 daddr ::ffff:0:0:0/96 goto deny"));
	assert_non_null(strstr(out, "ip6 daddr ::/96 goto deny"));
	assert_non_null(strstr(out, "ip6 daddr 64:ff9b::a00:0/104 goto deny"));
	assert_non_null(strstr(out, "ip6 daddr 64:ff9b::c613:0/112 goto deny"));
	assert_non_null(strstr(out, "ip6 daddr 64:ff9b::a9fe:0/112 goto deny"));
	assert_non_null(strstr(out, "ip6 daddr 64:ff9b::7f00:0/104 goto deny"));
	assert_non_null(strstr(out, "ip6 daddr 64:ff9b::c000:202/128 goto deny"));
	/* but not the whole prefix: on a v6-only host it leads to every public v4 address */
	assert_null(strstr(out, "ip6 daddr 64:ff9b::/96 "));
	assert_non_null(strstr(out, "ct state new ct count over 12 goto deny"));
	assert_non_null(strstr(out, "iifname \"lo\" accept"));
	/* the rate both ways */
	const char *rate = strstr(out, "limit rate over 4194304 bytes/second burst 524288 bytes drop");
	assert_non_null(rate);
	assert_non_null(strstr(rate + 1, "limit rate over 4194304 bytes/second"));
	assert_non_null(strstr(out, "reject with tcp reset"));

	/* no bound and no rate: no such rules */
	assert_int_equal(egress_ruleset("", "", NULL, 0, 0, out, sizeof(out), why, sizeof(why)), 0);
	assert_null(strstr(out, "ct count"));
	assert_null(strstr(out, "limit rate"));

	/* anything but addresses never reaches nft */
	assert_int_equal(egress_ruleset("10.0.0.0/8 } flush ruleset", "", NULL, 0, 0, out, sizeof(out),
					why, sizeof(why)),
			 -1);
	assert_non_null(strstr(why, "}"));
	/* and a ruleset that does not fit is an error, not a cut */
	assert_int_equal(egress_ruleset("10.0.0.0/8", "", NULL, 0, 0, out, 200, why, sizeof(why)), -1);
}

/* The peer interface: egress's table lets peer0 alone (its own table filters it),
 * before the deny list and outside the rate; labd_peer drops all but the peers on it,
 * both ways; a peer set is checked strictly. */
static void test_peer_rules(void **st)
{
	static char out[EGRESS_RULESET_MAX];
	char why[160];

	(void)st;
	assert_int_equal(egress_ruleset("10.0.0.0/8", "", "peer0", 0, 4194304, out, sizeof(out), why,
					sizeof(why)),
			 0);
	const char *o = strstr(out, "oifname \"peer0\" accept");
	const char *i = strstr(out, "iifname \"peer0\" accept");
	assert_non_null(o);
	assert_non_null(i);
	assert_true(o < strstr(out, "ip daddr 10.0.0.0/8 goto deny"));
	assert_true(i < strstr(i, "limit rate"));
	assert_int_equal(egress_ruleset("", "", NULL, 0, 0, out, sizeof(out), why, sizeof(why)), 0);
	assert_null(strstr(out, "peer0"));

	assert_int_equal(netpeer_ruleset("10.1.0.2,10.1.0.3", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "iifname \"peer0\" ip saddr != { 10.1.0.2,10.1.0.3 } drop"));
	assert_non_null(strstr(out, "oifname \"peer0\" ip daddr != { 10.1.0.2,10.1.0.3 } drop"));
	assert_non_null(strstr(out, "iifname \"peer0\" meta nfproto != ipv4 drop"));
	assert_int_equal(netpeer_ruleset("10.1.0.2", out, 64), -1);

	assert_int_equal(sandbox_peers_check("10.1.0.1", "10.1.0.2,10.1.0.3", why, sizeof(why)), 0);
	static const char *const bad[][3] = {
		{"10.1.0.1", "10.1.0.1", "peers: holds peer_addr"},
		{"10.1.0.1", "10.1.0.2,10.1.0.2", "named twice"},
		{"10.1.0.1", "10.1.0.2,", "peers:"},
		{"10.1.0.1", "10.1.0.2;flush ruleset", "peers:"},
		{"10.1.0.1", "224.0.0.1", "peers:"},
		{"10.1.0.1", "", "peers: empty"},
		{"127.0.0.1", "10.1.0.2", "peer_addr"},
		{"10.1.0.1/24", "10.1.0.2", "peer_addr"},
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		assert_int_equal(sandbox_peers_check(bad[k][0], bad[k][1], why, sizeof(why)), -1);
		assert_non_null(strstr(why, bad[k][2]));
	}
	char many[1200] = "";
	for (int k = 0; k < 64; k++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "%s10.2.0.%d",
			 k ? "," : "", k + 1);
	assert_int_equal(sandbox_peers_check("10.1.0.1", many, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "more than 63"));
	*strrchr(many, ',') = '\0'; /* 63 */
	assert_int_equal(sandbox_peers_check("10.1.0.1", many, why, sizeof(why)), 0);
}

/* The namespace of exactly the process that started at the given time: a pid whose
 * start time differs (reused by another process) or that is gone lends nothing. */
/* The host's side of a veth sandbox: every rule keyed by its interface, spoofed
 * sources and non-IPv4 dropped, the host itself refused, DNS DNATed (and let into the
 * host only for a loopback resolver), the denied lists and the sandboxes' range
 * refused, nothing new into the sandbox, the sandbox's own address masqueraded. */
static void test_veth_ruleset(void **st)
{
	static char out[EGRESS_RULESET_MAX];
	struct egress_veth v = {"labd_veth_7", "lbv7", "10.254.0.30", "10.254.0.0/16", "127.0.0.53", true};
	char why[160];

	(void)st;
	assert_int_equal(egress_veth_ruleset(&v, "198.19.0.0/16", 5, 1 << 20, out, sizeof(out), why,
					     sizeof(why)), 0);
	assert_non_null(strstr(out, "table inet labd_veth_7 {"));
	assert_non_null(strstr(out, "iifname \"lbv7\" ip saddr != 10.254.0.30 drop"));
	assert_non_null(strstr(out, "iifname \"lbv7\" meta nfproto != ipv4 drop"));
	assert_non_null(strstr(out, "dnat ip to 127.0.0.53:53"));
	assert_non_null(strstr(out, "ct original ip daddr 169.254.1.53 ip daddr 127.0.0.53 udp dport 53 accept"));
	assert_non_null(strstr(out, "iifname \"lbv7\" goto deny"));
	assert_non_null(strstr(out, "ip daddr 198.19.0.0/16 goto deny"));
	assert_non_null(strstr(out, "ip daddr 10.254.0.0/16 goto deny"));
	assert_non_null(strstr(out, "ip daddr 127.0.0.0/8 goto deny"));
	assert_non_null(strstr(out, "ct count over 5 goto deny"));
	assert_non_null(strstr(out, "oifname \"lbv7\" drop"));
	assert_non_null(strstr(out, "ip saddr 10.254.0.30 oifname != \"lbv7\" masquerade"));
	/* a resolver elsewhere: forwarded, never let into the host */
	v.resolver = "198.18.3.2";
	v.resolver_local = false;
	assert_int_equal(egress_veth_ruleset(&v, "", 0, 0, out, sizeof(out), why, sizeof(why)), 0);
	assert_null(strstr(out, "udp dport 53 accept\n\t\tiifname"));
	assert_non_null(strstr(out, "ct original ip daddr 169.254.1.53 ip daddr 198.18.3.2 udp dport 53 accept"));
	assert_null(strstr(out, "limit rate"));
	assert_int_equal(egress_veth_ruleset(&v, "example.org", 0, 0, out, sizeof(out), why,
					     sizeof(why)), -1);
	assert_non_null(strstr(why, "example.org"));
}

static void test_open_netns(void **st)
{
	struct stat want, got;
	uint64_t ticks;
	int fd = -1;
	pid_t c;
	(void)st;

	if ((c = fork()) == 0) {
		pause();
		_exit(0);
	}
	assert_true(c > 0);
	ticks = sandbox_proc_start_ticks(c);
	assert_true(ticks > 0);
	assert_int_equal(egress_open_netns(c, ticks, &fd), 0);
	assert_int_equal(fstat(fd, &got), 0);
	assert_int_equal(stat("/proc/self/ns/net", &want), 0); /* the child shares ours */
	assert_true(got.st_ino == want.st_ino && got.st_dev == want.st_dev);
	close(fd);
	fd = -1;
	assert_int_equal(egress_open_netns(c, ticks + 1, &fd), -1);
	assert_int_equal(errno, ESRCH);
	assert_int_equal(egress_open_netns(c, 0, &fd), -1);
	kill(c, SIGKILL);
	assert_int_equal(waitpid(c, NULL, 0), c);
	assert_int_equal(egress_open_netns(c, ticks, &fd), -1);
	assert_int_equal(fd, -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cidr),
		cmocka_unit_test(test_ruleset),
		cmocka_unit_test(test_veth_ruleset),
		cmocka_unit_test(test_peer_rules),
		cmocka_unit_test(test_open_netns),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
