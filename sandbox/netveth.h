/* netveth.h - the veth path of an egress sandbox (sandbox_spec.net_path ==
 * SANDBOX_NET_VETH): a veth pair between the sandbox's network namespace and the
 * host's, forwarded and masqueraded by root's nftables rules on the host, instead of
 * pasta.  Internal to sandbox/; see docs/sandbox.md, "Network" and docs/security.md.
 *
 * Each sandbox holds one slot of [network] veth_range, a /30: the host end "lbv<slot>"
 * has the first address, the sandbox's "eth0" the second.  The claim
 * /run/labd-veth/<slot> ("<id> <sandbox address> <gateway address> <state_dir>") is
 * taken with O_EXCL, so two starts (of any labd on the host) never share a slot;
 * <slot>.nft beside it is the host's table "labd_veth_<slot>" as loaded, for the
 * watchdog to load again. */
#ifndef LABD_SANDBOX_NETVETH_H
#define LABD_SANDBOX_NETVETH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "labd/sandbox.h"

/* "a.b.c.d/bits", /8 to /30, host bits zero: 0 with the first address (host order)
 * and the number of /30 slots in *base and *slots (either may be NULL), else -1. */
int netveth_range_parse(const char *range, uint32_t *base, unsigned *slots);
/* Claims a slot, makes the veth pair (the sandbox's end eth0 in pid's namespace, pid
 * being the init that started at start_ticks), loads the host's table, turns on
 * forwarding on the host end (and on the host's interfaces, each guarded, see
 * netveth.c), and configures the sandbox's end.  Call after the ruleset inside is
 * installed and before any of the sandbox's code runs.  0 or -1 (fail.h); on failure
 * what was made is removed. */
int netveth_start(const struct sandbox_spec *s, const char *id, pid_t pid, uint64_t start_ticks);
/* The watchdog: -1 when sandbox h has no veth; 0 when its veth and table are there;
 * 1 after making them again (the link or the table had gone); -2 when that failed. */
int netveth_check(const struct sandbox_spec *s, const struct sandbox_handle *h);
/* Removes sandbox id's veth, host table and claim (nothing when it has none). */
void netveth_remove(const char *state_dir, const char *id);
/* Removes every claim of state_dir whose sandbox live() says is not running, every
 * claim of a state directory that is no more, and every labd veth or
 * host table without a claim; with no claim left, the forwarding labd turned on goes
 * off again.  The number removed. */
int netveth_sweep(const char *state_dir, bool (*live)(const char *id, void *arg), void *arg);
/* What netveth_sweep would remove, counted, nothing removed. */
int netveth_leftovers(const char *state_dir, bool (*live)(const char *id, void *arg), void *arg);

#endif
