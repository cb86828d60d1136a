/* ipc.c - supervisor protocol framing and validation; see ipc.h. */
#include "proto/ipc.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "labd/log.h"

int ipc_send(int fd, json_t *msg)
{
	char *text = json_dumps(msg, JSON_COMPACT);
	ssize_t n;
	size_t len;

	if (!text)
		return log_error("ipc: cannot encode message");
	len = strlen(text);
	if (len > IPC_MAX_MESSAGE) {
		free(text);
		return log_error("ipc: message of %zu bytes is over the limit", len);
	}
	do
		n = send(fd, text, len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	free(text);
	return n == (ssize_t)len ? 0 : log_errno("ipc: send");
}

int ipc_recv(int fd, json_t **out, int timeout_ms)
{
	char *buf;
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	ssize_t n;
	int rc;
	json_error_t err;

	*out = NULL;
	do
		rc = poll(&pfd, 1, timeout_ms);
	while (rc < 0 && errno == EINTR);
	if (rc == 0)
		return -1; /* timeout */
	if (rc < 0)
		return log_errno("ipc: poll");
	buf = malloc(IPC_MAX_MESSAGE + 1);
	if (!buf)
		return log_errno("ipc: malloc");
	/* One recv is one whole SEQPACKET message; MSG_TRUNC reports its real size. */
	do
		n = recv(fd, buf, IPC_MAX_MESSAGE + 1, MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		free(buf);
		return n == 0 ? 1 : log_errno("ipc: recv");
	}
	if (n > IPC_MAX_MESSAGE) {
		free(buf);
		return log_error("ipc: dropped a %zd-byte message (limit %d)", n, IPC_MAX_MESSAGE);
	}
	*out = json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES, &err);
	free(buf);
	if (!*out || !json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return log_error("ipc: message is not a JSON object");
	}
	return 0;
}

/* The protocol: each request type and the fields it carries (all required). */
struct field_spec {
	const char *name;
	json_type type;
};
struct type_spec {
	const char *type;
	struct field_spec fields[6];
};
static const struct type_spec requests[] = {
	{"ping", {{NULL, 0}}},
	{"version", {{NULL, 0}}},
	{"runtime_list", {{NULL, 0}}},
	{"runtime_start",
	 {{"user", JSON_STRING},
	  {"user_id", JSON_INTEGER},
	  {"kind", JSON_STRING},
	  {"token", JSON_STRING},
	  {"deadline", JSON_INTEGER},
	  {"gpus", JSON_ARRAY}}},
	{"runtime_stop", {{"user", JSON_STRING}, {"reason", JSON_STRING}, {NULL, 0}}},
};

static const struct field_spec *find_field(const struct type_spec *t, const char *name)
{
	for (const struct field_spec *f = t->fields; f < t->fields + 6 && f->name; f++)
		if (strcmp(f->name, name) == 0)
			return f;
	return NULL;
}

int ipc_parse_request(json_t *msg, struct ipc_request *out, char *err, size_t errlen)
{
	json_t *v = json_object_get(msg, "v"), *id = json_object_get(msg, "id");
	json_t *type = json_object_get(msg, "type");
	const struct type_spec *spec = NULL;
	const char *key;
	json_t *value;

	if (!json_is_integer(v) || json_integer_value(v) != IPC_VERSION) {
		snprintf(err, errlen, "unsupported protocol version");
		return -1;
	}
	if (!json_is_integer(id) || json_integer_value(id) < 0) {
		snprintf(err, errlen, "field id must be a non-negative integer");
		return -1;
	}
	if (!json_is_string(type)) {
		snprintf(err, errlen, "field type must be a string");
		return -1;
	}
	out->id = json_integer_value(id);
	for (size_t i = 0; i < sizeof(requests) / sizeof(requests[0]); i++)
		if (strcmp(requests[i].type, json_string_value(type)) == 0)
			spec = &requests[i];
	if (!spec) {
		snprintf(err, errlen, "unknown message type");
		return -1;
	}
	out->type = spec->type;
	out->msg = msg;
	json_object_foreach(msg, key, value) {
		if (!strcmp(key, "v") || !strcmp(key, "id") || !strcmp(key, "type"))
			continue;
		const struct field_spec *f = find_field(spec, key);
		if (!f) {
			snprintf(err, errlen, "unknown field %.32s", key);
			return -1;
		}
		if (json_typeof(value) != f->type) {
			snprintf(err, errlen, "field %s has the wrong type", f->name);
			return -1;
		}
	}
	for (const struct field_spec *f = spec->fields; f < spec->fields + 6 && f->name; f++) {
		if (!json_object_get(msg, f->name)) {
			snprintf(err, errlen, "field %s is missing", f->name);
			return -1;
		}
	}
	return 0;
}

json_t *ipc_reply(long long id, const char *type)
{
	return json_pack("{s:i,s:I,s:s}", "v", IPC_VERSION, "id", (json_int_t)id, "type", type);
}

json_t *ipc_error(long long id, const char *code, const char *message)
{
	json_t *r = ipc_reply(id, "error");
	json_object_set_new(r, "code", json_string(code));
	json_object_set_new(r, "message", json_string(message));
	return r;
}

struct ipc_client {
	int fd;
	long long next_id;
	pthread_mutex_t lock;
};

struct ipc_client *ipc_client_new(int fd)
{
	struct ipc_client *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return NULL;
	}
	c->fd = fd;
	c->next_id = 1;
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

void ipc_client_free(struct ipc_client *c)
{
	if (!c)
		return;
	close(c->fd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int ipc_client_call(struct ipc_client *c, const char *type, json_t *params, json_t **reply)
{
	json_t *msg;
	long long id;
	int rc = -1;

	*reply = NULL;
	pthread_mutex_lock(&c->lock);
	id = c->next_id++;
	msg = ipc_reply(id, type);
	if (params)
		json_object_update_missing(msg, params);
	if (ipc_send(c->fd, msg) == 0) {
		/* Replies to calls that timed out earlier arrive late: skip them. */
		for (int tries = 0; tries < 8; tries++) {
			json_t *r;
			if (ipc_recv(c->fd, &r, 2000) != 0)
				break;
			json_t *rid = json_object_get(r, "id");
			if (json_is_integer(rid) && json_integer_value(rid) == id) {
				*reply = r;
				rc = 0;
				break;
			}
			json_decref(r);
		}
	}
	json_decref(msg);
	pthread_mutex_unlock(&c->lock);
	return rc;
}
