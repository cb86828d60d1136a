/* host_runtime.h - the runtime purpose of the sandbox host (host.h): one sandbox
 * per user running Jupyter; its readiness probed, deadline warnings pushed
 * (sandbox_warning), a stop given [runtime] stop_grace, the exit classified (OOM,
 * signal, status), Jupyter's output drained by a keeper that outlives the
 * supervisor (runkeeper.h), and the runtimes a previous supervisor left
 * re-adopted from <state>/boxes/<user>.json. */
#ifndef LABD_HOST_RUNTIME_H
#define LABD_HOST_RUNTIME_H

#include <jansson.h>

#include "supervisor/host.h"

extern const struct host_purpose host_runtime;

/* Handlers for requests checked against proto.h's field lists; each returns
 * the reply (caller owns it). A start is answered when the build has begun;
 * sandbox_ready or sandbox_ended follows. */
json_t *host_runtime_start(struct host *h, long long id, json_t *msg);
json_t *host_runtime_stop(struct host *h, long long id, json_t *msg);
#define HOST_RUNTIME_MAX_WARNINGS 4
/* What the host's cgroups lack (sandbox_host_warnings), as a new JSON array of
 * strings, for the hello reply: labd-web shows it to admins in /api/v1/health. */
json_t *host_runtime_warnings(void);

#endif
