/* nvml.h - the NVML calls labd makes, resolved with dlopen/dlsym so labd
 * builds and runs without NVIDIA's library: when it is absent (or lacks a
 * symbol, or nvmlInit fails: no driver, no access to the device nodes),
 * nvml_open says why and labd carries on without the numbers.
 *
 * Besides each card's name, memory, utilisation and temperature it reads
 * whether MIG is on, the card's MIG devices (one per compute instance: GPU
 * and compute instance ids, profile, UUID, memory) and the compute processes
 * with their GPU memory. The MIG and process calls are optional: a library
 * from before MIG lacks them, and then every card reads as MIG off with no
 * processes.
 *
 * Runs in the web process (user labd, no capabilities): NVML opens
 * /dev/nvidiactl and /dev/nvidia<N>, which the driver creates 0666 by default
 * (NVreg_DeviceFileMode); root never loads the vendor library. */
#ifndef LABD_SCHED_NVML_H
#define LABD_SCHED_NVML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched/gpus.h"

#define NVML_MIG_MAX 8      /* MIG devices read per card (an H200 has up to 7) */
#define NVML_PROCESSES_MAX 64 /* compute processes read per card */
#define NVML_NO_INSTANCE 0xFFFFFFFFu /* a process's gi/ci on a card without MIG */

struct nvml;

/* One MIG device: a compute instance inside a GPU instance. */
struct nvml_mig {
	unsigned gi, ci;
	char profile[GPU_PROFILE_MAX];           /* "1g.18gb", "" when the name says none */
	char uuid[GPU_UUID_MAX];                 /* "MIG-…" */
	int64_t memory_bytes, memory_used_bytes; /* -1 when unknown */
	int utilization_percent;                 /* -1 when NVML gives none (real cards do not) */
};

/* A compute process on a card, with the MIG device it runs on. */
struct nvml_process {
	unsigned pid;   /* in the web process's pid namespace (the host's) */
	unsigned gi, ci; /* NVML_NO_INSTANCE on a card without MIG */
	int64_t bytes;  /* GPU memory it uses; -1 when NVML cannot say */
};

struct nvml_card {
	unsigned minor;
	char name[GPU_NAME_MAX];                 /* "" when unknown */
	int64_t memory_bytes, memory_used_bytes; /* -1 when unknown */
	int utilization_percent, temperature_c;  /* -1 when unknown */
	bool mig;                                /* MIG mode is on now */
	size_t n_mig;
	struct nvml_mig mig_devices[NVML_MIG_MAX]; /* in NVML's order */
	size_t n_processes;
	struct nvml_process processes[NVML_PROCESSES_MAX];
};

/* Loads library (a file name for the loader's search, or a path) and
 * initialises NVML. 0 and *out; a negative errno with why (a sentence) in
 * why[whylen] when NVML cannot be used. */
int nvml_open(const char *library, struct nvml **out, char *why, size_t whylen);
/* Reads every card NVML knows, at most max, into out: the number read. */
size_t nvml_read_cards(struct nvml *n, struct nvml_card *out, size_t max);
/* The profile in a MIG device's name ("NVIDIA H200 MIG 1g.18gb" → "1g.18gb")
 * into out (len bytes); "" when the name has none. */
void nvml_profile_of(const char *name, char *out, size_t len);
/* Shuts NVML down and unloads it. NULL is fine. */
void nvml_close(struct nvml *n);

#endif
