/* jobhosts.h - the hosts of one training job that runs on several machines
 * (docs/jobs.md "Several hosts"): the "hosts" field of a job spec, and what
 * each host's sandbox is told from it (the managed-training variables,
 * resourceconfig.json, and what torchrun needs for its rendezvous).
 *
 * Pure: no I/O. The head writes the field (one spec per host, the same but
 * for "current"); the supervisor reads it back with jobhosts_parse and builds
 * the environment and the file with the functions below. A spec without the
 * field is one host, algo-1, as before. */
#ifndef LABD_PROTO_JOBHOSTS_H
#define LABD_PROTO_JOBHOSTS_H

#include <jansson.h>
#include <stddef.h>

#define JOBHOSTS_MAX 64        /* [slurm] max_instances' bound */
#define JOBHOSTS_ADDR_MAX 46   /* an IPv4 or IPv6 address as text, with its NUL */
#define JOBHOSTS_IFNAME_MAX 16 /* IFNAMSIZ */
#define JOBHOSTS_ENV_MAX 9     /* entries jobhosts_env makes at most */
#define JOBHOSTS_ENV_LEN 1024  /* one entry: SM_HOSTS of 64 hosts fits */

struct jobhosts {
	int current, count;                   /* algo-<current> of algo-1..algo-<count> */
	char master_addr[JOBHOSTS_ADDR_MAX];  /* algo-1's address the others reach; "" alone */
	int master_port;                      /* the rendezvous port on it; 0 alone */
	char interface[JOBHOSTS_IFNAME_MAX];  /* the sandbox's network interface */
};

/* One host: algo-1 of 1, no rendezvous. */
void jobhosts_single(struct jobhosts *h);
/* Reads the spec's "hosts" (NULL = one host). 0, or -EINVAL with err naming
 * the field ("hosts.current: ...") and *h left as one host. */
int jobhosts_parse(json_t *v, struct jobhosts *h, char *err, size_t errlen);
/* The "hosts" field for h (NULL when out of memory); parses back to h. */
json_t *jobhosts_json(const struct jobhosts *h);
/* The environment entries ("NAME=value") for h into out[0..*n). One host:
 * SM_CURRENT_HOST, SM_HOSTS, SM_NETWORK_INTERFACE_NAME; several add
 * MASTER_ADDR, MASTER_PORT, NNODES and NODE_RANK (torchrun's --nnodes,
 * --node_rank, --master_addr, --master_port), and GLOO_SOCKET_IFNAME and
 * NCCL_SOCKET_IFNAME, the interface (the collective libraries' traffic between
 * hosts takes the hosts' network, not the sandbox's default route). 0, or
 * -ENAMETOOLONG. */
int jobhosts_env(const struct jobhosts *h, char out[JOBHOSTS_ENV_MAX][JOBHOSTS_ENV_LEN],
		 size_t *n);
/* resourceconfig.json: {"current_host","hosts","network_interface_name"}
 * (NULL when out of memory). */
json_t *jobhosts_resourceconfig(const struct jobhosts *h);

#endif
