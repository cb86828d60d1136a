/* nvml_standin.c - a stand-in for NVIDIA's NVML library (libnvidia-ml.so.1) that
 * answers the calls labd's web process makes (server/sched/nvml.c) from a JSON
 * file, so the inventory, MIG instances, per-process memory and the share
 * budgets are tested without a GPU. labd loads it through [gpu] nvml_library,
 * the same dlopen path as the real library.
 *
 * The file is named by LABD_NVML_STANDIN and read again on every call, so a
 * test changes the readings (or the MIG layout) while labd runs:
 *
 *   {"cards": [{"minor": 0, "name": "NVIDIA H200", "memory_total": 150754820096,
 *               "memory_used": 0, "utilization": 0, "temperature": 31,
 *               "mig": true,
 *               "mig_devices": [{"gi": 1, "ci": 0, "profile": "1g.18gb",
 *                                "memory_total": 19327352832, "memory_used": 0,
 *                                "utilization": 0, "uuid": "MIG-…",
 *                                "processes": [{"pid": 42, "bytes": 1024}]}],
 *               "processes": [{"pid": 43, "bytes": 2048}]}]}
 *
 * Handles are addresses in a fixed table (card, MIG slot), as opaque to labd as
 * the real library's. The declarations follow the public nvml.h: return codes,
 * nvmlMemory_t, nvmlUtilization_t, nvmlProcessInfo_t (the _v2/_v3 layout). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_UNKNOWN 999

#define CARDS_MAX 16
#define MIG_MAX 8 /* nvmlDeviceGetMaxMigDeviceCount: 7 on an H200, one slot spare */

struct memory { unsigned long long total, free, used; };
struct utilization { unsigned int gpu, memory; };
struct process_info {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId, computeInstanceId;
};

/* handle = &slots[card index in the file][0 for the card, 1 + i for its MIG device i] */
struct slot { int card, mig; };
static struct slot slots[CARDS_MAX][MIG_MAX + 1];
static int initialised;

#define EXPORT __attribute__((visibility("default")))

static json_t *load(void)
{
	const char *path = getenv("LABD_NVML_STANDIN");
	return path ? json_load_file(path, 0, NULL) : NULL;
}

static json_t *card_at(json_t *root, int i)
{
	return json_array_get(json_object_get(root, "cards"), (size_t)i);
}

/* The JSON object behind a handle (a card or one of its MIG devices), or NULL. */
static json_t *object_of(json_t *root, const struct slot *s)
{
	json_t *card = card_at(root, s->card);

	if (!card || s->mig < 0)
		return card;
	return json_array_get(json_object_get(card, "mig_devices"), (size_t)s->mig);
}

static unsigned long long num(json_t *o, const char *key, unsigned long long dflt)
{
	json_t *v = json_object_get(o, key);
	return json_is_integer(v) ? (unsigned long long)json_integer_value(v) : dflt;
}

/* Loads the file, finds handle's object and runs fn on it: the common shape of
 * every getter below. */
typedef int (*getter)(json_t *card, json_t *obj, const struct slot *s, void *out, void *extra);
static int with_object(void *handle, getter fn, void *out, void *extra)
{
	const struct slot *s = handle;
	json_t *root, *obj;
	int rc;

	if (!initialised)
		return NVML_ERROR_UNINITIALIZED;
	if (!s || !out)
		return NVML_ERROR_INVALID_ARGUMENT;
	root = load();
	obj = root ? object_of(root, s) : NULL;
	rc = obj ? fn(card_at(root, s->card), obj, s, out, extra) : NVML_ERROR_NOT_FOUND;
	json_decref(root);
	return rc;
}

EXPORT int nvmlInit_v2(void)
{
	json_t *root = load();

	for (int c = 0; c < CARDS_MAX; c++)
		for (int m = 0; m <= MIG_MAX; m++)
			slots[c][m] = (struct slot){c, m - 1};
	initialised = root != NULL;
	json_decref(root);
	return initialised ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

EXPORT int nvmlShutdown(void)
{
	initialised = 0;
	return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetCount_v2(unsigned int *count)
{
	json_t *root;

	if (!initialised)
		return NVML_ERROR_UNINITIALIZED;
	root = load();
	*count = (unsigned)json_array_size(json_object_get(root, "cards"));
	json_decref(root);
	return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device)
{
	unsigned count = 0;

	if (nvmlDeviceGetCount_v2(&count) != NVML_SUCCESS || index >= count || index >= CARDS_MAX)
		return NVML_ERROR_INVALID_ARGUMENT;
	*device = &slots[index][0];
	return NVML_SUCCESS;
}

static int get_minor(json_t *card, json_t *obj, const struct slot *s, void *out, void *extra)
{
	(void)obj, (void)extra;
	if (s->mig >= 0)
		return NVML_ERROR_NOT_SUPPORTED;
	*(unsigned *)out = (unsigned)num(card, "minor", 0);
	return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetMinorNumber(void *device, unsigned int *minor)
{
	return with_object(device, get_minor, minor, NULL);
}

/* A MIG device's name as the real library gives it: "<card> MIG <profile>". */
static int get_name(json_t *card, json_t *obj, const struct slot *s, void *out, void *extra)
{
	unsigned length = *(unsigned *)extra;
	const char *card_name = json_string_value(json_object_get(card, "name"));
	int n;

	card_name = card_name ? card_name : "NVIDIA Stand-in";
	if (s->mig < 0)
		n = snprintf(out, length, "%s", card_name);
	else
		n = snprintf(out, length, "%s MIG %s", card_name,
			     json_string_value(json_object_get(obj, "profile"))
				     ? json_string_value(json_object_get(obj, "profile"))
				     : "1g.18gb");
	return n < 0 || (unsigned)n >= length ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetName(void *device, char *name, unsigned int length)
{
	return with_object(device, get_name, name, &length);
}

static int get_memory(json_t *card, json_t *obj, const struct slot *s, void *out, void *extra)
{
	struct memory *m = out;

	(void)card, (void)s, (void)extra;
	m->total = num(obj, "memory_total", 0);
	m->used = num(obj, "memory_used", 0);
	m->free = m->total > m->used ? m->total - m->used : 0;
	return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetMemoryInfo(void *device, struct memory *memory)
{
	return with_object(device, get_memory, memory, NULL);
}

static int get_utilization(json_t *card, json_t *obj, const struct slot *s, void *out,
			   void *extra)
{
	struct utilization *u = out;

	(void)card, (void)s, (void)extra;
	if (!json_is_integer(json_object_get(obj, "utilization")))
		return NVML_ERROR_NOT_SUPPORTED;
	u->gpu = (unsigned)num(obj, "utilization", 0);
	u->memory = (unsigned)num(obj, "memory_utilization", 0);
	return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetUtilizationRates(void *device, struct utilization *utilization)
{
	return with_object(device, get_utilization, utilization, NULL);
}

static int get_temperature(json_t *card, json_t *obj, const struct slot *s, void *out,
			   void *extra)
{
	(void)card, (void)extra;
	if (s->mig >= 0 || !json_is_integer(json_object_get(obj, "temperature")))
		return NVML_ERROR_NOT_SUPPORTED;
	*(unsigned *)out = (unsigned)num(obj, "temperature", 0);
	return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetTemperature(void *device, int sensor, unsigned int *temp)
{
	return sensor != 0 ? NVML_ERROR_INVALID_ARGUMENT
			   : with_object(device, get_temperature, temp, NULL);
}

static int get_mig_mode(json_t *card, json_t *obj, const struct slot *s, void *out, void *extra)
{
	(void)card;
	if (s->mig >= 0)
		return NVML_ERROR_NOT_SUPPORTED;
	*(unsigned *)out = json_is_true(json_object_get(obj, "mig"));
	*(unsigned *)extra = *(unsigned *)out;
	return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetMigMode(void *device, unsigned int *current, unsigned int *pending)
{
	return pending ? with_object(device, get_mig_mode, current, pending)
		       : NVML_ERROR_INVALID_ARGUMENT;
}

static int get_max_mig(json_t *card, json_t *obj, const struct slot *s, void *out, void *extra)
{
	(void)card, (void)obj, (void)extra;
	if (s->mig >= 0)
		return NVML_ERROR_NOT_SUPPORTED;
	*(unsigned *)out = MIG_MAX - 1;
	return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetMaxMigDeviceCount(void *device, unsigned int *count)
{
	return with_object(device, get_max_mig, count, NULL);
}

static int get_mig_handle(json_t *card, json_t *obj, const struct slot *s, void *out,
			  void *extra)
{
	unsigned index = *(unsigned *)extra;

	(void)card;
	if (s->mig >= 0 || !json_is_true(json_object_get(obj, "mig")))
		return NVML_ERROR_NOT_SUPPORTED;
	if (index >= MIG_MAX || index >= json_array_size(json_object_get(obj, "mig_devices")))
		return NVML_ERROR_NOT_FOUND;
	*(void **)out = &slots[s->card][index + 1];
	return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetMigDeviceHandleByIndex(void *device, unsigned int index, void **mig)
{
	return with_object(device, get_mig_handle, mig, &index);
}

static int get_parent(json_t *card, json_t *obj, const struct slot *s, void *out, void *extra)
{
	(void)card, (void)obj, (void)extra;
	if (s->mig < 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	*(void **)out = &slots[s->card][0];
	return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetDeviceHandleFromMigDeviceHandle(void *mig, void **device)
{
	return with_object(mig, get_parent, device, NULL);
}

/* extra: the key ("gi" or "ci") */
static int get_instance_id(json_t *card, json_t *obj, const struct slot *s, void *out,
			   void *extra)
{
	(void)card;
	if (s->mig < 0)
		return NVML_ERROR_NOT_SUPPORTED;
	*(unsigned *)out = (unsigned)num(obj, extra, 0);
	return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetGpuInstanceId(void *device, unsigned int *id)
{
	return with_object(device, get_instance_id, id, "gi");
}

EXPORT int nvmlDeviceGetComputeInstanceId(void *device, unsigned int *id)
{
	return with_object(device, get_instance_id, id, "ci");
}

static int get_uuid(json_t *card, json_t *obj, const struct slot *s, void *out, void *extra)
{
	unsigned length = *(unsigned *)extra;
	const char *uuid = json_string_value(json_object_get(obj, "uuid"));
	char made[96];
	int n;

	if (!uuid) { /* a stable one made up from where the device is */
		snprintf(made, sizeof(made), "%s-5a5a5a5a-0000-4000-8000-%06u%06d",
			 s->mig < 0 ? "GPU" : "MIG", (unsigned)num(card, "minor", 0), s->mig + 1);
		uuid = made;
	}
	n = snprintf(out, length, "%s", uuid);
	return n < 0 || (unsigned)n >= length ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetUUID(void *device, char *uuid, unsigned int length)
{
	return with_object(device, get_uuid, uuid, &length);
}

struct process_list {
	unsigned *count;
	unsigned filled, total;
};

/* Appends obj's "processes" (gi, ci: the MIG device they run on, 0 on a card). */
static void add_processes(json_t *obj, unsigned gi, unsigned ci, struct process_info *infos,
			  struct process_list *l)
{
	size_t i;
	json_t *p;

	json_array_foreach(json_object_get(obj, "processes"), i, p) {
		if (l->filled < *l->count)
			infos[l->filled++] = (struct process_info){
				.pid = (unsigned)num(p, "pid", 0),
				.usedGpuMemory = num(p, "bytes", ~0ULL),
				.gpuInstanceId = gi, .computeInstanceId = ci};
		l->total++;
	}
}

/* A card lists its own processes and those of each of its MIG devices; a MIG
 * device only its own. */
static int get_processes(json_t *card, json_t *obj, const struct slot *s, void *out, void *extra)
{
	struct process_list l = {extra, 0, 0};
	size_t i;
	json_t *m;

	(void)card;
	if (s->mig >= 0) {
		add_processes(obj, (unsigned)num(obj, "gi", 0), (unsigned)num(obj, "ci", 0), out, &l);
	} else {
		add_processes(obj, 0xFFFFFFFFu, 0xFFFFFFFFu, out, &l);
		json_array_foreach(json_object_get(obj, "mig_devices"), i, m)
			add_processes(m, (unsigned)num(m, "gi", 0), (unsigned)num(m, "ci", 0), out,
				      &l);
	}
	*l.count = l.total;
	return l.filled < l.total ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(void *device, unsigned int *count,
						    struct process_info *infos)
{
	struct process_info none;

	if (!count || (*count && !infos))
		return NVML_ERROR_INVALID_ARGUMENT;
	return with_object(device, get_processes, infos ? infos : &none, count);
}
