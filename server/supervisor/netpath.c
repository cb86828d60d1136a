/* netpath.c - [network] path = auto, and what the doctor reads; see netpath.h. */
#include "supervisor/netpath.h"

#include <ctype.h>
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "labd/sandbox.h"

#define NFT_OUT_MAX (8u << 20) /* a Docker host's chains are some KiB */

static const char *str(json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));
	return s ? s : "?";
}

/* Whether a chain of this family sees the veth path's packets: IPv4 only (ip6
 * chains never do; bridge and netdev chains see no routed packet). */
static bool sees_ipv4(const char *family)
{
	return !strcmp(family, "ip") || !strcmp(family, "inet");
}

/* The first chain that stops forwarding: firewalld's own table (its forward chain
 * accepts by policy and rejects what no zone allows in its rules), or a chain on
 * the forward hook whose policy drops. */
static bool chains_block(json_t *all, char *why, size_t len)
{
	json_t *item;
	size_t i;

	json_array_foreach(json_object_get(all, "nftables"), i, item) {
		json_t *c = json_object_get(item, "chain");
		const char *hook = json_string_value(json_object_get(c, "hook"));
		const char *policy = json_string_value(json_object_get(c, "policy"));
		if (c && !strcmp(str(c, "table"), "firewalld")) {
			snprintf(why, len, "firewalld's table %s firewalld rejects what its zones do "
				 "not allow", str(c, "family"));
			return true;
		}
		if (hook && policy && !strcmp(hook, "forward") && !strcmp(policy, "drop") &&
		    sees_ipv4(str(c, "family"))) {
			snprintf(why, len, "chain %s %s/%s drops forwarded packets by default",
				 str(c, "family"), str(c, "table"), str(c, "name"));
			return true;
		}
	}
	return false;
}

static bool has_line(const char *text, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, word, n) && (p[n] == '\n' || p[n] == '\0'))
			return true;
	return false;
}

bool netpath_blocked(const struct netpath_host *h, char *why, size_t len)
{
	json_error_t e;
	json_t *all;
	bool blocked;

	why[0] = '\0';
	if (h->firewalld) {
		snprintf(why, len, "firewalld runs (it rejects forwarded packets its zones do not "
			 "allow)");
		return true;
	}
	/* the legacy iptables are not nft's to list: their policy stays unknown */
	if (h->legacy_tables && has_line(h->legacy_tables, "filter")) {
		snprintf(why, len, "the legacy iptables' filter table is in use (its forward "
			 "policy cannot be read)");
		return true;
	}
	if (!h->nft_chains || !(all = json_loads(h->nft_chains, 0, &e))) {
		snprintf(why, len, "nft could not list the host's chains");
		return true;
	}
	blocked = chains_block(all, why, len);
	json_decref(all);
	return blocked;
}

/* nft's answer in full, or NULL; free it. */
static char *run_nft(const char *nft)
{
	char cmd[CONFIG_PATH_MAX + 40], *out = NULL, *grown;
	size_t used = 0, cap = 0, n;
	FILE *f;
	int status;

	snprintf(cmd, sizeof(cmd), "'%s' -j list chains 2>/dev/null", nft);
	if (strchr(nft, '\'') || !(f = popen(cmd, "r")))
		return NULL;
	do {
		if (used + 4096 + 1 > cap) {
			cap = cap ? cap * 2 : 65536;
			if (cap > NFT_OUT_MAX || !(grown = realloc(out, cap)))
				break;
			out = grown;
		}
		n = fread(out + used, 1, cap - used - 1, f);
		used += n;
	} while (n > 0);
	status = pclose(f);
	if (out && status == 0 && used > 0 && used < cap) {
		out[used] = '\0';
		return out;
	}
	free(out);
	return NULL;
}

/* The start of a small file into buf ("" when it cannot be read). */
static const char *read_small(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	size_t n = f ? fread(buf, 1, len - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = '\0';
	return buf;
}

static bool firewalld_runs(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	char path[64], comm[32];
	bool found = false;

	while (d && !found && (e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/%.20s/comm", e->d_name);
		found = !strcmp(read_small(path, comm, sizeof(comm)), "firewalld\n");
	}
	if (d)
		closedir(d);
	return found;
}

bool netpath_host_blocked(const struct labd_config *cfg, char *why, size_t len)
{
	char *chains = run_nft(cfg->net_nft[0] ? cfg->net_nft : "nft");
	char legacy[4096];
	struct netpath_host h = {chains, read_small("/proc/net/ip_tables_names", legacy,
						     sizeof(legacy)),
				 firewalld_runs()};
	bool blocked = netpath_blocked(&h, why, len);

	free(chains);
	return blocked;
}

void netpath_settle(struct labd_config *cfg)
{
	char why[sizeof(cfg->net_path_why) - 16];

	if (cfg->net_path != CONFIG_NET_PATH_AUTO) {
		snprintf(cfg->net_path_why, sizeof(cfg->net_path_why), "[network] path = %s",
			 netpath_name(cfg));
		return;
	}
	if (netpath_host_blocked(cfg, why, sizeof(why))) {
		cfg->net_path = SANDBOX_NET_PASTA;
		snprintf(cfg->net_path_why, sizeof(cfg->net_path_why), "auto: %s", why);
	} else {
		cfg->net_path = SANDBOX_NET_VETH;
		snprintf(cfg->net_path_why, sizeof(cfg->net_path_why),
			 "auto: the host forwards (no forward chain drops by default, no firewalld)");
	}
}

const char *netpath_name(const struct labd_config *cfg)
{
	return cfg->net_path == SANDBOX_NET_VETH ? "veth" : "pasta";
}
