/* sizecap.c - machine caps on a sandbox's sizes; see sizecap.h. */
#include "supervisor/sizecap.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "config/config.h"

void sizecap_machine(const struct labd_config *cfg, struct sizecap_sizes *out)
{
	long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGESIZE);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	out->memory_bytes = cfg->memory_max_bytes;
	if (!out->memory_bytes)
		out->memory_bytes = pages > 0 && page_bytes > 0 ? (uint64_t)pages * (uint64_t)page_bytes
								: cfg->memory_bytes;
	out->cpus_milli = cfg->cpus_max_milli;
	if (!out->cpus_milli)
		out->cpus_milli = cpus > 0 ? (unsigned)cpus * 1000 : cfg->cpus_milli;
	out->home_size_bytes = cfg->home_size_max_bytes;
}

int sizecap_apply(const struct labd_config *cfg, int64_t memory_bytes, int64_t cpus_milli,
	       int64_t home_size_bytes, struct sizecap_sizes *out, char *why, size_t len)
{
	struct sizecap_sizes cap;

	sizecap_machine(cfg, &cap);
	out->memory_bytes = memory_bytes > 0 ? (uint64_t)memory_bytes : cfg->memory_bytes;
	out->cpus_milli = cpus_milli > 0 ? (unsigned)cpus_milli : cfg->cpus_milli;
	out->home_size_bytes = home_size_bytes > 0 ? (uint64_t)home_size_bytes : cfg->home_size_bytes;
	/* refuse rather than clamp: a plan above the machine is a mistake the
	 * admin should see in the runtime's reason, not a silent smaller box */
	if (out->memory_bytes > cap.memory_bytes) {
		snprintf(why, len, "memory_bytes %llu is above the machine cap %llu ([runtime] memory_max)",
			 (unsigned long long)out->memory_bytes, (unsigned long long)cap.memory_bytes);
		return -ERANGE;
	}
	if (out->cpus_milli > cap.cpus_milli) {
		snprintf(why, len, "cpus_milli %u is above the machine cap %u ([runtime] cpus_max)",
			 out->cpus_milli, cap.cpus_milli);
		return -ERANGE;
	}
	if (out->home_size_bytes > cap.home_size_bytes) {
		snprintf(why, len,
			 "home_size_bytes %llu is above the machine cap %llu ([runtime] home_size_max)",
			 (unsigned long long)out->home_size_bytes,
			 (unsigned long long)cap.home_size_bytes);
		return -ERANGE;
	}
	return 0;
}
