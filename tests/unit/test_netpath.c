/* Unit tests of [network] path = auto (supervisor/netpath.c): what stops the host
 * forwarding, read from nft's JSON rulesets as Docker, ufw, firewalld and labd's own
 * veth tables leave them, the legacy iptables' tables and a running firewalld; and
 * the settling of the config (with a stand-in nft that prints a ruleset). */
#include "unit.h"

#include <sys/stat.h>

#include "config/config.h"
#include "labd/sandbox.h"
#include "supervisor/netpath.h"

#define META "{\"metainfo\": {\"version\": \"1.0.6\", \"json_schema_version\": 1}}"
#define CHAIN(family, table, name, hook, policy)                                          \
	"{\"chain\": {\"family\": \"" family "\", \"table\": \"" table "\", \"name\": \"" name \
	"\", \"handle\": 1, \"type\": \"filter\", \"hook\": \"" hook "\", \"prio\": 0, "      \
	"\"policy\": \"" policy "\"}}"
#define RULESET(...) "{\"nftables\": [" META __VA_ARGS__ "]}"

static bool blocked(const char *chains, const char *legacy, bool firewalld, char *why)
{
	struct netpath_host h = {chains, legacy, firewalld};
	return netpath_blocked(&h, why, 200);
}

static void test_a_host_that_forwards(void **state)
{
	char why[200];

	(void)state;
	/* nothing at all (a fresh host, or one network namespace of its own) */
	assert_false(blocked(RULESET(""), NULL, false, why));
	assert_string_equal(why, "");
	/* labd's own tables, an input chain that drops and a forward chain that accepts */
	assert_false(blocked(RULESET(", " CHAIN("inet", "labd_veth", "forward", "forward", "accept")
				     ", " CHAIN("ip", "labd_veth_3", "fwd", "forward", "accept")
				     ", " CHAIN("inet", "filter", "input", "input", "drop")),
			     "nat\nmangle\n", false, why));
	/* IPv6's forward policy (Docker's ip6tables): the veth path is IPv4 only */
	assert_false(blocked(RULESET(", " CHAIN("ip6", "filter", "FORWARD", "forward", "drop")),
			     NULL, false, why));
	/* a chain with no hook (a regular chain jumped to) has no policy of its own */
	assert_false(blocked(RULESET(", {\"chain\": {\"family\": \"ip\", \"table\": \"filter\", "
				     "\"name\": \"DOCKER-USER\", \"handle\": 9}}"),
			     "", false, why));
}

static void test_what_stops_forwarding_is_named(void **state)
{
	char why[200];

	(void)state;
	/* Docker (and ufw's default) through iptables-nft: table ip filter, policy drop */
	assert_true(blocked(RULESET(", " CHAIN("ip", "filter", "INPUT", "input", "accept")
				    ", " CHAIN("ip", "filter", "FORWARD", "forward", "drop")),
			    NULL, false, why));
	assert_string_equal(why, "chain ip filter/FORWARD drops forwarded packets by default");
	/* an admin's own nftables table */
	assert_true(blocked(RULESET(", " CHAIN("inet", "fw", "towards", "forward", "drop")), NULL,
			    false, why));
	assert_non_null(strstr(why, "inet fw/towards"));
	/* firewalld's nftables backend: its forward chain accepts by policy, its rules reject */
	assert_true(blocked(RULESET(", " CHAIN("inet", "firewalld", "filter_FORWARD", "forward",
					       "accept")),
			    NULL, false, why));
	assert_non_null(strstr(why, "firewalld's table inet firewalld"));
	/* firewalld running, whatever its tables */
	assert_true(blocked(RULESET(""), NULL, true, why));
	assert_non_null(strstr(why, "firewalld runs"));
	/* the legacy iptables' filter table: its policy is not nft's to read */
	assert_true(blocked(RULESET(""), "nat\nfilter\n", false, why));
	assert_non_null(strstr(why, "legacy iptables"));
	/* nft not asked, or its answer unreadable: veth would need it anyway */
	assert_true(blocked(NULL, NULL, false, why));
	assert_non_null(strstr(why, "nft could not list"));
	assert_true(blocked("{not json", NULL, false, why));
}

/* A stand-in nft printing text (exit status rc) at dir/nft. */
static void stand_in_nft(const char *dir, const char *text, int rc, struct labd_config *cfg)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/nft", dir);
	assert_non_null(f = fopen(path, "w"));
	fprintf(f, "#!/bin/sh\ncat <<'END'\n%s\nEND\nexit %d\n", text, rc);
	fclose(f);
	assert_int_equal(chmod(path, 0755), 0);
	snprintf(cfg->net_nft, sizeof(cfg->net_nft), "%s", path);
}

static void test_settle(void **state)
{
	struct labd_config cfg;
	char dir[64];

	(void)state;
	unit_tempdir(dir);
	config_defaults(&cfg, false);
	assert_int_equal(cfg.net_path, CONFIG_NET_PATH_AUTO); /* the default */
	stand_in_nft(dir, RULESET(", " CHAIN("ip", "filter", "FORWARD", "forward", "drop")), 0,
		     &cfg);
	netpath_settle(&cfg);
	assert_int_equal(cfg.net_path, SANDBOX_NET_PASTA);
	assert_string_equal(netpath_name(&cfg), "pasta");
	assert_string_equal(cfg.net_path_why,
			    "auto: chain ip filter/FORWARD drops forwarded packets by default");
	/* nft failing: pasta */
	cfg.net_path = CONFIG_NET_PATH_AUTO;
	stand_in_nft(dir, RULESET(""), 1, &cfg);
	netpath_settle(&cfg);
	assert_int_equal(cfg.net_path, SANDBOX_NET_PASTA);
	/* set in the config: kept, whatever the host */
	cfg.net_path = SANDBOX_NET_VETH;
	netpath_settle(&cfg);
	assert_int_equal(cfg.net_path, SANDBOX_NET_VETH);
	assert_string_equal(cfg.net_path_why, "[network] path = veth");
	cfg.net_path = SANDBOX_NET_PASTA;
	stand_in_nft(dir, RULESET(""), 0, &cfg);
	netpath_settle(&cfg);
	assert_int_equal(cfg.net_path, SANDBOX_NET_PASTA);
	assert_string_equal(cfg.net_path_why, "[network] path = pasta");
	unit_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_host_that_forwards),
		cmocka_unit_test(test_what_stops_forwarding_is_named),
		cmocka_unit_test(test_settle),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
