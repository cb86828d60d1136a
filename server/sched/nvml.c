/* nvml.c - NVML through dlopen; see nvml.h. The declarations below are
 * NVML's documented C interface (nvml.h of the CUDA toolkit), restated for
 * the few calls made so that no NVIDIA header is needed to build. */
#include "sched/nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvml_return;        /* nvmlReturn_t: 0 is NVML_SUCCESS */
typedef struct nvml_device *nvml_device; /* nvmlDevice_t, opaque */
struct nvml_memory {            /* nvmlMemory_t */
	unsigned long long total, free, used;
};
struct nvml_utilization {       /* nvmlUtilization_t, percent over the last sample period */
	unsigned int gpu, memory;
};
#define NVML_TEMPERATURE_GPU 0 /* nvmlTemperatureSensors_t */

struct nvml {
	void *lib;
	nvml_return (*shutdown)(void);
	nvml_return (*count)(unsigned int *);
	nvml_return (*by_index)(unsigned int, nvml_device *);
	nvml_return (*minor)(nvml_device, unsigned int *);
	nvml_return (*name)(nvml_device, char *, unsigned int);
	nvml_return (*memory)(nvml_device, struct nvml_memory *);
	nvml_return (*utilization)(nvml_device, struct nvml_utilization *);
	nvml_return (*temperature)(nvml_device, int, unsigned int *);
};

/* dlsym into a function pointer: POSIX guarantees the conversion works. */
static int resolve(void *lib, const char *symbol, void *fnp)
{
	void *p = dlsym(lib, symbol);

	memcpy(fnp, &p, sizeof(p));
	return p ? 0 : -ENOENT;
}

int nvml_open(const char *library, struct nvml **out, char *why, size_t whylen)
{
	struct nvml *n = calloc(1, sizeof(*n));
	nvml_return (*init)(void) = NULL;
	const char *missing = NULL;

	if (!n)
		return -ENOMEM;
	n->lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
	if (!n->lib) {
		snprintf(why, whylen, "%s cannot be loaded (%s)", library, dlerror());
		free(n);
		return -ENOENT;
	}
	static const char *const names[] = {
		"nvmlInit_v2", "nvmlShutdown", "nvmlDeviceGetCount_v2",
		"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetMinorNumber", "nvmlDeviceGetName",
		"nvmlDeviceGetMemoryInfo", "nvmlDeviceGetUtilizationRates",
		"nvmlDeviceGetTemperature"};
	void *slots[] = {&init, &n->shutdown, &n->count, &n->by_index, &n->minor, &n->name,
			 &n->memory, &n->utilization, &n->temperature};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !missing; i++)
		if (resolve(n->lib, names[i], slots[i]) < 0)
			missing = names[i];
	bool failed = true;

	if (missing)
		snprintf(why, whylen, "%s has no %s", library, missing);
	else if (init() != 0)
		snprintf(why, whylen, "nvmlInit failed (no driver, or no access to the device nodes)");
	else
		failed = false;
	if (failed) {
		dlclose(n->lib);
		free(n);
		return -ENODEV;
	}
	*out = n;
	return 0;
}

/* The device NVML numbers index, if its minor number is one of ours. */
static struct gpu_info *ours(struct nvml *n, unsigned index, struct gpu_info *gpus, size_t count,
			     nvml_device *dev)
{
	unsigned minor;

	if (n->by_index(index, dev) != 0 || n->minor(*dev, &minor) != 0)
		return NULL;
	for (size_t i = 0; i < count; i++)
		if (gpus[i].id == minor)
			return &gpus[i];
	return NULL;
}

size_t nvml_read(struct nvml *n, struct gpu_info *gpus, size_t count)
{
	unsigned total = 0, temp;
	struct nvml_memory mem;
	struct nvml_utilization util;
	char name[GPU_NAME_MAX];
	size_t filled = 0;

	if (!n || n->count(&total) != 0)
		return 0;
	for (unsigned i = 0; i < total; i++) {
		nvml_device dev;
		struct gpu_info *g = ours(n, i, gpus, count, &dev);
		if (!g)
			continue;
		g->source = GPU_SOURCE_NVML;
		if (n->name(dev, name, sizeof(name)) == 0)
			snprintf(g->name, sizeof(g->name), "%.*s", (int)sizeof(name) - 1, name);
		if (n->memory(dev, &mem) == 0) {
			g->memory_bytes = (int64_t)mem.total;
			g->memory_used_bytes = (int64_t)mem.used;
		}
		if (n->utilization(dev, &util) == 0)
			g->utilization_percent = (int)util.gpu;
		if (n->temperature(dev, NVML_TEMPERATURE_GPU, &temp) == 0)
			g->temperature_c = (int)temp;
		filled++;
	}
	return filled;
}

void nvml_close(struct nvml *n)
{
	if (!n)
		return;
	n->shutdown();
	dlclose(n->lib);
	free(n);
}
