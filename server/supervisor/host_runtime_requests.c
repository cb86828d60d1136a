/* host_runtime_requests.c - a runtime's start and stop, as the web process asks
 * them; see host_runtime.h (a deleted user's end: host_homes.h). */
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "config/images.h"
#include "labd/log.h"
#include "proto/proto.h"
#include "supervisor/host_runtime.h"
#include "supervisor/host_runtime_box.h"
#include "supervisor/startcheck.h"
#include "supervisor/uidmap.h"

static struct runtime_box *find(struct host *h, const char *user)
{
	struct host_box *b;
	for (int i = 0; (b = host_next(h, &host_runtime, &i));)
		if (strcmp(b->user, user) == 0)
			return (struct runtime_box *)b;
	return NULL;
}

/* startcheck's held callback: a GPU held by any sandbox of any purpose */
static bool gpu_held(const void *h, unsigned gpu)
{
	return host_gpu_held(h, gpu);
}

/* The Jupyter kind for a start; a jupyter_env that is set but lacks it is
 * logged and passed over, so a host without the env still starts runtimes
 * from the image's own jupyter. */
static const char *pick_jupyter(const struct labd_config *cfg, const struct launch_request *rq)
{
	char image_env[CONFIG_PATH_MAX + sizeof(LAUNCH_IMAGE_ENV)];
	const char *env = strcmp(cfg->image, "/") == 0 ? cfg->jupyter_env : "";
	const char *kind;

	if (rq->from_image) { /* the image's own env, seen from the host */
		snprintf(image_env, sizeof(image_env), "%s" LAUNCH_IMAGE_ENV, rq->root);
		env = image_env;
	}
	kind = launch_pick_jupyter(cfg->jupyter, rq->root, env);

	if (kind && env[0] && !launch_env_has(env, kind))
		log_warn("jupyter_env %s has no bin/jupyter-%s: using the image's jupyter", env, kind);
	return kind;
}

static void fill_request(json_t *msg, const struct startcheck_start *st, const char *jupyter,
			 struct launch_request *rq)
{
	snprintf(rq->user, sizeof(rq->user), "%s", proto_str(msg, "user"));
	rq->user_id = (uint32_t)proto_int(msg, "user_id");
	snprintf(rq->token, sizeof(rq->token), "%s", proto_str(msg, "token"));
	startcheck_fill(st, rq);
	rq->jupyter = jupyter;
}

static json_t *started_reply(long long id, const char *user, const char *hash)
{
	char endpoint[LAUNCH_PATH_MAX];
	json_t *r = proto_ok(id);

	launch_endpoint(user, endpoint, sizeof(endpoint));
	json_object_set_new(r, "endpoint", json_string(endpoint));
	if (hash[0]) /* the runtime row records what it runs on */
		json_object_set_new(r, "image_hash", json_string(hash));
	return r;
}

json_t *host_runtime_start(struct host *h, long long id, json_t *msg)
{
	const struct labd_config *cfg = host_cfg(h);
	const char *user = proto_str(msg, "user"), *jupyter;
	struct startcheck_start st;
	struct launch_request rq = {0};
	struct runtime_box *x;
	char reason[200], hash[IMAGE_HASH_MAX];
	enum startcheck_code code;
	uid_t uid;
	int rc;

	startcheck_read(cfg, msg, &st);
	st.live = host_live(h);
	code = startcheck_check(cfg, &st, gpu_held, h, &rq, hash, reason, sizeof(reason));
	if (code != STARTCHECK_OK) {
		/* a GPU freed and claimed at once is expected: the web side queues again */
		if (startcheck_expected(code))
			log_info("sandbox_start for %s waits: %s", user, reason);
		else
			log_error("refused sandbox_start for %s: %s", user, reason);
		return proto_error(id, startcheck_code_name(code), reason);
	}
	x = find(h, user);
	if (x && x->b.state != H_ENDED)
		return proto_error(id, "runtime_exists", "this user already has a sandbox");
	if (!x && host_count(h, &host_runtime, NULL) >= host_runtime.max_boxes)
		return proto_error(id, "busy", "too many sandboxes");
	jupyter = pick_jupyter(cfg, &rq);
	if (!jupyter)
		return proto_error(id, "no_jupyter", "no jupyter lab, notebook or server in the image");
	if ((rc = uidmap_claim(host_uids(h), user, proto_int(msg, "user_id"), &uid, reason,
			       sizeof(reason))) < 0) {
		log_error("refused sandbox_start for %s: %s", user, reason);
		return proto_error(id, "bad_uid", reason);
	}
	fill_request(msg, &st, jupyter, &rq);
	if (!(x = (struct runtime_box *)host_claim(h, &host_runtime, x ? &x->b : NULL)))
		return proto_error(id, "busy", "too many sandboxes");
	if ((rc = launch_spawn(cfg, host_state_dir(h), &rq, &x->b.worker, &x->b.worker_fd,
			       &x->out_fd)) < 0) {
		x->out_fd = -1;
		return proto_error(id, "sandbox_failed", strerror(-rc));
	}
	x->b.used = true;
	x->b.state = H_STARTING;
	x->runtime_id = proto_int(msg, "runtime_id");
	x->b.deadline_s = proto_int(msg, "deadline");
	x->b.host_uid = uid;
	x->b.n_gpus = rq.n_gpus;
	memcpy(x->b.gpus, rq.gpus, sizeof(x->b.gpus));
	snprintf(x->b.user, sizeof(x->b.user), "%s", user);
	snprintf(x->kind, sizeof(x->kind), "%s", proto_str(msg, "kind"));
	log_info("building the sandbox of %s (runtime %lld, worker %d)", user, x->runtime_id,
		 (int)x->b.worker);
	return started_reply(id, user, hash);
}

json_t *host_runtime_stop(struct host *h, long long id, json_t *msg)
{
	struct runtime_box *x = find(h, proto_str(msg, "user"));
	long long rid = proto_int(msg, "runtime_id");
	const char *reason = proto_str(msg, "reason");

	if (!x || x->b.state == H_ENDED || (rid && x->runtime_id && rid != x->runtime_id))
		return proto_error(id, "not_found", "no sandbox is running for this runtime");
	host_stop(h, &x->b, "requested", reason[0] ? reason : "stopped");
	return proto_ok(id);
}
