/* capacity.h - how many sandboxes one host runs at once: [runtime] max_sandboxes, or,
 * when it is 0, a figure derived from the host's memory. The web process refuses a
 * start beyond it (runtime.c, dispatch.c) and the supervisor's start check is the
 * last line (startcheck.c); both read it here so that they agree. */
#ifndef LABD_CAPACITY_H
#define LABD_CAPACITY_H

#include <stdint.h>

struct labd_config;

/* The derived cap gives each sandbox this much of the host's memory: a runtime with
 * one kernel was measured at ~136 MB; the rest is head-room for the user's work
 * (docs/operations.md "Sizing"). */
#define CAPACITY_BYTES_PER_SANDBOX (256ULL << 20)
#define CAPACITY_SANDBOXES_MIN 4
/* the supervisor's slots: 256 runtimes and 256 pools */
#define CAPACITY_SANDBOXES_MAX 512

/* Pure: the derived cap for a host of memory_bytes, within MIN..MAX. */
unsigned capacity_derive(uint64_t memory_bytes);
/* [runtime] max_sandboxes, or capacity_derive() of this host's memory when it is 0. */
unsigned capacity_max_sandboxes(const struct labd_config *cfg);

#endif
