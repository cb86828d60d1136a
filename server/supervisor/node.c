/* node.c - `labd node`'s preparation and hello; see node.h. */
#include "supervisor/node.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "proto/link.h"
#include "supervisor/launch.h"

static int bad(char *err, size_t errlen, const char *what)
{
	snprintf(err, errlen, "%s", what);
	return -1;
}

/* A numeric, specified address: the head connects to what the hello says. */
static bool data_address_ok(const char *listen)
{
	char host[64];
	unsigned port;
	unsigned char addr[16];

	if (config_split_listen(listen, host, sizeof(host), &port) < 0 || port == 0)
		return false;
	if (inet_pton(AF_INET, host, addr) == 1)
		return memcmp(addr, "\0\0\0\0", 4) != 0;
	if (inet_pton(AF_INET6, host, addr) == 1)
		return memcmp(addr, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16) != 0;
	return false;
}

int node_prepare(struct labd_config *cfg, char *err, size_t errlen)
{
	struct link_secret secret;
	char why[300];

	if (!link_name_ok(cfg->node_name))
		return bad(err, errlen, "[node] name: required, [A-Za-z0-9][A-Za-z0-9._-]{0,63}");
	if (!cfg->node_head[0] || !strchr(cfg->node_head, ':'))
		return bad(err, errlen, "[node] head: required, HOST:PORT of the head's link listener");
	if (!data_address_ok(cfg->node_data_listen))
		return bad(err, errlen, "[node] data_listen: required, ADDRESS:PORT with the node's "
					"own numeric address (not 0.0.0.0 or ::)");
	if (!cfg->node_cgroup_parent[0])
		node_cgroup_parent(cfg, cfg->node_cgroup_parent, sizeof(cfg->node_cgroup_parent));
	if (strchr(cfg->node_cgroup_parent, '/') || cfg->node_cgroup_parent[0] == '.')
		return bad(err, errlen, "[node] cgroup_parent: one name, without / or a leading .");
	if (!cfg->node_secret_file[0])
		return bad(err, errlen, "[node] secret_file: required");
	if (link_secret_read(cfg->node_secret_file, &secret, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "[node] secret_file: %s", why);
		return -1;
	}
	memcpy(cfg->link_secret, secret.bytes, secret.len);
	cfg->link_secret_len = secret.len;
	link_secret_clear(&secret);
	cfg->node_mode = true;
	return 0;
}

void node_cgroup_parent(const struct labd_config *cfg, char *out, size_t len)
{
	if (!cfg->node_cgroup_parent[0] && cfg->node_name[0])
		snprintf(out, len, "labd-%s", cfg->node_name);
	else /* out is never the setting itself then: node_prepare fills it only when empty */
		snprintf(out, len, "%s", launch_cgroup_parent(cfg));
}

json_t *node_hello(const struct labd_config *cfg)
{
	json_t *gpus = json_array();
	long cpus = sysconf(_SC_NPROCESSORS_ONLN), pages = sysconf(_SC_PHYS_PAGES);
	long page = sysconf(_SC_PAGESIZE);

	/* in [gpu] devices' order, which the operator keeps equal to gres.conf's: Slurm's
	 * GRES index i is gpus[i] */
	if (cfg->gpu_stand_in)
		for (unsigned i = 0; i < cfg->gpu_stand_in; i++)
			json_array_append_new(gpus, json_integer(i));
	else
		for (unsigned i = 0; i < cfg->n_gpu_devices; i++)
			json_array_append_new(gpus, json_integer(cfg->gpu_devices[i]));
	return json_pack("{s:s, s:s, s:s, s:o, s:i, s:I, s:s}", "type", "node_hello", "name",
			 cfg->node_name, "data", cfg->node_data_listen, "gpus", gpus, "cpus",
			 (int)(cpus > 0 ? cpus : 1), "memory_bytes",
			 (json_int_t)(pages > 0 && page > 0 ? (long long)pages * page : 1),
			 "version", LABD_VERSION);
}
