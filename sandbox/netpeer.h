/* netpeer.h - the peer interface of a sandbox (sandbox_spec.peer_addr, peers,
 * peer_via): "peer0", an ipvlan slave in L2 mode of the host interface that holds
 * peer_via, in the sandbox's network namespace, with root's table "labd_peer" there
 * letting only the peers through it.  Internal to sandbox/; see docs/sandbox.md,
 * "Network" and docs/security.md. */
#ifndef LABD_SANDBOX_NETPEER_H
#define LABD_SANDBOX_NETPEER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "labd/sandbox.h"

#define NETPEER_RULESET_MAX 4096

/* The spec's three peer fields: all NULL, or all set and valid (peer_via an IPv4
 * address).  0 or -1 (fail.h). */
int netpeer_spec_check(const struct sandbox_spec *s);
/* The nft script of table inet labd_peer for peers (checked).  Pure.  0, or -1 when it
 * does not fit in len. */
int netpeer_ruleset(const char *peers, char *out, size_t len);
/* Installs the table in pid's network namespace (pid the init that started at
 * start_ticks), makes peer0 there on the interface holding peer_via, gives it
 * peer_addr with that interface's prefix length and sets it up.  Call before any of
 * the sandbox's code runs.  0 or -1 (fail.h); peer0 goes with the namespace. */
int netpeer_start(const struct sandbox_spec *s, pid_t pid, uint64_t start_ticks);

#endif
