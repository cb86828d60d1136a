/* local.c - the local backend: the supervisor protocol from the web side.
 *
 * Calls may come from any worker thread at once: each waits for its own reply
 * by id, so a slow answer to one never holds up another (no lock is held
 * while waiting). One reader thread takes replies and events off the socket;
 * events are checked against the same field lists the supervisor sends by
 * (proto.h) before they reach the runtime layer. */
#include "backend/backend.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "labd/clock.h"
#include "labd/log.h"
#include "labd/str.h"
#include "metrics/labd.h"
#include "proto/proto.h"

/* The supervisor takes at most this many bytes of a stop's reason (proto_sandbox_stop,
 * proto_pool_stop); cut on a UTF-8 boundary (str_utf8_len), since a message json_pack
 * could not build would go out without its fields and end this process. */
#define STOP_REASON_MAX 150

#define CALL_TIMEOUT_MS 5000

struct pending {
	long long id;
	json_t *reply;
	int fd; /* a descriptor the reply carried (job_shell), or -1 */
	struct pending *next;
};

struct local {
	struct backend base;
	int fd;
	pthread_t reader;
	pthread_mutex_t lock;
	pthread_cond_t answered;
	struct pending *pending;
	long long next_id;
	struct backend_events ev;
	/* the hello reply's host warnings, "\n"-separated; written once, while
	 * backend_local_new says hello, before any HTTP worker can read them */
	char warnings[BACKEND_WARNINGS_MAX];
};

static void on_ready(struct local *l, json_t *m)
{
	if (l->ev.ready)
		l->ev.ready(l->ev.ctx, proto_str(m, "user"), proto_int(m, "runtime_id"),
			    proto_str(m, "endpoint"));
}

static void on_ended(struct local *l, json_t *m)
{
	if (l->ev.ended)
		l->ev.ended(l->ev.ctx, proto_str(m, "user"), proto_int(m, "runtime_id"),
			    proto_str(m, "cause"), proto_bool(m, "failed"), proto_str(m, "reason"));
}

static void on_warning(struct local *l, json_t *m)
{
	if (l->ev.warning)
		l->ev.warning(l->ev.ctx, proto_str(m, "user"), proto_int(m, "runtime_id"),
			      proto_int(m, "seconds_left"));
}

static void on_pool_ready(struct local *l, json_t *m)
{
	if (l->ev.pool_ready)
		l->ev.pool_ready(l->ev.ctx, proto_str(m, "user"), proto_int(m, "pool_id"));
}

static void on_pool_ended(struct local *l, json_t *m)
{
	if (l->ev.pool_ended)
		l->ev.pool_ended(l->ev.ctx, proto_str(m, "user"), proto_int(m, "pool_id"),
				 proto_str(m, "cause"), proto_bool(m, "failed"),
				 proto_str(m, "reason"));
}

static void on_job_phase(struct local *l, json_t *m)
{
	if (!proto_phase_ok(proto_str(m, "phase"))) {
		log_error("supervisor sent a job_phase with an unknown phase");
		return;
	}
	if (l->ev.job_phase)
		l->ev.job_phase(l->ev.ctx, proto_str(m, "user"), proto_int(m, "pool_id"),
				proto_int(m, "job_id"), proto_str(m, "phase"), proto_int(m, "at_ms"));
}

static void on_job_exited(struct local *l, json_t *m)
{
	struct backend_job_exit x = {
		.kind = proto_str(m, "kind"),
		.code = (int)proto_int(m, "code"),
		.signal = (int)proto_int(m, "signal"),
		.at_ms = proto_int(m, "at_ms"),
		.reason = proto_str(m, "reason"),
		.failure = proto_str(m, "failure"),
		.home_full = proto_bool(m, "home_full"),
	};

	if (!proto_exit_kind_ok(x.kind)) {
		log_error("supervisor sent a job_exited with an unknown kind");
		return;
	}
	if (l->ev.job_exited)
		l->ev.job_exited(l->ev.ctx, proto_str(m, "user"), proto_int(m, "pool_id"),
				 proto_int(m, "job_id"), &x);
}

static void on_job_sample(struct local *l, json_t *m)
{
	struct backend_job_sample s = {
		.at_ms = proto_int(m, "at_ms"),
		.cpu_usage_us = proto_int(m, "cpu_usage_us"),
		.memory_bytes = proto_int(m, "memory_bytes"),
		.memory_limit_bytes = proto_int(m, "memory_limit_bytes"),
		.io_wait_us = proto_int(m, "io_wait_us"),
		.log_bytes = proto_int(m, "log_bytes"),
	};

	if (l->ev.job_sample)
		l->ev.job_sample(l->ev.ctx, proto_str(m, "user"), proto_int(m, "pool_id"),
				 proto_int(m, "job_id"), &s);
}

/* What the supervisor may send: one table validates and dispatches. */
static const struct {
	const char *type;
	const struct proto_field *fields;
	void (*handler)(struct local *l, json_t *msg);
} events[] = {
	{"sandbox_ready", proto_sandbox_ready, on_ready},
	{"sandbox_ended", proto_sandbox_ended, on_ended},
	{"sandbox_warning", proto_sandbox_warning, on_warning},
	{"pool_ready", proto_pool_ready, on_pool_ready},
	{"pool_ended", proto_pool_ended, on_pool_ended},
	{"job_phase", proto_job_phase, on_job_phase},
	{"job_exited", proto_job_exited, on_job_exited},
	{"job_sample", proto_job_sample, on_job_sample},
};

/* Hands msg over to its waiter (NULL returned) or gives it back. Handed over,
 * not shared: jansson's json_decref reads the count without an atomic load, so
 * the reader's decref must not race the waiter's. */
static json_t *deliver_reply(struct local *l, json_t *msg, int *fd)
{
	long long id = proto_int(msg, "id");

	pthread_mutex_lock(&l->lock);
	for (struct pending *p = l->pending; p; p = p->next)
		if (p->id == id && !p->reply) {
			p->reply = msg;
			p->fd = *fd;
			*fd = -1;
			msg = NULL;
			pthread_cond_broadcast(&l->answered);
			break;
		}
	/* no waiter: the call timed out meanwhile; the reconciler catches up */
	pthread_mutex_unlock(&l->lock);
	return msg;
}

/* msg (consumed): a reply goes to its waiter, an event to its handler. A
 * descriptor beside it (fd, consumed) goes only with a reply that has a waiter. */
static void dispatch(struct local *l, json_t *msg, int fd)
{
	const char *type = json_string_value(json_object_get(msg, "type")) ?: "";
	char err[128];

	if (strcmp(type, "reply") == 0) {
		if (proto_check(msg, proto_reply, true, err, sizeof(err)) == 0)
			msg = deliver_reply(l, msg, &fd);
		else
			log_error("supervisor sent a bad reply: %s", err);
		if (fd >= 0)
			close(fd); /* its caller gave up waiting: a shell's terminal hangs up */
		json_decref(msg);
		return;
	}
	if (fd >= 0)
		close(fd); /* events carry none */
	for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++) {
		if (strcmp(events[i].type, type) != 0)
			continue;
		if (proto_check(msg, events[i].fields, false, err, sizeof(err)) == 0)
			events[i].handler(l, msg);
		else
			log_error("supervisor sent a bad %s: %s", type, err);
		json_decref(msg);
		return;
	}
	log_error("supervisor sent an unknown message type %.40s", type);
	json_decref(msg);
}

static void *reader_loop(void *arg)
{
	struct local *l = arg;
	struct pollfd pfd = {.fd = l->fd, .events = POLLIN};

	for (;;) {
		json_t *msg;
		int fd;
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			break;
		int rc = proto_recv_fd(l->fd, &msg, &fd);
		if (rc == -EAGAIN || rc == -EPROTO)
			continue;
		if (rc != 0)
			break; /* EOF: the supervisor is gone or the web process stops */
		dispatch(l, msg, fd);
	}
	metrics_supervisor_channel(false);
	return NULL;
}

/* The reply wait's condition variable times out on CLOCK_MONOTONIC: a step
 * of the wall clock neither cuts a call short nor stretches it. */
static void init_answered(pthread_cond_t *c)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
}

/* Sends msg (consumed) and waits for its reply. 0 with *reply owned by the
 * caller (and *fd, when not NULL, the descriptor it carried or -1), -ETIMEDOUT,
 * or another negative errno. */
static int call_fd(struct local *l, json_t *msg, json_t **reply, int *fd)
{
	struct pending self = {.fd = -1}, **pp;
	struct timespec until;
	int rc = 0;

	*reply = NULL;
	clock_deadline(&until, CALL_TIMEOUT_MS);
	pthread_mutex_lock(&l->lock);
	self.id = l->next_id++;
	self.next = l->pending;
	l->pending = &self;
	json_object_set_new(msg, "id", json_integer(self.id));
	rc = proto_send(l->fd, msg);
	while (rc == 0 && !self.reply)
		if (pthread_cond_timedwait(&l->answered, &l->lock, &until) == ETIMEDOUT)
			rc = -ETIMEDOUT;
	for (pp = &l->pending; *pp != &self; pp = &(*pp)->next)
		;
	*pp = self.next;
	pthread_mutex_unlock(&l->lock);
	json_decref(msg);
	if (self.reply && rc == 0)
		*reply = self.reply;
	else
		json_decref(self.reply);
	if (fd && self.reply && rc == 0)
		*fd = self.fd;
	else if (self.fd >= 0)
		close(self.fd);
	return self.reply ? 0 : rc;
}

static int call(struct local *l, json_t *msg, json_t **reply)
{
	return call_fd(l, msg, reply, NULL);
}

/* A call whose reply only says ok or not: 0, or -ENOENT/-EEXIST/-EBUSY/-EIO by code. */
static int simple_call(struct local *l, json_t *msg, json_t **reply, char *err, size_t errlen)
{
	int rc = call(l, msg, reply);
	const char *code;

	if (rc < 0)
		return rc;
	if (proto_bool(*reply, "ok"))
		return 0;
	code = proto_str(*reply, "code");
	if (err)
		snprintf(err, errlen, "%s", proto_str(*reply, "message"));
	return strcmp(code, "not_found") == 0	 ? -ENOENT
	       : strcmp(code, "runtime_exists") == 0 ? -EEXIST
	       : strcmp(code, "gpu_busy") == 0 || strcmp(code, "home_busy") == 0 ||
			 strcmp(code, "pool_busy") == 0 || strcmp(code, "host_full") == 0 ||
			 /* the supervisor still tears down a pool the store has ended */
			 strcmp(code, "too_many_pools") == 0
		 ? -EBUSY
										  : -EIO;
}

/* The sandbox's size into a start message, sandbox_start's and pool_start's alike
 * (proto.c's BOX_SHAPE_FIELDS): an absent size is the supervisor's configured
 * default; the network is always sent, since an absent one means the supervisor's
 * [quota] default rather than the plan's. */
static void put_shape(json_t *m, const struct box_shape *sh)
{
	json_t *gpus = json_array();

	for (unsigned i = 0; i < sh->n_gpus && i < BOX_GPUS_MAX; i++)
		json_array_append_new(gpus, json_integer(sh->gpus[i]));
	json_object_set_new(m, "gpus", gpus);
	if (sh->memory_bytes > 0)
		json_object_set_new(m, "memory_bytes", json_integer(sh->memory_bytes));
	if (sh->cpus_milli > 0)
		json_object_set_new(m, "cpus_milli", json_integer(sh->cpus_milli));
	if (sh->home_size_bytes > 0)
		json_object_set_new(m, "home_size_bytes", json_integer(sh->home_size_bytes));
	json_object_set_new(m, "network", json_integer(sh->network ? 1 : 0));
	if (sh->network && sh->egress_bytes_per_s > 0)
		json_object_set_new(m, "egress_bytes_per_s", json_integer(sh->egress_bytes_per_s));
	if (sh->image && sh->image[0])
		json_object_set_new(m, "image", json_string(sh->image));
}

/* The devices' uuids into a start message (gpu_uuids, parallel to gpus), only when
 * every device of sh has one: the supervisor takes all or none. */
static void put_uuids(json_t *m, const struct box_shape *sh, const char *const *uuids)
{
	json_t *list = json_array();

	for (unsigned i = 0; i < sh->n_gpus && i < BOX_GPUS_MAX; i++) {
		if (!uuids[i] || !uuids[i][0]) {
			json_decref(list);
			return;
		}
		json_array_append_new(list, json_string(uuids[i]));
	}
	if (json_array_size(list) > 0)
		json_object_set_new(m, "gpu_uuids", list);
	else
		json_decref(list);
}

/* Sends a start m (its own fields set; consumed) for a sandbox of shape sh and waits
 * for the reply (*reply, the caller's). image_hash (may be NULL) gets the hash of the
 * image the supervisor started it on, "" for the host's root or a refusal. */
static int start_call(struct local *l, json_t *m, const struct box_shape *sh, char *image_hash,
		      json_t **reply, char *err, size_t errlen)
{
	int rc;

	put_shape(m, sh);
	rc = simple_call(l, m, reply, err, errlen);
	if (image_hash)
		snprintf(image_hash, BACKEND_IMAGE_HASH_MAX, "%s",
			 rc == 0 ? proto_str(*reply, "image_hash") : "");
	return rc;
}

static int local_start(struct backend *b, const struct backend_start *s, char *endpoint,
		       char *err, size_t errlen)
{
	json_t *m = proto_msg("sandbox_start", -1), *reply = NULL;
	int rc;

	json_object_update_new(m, json_pack("{s:s,s:I,s:I,s:s,s:s,s:I}", "user", s->user,
					    "user_id", (json_int_t)s->user_id, "runtime_id",
					    (json_int_t)s->runtime_id, "kind", s->kind, "token",
					    s->token, "deadline", (json_int_t)s->deadline_s));
	put_uuids(m, &s->shape, s->gpu_uuids);
	rc = start_call((struct local *)b, m, &s->shape, s->image_hash, &reply, err, errlen);
	endpoint[0] = '\0';
	if (rc == 0)
		snprintf(endpoint, BACKEND_ENDPOINT_MAX, "%s", proto_str(reply, "endpoint"));
	json_decref(reply);
	return rc;
}

static int local_stop(struct backend *b, const char *user, int64_t runtime_id, const char *reason)
{
	json_t *m, *reply = NULL;
	json_t *fields = json_pack("{s:s,s:I,s:s%}", "user", user, "runtime_id",
				   (json_int_t)runtime_id, "reason", reason,
				   str_utf8_len(reason, STOP_REASON_MAX));
	int rc;

	if (!fields)
		return -EINVAL;
	m = proto_msg("sandbox_stop", -1);
	json_object_update_new(m, fields);
	rc = simple_call((struct local *)b, m, &reply, NULL, 0);
	json_decref(reply);
	return rc;
}

static int local_user_deleted(struct backend *b, const char *user, int64_t user_id)
{
	json_t *m = proto_msg("user_deleted", -1), *reply = NULL;
	int rc;

	json_object_update_new(m, json_pack("{s:s,s:I}", "user", user, "user_id",
					    (json_int_t)user_id));
	rc = simple_call((struct local *)b, m, &reply, NULL, 0);
	json_decref(reply);
	return rc;
}

static void copy_sandbox(json_t *e, struct backend_sandbox *s)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->user, sizeof(s->user), "%s", proto_str(e, "user"));
	s->runtime_id = proto_int(e, "runtime_id");
	snprintf(s->state, sizeof(s->state), "%s", proto_str(e, "state"));
	s->ready = proto_bool(e, "ready");
	s->failed = proto_bool(e, "failed");
	snprintf(s->cause, sizeof(s->cause), "%s", proto_str(e, "cause"));
	snprintf(s->reason, sizeof(s->reason), "%s", proto_str(e, "reason"));
	/* absent from an older supervisor: a runtime */
	s->pool_id = json_integer_value(json_object_get(e, "pool_id"));
	s->job_id = json_integer_value(json_object_get(e, "job_id"));
}

static int local_list(struct backend *b, struct backend_sandbox **out, size_t *n)
{
	json_t *reply = NULL, *list, *e;
	int rc = simple_call((struct local *)b, proto_msg("sandbox_list", -1), &reply, NULL, 0);
	size_t i;

	*out = NULL;
	*n = 0;
	list = json_object_get(reply, "sandboxes");
	if (rc == 0 && json_array_size(list) > 0) {
		*out = calloc(json_array_size(list), sizeof(**out));
		if (!*out)
			rc = -ENOMEM;
	}
	json_array_foreach(list, i, e) {
		if (*out && json_is_object(e))
			copy_sandbox(e, &(*out)[(*n)++]);
	}
	json_decref(reply);
	return rc;
}

static int local_ping(struct backend *b)
{
	json_t *reply = NULL;
	int rc = simple_call((struct local *)b, proto_msg("ping", -1), &reply, NULL, 0);
	json_decref(reply);
	return rc;
}

static void local_free(struct backend *b)
{
	struct local *l = (struct local *)b;

	shutdown(l->fd, SHUT_RDWR); /* the reader sees EOF and ends */
	pthread_join(l->reader, NULL);
	close(l->fd);
	pthread_cond_destroy(&l->answered);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

static const char *local_warnings(struct backend *b);

static int local_home_usage(struct backend *b, const char *user, int64_t user_id,
			    struct backend_home *out)
{
	json_t *m = proto_msg("home_usage", -1), *reply = NULL;
	int rc;

	json_object_update_new(m, json_pack("{s:s,s:I}", "user", user, "user_id",
					    (json_int_t)user_id));
	rc = simple_call((struct local *)b, m, &reply, NULL, 0);
	*out = (struct backend_home){0};
	if (rc == 0) {
		out->exists = proto_bool(reply, "exists");
		out->mounted = json_is_true(json_object_get(reply, "mounted"));
		out->used_bytes = json_integer_value(json_object_get(reply, "used_bytes"));
		out->size_bytes = json_integer_value(json_object_get(reply, "size_bytes"));
	}
	json_decref(reply);
	return rc;
}

static int local_home_resize(struct backend *b, const char *user, int64_t user_id,
			     int64_t size_bytes, enum backend_home_applied *applied)
{
	json_t *m = proto_msg("home_resize", -1), *reply = NULL;
	int rc;

	json_object_update_new(m, json_pack("{s:s,s:I,s:I}", "user", user, "user_id",
					    (json_int_t)user_id, "size_bytes",
					    (json_int_t)size_bytes));
	rc = simple_call((struct local *)b, m, &reply, NULL, 0);
	if (rc == 0) {
		const char *a = json_string_value(json_object_get(reply, "applied"));
		*applied = a && !strcmp(a, "online")	  ? BACKEND_HOME_ONLINE
			   : a && !strcmp(a, "unchanged") ? BACKEND_HOME_UNCHANGED
							  : BACKEND_HOME_NEXT_START;
	}
	json_decref(reply);
	return rc;
}

static int local_pool_start(struct backend *b, const struct backend_pool_start *s, char *err,
			    size_t errlen)
{
	json_t *m = proto_msg("pool_start", -1), *reply = NULL;
	int rc;

	json_object_update_new(m, json_pack("{s:s,s:I,s:I,s:I}", "user", s->user, "user_id",
					    (json_int_t)s->user_id, "pool_id",
					    (json_int_t)s->pool_id, "deadline",
					    (json_int_t)s->deadline_s));
	put_uuids(m, &s->shape, s->gpu_uuids);
	if (s->peer_addr && s->peers)
		json_object_update_new(m, json_pack("{s:s,s:s}", "peer_addr", s->peer_addr,
						    "peers", s->peers));
	if (s->scratch_home)
		json_object_set_new(m, "scratch_home", json_true());
	rc = start_call((struct local *)b, m, &s->shape, s->image_hash, &reply, err, errlen);
	json_decref(reply);
	return rc;
}

static int local_pool_stop(struct backend *b, const char *user, int64_t pool_id,
			   const char *reason)
{
	json_t *reply = NULL, *m;
	json_t *fields = json_pack("{s:s,s:I,s:s%}", "user", user, "pool_id", (json_int_t)pool_id,
				   "reason", reason, str_utf8_len(reason, STOP_REASON_MAX));
	int rc;

	if (!fields)
		return -EINVAL;
	m = proto_msg("pool_stop", -1);
	json_object_update_new(m, fields);
	rc = simple_call((struct local *)b, m, &reply, NULL, 0);
	json_decref(reply);
	return rc;
}

static int local_job_run(struct backend *b, const char *user, int64_t pool_id, int64_t job_id,
			 const char *spec_json, char *err, size_t errlen)
{
	json_t *reply = NULL, *m;
	int rc;

	if (strlen(spec_json) > PROTO_JOB_SPEC_MAX) {
		snprintf(err, errlen, "spec: is longer than 48 KiB");
		return -EINVAL;
	}
	m = proto_msg("job_run", -1);
	json_object_update_new(m, json_pack("{s:s,s:I,s:I,s:s}", "user", user, "pool_id",
					    (json_int_t)pool_id, "job_id", (json_int_t)job_id,
					    "spec", spec_json));
	rc = simple_call((struct local *)b, m, &reply, err, errlen);
	/* the supervisor's bad_spec names the field: the caller's input was wrong */
	if (rc == -EIO && strcmp(proto_str(reply, "code"), "bad_spec") == 0)
		rc = -EINVAL;
	json_decref(reply);
	return rc;
}

static int local_job_stop(struct backend *b, const char *user, int64_t pool_id, int64_t job_id,
			  int64_t grace_s)
{
	json_t *reply = NULL, *m = proto_msg("job_stop", -1);
	int rc;

	json_object_update_new(m, json_pack("{s:s,s:I,s:I,s:I}", "user", user, "pool_id",
					    (json_int_t)pool_id, "job_id", (json_int_t)job_id,
					    "grace_s",
					    (json_int_t)(grace_s < 0 ? 0
						: grace_s > PROTO_GRACE_MAX_S ? PROTO_GRACE_MAX_S
									      : grace_s)));
	rc = simple_call((struct local *)b, m, &reply, NULL, 0);
	json_decref(reply);
	return rc;
}

static int local_job_logs_remove(struct backend *b, const int64_t *job_ids, size_t n)
{
	json_t *m = proto_msg("job_logs_remove", -1), *ids = json_array(), *reply = NULL;
	int rc;

	for (size_t i = 0; i < n; i++)
		json_array_append_new(ids, json_integer(job_ids[i]));
	json_object_set_new(m, "job_ids", ids);
	rc = simple_call((struct local *)b, m, &reply, NULL, 0);
	json_decref(reply);
	return rc;
}

/* job_shell: 0 with the terminal in *fd, or (through a node's link, which keeps it)
 * with its token in token; else as local_job_shell says. */
static int shell_call(struct local *l, const struct backend_shell *s, int *fd, char *token,
		      size_t toklen, char *err, size_t errlen)
{
	json_t *reply = NULL, *m = proto_msg("job_shell", -1);
	const char *kept;
	int rc;

	*fd = -1;
	json_object_update_new(m, json_pack("{s:s,s:I,s:I,s:I,s:I}", "user", s->user, "pool_id",
					    (json_int_t)s->pool_id, "job_id", (json_int_t)s->job_id,
					    "cols", (json_int_t)s->cols, "rows", (json_int_t)s->rows));
	if ((rc = call_fd(l, m, &reply, fd)) < 0)
		return rc;
	kept = json_string_value(json_object_get(reply, "shell_token"));
	if (proto_bool(reply, "ok") && (*fd >= 0 || (token && kept))) {
		if (*fd < 0)
			snprintf(token, toklen, "%s", kept);
		json_decref(reply);
		return 0;
	}
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	snprintf(err, errlen, "%s", proto_bool(reply, "ok") ? "no terminal came back"
							  : proto_str(reply, "message"));
	rc = strcmp(proto_str(reply, "code"), "job_not_running") == 0 ||
			     strcmp(proto_str(reply, "code"), "not_found") == 0
		     ? -ENOENT
	     : strcmp(proto_str(reply, "code"), "busy") == 0 ? -EBUSY
							     : -EIO;
	json_decref(reply);
	return rc;
}

static int local_job_shell(struct backend *b, const struct backend_shell *s, int *fd,
			   char *err, size_t errlen)
{
	if (s->host > 1) { /* one machine runs jobs on one host */
		snprintf(err, errlen, "the job runs on one host, algo-1");
		*fd = -1;
		return -ENOENT;
	}
	return shell_call((struct local *)b, s, fd, NULL, 0, err, errlen);
}

int backend_local_job_shell_token(struct backend *b, const struct backend_shell *s, char *token,
				  size_t toklen, char *err, size_t errlen)
{
	int fd = -1, rc;

	token[0] = '\0';
	if ((rc = shell_call((struct local *)b, s, &fd, token, toklen, err, errlen)) < 0)
		return rc;
	if (fd >= 0) { /* a supervisor on this host: not what the caller can use */
		close(fd);
		snprintf(err, errlen, "the terminal came as a descriptor, not kept by a link");
		return -EIO;
	}
	return 0;
}

static int local_gpu_processes_end(struct backend *b, const char *user, int64_t runtime_id,
				   int64_t pool_id, const unsigned *pids, size_t n)
{
	json_t *reply = NULL, *m = proto_msg("gpu_processes_end", -1), *list = json_array();
	int rc;

	for (size_t i = 0; i < n; i++)
		json_array_append_new(list, json_integer(pids[i]));
	/* the sandbox by one of its ids: the supervisor refuses both or neither */
	json_object_update_new(m, json_pack("{s:s,s:I,s:o}", "user", user,
					    runtime_id > 0 ? "runtime_id" : "pool_id",
					    (json_int_t)(runtime_id > 0 ? runtime_id : pool_id),
					    "pids", list));
	rc = simple_call((struct local *)b, m, &reply, NULL, 0);
	if (rc == 0)
		rc = (int)proto_int(reply, "ended");
	json_decref(reply);
	return rc;
}

static const struct backend_ops local_ops = {local_start,	 local_stop,
					     local_list,	 local_ping,
					     local_free,	 local_user_deleted,
					     local_warnings,	 local_home_usage,
					     local_home_resize,	 local_pool_start,
					     local_pool_stop,	 local_job_run,
					     local_job_stop,	 local_job_logs_remove,
					     local_job_shell,	 local_gpu_processes_end,
					     NULL};

/* At most BACKEND_WARNINGS_MAX bytes of the supervisor's strings, one a line. */
static void keep_warnings(struct local *l, json_t *list)
{
	size_t i, used = 0;
	json_t *w;

	l->warnings[0] = '\0';
	json_array_foreach(list, i, w) {
		const char *s = json_string_value(w);
		int n;
		if (!s || strchr(s, '\n'))
			continue;
		n = snprintf(l->warnings + used, sizeof(l->warnings) - used, "%s\n", s);
		if (n < 0 || (size_t)n >= sizeof(l->warnings) - used) {
			l->warnings[used] = '\0';
			break;
		}
		used += (size_t)n;
	}
}

static const char *local_warnings(struct backend *b)
{
	return ((struct local *)b)->warnings;
}

static int say_hello(struct local *l)
{
	json_t *m = proto_msg("hello", -1), *reply = NULL;
	int rc;

	json_object_set_new(m, "version", json_string(LABD_VERSION));
	rc = simple_call(l, m, &reply, NULL, 0);
	if (rc == 0)
		keep_warnings(l, json_object_get(reply, "warnings"));
	json_decref(reply);
	return rc;
}

int backend_local_send_raw(struct backend *b, const char *text)
{
	struct local *l = (struct local *)b;
	return send(l->fd, text, strlen(text), MSG_NOSIGNAL) < 0 ? -errno : 0;
}

struct backend *backend_local_new(int fd, const struct backend_events *ev)
{
	struct local *l = calloc(1, sizeof(*l));

	if (!l) {
		close(fd);
		return NULL;
	}
	l->base.ops = &local_ops;
	l->fd = fd;
	l->next_id = 1;
	l->ev = *ev;
	pthread_mutex_init(&l->lock, NULL);
	init_answered(&l->answered);
	if (pthread_create(&l->reader, NULL, reader_loop, l) != 0) {
		close(fd);
		free(l);
		return NULL;
	}
	if (say_hello(l) < 0) {
		log_error("the supervisor did not answer hello");
		local_free(&l->base);
		return NULL;
	}
	metrics_supervisor_channel(true);
	if (l->ev.connected)
		l->ev.connected(l->ev.ctx);
	return &l->base;
}
