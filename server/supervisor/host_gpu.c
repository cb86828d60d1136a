/* host_gpu.c - gpu_processes_end; see host_gpu.h. */
#include "supervisor/host_gpu.h"

#include <string.h>
#include <sys/types.h>

#include "labd/log.h"
#include "proto/proto.h"
#include "supervisor/host_pool.h"
#include "supervisor/host_runtime.h"
#include "supervisor/host_runtime_box.h"
#include "supervisor/pool.h"

/* The running sandbox the message names, or NULL. */
static struct host_box *find(struct host *h, json_t *msg)
{
	const char *user = proto_str(msg, "user");
	bool pool = json_object_get(msg, "pool_id") != NULL;
	long long want = proto_int(msg, pool ? "pool_id" : "runtime_id");
	struct host_box *b;

	for (int i = 0; (b = host_next(h, pool ? &host_pool : &host_runtime, &i));) {
		long long have = pool ? ((struct pool_box *)b)->pool_id
				      : ((struct runtime_box *)b)->runtime_id;
		if (strcmp(b->user, user) == 0 && (want == 0 || have == want) &&
		    (b->state == H_RUNNING || b->state == H_STOPPING) && b->h.pid > 0)
			return b;
	}
	return NULL;
}

json_t *host_gpu_processes_end(struct host *h, long long id, json_t *msg)
{
	pid_t pids[PROTO_PIDS_MAX];
	unsigned n = 0;
	struct host_box *b;
	json_t *v, *r;
	size_t i;
	int ended;

	if ((json_object_get(msg, "pool_id") != NULL) == (json_object_get(msg, "runtime_id") != NULL))
		return proto_error(id, "bad_request", "name the sandbox by runtime_id or pool_id");
	if (!(b = find(h, msg)))
		return proto_error(id, "not_found", "no such running sandbox");
	json_array_foreach(json_object_get(msg, "pids"), i, v) {
		if (n < PROTO_PIDS_MAX) /* proto.c bounds the array to as many */
			pids[n++] = (pid_t)json_integer_value(v);
	}
	if ((ended = sandbox_end_pids(&b->h, pids, n)) < 0)
		return proto_error(id, "not_found", "the sandbox is gone");
	log_info("gpu_processes_end: %d of %u processes of %s's sandbox %s ended", ended, n,
		 b->user, b->h.id);
	r = proto_ok(id);
	json_object_set_new(r, "ended", json_integer(ended));
	return r;
}
