/* sizecap.h - root's bound on what the web process may ask a sandbox to get:
 * the memory, CPUs and home size a plan gives one runtime, checked against
 * the machine caps of [runtime] (memory_max, cpus_max, home_size_max). The
 * web process is never trusted for more than the host's configured maximum. */
#ifndef LABD_SUPERVISOR_SIZECAP_H
#define LABD_SUPERVISOR_SIZECAP_H

#include <stddef.h>
#include <stdint.h>

struct labd_config;

/* The sizes one sandbox gets. */
struct sizecap_sizes {
	uint64_t memory_bytes, home_size_bytes;
	unsigned cpus_milli;
};

/* The machine caps in effect: [runtime]'s *_max, or the host's memory and
 * online CPUs when those are 0. */
void sizecap_machine(const struct labd_config *cfg, struct sizecap_sizes *out);
/* Fills *out from the requested sizes (0 = [runtime]'s default). 0, or
 * -ERANGE with a sentence naming the size and the cap in why. */
int sizecap_apply(const struct labd_config *cfg, int64_t memory_bytes, int64_t cpus_milli,
	       int64_t home_size_bytes, struct sizecap_sizes *out, char *why, size_t len);

#endif
