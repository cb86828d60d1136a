/* host_gpu.h - gpu_processes_end: the web process names host pids of one sandbox's
 * processes (NVML's per-process readings of a share over its GPU memory budget past
 * [gpu] share_grace) and root ends those, and only those, that live in that sandbox. */
#ifndef LABD_HOST_GPU_H
#define LABD_HOST_GPU_H

#include <jansson.h>

#include "supervisor/host.h"

/* The reply: ok with "ended" (how many were SIGKILLed); not_found when the sandbox
 * (user's runtime, runtime_id when not 0, or pool_id) is not running; bad_request
 * unless exactly one of runtime_id and pool_id is sent. A pid not in the sandbox is
 * left alone (logged) and not counted. */
json_t *host_gpu_processes_end(struct host *h, long long id, json_t *msg);

#endif
