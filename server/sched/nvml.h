/* nvml.h - the few NVML calls labd makes, resolved with dlopen/dlsym so labd
 * builds and runs without NVIDIA's library: when it is absent (or lacks a
 * symbol, or nvmlInit fails: no driver, no access to the device nodes),
 * nvml_open says why and labd carries on without the numbers.
 *
 * Runs in the web process (user labd, no capabilities): NVML opens
 * /dev/nvidiactl and /dev/nvidia<N>, which the driver creates 0666 by default
 * (NVreg_DeviceFileMode); root never loads the vendor library. */
#ifndef LABD_SCHED_NVML_H
#define LABD_SCHED_NVML_H

#include <stddef.h>

#include "sched/gpus.h"

struct nvml;

/* Loads library (a file name for the loader's search, or a path) and
 * initialises NVML. 0 and *out; a negative errno with why (a sentence) in
 * why[whylen] when NVML cannot be used. */
int nvml_open(const char *library, struct nvml **out, char *why, size_t whylen);
/* Fills name, memory, utilisation and temperature of each of the n GPUs
 * whose id (the device's minor number) NVML knows, setting their source to
 * GPU_SOURCE_NVML; the others are left as they are. The number filled. */
size_t nvml_read(struct nvml *n, struct gpu_info *gpus, size_t count);
/* Shuts NVML down and unloads it. NULL is fine. */
void nvml_close(struct nvml *n);

#endif
