/* capacity.c - the host-wide cap on live sandboxes; see capacity.h. */
#include "config/capacity.h"

#include <unistd.h>

#include "config/config.h"

unsigned capacity_derive(uint64_t memory_bytes)
{
	uint64_t n = memory_bytes / CAPACITY_BYTES_PER_SANDBOX;

	if (n < CAPACITY_SANDBOXES_MIN)
		return CAPACITY_SANDBOXES_MIN;
	return n > CAPACITY_SANDBOXES_MAX ? CAPACITY_SANDBOXES_MAX : (unsigned)n;
}

unsigned capacity_max_sandboxes(const struct labd_config *cfg)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);

	if (cfg->max_sandboxes > 0)
		return cfg->max_sandboxes;
	if (pages <= 0 || page <= 0)
		return CAPACITY_SANDBOXES_MIN;
	return capacity_derive((uint64_t)pages * (uint64_t)page);
}
