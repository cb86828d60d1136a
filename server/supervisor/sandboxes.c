/* sandboxes.c - the supervisor's sandbox host; see sandboxes.h. */
#include "supervisor/sandboxes.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "config/images.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "labd/sandbox.h"
#include "proto/proto.h"
#include "supervisor/homes.h"
#include "supervisor/homesize.h"
#include "supervisor/launch.h"
#include "supervisor/uidmap.h"
#include "supervisor/runkeeper.h"
#include "supervisor/startcheck.h"

#define MAX_SANDBOXES 256
#define ENDED_KEEP_S 3600 /* how long an ended sandbox stays listed */
#define PROBE_EVERY_MS 5  /* readiness: the user is waiting on this */
#define SWEEP_EVERY_MS (3600 * 1000LL) /* archived homes past their retention */
#define NET_CHECK_EVERY_MS 2000 /* is each egress runtime's pasta still there */
/* 256 sandboxes listed with reasons this long stay within PROTO_MAX_MESSAGE */
#define LIST_REASON_MAX 96

enum hosted_state { H_STARTING, H_RUNNING, H_STOPPING, H_ENDING, H_ENDED };
static const char *const state_names[] = {"starting", "running", "stopping", "stopping", "ended"};

struct hosted {
	bool used;
	char user[LAUNCH_NAME_MAX + 1];
	char kind[8];
	long long runtime_id;
	uid_t host_uid;
	unsigned gpus[SANDBOX_MAX_GPUS]; /* held until the teardown is done */
	unsigned n_gpus;
	struct sandbox_handle h;
	int pidfd;
	pid_t worker; /* while starting or ending */
	int worker_fd;
	int64_t deadline_s, ended_at_s;
	enum hosted_state state;
	bool ready;
	bool stop_pending; /* asked to stop while still starting */
	bool requested;    /* the stop was asked for (user, idle, shutdown) */
	bool failed;       /* ended on its own, not cleanly */
	long long retire_user_id; /* the user was deleted: retire this home once ended */
	char cause[16];
	char reason[200];
	long long kill_at_ms, probe_at_ms, net_check_at_ms;
	unsigned warned; /* bit i: warn_before[i] was sent */
	int out_fd;  /* Jupyter's output pipe, held until its keeper has it */
	pid_t keeper; /* the keeper's pid (runkeeper.h); 0 when none */
};

/* Online home growths in flight: answered when their worker reports. */
#define MAX_GROWS 8

struct sandboxes {
	struct {
		int fd; /* -1: free */
		long long reply_id;
	} grow[MAX_GROWS];
	const struct labd_config *cfg;
	struct sandboxes_events ev;
	char state_dir[CONFIG_PATH_MAX];
	struct uidmap *uids;
	long long sweep_at_ms; /* next sweep of archived homes */
	struct hosted slot[MAX_SANDBOXES];
};

static struct hosted *find(struct sandboxes *sb, const char *user)
{
	for (int i = 0; i < MAX_SANDBOXES; i++)
		if (sb->slot[i].used && strcmp(sb->slot[i].user, user) == 0)
			return &sb->slot[i];
	return NULL;
}

static struct hosted *free_slot(struct sandboxes *sb)
{
	for (int i = 0; i < MAX_SANDBOXES; i++)
		if (!sb->slot[i].used)
			return &sb->slot[i];
	return NULL;
}

static void record_path(const struct sandboxes *sb, const char *user, char *out, size_t len)
{
	snprintf(out, len, "%s/boxes/%s.json", sb->state_dir, user);
}

/* Records what re-adoption needs beside the sandbox's own state file. */
static int save_record(const struct sandboxes *sb, const struct hosted *x)
{
	char path[LAUNCH_PATH_MAX], tmp[LAUNCH_PATH_MAX + 8];
	json_t *j = json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:s?}", "user", x->user, "id", x->h.id,
			      "kind", x->kind, "runtime_id", (json_int_t)x->runtime_id, "uid",
			      (json_int_t)x->host_uid, "deadline",
			      (json_int_t)x->deadline_s, "stopping",
			      x->state == H_STOPPING ? x->reason : NULL);
	json_t *gpus = json_array();
	int rc;

	for (unsigned i = 0; i < x->n_gpus; i++)
		json_array_append_new(gpus, json_integer(x->gpus[i]));
	json_object_set_new(j, "gpus", gpus);
	if (x->keeper) /* informative: re-adoption asks the keeper's socket */
		json_object_set_new(j, "keeper_pid", json_integer(x->keeper));

	record_path(sb, x->user, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	rc = json_dump_file(j, tmp, JSON_COMPACT);
	json_decref(j);
	if (rc < 0 || rename(tmp, path) < 0)
		return log_errno("save %s", path);
	return 0;
}

static json_t *event(const char *type, const struct hosted *x)
{
	json_t *e = proto_msg(type, -1);
	json_object_set_new(e, "user", json_string(x->user));
	json_object_set_new(e, "runtime_id", json_integer(x->runtime_id));
	return e;
}

static void emit(struct sandboxes *sb, json_t *e)
{
	if (sb->ev.emit)
		sb->ev.emit(sb->ev.ctx, e);
	json_decref(e);
}

static void emit_ready(struct sandboxes *sb, struct hosted *x)
{
	char endpoint[LAUNCH_PATH_MAX];
	json_t *e = event("sandbox_ready", x);

	launch_endpoint(x->user, endpoint, sizeof(endpoint));
	json_object_set_new(e, "endpoint", json_string(endpoint));
	emit(sb, e);
}

static void emit_ended(struct sandboxes *sb, struct hosted *x)
{
	json_t *e = event("sandbox_ended", x);

	json_object_set_new(e, "cause", json_string(x->cause));
	json_object_set_new(e, "failed", json_boolean(x->failed));
	json_object_set_new(e, "reason", json_string(x->reason));
	emit(sb, e);
}

/* The length of s cut to at most max bytes, never inside a UTF-8 sequence. */
static size_t utf8_cut(const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);

	if (n <= max)
		return n;
	n = max;
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	return n;
}

static void set_end(struct hosted *x, const char *cause, bool failed, const char *reason)
{
	snprintf(x->cause, sizeof(x->cause), "%s", cause);
	snprintf(x->reason, sizeof(x->reason), "%.*s", (int)utf8_cut(reason, sizeof(x->reason) - 1),
		 reason);
	x->failed = failed;
}

static void close_output(struct hosted *x)
{
	if (x->out_fd >= 0)
		close(x->out_fd);
	x->out_fd = -1;
}

static void close_worker(struct hosted *x)
{
	if (x->worker_fd >= 0)
		close(x->worker_fd);
	x->worker_fd = -1;
	x->worker = 0;
}

/* The sandbox is gone for good: forget its record, tell the web process. */
static void mark_ended(struct sandboxes *sb, struct hosted *x)
{
	char path[LAUNCH_PATH_MAX];

	close_worker(x);
	x->state = H_ENDED;
	x->ended_at_s = time(NULL);
	record_path(sb, x->user, path, sizeof(path));
	unlink(path);
	log_info("runtime of %s ended (%s): %s", x->user, x->cause, x->reason);
	emit_ended(sb, x);
	if (x->retire_user_id) {
		homes_retire(sb->cfg, sb->state_dir, x->user, x->retire_user_id);
		x->retire_user_id = 0;
	}
}

/* The live sandbox (starting, running or still being torn down) holding gpu. */
static const struct hosted *gpu_holder(const struct sandboxes *sb, unsigned gpu)
{
	for (int i = 0; i < MAX_SANDBOXES; i++) {
		const struct hosted *x = &sb->slot[i];
		if (!x->used || x->state == H_ENDED)
			continue;
		for (unsigned k = 0; k < x->n_gpus; k++)
			if (x->gpus[k] == gpu)
				return x;
	}
	return NULL;
}

bool sandboxes_gpu_held(const struct sandboxes *sb, unsigned gpu)
{
	/* a job pool holds GPUs exclusively against runtimes too (pools.c) */
	return gpu_holder(sb, gpu) || (sb->ev.gpu_held && sb->ev.gpu_held(sb->ev.ctx, gpu));
}

struct uidmap *sandboxes_uids(struct sandboxes *sb)
{
	return sb->uids;
}

/* Checks beyond the protocol's kinds and bounds; NULL when fine. */
static const char *check_start(struct sandboxes *sb, json_t *msg)
{
	const char *kind = proto_str(msg, "kind");
	json_t *gpus = json_object_get(msg, "gpus"), *g;
	size_t i;

	if (strcmp(kind, "cpu") && strcmp(kind, "gpu"))
		return "kind must be cpu or gpu";
	if (proto_int(msg, "deadline") <= time(NULL))
		return "deadline is in the past";
	if ((strcmp(kind, "gpu") == 0) != (json_array_size(gpus) > 0))
		return "gpus do not match the kind";
	json_array_foreach(gpus, i, g) {
		if (!startcheck_gpu_configured(sb->cfg, json_integer_value(g)))
			return "gpu is not one of [gpu] devices";
		/* exclusivity is root's to keep, whatever the web process believes */
		if (sandboxes_gpu_held(sb, (unsigned)json_integer_value(g)))
			return "gpu is held by another sandbox";
	}
	return NULL;
}

/* The optional integer field name of msg, 0 when absent (proto.c bounded it). */
static int64_t opt_int(json_t *msg, const char *name)
{
	return json_object_get(msg, name) ? proto_int(msg, name) : 0;
}

/* The plan's sizes, bounded by the machine caps; -ERANGE with why. */
static int request_sizes(struct sandboxes *sb, json_t *msg, struct launch_request *rq, char *why,
			 size_t len)
{
	return caps_apply(sb->cfg, opt_int(msg, "memory_bytes"), opt_int(msg, "cpus_milli"),
			  opt_int(msg, "home_size_bytes"), &rq->sizes, why, len);
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
static void fill_request(struct sandboxes *sb, json_t *msg, const char *jupyter,
			 struct launch_request *rq)
{
	json_t *gpus = json_object_get(msg, "gpus"), *g;
	size_t i;

	/* sizes were filled and checked by request_sizes */
	memset(rq, 0, offsetof(struct launch_request, sizes));
	snprintf(rq->user, sizeof(rq->user), "%s", proto_str(msg, "user"));
	rq->user_id = (uint32_t)proto_int(msg, "user_id");
	snprintf(rq->token, sizeof(rq->token), "%s", proto_str(msg, "token"));
	json_array_foreach(gpus, i, g) {
		if (rq->n_gpus < SANDBOX_MAX_GPUS)
			rq->gpus[rq->n_gpus++] = (unsigned)json_integer_value(g);
	}
	rq->jupyter = jupyter;
	/* the plan's network; absent (an older web process) = the configured default */
	rq->network = json_object_get(msg, "network") ? proto_int(msg, "network") == 1
						      : sb->cfg->quota_network == 1;
	if (json_object_get(msg, "egress_bytes_per_s"))
		rq->egress_bytes_per_s = (uint64_t)proto_int(msg, "egress_bytes_per_s");
	else if (!json_object_get(msg, "network") && sb->cfg->quota_egress_bytes_per_s > 0)
		rq->egress_bytes_per_s = (uint64_t)sb->cfg->quota_egress_bytes_per_s;
}

json_t *sandboxes_start(struct sandboxes *sb, long long id, json_t *msg)
{
	const char *why = check_start(sb, msg), *user = proto_str(msg, "user"), *jupyter;
	struct launch_request rq;
	struct hosted *x;
	char endpoint[LAUNCH_PATH_MAX], reason[200];
	char hash[IMAGE_HASH_MAX];
	uid_t uid;
	int rc;

	if (why) {
		log_error("refused sandbox_start for %s: %s", user, why);
		return proto_error(id, strstr(why, "held") ? "gpu_busy" : "bad_request", why);
	}
	if (request_sizes(sb, msg, &rq, reason, sizeof(reason)) < 0) {
		log_error("refused sandbox_start for %s: %s", user, reason);
		return proto_error(id, "above_machine_cap", reason);
	}
	x = find(sb, user);
	if (x && x->state != H_ENDED)
		return proto_error(id, "runtime_exists", "this user already has a sandbox");
	if (!x && !(x = free_slot(sb)))
		return proto_error(id, "busy", "too many sandboxes");
	if ((rc = startcheck_image(sb->cfg, msg, &rq, hash, reason, sizeof(reason))) < 0) {
		log_error("refused sandbox_start for %s: %s", user, reason);
		return proto_error(id, rc == -EPERM ? "image_unsafe" : "image_missing", reason);
	}
	jupyter = pick_jupyter(sb->cfg, &rq);
	if (!jupyter)
		return proto_error(id, "no_jupyter", "no jupyter lab, notebook or server in the image");
	if ((rc = uidmap_claim(sb->uids, user, proto_int(msg, "user_id"), &uid, reason,
			       sizeof(reason))) < 0) {
		log_error("refused sandbox_start for %s: %s", user, reason);
		return proto_error(id, "bad_uid", reason);
	}
	fill_request(sb, msg, jupyter, &rq);
	if (x->used)
		close_output(x); /* the slot's previous runtime */
	memset(x, 0, sizeof(*x));
	x->pidfd = x->worker_fd = -1;
	x->h.status_fd = -1;
	if ((rc = launch_spawn(sb->cfg, sb->state_dir, &rq, &x->worker, &x->worker_fd,
			       &x->out_fd)) < 0) {
		x->out_fd = -1;
		return proto_error(id, "sandbox_failed", strerror(-rc));
	}
	x->used = true;
	x->state = H_STARTING;
	x->runtime_id = proto_int(msg, "runtime_id");
	x->deadline_s = proto_int(msg, "deadline");
	x->host_uid = uid;
	x->n_gpus = rq.n_gpus;
	memcpy(x->gpus, rq.gpus, sizeof(x->gpus));
	snprintf(x->user, sizeof(x->user), "%s", user);
	snprintf(x->kind, sizeof(x->kind), "%s", proto_str(msg, "kind"));
	log_info("building the sandbox of %s (runtime %lld, worker %d)", user, x->runtime_id,
		 (int)x->worker);
	json_t *r = proto_ok(id);
	launch_endpoint(user, endpoint, sizeof(endpoint));
	json_object_set_new(r, "endpoint", json_string(endpoint));
	if (hash[0]) /* the runtime row records what it runs on */
		json_object_set_new(r, "image_hash", json_string(hash));
	return r;
}

static void request_stop(struct sandboxes *sb, struct hosted *x, const char *cause,
			 const char *reason)
{
	if (x->state == H_STARTING) {
		x->stop_pending = true;
		set_end(x, cause, false, reason);
		return;
	}
	if (x->state != H_RUNNING)
		return;
	set_end(x, cause, false, reason);
	x->requested = true;
	x->state = H_STOPPING;
	x->kill_at_ms = clock_ms() + sb->cfg->stop_grace_s * 1000;
	/* init forwards SIGTERM to Jupyter, which shuts its kernels down cleanly */
	sandbox_kill(&x->h, SIGTERM);
	save_record(sb, x); /* a restarted supervisor finishes the stop */
	log_info("stopping the runtime of %s: %s", x->user, reason);
}

json_t *sandboxes_stop(struct sandboxes *sb, long long id, json_t *msg)
{
	struct hosted *x = find(sb, proto_str(msg, "user"));
	long long rid = proto_int(msg, "runtime_id");
	const char *reason = proto_str(msg, "reason");

	if (!x || x->state == H_ENDED || (rid && x->runtime_id && rid != x->runtime_id))
		return proto_error(id, "not_found", "no sandbox is running for this runtime");
	request_stop(sb, x, "requested", reason[0] ? reason : "stopped");
	return proto_ok(id);
}

json_t *sandboxes_user_deleted(struct sandboxes *sb, long long id, json_t *msg)
{
	const char *user = proto_str(msg, "user");
	long long user_id = proto_int(msg, "user_id");
	struct hosted *x = find(sb, user);
	char why[200];

	if (uidmap_retire(sb->uids, user, user_id, why, sizeof(why)) < 0) {
		log_error("refused user_deleted for %s: %s", user, why);
		return proto_error(id, "bad_uid", why);
	}
	if (x && x->state != H_ENDED) {
		/* the home is still mounted: it goes when the teardown is done */
		x->retire_user_id = user_id;
		request_stop(sb, x, "requested", "account deleted");
	} else {
		homes_retire(sb->cfg, sb->state_dir, user, user_id);
	}
	return proto_ok(id);
}

/* The home named by (user, user_id) only when root's record pairs them. */
static const char *home_pair_refused(struct sandboxes *sb, json_t *msg, char *why, size_t len)
{
	uid_t uid;

	if (uidmap_claim(sb->uids, proto_str(msg, "user"), proto_int(msg, "user_id"), &uid, why,
			 len) < 0)
		return why;
	return NULL;
}

json_t *sandboxes_home_usage(struct sandboxes *sb, long long id, json_t *msg)
{
	char why[200];

	if (home_pair_refused(sb, msg, why, sizeof(why)))
		return proto_error(id, "bad_uid", why);
	return homesize_usage(sb->state_dir, id, proto_str(msg, "user"), proto_int(msg, "user_id"));
}

json_t *sandboxes_home_resize(struct sandboxes *sb, long long id, json_t *msg)
{
	char why[200];

	if (home_pair_refused(sb, msg, why, sizeof(why))) {
		log_error("refused home_resize for %s: %s", proto_str(msg, "user"), why);
		return proto_error(id, "bad_uid", why);
	}
	int k = 0, fd = -1;
	while (k < MAX_GROWS && sb->grow[k].fd >= 0)
		k++;
	if (k == MAX_GROWS) /* busy: the next start grows it */
		return proto_error(id, "busy", "too many home growths at once");
	json_t *r = homesize_resize(sb->cfg, sb->state_dir, id, proto_str(msg, "user"),
				    proto_int(msg, "user_id"), proto_int(msg, "size_bytes"), &fd);
	if (!r) {
		sb->grow[k].fd = fd;
		sb->grow[k].reply_id = id;
	}
	return r; /* NULL: answered by on_grown */
}

/* A growth worker reported (or died): answer its request. */
static void on_grown(struct sandboxes *sb, int k)
{
	json_t *r = homesize_resized(sb->grow[k].reply_id, sb->grow[k].fd);

	emit(sb, r); /* a reply to the web process's request, sent as it is */
	close(sb->grow[k].fd);
	sb->grow[k].fd = -1;
}

json_t *sandboxes_list(struct sandboxes *sb, long long id)
{
	json_t *list = json_array(), *r;

	for (int i = 0; i < MAX_SANDBOXES; i++) {
		struct hosted *x = &sb->slot[i];
		if (!x->used)
			continue;
		/* the reason is cut so that a full list stays one message */
		json_array_append_new(
			list, json_pack("{s:s,s:I,s:s,s:b,s:s,s:s%,s:b,s:i,s:i}", "user", x->user,
					"runtime_id", (json_int_t)x->runtime_id, "state",
					state_names[x->state], "ready", x->ready, "cause", x->cause,
					"reason", x->reason, utf8_cut(x->reason, LIST_REASON_MAX),
					"failed", x->failed, "pool_id", 0, "job_id", 0));
	}
	r = proto_ok(id);
	json_object_set_new(r, "sandboxes", list);
	return r;
}

static void describe_end(struct hosted *x, const struct sandbox_result *res)
{
	char why[200];

	if (res->kind == SANDBOX_OOM) {
		set_end(x, "oom", true,
			"out of memory: the runtime used more than its memory limit");
		return;
	}
	if (x->requested)
		return; /* the stop's cause and reason stay */
	if (res->kind == SANDBOX_EXITED) {
		snprintf(why, sizeof(why), "jupyter exited with status %d", res->code);
		set_end(x, "exited", res->code != 0, why);
	} else if (res->kind == SANDBOX_SIGNALED) {
		snprintf(why, sizeof(why), "jupyter was killed by signal %d", res->signal);
		set_end(x, "signaled", true, why);
	} else {
		set_end(x, "gone", true, "the runtime ended");
	}
}

/* The sandbox's init is gone: classify, then tear down in a worker. */
static void begin_teardown(struct sandboxes *sb, struct hosted *x)
{
	struct sandbox_result res;
	int rc;

	if (sandbox_wait(&x->h, &res) < 0)
		memset(&res, 0, sizeof(res)), res.kind = SANDBOX_UNKNOWN;
	describe_end(x, &res);
	if (x->pidfd >= 0)
		close(x->pidfd);
	x->pidfd = -1;
	x->state = H_ENDING;
	runkeeper_end(sb->state_dir, x->h.id); /* before the teardown kills the keeper */
	x->keeper = 0;
	rc = launch_teardown(&x->h, &x->worker, &x->worker_fd);
	if (rc < 0) {
		log_warn("teardown of the runtime of %s could not start (%s); gc will retry",
			 x->user, strerror(-rc));
		mark_ended(sb, x);
	}
}

static void on_started(struct sandboxes *sb, struct hosted *x)
{
	char err[200];
	int rc = launch_result(x->worker_fd, &x->h, err, sizeof(err));

	if (rc == -EAGAIN)
		return;
	close_worker(x);
	if (rc < 0) {
		close_output(x);
		set_end(x, "start_failed", true, err);
		mark_ended(sb, x);
		return;
	}
	x->state = H_RUNNING;
	x->pidfd = (int)syscall(SYS_pidfd_open, x->h.pid, 0);
	x->probe_at_ms = clock_ms();
	/* the output outlives this process from now on; a runtime without a keeper
	 * would stop starting kernels at the next restart: it fails the start */
	rc = runkeeper_start(sb->cfg, sb->state_dir, x->user, &x->h, x->out_fd, &x->keeper);
	close_output(x);
	save_record(sb, x);
	log_info("runtime of %s started: sandbox %s, pid %d", x->user, x->h.id, (int)x->h.pid);
	if (rc < 0) {
		snprintf(err, sizeof(err), "its output keeper could not start: %s", strerror(-rc));
		request_stop(sb, x, "start_failed", err);
		x->failed = true;
		return;
	}
	if (x->stop_pending) {
		/* copies: set_end writes x->cause and x->reason, and snprintf from a
		 * buffer into itself empties it (a stop while starting ended with no cause,
		 * which the web process refuses as a bad sandbox_ended) */
		char cause[sizeof(x->cause)], reason[sizeof(x->reason)];
		snprintf(cause, sizeof(cause), "%s", x->cause);
		snprintf(reason, sizeof(reason), "%s", x->reason);
		request_stop(sb, x, cause, reason);
	}
}

void sandboxes_stop_all(struct sandboxes *sb, const char *reason)
{
	for (int i = 0; i < MAX_SANDBOXES; i++)
		if (sb->slot[i].used)
			request_stop(sb, &sb->slot[i], "requested", reason);
}

int sandboxes_live(struct sandboxes *sb)
{
	int n = 0;
	for (int i = 0; i < MAX_SANDBOXES; i++)
		n += sb->slot[i].used && sb->slot[i].state != H_ENDED;
	return n;
}

int sandboxes_pollfds(struct sandboxes *sb, struct pollfd *fds, int max)
{
	int n = 0;
	for (int k = 0; k < MAX_GROWS && n < max; k++)
		if (sb->grow[k].fd >= 0)
			fds[n++] = (struct pollfd){.fd = sb->grow[k].fd, .events = POLLIN};
	for (int i = 0; i < MAX_SANDBOXES && n < max; i++) {
		struct hosted *x = &sb->slot[i];
		if (!x->used)
			continue;
		if (x->worker_fd >= 0)
			fds[n++] = (struct pollfd){.fd = x->worker_fd, .events = POLLIN};
		else if ((x->state == H_RUNNING || x->state == H_STOPPING) && x->pidfd >= 0)
			fds[n++] = (struct pollfd){.fd = x->pidfd, .events = POLLIN};
	}
	return n;
}

static void on_fd(struct sandboxes *sb, struct hosted *x, int fd)
{
	if (fd == x->worker_fd && x->state == H_STARTING)
		on_started(sb, x);
	else if (fd == x->worker_fd && x->state == H_ENDING)
		mark_ended(sb, x); /* EOF: the teardown worker is done */
	else if (fd == x->pidfd && (x->state == H_RUNNING || x->state == H_STOPPING))
		begin_teardown(sb, x);
}

void sandboxes_on_events(struct sandboxes *sb, const struct pollfd *fds, int n)
{
	for (int k = 0; k < n; k++) {
		if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		for (int g = 0; g < MAX_GROWS; g++)
			if (sb->grow[g].fd >= 0 && sb->grow[g].fd == fds[k].fd)
				on_grown(sb, g);
		for (int i = 0; i < MAX_SANDBOXES; i++) {
			struct hosted *x = &sb->slot[i];
			if (x->used && (x->worker_fd == fds[k].fd || x->pidfd == fds[k].fd)) {
				on_fd(sb, x, fds[k].fd);
				break;
			}
		}
	}
}

static void send_warnings(struct sandboxes *sb, struct hosted *x, int64_t wall)
{
	for (unsigned i = 0; i < sb->cfg->n_warn_before && i < 32; i++) {
		int64_t left = x->deadline_s - wall;
		if ((x->warned & (1u << i)) || left > sb->cfg->warn_before_s[i])
			continue;
		x->warned |= 1u << i;
		json_t *e = event("sandbox_warning", x);
		json_object_set_new(e, "seconds_left", json_integer(left > 0 ? left : 0));
		emit(sb, e);
	}
}

static long long next_warning_ms(struct sandboxes *sb, struct hosted *x, int64_t wall,
				 long long now)
{
	long long due = now + (x->deadline_s - wall) * 1000;
	for (unsigned i = 0; i < sb->cfg->n_warn_before && i < 32; i++)
		if (!(x->warned & (1u << i))) {
			long long w = now + (x->deadline_s - sb->cfg->warn_before_s[i] - wall) * 1000;
			due = w < due ? w : due;
		}
	return due;
}

/* A running runtime's pasta, restarted (loudly) when it died: the network is the
 * runtime's only way out, and a dead pasta would leave it silently cut off. */
static void check_net(struct sandboxes *sb, struct hosted *x, long long now)
{
	struct sandbox_spec s;

	if (now < x->net_check_at_ms)
		return;
	x->net_check_at_ms = now + NET_CHECK_EVERY_MS;
	sandbox_spec_init(&s);
	s.state_dir = sb->state_dir;
	s.net_dns = sb->cfg->net_dns;
	s.pasta_path = sb->cfg->net_pasta;
	int rc = sandbox_net_check(&s, &x->h);
	if (rc != 0)
		log_warn("runtime of %s: its network helper (pasta) ended and was %s", x->user,
			 rc == 1 ? "restarted" : "not restarted");
}

/* Timers of one running or stopping sandbox; returns when it is next due. */
static long long tick_one(struct sandboxes *sb, struct hosted *x, long long now, int64_t wall)
{
	if (x->state == H_RUNNING && !x->ready && now >= x->probe_at_ms) {
		char run_dir[LAUNCH_PATH_MAX];
		launch_run_dir(sb->state_dir, x->user, run_dir, sizeof(run_dir));
		if (launch_probe(run_dir, x->host_uid)) {
			x->ready = true;
			log_info("runtime of %s answers", x->user);
			emit_ready(sb, x);
		}
		x->probe_at_ms = now + PROBE_EVERY_MS;
	}
	if (x->state == H_RUNNING)
		check_net(sb, x, now);
	if (x->state == H_RUNNING) {
		if (x->deadline_s <= wall)
			request_stop(sb, x, "time_limit", "time limit reached");
		else
			send_warnings(sb, x, wall);
	}
	if (x->state == H_RUNNING) {
		long long due = x->ready ? next_warning_ms(sb, x, wall, now) : x->probe_at_ms;
		return due < x->net_check_at_ms ? due : x->net_check_at_ms;
	}
	if (x->state == H_STOPPING && x->kill_at_ms <= now) {
		log_warn("runtime of %s did not stop within the grace period: killing it",
			 x->user);
		sandbox_kill(&x->h, SIGKILL);
		x->kill_at_ms = now + 1000; /* and again, until the pidfd says gone */
	}
	return x->state == H_STOPPING ? x->kill_at_ms : -1;
}

int sandboxes_tick(struct sandboxes *sb)
{
	long long now = clock_ms(), next = -1;
	int64_t wall = time(NULL);

	if (now >= sb->sweep_at_ms) {
		homes_sweep(sb->state_dir, sb->cfg->archive_retention_s, wall);
		sb->sweep_at_ms = now + SWEEP_EVERY_MS;
	}
	next = sb->sweep_at_ms;

	for (int i = 0; i < MAX_SANDBOXES; i++) {
		struct hosted *x = &sb->slot[i];
		if (!x->used)
			continue;
		if (x->state == H_ENDED && wall - x->ended_at_s > ENDED_KEEP_S) {
			close_output(x);
			x->used = false;
			continue;
		}
		long long due = tick_one(sb, x, now, wall);
		if (due >= 0 && (next < 0 || due < next))
			next = due;
	}
	return next < 0 ? -1 : (int)(next - now < 0 ? 0 : next - now > 60000 ? 60000 : next - now);
}

/* Re-adopts one record a previous supervisor left; false when it is gone. */
static bool adopt_one(struct sandboxes *sb, json_t *j)
{
	const char *user = json_string_value(json_object_get(j, "user"));
	const char *id = json_string_value(json_object_get(j, "id"));
	const char *stopping = json_string_value(json_object_get(j, "stopping"));
	struct hosted *x = free_slot(sb);

	if (!x || !user || !id || strlen(user) > LAUNCH_NAME_MAX)
		return false;
	memset(x, 0, sizeof(*x));
	x->worker_fd = x->out_fd = -1;
	if (sandbox_adopt(sb->state_dir, id, &x->h) < 0)
		return false;
	x->used = true;
	x->state = H_RUNNING;
	snprintf(x->user, sizeof(x->user), "%s", user);
	snprintf(x->kind, sizeof(x->kind), "%s",
		 json_string_value(json_object_get(j, "kind")) ?: "cpu");
	x->runtime_id = json_integer_value(json_object_get(j, "runtime_id"));
	x->host_uid = (uid_t)json_integer_value(json_object_get(j, "uid"));
	x->deadline_s = json_integer_value(json_object_get(j, "deadline"));
	json_t *g, *gpus = json_object_get(j, "gpus");
	size_t i;
	json_array_foreach(gpus, i, g) {
		if (x->n_gpus < SANDBOX_MAX_GPUS)
			x->gpus[x->n_gpus++] = (unsigned)json_integer_value(g);
	}
	x->pidfd = (int)syscall(SYS_pidfd_open, x->h.pid, 0);
	log_info("re-adopted the runtime of %s (sandbox %s)", user, id);
	/* no keeper (an earlier release's runtime, or it died): a new one, or loudly none */
	if (runkeeper_repair(sb->cfg, sb->state_dir, user, &x->h, &x->keeper) == 1)
		x->keeper = (pid_t)json_integer_value(json_object_get(j, "keeper_pid"));
	else if (x->keeper)
		save_record(sb, x);
	if (stopping)
		request_stop(sb, x, "requested", stopping);
	return true;
}

static void adopt_all(struct sandboxes *sb)
{
	char dir[LAUNCH_PATH_MAX], path[LAUNCH_PATH_MAX + 300];
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/boxes", sb->state_dir);
	d = opendir(dir);
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.' || !strstr(e->d_name, ".json"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		json_t *j = json_load_file(path, 0, NULL);
		if (!adopt_one(sb, j)) {
			log_info("runtime record %s is no longer running", e->d_name);
			unlink(path);
			if (json_string_value(json_object_get(j, "id")))
				runkeeper_end(sb->state_dir, json_string_value(json_object_get(j, "id")));
		}
		json_decref(j);
	}
	if (d)
		closedir(d);
}

/* Gaps in the host's cgroups are said loudly at start-up, never skipped silently;
 * admins see the same sentences in /api/v1/health (sandboxes_warnings). */
static int host_warnings(const char **w)
{
	/* Failure injection for tests: LABD_FAULT_HOST_WARNING=<text> adds text, standing
	 * in for a host without memsw or pids (the detection is unit-tested on fake trees) */
	int n = sandbox_host_warnings(w, SANDBOXES_MAX_WARNINGS - 1);
	const char *fault = getenv("LABD_FAULT_HOST_WARNING");

	if (fault && fault[0])
		w[n++] = fault;
	return n;
}

static void log_host_warnings(void)
{
	const char *w[SANDBOXES_MAX_WARNINGS];
	int n = host_warnings(w);

	for (int i = 0; i < n; i++)
		log_warn("%s", w[i]);
}

json_t *sandboxes_warnings(void)
{
	const char *w[SANDBOXES_MAX_WARNINGS];
	int n = host_warnings(w);
	json_t *list = json_array();

	for (int i = 0; i < n; i++)
		json_array_append_new(list, json_string(w[i]));
	return list;
}

struct sandboxes *sandboxes_new(const struct labd_config *cfg, const char *state_dir,
				const struct sandboxes_events *ev)
{
	struct sandboxes *sb = calloc(1, sizeof(*sb));

	if (!sb)
		return NULL;
	sb->cfg = cfg;
	for (int k = 0; k < MAX_GROWS; k++)
		sb->grow[k].fd = -1;
	if (ev)
		sb->ev = *ev;
	snprintf(sb->state_dir, sizeof(sb->state_dir), "%s", state_dir);
	if (!(sb->uids = uidmap_new(cfg, state_dir))) {
		free(sb);
		return NULL;
	}
	log_host_warnings();
	adopt_all(sb);
	if (sandbox_gc(state_dir, false) > 0)
		log_info("cleaned up sandboxes a crash left behind");
	return sb;
}

void sandboxes_free(struct sandboxes *sb)
{
	if (!sb)
		return;
	for (int k = 0; k < MAX_GROWS; k++)
		if (sb->grow[k].fd >= 0)
			close(sb->grow[k].fd);
	for (int i = 0; i < MAX_SANDBOXES; i++) {
		struct hosted *x = &sb->slot[i];
		if (x->used)
			close_output(x);
		if (!x->used || x->state == H_ENDED)
			continue;
		if (x->pidfd >= 0)
			close(x->pidfd);
		close_worker(x);
		sandbox_handle_clear(&x->h);
	}
	uidmap_free(sb->uids);
	free(sb);
}
