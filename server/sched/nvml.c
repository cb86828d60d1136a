/* nvml.c - NVML through dlopen; see nvml.h. The declarations below are
 * NVML's documented C interface (nvml.h of the CUDA toolkit), restated for
 * the calls made so that no NVIDIA header is needed to build. */
#include "sched/nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvml_return;        /* nvmlReturn_t: 0 is NVML_SUCCESS */
#define NVML_ERROR_INSUFFICIENT_SIZE 7
typedef struct nvml_device *nvml_device; /* nvmlDevice_t, opaque */
struct nvml_memory {            /* nvmlMemory_t */
	unsigned long long total, free, used;
};
struct nvml_utilization {       /* nvmlUtilization_t, percent over the last sample period */
	unsigned int gpu, memory;
};
struct nvml_process_info {      /* nvmlProcessInfo_t of the _v3 call */
	unsigned int pid;
	unsigned long long used_gpu_memory; /* NVML_VALUE_NOT_AVAILABLE (~0) when unknown */
	unsigned int gpu_instance_id, compute_instance_id;
};
#define NVML_TEMPERATURE_GPU 0 /* nvmlTemperatureSensors_t */
#define NVML_UUID_BUFFER 96    /* NVML_DEVICE_UUID_V2_BUFFER_SIZE */

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
	/* optional (NULL in a library from before MIG) */
	nvml_return (*mig_mode)(nvml_device, unsigned int *, unsigned int *);
	nvml_return (*mig_max)(nvml_device, unsigned int *);
	nvml_return (*mig_by_index)(nvml_device, unsigned int, nvml_device *);
	nvml_return (*gi_id)(nvml_device, unsigned int *);
	nvml_return (*ci_id)(nvml_device, unsigned int *);
	nvml_return (*uuid)(nvml_device, char *, unsigned int);
	nvml_return (*processes)(nvml_device, unsigned int *, struct nvml_process_info *);
};

/* dlsym into a function pointer: POSIX guarantees the conversion works. */
static int resolve(void *lib, const char *symbol, void *fnp)
{
	void *p = dlsym(lib, symbol);

	memcpy(fnp, &p, sizeof(p));
	return p ? 0 : -ENOENT;
}

/* The MIG and process calls: all or none, so a half-MIG library reads as none. */
static void resolve_optional(struct nvml *n)
{
	static const char *const names[] = {
		"nvmlDeviceGetMigMode", "nvmlDeviceGetMaxMigDeviceCount",
		"nvmlDeviceGetMigDeviceHandleByIndex", "nvmlDeviceGetGpuInstanceId",
		"nvmlDeviceGetComputeInstanceId", "nvmlDeviceGetUUID",
		"nvmlDeviceGetComputeRunningProcesses_v3"};
	void *slots[] = {&n->mig_mode, &n->mig_max,  &n->mig_by_index, &n->gi_id,
			 &n->ci_id,    &n->uuid,     &n->processes};
	bool all = true;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		all = resolve(n->lib, names[i], slots[i]) == 0 && all;
	if (!all)
		n->mig_mode = NULL;
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
	resolve_optional(n);
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

void nvml_profile_of(const char *name, char *out, size_t len)
{
	const char *at = strstr(name, " MIG ");

	snprintf(out, len, "%s", at ? at + 5 : "");
	out[strcspn(out, " ")] = '\0';
}

static void read_memory(struct nvml *n, nvml_device dev, int64_t *total, int64_t *used)
{
	struct nvml_memory mem;

	*total = *used = -1;
	if (n->memory(dev, &mem) == 0) {
		*total = (int64_t)mem.total;
		*used = (int64_t)mem.used;
	}
}

static int read_utilization(struct nvml *n, nvml_device dev)
{
	struct nvml_utilization util;

	return n->utilization(dev, &util) == 0 ? (int)util.gpu : -1;
}

/* One MIG device of a card: 0, or -1 when NVML does not answer for it. */
static int read_mig(struct nvml *n, nvml_device mig, struct nvml_mig *out)
{
	char name[GPU_NAME_MAX], uuid[NVML_UUID_BUFFER];

	*out = (struct nvml_mig){0};
	if (n->gi_id(mig, &out->gi) != 0 || n->ci_id(mig, &out->ci) != 0)
		return -1;
	if (n->name(mig, name, sizeof(name)) == 0)
		nvml_profile_of(name, out->profile, sizeof(out->profile));
	if (n->uuid(mig, uuid, sizeof(uuid)) == 0)
		snprintf(out->uuid, sizeof(out->uuid), "%.*s", (int)sizeof(out->uuid) - 1, uuid);
	read_memory(n, mig, &out->memory_bytes, &out->memory_used_bytes);
	out->utilization_percent = read_utilization(n, mig);
	return 0;
}

/* The compute processes of dev (a card, or one of its MIG devices: gi/ci
 * given) appended to c's. More than NVML_PROCESSES_MAX on a card: the first
 * ones only. */
static void read_processes(struct nvml *n, nvml_device dev, bool mig, unsigned gi, unsigned ci,
			   struct nvml_card *c)
{
	struct nvml_process_info info[NVML_PROCESSES_MAX];
	unsigned count = NVML_PROCESSES_MAX;
	nvml_return rc;

	if (!n->processes)
		return;
	rc = n->processes(dev, &count, info);
	if (rc == NVML_ERROR_INSUFFICIENT_SIZE)
		count = NVML_PROCESSES_MAX;
	else if (rc != 0)
		return;
	for (unsigned i = 0; i < count && i < NVML_PROCESSES_MAX; i++) {
		if (c->n_processes == NVML_PROCESSES_MAX)
			return;
		c->processes[c->n_processes++] = (struct nvml_process){
			.pid = info[i].pid,
			.gi = mig ? gi : NVML_NO_INSTANCE,
			.ci = mig ? ci : NVML_NO_INSTANCE,
			.bytes = info[i].used_gpu_memory == ~0ULL ? -1
								   : (int64_t)info[i].used_gpu_memory};
	}
}

/* MIG mode and, when on, the card's MIG devices. */
static void read_migs(struct nvml *n, nvml_device dev, struct nvml_card *c)
{
	unsigned current = 0, pending = 0, max = 0;
	nvml_device mig;

	if (!n->mig_mode || n->mig_mode(dev, &current, &pending) != 0 || current != 1)
		return;
	c->mig = true;
	if (n->mig_max(dev, &max) != 0)
		return;
	/* indices without a device answer NOT_FOUND: the devices need not be packed */
	for (unsigned i = 0; i < max && c->n_mig < NVML_MIG_MAX; i++) {
		struct nvml_mig *m = &c->mig_devices[c->n_mig];
		if (n->mig_by_index(dev, i, &mig) != 0 || read_mig(n, mig, m) != 0)
			continue;
		c->n_mig++;
		/* per instance: the card's own list of a MIG card needs privileges the
		 * web process has not */
		read_processes(n, mig, true, m->gi, m->ci, c);
	}
}

static int read_card(struct nvml *n, unsigned index, struct nvml_card *c)
{
	unsigned temp;
	nvml_device dev;

	*c = (struct nvml_card){.utilization_percent = -1, .temperature_c = -1};
	if (n->by_index(index, &dev) != 0 || n->minor(dev, &c->minor) != 0)
		return -1;
	if (n->name(dev, c->name, sizeof(c->name)) != 0)
		c->name[0] = '\0';
	c->name[sizeof(c->name) - 1] = '\0';
	read_memory(n, dev, &c->memory_bytes, &c->memory_used_bytes);
	c->utilization_percent = read_utilization(n, dev);
	if (n->temperature(dev, NVML_TEMPERATURE_GPU, &temp) == 0)
		c->temperature_c = (int)temp;
	read_migs(n, dev, c);
	if (!c->mig)
		read_processes(n, dev, false, 0, 0, c);
	return 0;
}

size_t nvml_read_cards(struct nvml *n, struct nvml_card *out, size_t max)
{
	unsigned total = 0;
	size_t filled = 0;

	if (!n || n->count(&total) != 0)
		return 0;
	for (unsigned i = 0; i < total && filled < max; i++)
		if (read_card(n, i, &out[filled]) == 0)
			filled++;
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
