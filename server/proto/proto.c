/* proto.c - framing, the field lists and their validation; see proto.h. */
#include "proto/proto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "labd/boxshape.h"
#include "labd/gpucaps.h"
#include "labd/log.h"
#include "labd/parse.h"

#define USER_ID_MAX 1000000
#define TIME_MAX 32503680000LL /* year 3000: bounds a deadline */
#define IMAGE_NAME_LEN_MAX 32   /* config/images.h IMAGE_NAME_MAX */

/* The size of a sandbox (labd/boxshape.h), one fragment in both starts, sandbox_start
 * and pool_start: a runtime and a job pool are sized alike. gpus are checked again
 * root-side (configured, named once, not held); the sizes are capped at [runtime]'s
 * *_max; gpu_uuids, when sent, names each of gpus by its uuid in the same order (checked
 * root-side against the kind of each device: MIG- for an instance, GPU- for a card or a
 * share); network is 0 loopback only or 1 egress, with its rate each way; image is a
 * NAME of the supervisor's [images], absent = the host's root. An absent size is the
 * supervisor's default; an absent network, its [quota] default (startcheck.h). */
#define BOX_SHAPE_FIELDS                                               \
	{"gpus", PROTO_INT_ARRAY, 0, BOX_GPUS_MAX, false},                  \
	{"gpu_uuids", PROTO_UUID_ARRAY, 1, BOX_GPUS_MAX, true},             \
	{"memory_bytes", PROTO_INT, 1, 1LL << 50, true},                   \
	{"cpus_milli", PROTO_INT, 1, 1LL << 30, true},                     \
	{"home_size_bytes", PROTO_INT, 1, 1LL << 50, true},                \
	{"network", PROTO_INT, 0, 1, true},                                \
	{"egress_bytes_per_s", PROTO_INT, 1, 1LL << 40, true},             \
	{"image", PROTO_STRING, 1, IMAGE_NAME_LEN_MAX, true}

/* what names a user, beside the host uid root keeps for the id (supervisor/uidmap.c) */
#define USER_KEY_FIELDS                                                \
	{"user", PROTO_NAME, 0, 0, false},                                 \
	{"user_id", PROTO_INT, 1, USER_ID_MAX, false}

/* what names a runtime's sandbox in every message about it after its start (0: the
 * user's, whichever it is) */
#define RUNTIME_KEY_FIELDS                                             \
	{"user", PROTO_NAME, 0, 0, false},                                 \
	{"runtime_id", PROTO_INT, 0, 1LL << 53, false}

/* why a sandbox ended, a runtime's (sandbox_ended) and a pool's (pool_ended) alike:
 * cause one of PROTO_CAUSES */
#define ENDED_FIELDS                                                   \
	{"cause", PROTO_STRING, 1, 16, false},                             \
	{"failed", PROTO_BOOL, 0, 0, false},                               \
	{"reason", PROTO_STRING, 0, 200, false}

const struct proto_field proto_empty[] = {{NULL, 0, 0, 0, false}};
const struct proto_field proto_hello[] = {
	{"version", PROTO_STRING, 1, 32, false},
	{NULL, 0, 0, 0, false},
};
const struct proto_field proto_sandbox_start[] = {
	USER_KEY_FIELDS,
	{"runtime_id", PROTO_INT, 1, 1LL << 53, false},
	{"kind", PROTO_STRING, 3, 3, false},
	{"token", PROTO_TOKEN, PARSE_TOKEN_LEN, PARSE_TOKEN_LEN, false},
	{"deadline", PROTO_INT, 1, TIME_MAX, false},
	BOX_SHAPE_FIELDS,
	{NULL, 0, 0, 0, false},
};
const struct proto_field proto_user_deleted[] = {
	USER_KEY_FIELDS,
	{NULL, 0, 0, 0, false},
};
const struct proto_field proto_home_usage[] = {
	USER_KEY_FIELDS,
	{NULL, 0, 0, 0, false},
};
const struct proto_field proto_home_resize[] = {
	USER_KEY_FIELDS,
	{"size_bytes", PROTO_INT, 1, 1LL << 50, false},
	{NULL, 0, 0, 0, false},
};
const struct proto_field proto_sandbox_stop[] = {
	RUNTIME_KEY_FIELDS,
	{"reason", PROTO_STRING, 0, 150, false},
	{NULL, 0, 0, 0, false},
};
/* A reply's own fields; what a request's reply adds is checked by its caller. */
const struct proto_field proto_reply[] = {
	{"ok", PROTO_BOOL, 0, 0, false},
	{"code", PROTO_STRING, 1, 40, true},
	{"message", PROTO_STRING, 0, 200, true},
	{"version", PROTO_STRING, 1, 32, true},
	{"endpoint", PROTO_STRING, 1, 200, true},
	{"sandboxes", PROTO_LIST, 0, 0, true},
	{"warnings", PROTO_LIST, 0, 0, true}, /* hello: what the host's cgroups lack */
	{"exists", PROTO_BOOL, 0, 0, true},     /* home_usage */
	{"mounted", PROTO_BOOL, 0, 0, true},    /* home_usage */
	{"used_bytes", PROTO_INT, 0, 1LL << 50, true}, /* home_usage */
	{"size_bytes", PROTO_INT, 0, 1LL << 50, true}, /* home_usage */
	{"applied", PROTO_STRING, 1, 16, true}, /* home_resize: online, next_start, unchanged */
	{"image_hash", PROTO_STRING, 1, 80, true}, /* sandbox_start on an image: its hash */
	{"ended", PROTO_INT, 0, PROTO_PIDS_MAX, true}, /* gpu_processes_end */
	/* a node's link (link.h) could not carry the descriptor beside this reply */
	{"fd_dropped", PROTO_BOOL, 0, 0, true},
	{NULL, 0, 0, 0, false},
};
const struct proto_field proto_sandbox_ready[] = {
	RUNTIME_KEY_FIELDS,
	{"endpoint", PROTO_STRING, 1, 200, false},
	{NULL, 0, 0, 0, false},
};
const struct proto_field proto_sandbox_ended[] = {
	RUNTIME_KEY_FIELDS,
	ENDED_FIELDS,
	{NULL, 0, 0, 0, false},
};
const struct proto_field proto_sandbox_warning[] = {
	RUNTIME_KEY_FIELDS,
	{"seconds_left", PROTO_INT, 0, TIME_MAX, false},
	{NULL, 0, 0, 0, false},
};

/* ---- job sandboxes ("pools", docs/jobs.md) ---- */
#define POOL_ID_MAX (1LL << 53)
#define JOB_ID_MAX (1LL << 53)
/* what names a pool, and a job in it, in every message about them */
#define POOL_KEY_FIELDS                                                \
	{"user", PROTO_NAME, 0, 0, false},                                 \
	{"pool_id", PROTO_INT, 1, POOL_ID_MAX, false}
#define JOB_KEY_FIELDS POOL_KEY_FIELDS, {"job_id", PROTO_INT, 1, JOB_ID_MAX, false}
const struct proto_field proto_pool_start[] = {
	USER_KEY_FIELDS,
	{"pool_id", PROTO_INT, 1, POOL_ID_MAX, false},
	/* a hard cap: the pool ends then, whatever runs in it */
	{"deadline", PROTO_INT, 1, TIME_MAX, false},
	BOX_SHAPE_FIELDS,
	/* one host of a job on several nodes (docs/slurm.md): its address on the cluster
	 * network, the other hosts' ("a,b,c"), and whether its home is a scratch folder;
	 * checked strictly root-side (sandbox_peers_check), only on `labd node` */
	{"peer_addr", PROTO_STRING, 7, 15, true},
	{"peers", PROTO_STRING, 7, 1023, true},
	{"scratch_home", PROTO_BOOL, 0, 0, true},
	{NULL, 0, 0, 0, false},
};
const struct proto_field proto_pool_stop[] = {
	POOL_KEY_FIELDS,
	{"reason", PROTO_STRING, 0, 150, false},
	{NULL, 0, 0, 0, false},
};
const struct proto_field proto_job_run[] = {
	JOB_KEY_FIELDS,
	/* the job spec as JSON text; jobspec_check reads it strictly root-side */
	{"spec", PROTO_STRING, 2, PROTO_JOB_SPEC_MAX, false},
	{NULL, 0, 0, 0, false},
};
const struct proto_field proto_job_stop[] = {
	JOB_KEY_FIELDS,
	{"grace_s", PROTO_INT, 0, PROTO_GRACE_MAX_S, false},
	{NULL, 0, 0, 0, false},
};
/* a terminal in a running job's sandbox: answered with the pty's master (SCM_RIGHTS) */
const struct proto_field proto_job_shell[] = {
	JOB_KEY_FIELDS,
	{"cols", PROTO_INT, 1, PROTO_SHELL_SIZE_MAX, false},
	{"rows", PROTO_INT, 1, PROTO_SHELL_SIZE_MAX, false},
	{NULL, 0, 0, 0, false},
};
const struct proto_field proto_job_logs_remove[] = {
	{"job_ids", PROTO_INT_ARRAY, 1, PROTO_JOB_LOGS_MAX, false},
	{NULL, 0, 0, 0, false},
};
const struct proto_field proto_gpu_processes_end[] = {
	{"user", PROTO_NAME, 0, 0, false},
	{"runtime_id", PROTO_INT, 0, 1LL << 53, true},
	{"pool_id", PROTO_INT, 1, POOL_ID_MAX, true},
	{"pids", PROTO_INT_ARRAY, 1, PROTO_PIDS_MAX, false},
	{NULL, 0, 0, 0, false},
};
const struct proto_field proto_pool_ready[] = {
	POOL_KEY_FIELDS,
	{NULL, 0, 0, 0, false},
};
const struct proto_field proto_pool_ended[] = {
	POOL_KEY_FIELDS,
	ENDED_FIELDS,
	{NULL, 0, 0, 0, false},
};
const struct proto_field proto_job_phase[] = {
	JOB_KEY_FIELDS,
	{"phase", PROTO_STRING, 8, 11, false}, /* PROTO_PHASES */
	{"at_ms", PROTO_INT, 0, TIME_MAX * 1000, false},
	{NULL, 0, 0, 0, false},
};
const struct proto_field proto_job_exited[] = {
	JOB_KEY_FIELDS,
	{"kind", PROTO_STRING, 3, 12, false}, /* PROTO_EXIT_KINDS */
	{"code", PROTO_INT, 0, 255, false},
	{"signal", PROTO_INT, 0, 128, false},
	{"at_ms", PROTO_INT, 0, TIME_MAX * 1000, false},
	{"reason", PROTO_STRING, 0, 200, false},
	{"failure", PROTO_STRING, 0, PROTO_FAILURE_MAX, false},
	{"home_full", PROTO_BOOL, 0, 0, false},
	{NULL, 0, 0, 0, false},
};
const struct proto_field proto_job_sample[] = {
	JOB_KEY_FIELDS,
	{"at_ms", PROTO_INT, 0, TIME_MAX * 1000, false},
	{"cpu_usage_us", PROTO_INT, 0, 1LL << 62, false},
	{"memory_bytes", PROTO_INT, 0, 1LL << 50, false},
	{"memory_limit_bytes", PROTO_INT, 0, 1LL << 62, false}, /* 0 = none */
	{"io_wait_us", PROTO_INT, -1, 1LL << 62, false},       /* -1 = unknown */
	{"log_bytes", PROTO_INT, 0, 1LL << 50, false},
	{NULL, 0, 0, 0, false},
};

static bool word_in(const char *word, const char *list)
{
	size_t n = strlen(word);

	for (const char *p = list; n && (p = strstr(p, word)); p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
			return true;
	return false;
}

bool proto_phase_ok(const char *phase)
{
	return word_in(phase, PROTO_PHASES);
}

bool proto_exit_kind_ok(const char *kind)
{
	return word_in(kind, PROTO_EXIT_KINDS);
}

int proto_send(int fd, json_t *msg)
{
	char *text = json_dumps(msg, JSON_COMPACT);
	ssize_t n;
	size_t len;

	if (!text)
		return -ENOMEM;
	len = strlen(text);
	if (len > PROTO_MAX_MESSAGE) {
		free(text);
		log_error("proto: message of %zu bytes is over the limit", len);
		return -EMSGSIZE;
	}
	do
		n = send(fd, text, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	free(text);
	if (n == (ssize_t)len)
		return 0;
	return n < 0 ? -errno : -EIO;
}

/* sendmsg of text with pass_fd as SCM_RIGHTS */
static ssize_t send_with_fd(int fd, const char *text, size_t len, int pass_fd)
{
	char ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {(void *)text, len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			    .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c;

	memset(ctl, 0, sizeof(ctl));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
	return sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
}

int proto_send_fd(int fd, json_t *msg, int pass_fd)
{
	char *text;
	ssize_t n;
	size_t len;

	if (pass_fd < 0)
		return proto_send(fd, msg);
	if (!(text = json_dumps(msg, JSON_COMPACT)))
		return -ENOMEM;
	len = strlen(text);
	if (len > PROTO_MAX_MESSAGE) {
		free(text);
		return -EMSGSIZE;
	}
	do
		n = send_with_fd(fd, text, len, pass_fd);
	while (n < 0 && errno == EINTR);
	free(text);
	if (n == (ssize_t)len)
		return 0;
	return n < 0 ? -errno : -EIO;
}

/* The one descriptor a message carried (MSG_CMSG_CLOEXEC), or -1; more than one, or
 * a cut control part, is closed and counts as none. */
static int take_fd(struct msghdr *mh)
{
	int fd = -1;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int got;
			memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (fd < 0 && i == 0 && n == 1)
				fd = got;
			else
				close(got);
		}
	}
	if (fd >= 0 && (mh->msg_flags & MSG_CTRUNC)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

int proto_recv_fd(int fd, json_t **out, int *got_fd)
{
	char *buf = malloc(PROTO_MAX_MESSAGE + 1), ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {buf, PROTO_MAX_MESSAGE + 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			    .msg_controllen = sizeof(ctl)};
	json_error_t err;
	ssize_t n;

	*out = NULL;
	*got_fd = -1;
	if (!buf)
		return -ENOMEM;
	do
		n = recvmsg(fd, &mh, MSG_TRUNC | MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n > 0)
		*got_fd = take_fd(&mh);
	if (n <= 0 || n > PROTO_MAX_MESSAGE ||
	    !(*out = json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES, &err)) ||
	    !json_is_object(*out)) {
		int rc = n == 0 ? 1 : n < 0 ? -errno : -EPROTO;
		free(buf);
		json_decref(*out);
		*out = NULL;
		if (*got_fd >= 0)
			close(*got_fd);
		*got_fd = -1;
		if (rc == -EPROTO)
			log_error("proto: dropped a %zd-byte message that is no JSON object within the "
				  "limit", n);
		return rc;
	}
	free(buf);
	return 0;
}

int proto_recv(int fd, json_t **out)
{
	char *buf = malloc(PROTO_MAX_MESSAGE + 1);
	json_error_t err;
	ssize_t n;

	*out = NULL;
	if (!buf)
		return -ENOMEM;
	/* One recv is one whole SEQPACKET message; MSG_TRUNC reports its real size. */
	do
		n = recv(fd, buf, PROTO_MAX_MESSAGE + 1, MSG_TRUNC | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		free(buf);
		return n == 0 ? 1 : -errno;
	}
	if (n > PROTO_MAX_MESSAGE) {
		free(buf);
		log_error("proto: dropped a %zd-byte message (limit %d)", n, PROTO_MAX_MESSAGE);
		return -EPROTO;
	}
	*out = json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES, &err);
	free(buf);
	if (!*out || !json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return -EPROTO;
	}
	return 0;
}

static bool in(long long v, long long lo, long long hi)
{
	return v >= lo && v <= hi;
}

/* Kind and bounds of one value; NULL when fine, else what is wrong. */
static const char *check_value(const struct proto_field *f, json_t *v)
{
	size_t i;
	json_t *e;

	switch (f->kind) {
	case PROTO_STRING:
	case PROTO_NAME:
	case PROTO_TOKEN:
		if (!json_is_string(v))
			return "must be a string";
		if (f->kind == PROTO_NAME)
			return parse_user_name_ok(json_string_value(v)) ? NULL : "is not a user name";
		if (!in((long long)json_string_length(v), f->min, f->max))
			return "has a length out of bounds";
		if (f->kind == PROTO_TOKEN && !parse_token_ok(json_string_value(v)))
			return "has characters outside [A-Za-z0-9_-]";
		return NULL;
	case PROTO_INT:
		if (!json_is_integer(v))
			return "must be an integer";
		return in(json_integer_value(v), f->min, f->max) ? NULL : "is out of bounds";
	case PROTO_BOOL:
		return json_is_boolean(v) ? NULL : "must be a boolean";
	case PROTO_INT_ARRAY:
		if (!json_is_array(v))
			return "must be an array";
		if (!in((long long)json_array_size(v), f->min, f->max))
			return "has a length out of bounds";
		json_array_foreach(v, i, e) {
			if (!json_is_integer(e) || json_integer_value(e) < 0)
				return "must hold non-negative integers";
		}
		return NULL;
	case PROTO_LIST:
		return json_is_array(v) ? NULL : "must be an array";
	case PROTO_UUID_ARRAY:
		if (!json_is_array(v))
			return "must be an array";
		if (!in((long long)json_array_size(v), f->min, f->max))
			return "has a length out of bounds";
		json_array_foreach(v, i, e) {
			if (!gpucaps_uuid_ok(json_string_value(e)))
				return "must hold device uuids (GPU-… or MIG-…)";
		}
		return NULL;
	}
	return "has an unknown kind";
}

static const struct proto_field *find_field(const struct proto_field *fields, const char *name)
{
	for (const struct proto_field *f = fields; f->name; f++)
		if (strcmp(f->name, name) == 0)
			return f;
	return NULL;
}

static int fail(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
	snprintf(err, errlen, fmt, a, b);
	return -EPROTO;
}

int proto_check(json_t *msg, const struct proto_field *fields, bool want_id, char *err,
		size_t errlen)
{
	json_t *v = json_object_get(msg, "v"), *id = json_object_get(msg, "id"), *value;
	const char *key, *why;

	if (!json_is_integer(v) || json_integer_value(v) != PROTO_VERSION)
		return fail(err, errlen, "unsupported protocol version%s%s", "", "");
	if (want_id != (id != NULL) || (id && (!json_is_integer(id) || json_integer_value(id) < 0)))
		return fail(err, errlen, "field id %s%s", want_id ? "must be a non-negative integer"
								  : "is not allowed here", "");
	json_object_foreach(msg, key, value) {
		if (!strcmp(key, "v") || !strcmp(key, "id") || !strcmp(key, "type"))
			continue;
		const struct proto_field *f = find_field(fields, key);
		if (!f)
			return fail(err, errlen, "unknown field %.32s%s", key, "");
		if ((why = check_value(f, value)))
			return fail(err, errlen, "field %s %s", f->name, why);
	}
	for (const struct proto_field *f = fields; f->name; f++)
		if (!f->optional && !json_object_get(msg, f->name))
			return fail(err, errlen, "field %s is missing%s", f->name, "");
	return 0;
}

json_t *proto_msg(const char *type, long long id)
{
	json_t *m = json_pack("{s:i,s:s}", "v", PROTO_VERSION, "type", type);
	if (m && id >= 0)
		json_object_set_new(m, "id", json_integer(id));
	return m;
}

json_t *proto_ok(long long id)
{
	json_t *r = proto_msg("reply", id);
	json_object_set_new(r, "ok", json_true());
	return r;
}

json_t *proto_error(long long id, const char *code, const char *message)
{
	json_t *r = proto_msg("reply", id);
	json_object_set_new(r, "ok", json_false());
	json_object_set_new(r, "code", json_string(code));
	json_object_set_new(r, "message", json_string(message));
	return r;
}

const char *proto_str(json_t *msg, const char *name)
{
	return json_string_value(json_object_get(msg, name)) ?: "";
}

long long proto_int(json_t *msg, const char *name)
{
	return json_integer_value(json_object_get(msg, name));
}

bool proto_bool(json_t *msg, const char *name)
{
	return json_is_true(json_object_get(msg, name));
}
