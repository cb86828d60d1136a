/* gpucaps.h - the MIG instances a card has, as the NVIDIA driver tells root: under
 * its capability folder (/proc/driver/nvidia/capabilities, [gpu] caps_dir),
 * gpu<minor>/mig/gi<G>/access grants a GPU instance and gpu<minor>/mig/gi<G>/ci<C>/access
 * one of its compute instances; each file holds a line "DeviceFileMinor: <n>" naming
 * the node nvidia-cap<n> (under /dev/nvidia-caps) whose opening is that grant. A
 * process needs /dev/nvidia<minor>, nvidiactl and both cap nodes to use the instance.
 * Read by the supervisor (does the instance asked for exist; is MIG on for a whole
 * card asked for) and by the sandbox (which nodes to bind). */
#ifndef LABD_GPUCAPS_H
#define LABD_GPUCAPS_H

#include <stdbool.h>

#define GPUCAPS_CI_NONE (-1) /* gpucaps_minor of the GPU instance itself */

/* The cap node minor of card minor's GPU instance gi (ci = GPUCAPS_CI_NONE) or of its
 * compute instance ci, read from caps_dir: 0 and *cap, -ENOENT when no such instance,
 * -EINVAL when the file has no DeviceFileMinor line (or another errno of the read). */
int gpucaps_minor(const char *caps_dir, unsigned minor, unsigned gi, int ci, unsigned *cap);
/* Whether card minor has any GPU instance under caps_dir (MIG is on and used). */
bool gpucaps_mig_used(const char *caps_dir, unsigned minor);
/* Whether uuid is a device uuid as NVML gives it: "GPU-" or "MIG-", then hex digits
 * and dashes, at most GPUCAPS_UUID_MAX bytes in all (it reaches CUDA_VISIBLE_DEVICES). */
#define GPUCAPS_UUID_MAX 64
bool gpucaps_uuid_ok(const char *uuid);

#endif
