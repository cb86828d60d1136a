/* kinds.h - the key table of labd.ini and the kinds of value a key takes (one parser
 * and one message per kind, kinds.c). Internal to config/ and its unit test. */
#ifndef LABD_CONFIG_KINDS_H
#define LABD_CONFIG_KINDS_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

enum config_kind {
	K_STRING,        /* text of min..sizeof(field)-1 bytes */
	K_BOOL,          /* true/yes/1 or false/no/0 */
	K_UINT,          /* a whole number in min..max */
	K_UINT_AUTO,     /* auto (stored as 0: decided at start) or a whole number in min..max */
	K_POW2,          /* a power of two in min..max */
	K_DURATION,      /* seconds (30s, 15m, 8h, 7d) */
	K_DURATION_MS,   /* "250ms" or a duration such as 2s, stored in ms */
	K_DURATION_NONE, /* a duration, or "none" (stored as -1: no limit) */
	K_DURATIONS,     /* comma-separated durations, stored descending (warn_before) */
	K_SIZE,          /* bytes (64K, 1M, 15G) */
	K_SIZE_NONE,     /* a size, or "none" (stored as -1: no limit) */
	K_CPUS,          /* decimal CPU count stored as milli-CPUs */
	K_LOGLEVEL,      /* debug, info, warn or error */
	K_LISTEN,        /* ADDRESS:PORT */
	K_GPUS,          /* auto, or comma-separated GPU minors */
	K_GPU_SHARES,    /* comma-separated MINOR:COUNT:SIZE (count up to max) */
	K_JUPYTER,       /* auto, lab, notebook or server */
	K_DELETED_HOME,  /* archive or remove */
	K_PROXIES,       /* comma-separated addresses or CIDR networks, parsed */
	K_CIDRS,         /* comma-separated addresses or CIDR networks, kept as text */
	K_PATHS,         /* comma-separated absolute paths (or empty) */
	K_DIR,           /* one absolute directory other than "/", or empty */
	K_ORIGIN,        /* per_user or path, stored as a bool (true = per_user) */
	K_DOMAIN,        /* a lowercase DNS name: labels of [a-z0-9-] joined by dots */
	K_ORIGIN_URL,    /* http[s]://host[:port], nothing after, or empty */
	K_NETWORK,       /* none or egress, stored as 0 or 1 */
	K_NET_PATH,      /* pasta or veth, stored as 0 or 1 (enum sandbox_net_path) */
	K_VETH_RANGE,    /* one IPv4 network, /8 to /30, host bits zero */
	K_ADDRESS,       /* an IPv4 or IPv6 address, or empty */
	K_KINDS          /* the count, not a kind */
};

/* One key of the file. min..max bound the number a kind stores (for K_STRING, min is the
 * shortest length; for lists, max is the most items or the largest item). dflt is the
 * default written as in the file and parsed by the same kind, so it obeys the bounds
 * (test_config proves it), or NULL: the field stays zero, which the code reads as "the
 * host's" (memory_max, cpus_max), a value the file cannot spell. */
struct config_key {
	const char *section, *name;
	enum config_kind kind;
	size_t offset, size;
	uint64_t min, max;
	const char *dflt;
};

/* The key table (config.c), in file order of docs/config.md; *n gets its length. */
const struct config_key *config_keys(size_t *n);
/* Parses value as k's kind into k's field of cfg: NULL when taken, else what the value
 * must be (a static text). On refusal the field may be half written; config_load then
 * fails as a whole. */
const char *config_kind_apply(struct labd_config *cfg, const struct config_key *k,
			      const char *value);

#endif
