/* channel.c - the supervisor's message table and dispatch; see channel.h. */
#include "supervisor/channel.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "labd/log.h"
#include "proto/proto.h"
#include "supervisor/host.h"
#include "supervisor/host_gpu.h"
#include "supervisor/host_homes.h"
#include "supervisor/host_pool.h"
#include "supervisor/host_runtime.h"
#include "supervisor/host_shell.h"

/* What the web process may send in each state of the channel. */
enum channel_state {
	CH_NEW = 1 << 0,   /* only hello, once */
	CH_READY = 1 << 1, /* after hello */
};

struct channel {
	int fd;
	enum channel_state state;
	struct host *host; /* NULL: every sandbox request is refused */
};

typedef json_t *(*handler_fn)(struct channel *ch, long long id, json_t *msg);
/* A request to the sandbox host (host.h), most handled by a purpose. */
typedef json_t *(*host_fn)(struct host *h, long long id, json_t *msg);

static json_t *on_hello(struct channel *ch, long long id, json_t *msg)
{
	json_t *r;

	if (strcmp(proto_str(msg, "version"), LABD_VERSION) != 0)
		log_warn("web process speaks labd %s, supervisor is %s", proto_str(msg, "version"),
			 LABD_VERSION);
	ch->state = CH_READY;
	if (ch->host) /* pools' agents are read, their jobs' ends said, from now on */
		host_set_listening(ch->host, true);
	r = proto_ok(id);
	json_object_set_new(r, "version", json_string(LABD_VERSION));
	json_object_set_new(r, "warnings", host_runtime_warnings());
	return r;
}

static json_t *on_ping(struct channel *ch, long long id, json_t *msg)
{
	(void)ch;
	(void)msg;
	return proto_ok(id);
}

/* runtimes and job pools in one list (pool_id tells them apart) */
static json_t *on_list(struct host *h, long long id, json_t *msg)
{
	(void)msg;
	return host_list(h, id);
}

/* The table: validation and dispatch in one place. */
static const struct {
	const char *type;
	const struct proto_field *fields;
	unsigned permit;
	handler_fn handler; /* the channel's own, or */
	host_fn host;       /* the host's (refused while the channel has none) */
} table[] = {
	{"hello", proto_hello, CH_NEW, on_hello, NULL},
	{"ping", proto_empty, CH_READY, on_ping, NULL},
	{"sandbox_start", proto_sandbox_start, CH_READY, NULL, host_runtime_start},
	{"sandbox_stop", proto_sandbox_stop, CH_READY, NULL, host_runtime_stop},
	{"sandbox_list", proto_empty, CH_READY, NULL, on_list},
	{"user_deleted", proto_user_deleted, CH_READY, NULL, host_homes_user_deleted},
	{"home_usage", proto_home_usage, CH_READY, NULL, host_homes_usage},
	{"home_resize", proto_home_resize, CH_READY, NULL, host_homes_resize},
	{"pool_start", proto_pool_start, CH_READY, NULL, host_pool_start},
	{"pool_stop", proto_pool_stop, CH_READY, NULL, host_pool_stop},
	{"job_run", proto_job_run, CH_READY, NULL, host_pool_job_run},
	{"job_stop", proto_job_stop, CH_READY, NULL, host_pool_job_stop},
	{"job_logs_remove", proto_job_logs_remove, CH_READY, NULL, host_pool_logs_remove},
	{"job_shell", proto_job_shell, CH_READY, NULL, host_shell_open},
	{"gpu_processes_end", proto_gpu_processes_end, CH_READY, NULL, host_gpu_processes_end},
};

/* A row's handler; a channel without a host (unit tests of the table) refuses
 * what only the host answers. */
static json_t *handle(struct channel *ch, size_t i, json_t *msg)
{
	long long id = proto_int(msg, "id");

	if (table[i].handler)
		return table[i].handler(ch, id, msg);
	if (!ch->host)
		return proto_error(id, "no_jobs", "this supervisor runs no sandboxes");
	return table[i].host(ch->host, id, msg);
}

struct channel *channel_new(int fd, struct host *host)
{
	struct channel *ch = calloc(1, sizeof(*ch));

	if (!ch) {
		close(fd);
		return NULL;
	}
	ch->fd = fd;
	ch->state = CH_NEW;
	ch->host = host;
	return ch;
}

void channel_free(struct channel *ch)
{
	if (!ch)
		return;
	if (ch->host)
		host_set_listening(ch->host, false);
	close(ch->fd);
	free(ch);
}

int channel_fd(const struct channel *ch)
{
	return ch ? ch->fd : -1;
}

static int refuse(const char *type, const char *why)
{
	log_error("attack? the web process sent %.40s: %s; closing the channel and restarting it",
		  type, why);
	return -EPROTO;
}

/* Failure injection for tests: LABD_FAULT_DROP_START_REPLY=<user> loses the
 * reply to that user's sandbox_start, as a reply that comes too late would. */
static bool fault_drop_reply(const char *type, json_t *msg)
{
	const char *user = getenv("LABD_FAULT_DROP_START_REPLY");

	if (!user || strcmp(type, "sandbox_start") != 0 || strcmp(user, proto_str(msg, "user")) != 0)
		return false;
	log_warn("fault injection: dropping the reply to the start of %s", user);
	return true;
}

static int dispatch(struct channel *ch, json_t *msg)
{
	const char *type = json_string_value(json_object_get(msg, "type"));
	char err[128];
	json_t *reply;

	for (size_t i = 0; type && i < sizeof(table) / sizeof(table[0]); i++) {
		if (strcmp(table[i].type, type) != 0)
			continue;
		if (!(table[i].permit & ch->state))
			return refuse(type, "not permitted in this state of the channel");
		if (proto_check(msg, table[i].fields, true, err, sizeof(err)) < 0)
			return refuse(type, err);
		log_debug("web process: %s", type);
		reply = handle(ch, i, msg);
		if (!reply) /* answered later, when its worker reports (home_resize) */
			return 0;
		if (fault_drop_reply(type, msg)) {
			json_decref(reply);
			return 0;
		}
		int rc = proto_send(ch->fd, reply);
		json_decref(reply);
		if (rc < 0)
			log_warn("cannot answer the web process: %s", strerror(-rc));
		return 0;
	}
	return refuse(type ? type : "(no type)", "unknown message type");
}

int channel_on_readable(struct channel *ch)
{
	for (;;) {
		json_t *msg;
		int rc = proto_recv(ch->fd, &msg);
		if (rc == -EAGAIN)
			return 0;
		if (rc == 1)
			return 1;
		if (rc == -EPROTO)
			return refuse("a message", "not a JSON object within the size limit");
		if (rc < 0)
			return 1;
		rc = dispatch(ch, msg);
		json_decref(msg);
		if (rc < 0)
			return rc;
	}
}

void channel_emit(struct channel *ch, json_t *event)
{
	channel_emit_fd(ch, event, -1);
}

void channel_emit_fd(struct channel *ch, json_t *event, int fd)
{
	int rc;

	if (!ch || ch->state != CH_READY)
		return;
	if ((rc = proto_send_fd(ch->fd, event, fd)) < 0)
		log_warn("cannot push %s to the web process: %s",
			 json_string_value(json_object_get(event, "type")), strerror(-rc));
}
