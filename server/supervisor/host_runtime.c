/* host_runtime.c - the runtime purpose of the sandbox host; see host_runtime.h. */
#include "supervisor/host_runtime.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "config/images.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "proto/proto.h"
#include "supervisor/homes.h"
#include "supervisor/host_homes.h"
#include "supervisor/host_runtime_box.h"
#include "supervisor/runkeeper.h"
#include "supervisor/startcheck.h"
#include "supervisor/uidmap.h"

#define PROBE_EVERY_MS 5        /* readiness: the user is waiting on this */
#define NET_CHECK_EVERY_MS 2000 /* is each egress runtime's pasta still there */

static struct runtime_box *find(struct host *h, const char *user)
{
	struct host_box *b;
	for (int i = 0; (b = host_next(h, &host_runtime, &i));)
		if (strcmp(b->user, user) == 0)
			return (struct runtime_box *)b;
	return NULL;
}

static void close_output(struct runtime_box *x)
{
	if (x->out_fd >= 0)
		close(x->out_fd);
	x->out_fd = -1;
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

static void fill_request(json_t *msg, const struct box_shape *shape, const char *jupyter,
			 struct launch_request *rq)
{
	snprintf(rq->user, sizeof(rq->user), "%s", proto_str(msg, "user"));
	rq->user_id = (uint32_t)proto_int(msg, "user_id");
	snprintf(rq->token, sizeof(rq->token), "%s", proto_str(msg, "token"));
	startcheck_fill(shape, rq);
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
	code = startcheck_check(cfg, &st, gpu_held, h, &rq, hash, reason, sizeof(reason));
	if (code != STARTCHECK_OK) {
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
	fill_request(msg, &st.shape, jupyter, &rq);
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

json_t *host_runtime_user_deleted(struct host *h, long long id, json_t *msg)
{
	const char *user = proto_str(msg, "user");
	long long user_id = proto_int(msg, "user_id");
	struct runtime_box *x = find(h, user);
	char why[200];

	if (uidmap_retire(host_uids(h), user, user_id, why, sizeof(why)) < 0) {
		log_error("refused user_deleted for %s: %s", user, why);
		return proto_error(id, "bad_uid", why);
	}
	if (x && x->b.state != H_ENDED) {
		/* the home is still mounted: it goes when the teardown is done */
		x->retire_user_id = user_id;
		host_stop(h, &x->b, "requested", "account deleted");
	} else {
		homes_retire(host_cfg(h), host_state_dir(h), user, user_id);
	}
	return proto_ok(id);
}

static void describe_end(struct host_box *b, const struct sandbox_result *res)
{
	char why[200];

	if (res->kind == SANDBOX_OOM) {
		host_set_end(b, "oom", true,
			     "out of memory: the runtime used more than its memory limit");
		return;
	}
	if (b->requested)
		return; /* the stop's cause and reason stay */
	if (res->kind == SANDBOX_EXITED) {
		snprintf(why, sizeof(why), "jupyter exited with status %d", res->code);
		host_set_end(b, "exited", res->code != 0, why);
	} else if (res->kind == SANDBOX_SIGNALED) {
		snprintf(why, sizeof(why), "jupyter was killed by signal %d", res->signal);
		host_set_end(b, "signaled", true, why);
	} else {
		host_set_end(b, "gone", true, "the runtime ended");
	}
}

static void died(struct host *h, struct host_box *b, const struct sandbox_result *res)
{
	describe_end(b, res);
	runkeeper_end(host_state_dir(h), b->h.id); /* before the teardown kills the keeper */
	((struct runtime_box *)b)->keeper = 0;
}

static void started(struct host *h, struct host_box *b)
{
	struct runtime_box *x = (struct runtime_box *)b;
	char err[200];
	int rc;

	x->probe_at_ms = clock_ms();
	/* the output outlives this process from now on; a runtime without a keeper
	 * would stop starting kernels at the next restart: it fails the start */
	rc = runkeeper_start(host_cfg(h), host_state_dir(h), b->user, &b->h, x->out_fd,
			     &x->keeper);
	close_output(x);
	host_save(h, b);
	log_info("runtime of %s started: sandbox %s, pid %d", b->user, b->h.id, (int)b->h.pid);
	if (rc < 0) {
		snprintf(err, sizeof(err), "its output keeper could not start: %s", strerror(-rc));
		host_stop(h, b, "start_failed", err);
		b->failed = true;
	}
}

static void ending(struct host *h, struct host_box *b)
{
	(void)h;
	close_output((struct runtime_box *)b);
}

static void ended(struct host *h, struct host_box *b)
{
	struct runtime_box *x = (struct runtime_box *)b;

	if (x->retire_user_id) {
		homes_retire(host_cfg(h), host_state_dir(h), b->user, x->retire_user_id);
		x->retire_user_id = 0;
	}
}

static void send_warnings(struct host *h, struct runtime_box *x, int64_t wall)
{
	const struct labd_config *cfg = host_cfg(h);

	for (unsigned i = 0; i < cfg->n_warn_before && i < 32; i++) {
		int64_t left = x->b.deadline_s - wall;
		if ((x->warned & (1u << i)) || left > cfg->warn_before_s[i])
			continue;
		x->warned |= 1u << i;
		json_t *e = host_event("sandbox_warning", &x->b);
		json_object_set_new(e, "seconds_left", json_integer(left > 0 ? left : 0));
		host_emit(h, e);
	}
}

static long long next_warning_ms(struct host *h, struct runtime_box *x, int64_t wall,
				 long long now)
{
	const struct labd_config *cfg = host_cfg(h);
	long long due = now + (x->b.deadline_s - wall) * 1000;

	for (unsigned i = 0; i < cfg->n_warn_before && i < 32; i++)
		if (!(x->warned & (1u << i))) {
			long long w = now + (x->b.deadline_s - cfg->warn_before_s[i] - wall) * 1000;
			due = w < due ? w : due;
		}
	return due;
}

/* A running runtime's pasta, restarted (loudly) when it died: the network is the
 * runtime's only way out, and a dead pasta would leave it silently cut off. */
static void check_net(struct host *h, struct runtime_box *x, long long now)
{
	struct sandbox_spec s;

	if (now < x->net_check_at_ms)
		return;
	x->net_check_at_ms = now + NET_CHECK_EVERY_MS;
	sandbox_spec_init(&s);
	s.state_dir = host_state_dir(h);
	s.net_dns = host_cfg(h)->net_dns;
	s.pasta_path = host_cfg(h)->net_pasta;
	int rc = sandbox_net_check(&s, &x->b.h);
	if (rc != 0)
		log_warn("runtime of %s: its network helper (pasta) ended and was %s", x->b.user,
			 rc == 1 ? "restarted" : "not restarted");
}

/* A running runtime's probe, network and warnings (the host did its deadline). */
static long long tick(struct host *h, struct host_box *b, long long now, int64_t wall)
{
	struct runtime_box *x = (struct runtime_box *)b;

	if (!b->ready && now >= x->probe_at_ms) {
		char run_dir[LAUNCH_PATH_MAX];
		launch_run_dir(host_state_dir(h), b->user, run_dir, sizeof(run_dir));
		if (launch_probe(run_dir, b->host_uid)) {
			char endpoint[LAUNCH_PATH_MAX];
			json_t *e = host_event("sandbox_ready", b);
			b->ready = true;
			log_info("runtime of %s answers", b->user);
			launch_endpoint(b->user, endpoint, sizeof(endpoint));
			json_object_set_new(e, "endpoint", json_string(endpoint));
			host_emit(h, e);
		}
		x->probe_at_ms = now + PROBE_EVERY_MS;
	}
	check_net(h, x, now);
	send_warnings(h, x, wall);
	long long due = b->ready ? next_warning_ms(h, x, wall, now) : x->probe_at_ms;
	return due < x->net_check_at_ms ? due : x->net_check_at_ms;
}

static void forget(struct host_box *b)
{
	close_output((struct runtime_box *)b);
}

static void *init(struct host *h)
{
	(void)h;
	host_runtime_log_warnings();
	return host_homes_new();
}

static void release(void *own)
{
	host_homes_free(own);
}

static long long tick_all(struct host *h, void *own, long long now, int64_t wall)
{
	return host_homes_tick(h, own, now, wall);
}

static int pollfds_all(struct host *h, void *own, struct pollfd *fds, int max)
{
	(void)h;
	return host_homes_pollfds(own, fds, max);
}

static bool on_fd_all(struct host *h, void *own, int fd)
{
	return host_homes_on_fd(h, own, fd);
}

const struct host_purpose host_runtime = {
	.name = "runtime",
	.ended_event = "sandbox_ended",
	.box_size = sizeof(struct runtime_box),
	.max_boxes = 256,
	.grace = true,
	.deadline_reason = "time limit reached",
	.init = init,
	.release = release,
	.describe = host_runtime_describe,
	.identify = host_runtime_identify,
	.record_path = host_runtime_record_path,
	.record_fields = host_runtime_record_fields,
	.adopt_all = host_runtime_adopt_all,
	.started = started,
	.died = died,
	.ending = ending,
	.ended = ended,
	.tick = tick,
	.tick_all = tick_all,
	.pollfds_all = pollfds_all,
	.on_fd_all = on_fd_all,
	.list_entry = host_runtime_list_entry,
	.forget = forget,
};
