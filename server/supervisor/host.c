/* host.c - the supervisor's sandbox host, one lifecycle for every purpose; see host.h. */
#include "supervisor/host.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "labd/clock.h"
#include "labd/fault.h"
#include "labd/gpudev.h"
#include "labd/log.h"
#include "labd/str.h"
#include "proto/proto.h"
#include "supervisor/launch.h"
#include "supervisor/record.h"
#include "supervisor/runkeeper.h"
#include "supervisor/uidmap.h"

#define HOST_PURPOSES_MAX 4
#define HOST_SLOTS 512 /* the purposes' max_boxes together; HOST_POLL_MAX counts on it */
#define ENDED_KEEP_S 3600        /* how long an ended sandbox stays listed */
#define KILL_AGAIN_MS 1000       /* SIGKILL again until the pidfd says gone */
#define TIMER_MAX_MS 60000       /* the loop wakes at least this often */
#define NET_CHECK_EVERY_MS 2000  /* is each egress sandbox's pasta or veth still there */
/* 256 sandboxes listed with reasons this long stay within PROTO_MAX_MESSAGE */
#define LIST_REASON_MAX 96

/* STOPPING and ENDING read the same to the web process */
static const char *const state_names[] = {"starting", "running", "stopping", "stopping",
					  "ended"};

struct host {
	const struct labd_config *cfg;
	char state_dir[CONFIG_PATH_MAX];
	host_emit_fn emit;
	host_emit_fd_fn emit_fd; /* a reply that carries a descriptor (job_shell) */
	void *ctx;
	struct uidmap *uids;
	const struct host_purpose *purposes[HOST_PURPOSES_MAX];
	void *own[HOST_PURPOSES_MAX];
	int n_purposes;
	bool listening; /* a web process said hello */
	/* host_stop_all's reason ("" until then): a start the channel still brings
	 * while the web process ends is stopped as soon as it is built */
	char stopping_all[ENDCAUSE_REASON_MAX];
	struct host_box *slot[HOST_SLOTS]; /* allocated by the purpose's box_size */
};

const struct labd_config *host_cfg(const struct host *h)
{
	return h->cfg;
}

const char *host_state_dir(const struct host *h)
{
	return h->state_dir;
}

struct uidmap *host_uids(struct host *h)
{
	return h->uids;
}

void *host_own(struct host *h, const struct host_purpose *p)
{
	for (int i = 0; i < h->n_purposes; i++)
		if (h->purposes[i] == p)
			return h->own[i];
	return NULL;
}

void host_emit(struct host *h, json_t *e)
{
	if (h->emit)
		h->emit(h->ctx, e);
	json_decref(e);
}

void host_set_emit_fd(struct host *h, host_emit_fd_fn fn)
{
	h->emit_fd = fn;
}

void host_emit_fd(struct host *h, json_t *e, int fd)
{
	if (h->emit_fd)
		h->emit_fd(h->ctx, e, fd);
	json_decref(e);
}

json_t *host_event(const char *type, const struct host_box *b)
{
	json_t *e = proto_msg(type, -1);
	json_object_set_new(e, "user", json_string(b->user));
	b->purpose->identify(b, e);
	return e;
}

static void describe(const struct host_box *b, char *out, size_t len)
{
	b->purpose->describe(b, out, len);
}

struct host_box *host_next(struct host *h, const struct host_purpose *p, int *i)
{
	for (; *i < HOST_SLOTS; (*i)++) {
		struct host_box *b = h->slot[*i];
		if (b && b->used && (!p || b->purpose == p))
			return (*i)++, b;
	}
	return NULL;
}

int host_count(const struct host *h, const struct host_purpose *p, const char *user)
{
	int n = 0;
	for (int i = 0; i < HOST_SLOTS; i++) {
		const struct host_box *b = h->slot[i];
		n += b && b->used && b->purpose == p && b->state != H_ENDED &&
		     (!user || strcmp(b->user, user) == 0);
	}
	return n;
}

static void reset(struct host_box *b, const struct host_purpose *p)
{
	if (b->used && p->forget)
		p->forget(b);
	memset(b, 0, p->box_size);
	b->purpose = p;
	b->pidfd = b->worker_fd = -1;
	b->h.status_fd = -1;
}

struct host_box *host_claim(struct host *h, const struct host_purpose *p, struct host_box *reuse)
{
	int n = 0, free_at = -1, ended_at = -1;

	for (int i = 0; !reuse && i < HOST_SLOTS; i++) {
		struct host_box *b = h->slot[i];
		if (b && b->used && b->purpose == p) {
			n++;
			if (ended_at < 0 && b->state == H_ENDED)
				ended_at = i;
		} else if (free_at < 0 && (!b || !b->used)) {
			free_at = i;
		}
	}
	if (!reuse && n < p->max_boxes && free_at >= 0) {
		if (h->slot[free_at] && h->slot[free_at]->purpose != p) {
			free(h->slot[free_at]);
			h->slot[free_at] = NULL;
		}
		if (!h->slot[free_at] && !(h->slot[free_at] = calloc(1, p->box_size)))
			return NULL;
		reuse = h->slot[free_at];
		reuse->used = false;
	} else if (!reuse && ended_at >= 0) { /* an ended box, kept only for the list */
		reuse = h->slot[ended_at];
	}
	if (reuse)
		reset(reuse, p);
	return reuse;
}

int host_save(struct host *h, const struct host_box *b)
{
	char path[LAUNCH_PATH_MAX];
	json_t *gpus = json_array();
	json_t *j = json_pack("{s:s,s:s,s:s,s:I,s:I}", "purpose", b->purpose->name, "user",
			      b->user, "id", b->h.id, "uid", (json_int_t)b->host_uid, "deadline",
			      (json_int_t)b->deadline_s);
	int rc;

	for (unsigned i = 0; i < b->n_gpus; i++)
		json_array_append_new(gpus, json_integer(b->gpus[i]));
	json_object_set_new(j, "gpus", gpus);
	b->purpose->record_fields(b, j);
	b->purpose->record_path(h, b, path, sizeof(path));
	rc = record_save(path, j);
	json_decref(j);
	return rc;
}

/* The first cause stays (endcause.h), for every purpose. */
_Static_assert(sizeof(((struct host_box *)0)->cause) == ENDCAUSE_CAUSE_MAX &&
		       sizeof(((struct host_box *)0)->reason) == ENDCAUSE_REASON_MAX,
	       "host_set_end writes endcause.h's sizes");
void host_set_end(struct host_box *b, const char *cause, bool failed, const char *reason)
{
	endcause_set(b->cause, b->reason, &b->failed, cause, failed, reason);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void close_worker(struct host_box *b)
{
	close_fd(&b->worker_fd);
	b->worker = 0;
}

void host_mark_ended(struct host *h, struct host_box *b)
{
	const struct host_purpose *p = b->purpose;
	char path[LAUNCH_PATH_MAX], name[LAUNCH_NAME_MAX + 64];
	json_t *e;

	close_worker(b);
	FAULT_POINT_STEP("host.teardown.after", p->name);
	if (p->ending)
		p->ending(h, b);
	b->state = H_ENDED;
	b->ended_at_s = time(NULL);
	p->record_path(h, b, path, sizeof(path));
	unlink(path);
	if (!b->cause[0]) {
		snprintf(path, sizeof(path), "the %s ended", p->name);
		host_set_end(b, "gone", true, path);
	}
	describe(b, name, sizeof(name));
	log_info("%s ended (%s): %s", name, b->cause, b->reason);
	e = host_event(p->ended_event, b);
	json_object_set_new(e, "cause", json_string(b->cause));
	json_object_set_new(e, "failed", json_boolean(b->failed));
	json_object_set_new(e, "reason", json_string(b->reason));
	host_emit(h, e);
	if (p->ended)
		p->ended(h, b);
}

void host_stop(struct host *h, struct host_box *b, const char *cause, const char *reason)
{
	char name[LAUNCH_NAME_MAX + 64];

	if (b->state == H_STARTING) {
		b->stop_pending = true;
		host_set_end(b, cause, false, reason);
		return;
	}
	if (b->state != H_RUNNING)
		return;
	describe(b, name, sizeof(name));
	if (b->purpose->grace) {
		host_set_end(b, cause, false, reason);
		b->requested = true;
		b->state = H_STOPPING;
		b->kill_at_ms = clock_ms() + h->cfg->stop_grace_s * 1000;
		/* init forwards SIGTERM to the command, which can end cleanly */
		sandbox_kill(&b->h, SIGTERM);
		host_save(h, b); /* a restarted supervisor finishes the stop */
		log_info("stopping the %s: %s", name, reason);
		return;
	}
	host_set_end(b, cause, strcmp(cause, "requested") != 0, reason);
	log_info("killing %s: %s", name, reason);
	host_save(h, b); /* a new supervisor finishes this end */
	sandbox_kill(&b->h, SIGKILL);
	b->kill_at_ms = clock_ms() + KILL_AGAIN_MS;
	/* the pidfd reports the end: begin_teardown from there */
}

/* The sandbox's init is gone: classify, then tear down in a worker. */
static void begin_teardown(struct host *h, struct host_box *b)
{
	char name[LAUNCH_NAME_MAX + 64];
	struct sandbox_result res;
	int rc;

	if (sandbox_wait(&b->h, &res) < 0)
		memset(&res, 0, sizeof(res)), res.kind = SANDBOX_UNKNOWN;
	b->purpose->died(h, b, &res);
	close_fd(&b->pidfd);
	b->state = H_ENDING;
	FAULT_POINT_STEP("host.teardown.before", b->purpose->name);
	rc = launch_teardown(&b->h, &b->worker, &b->worker_fd);
	if (rc < 0) {
		describe(b, name, sizeof(name));
		log_warn("teardown of the %s could not start (%s); gc will retry", name,
			 strerror(-rc));
		host_mark_ended(h, b);
	}
}

static void on_started(struct host *h, struct host_box *b)
{
	char err[200];
	int rc = launch_result(b->worker_fd, &b->h, err, sizeof(err));

	if (rc == -EAGAIN)
		return;
	close_worker(b);
	if (rc < 0) {
		host_set_end(b, "start_failed", true, err);
		host_mark_ended(h, b);
		return;
	}
	/* asked for after host_stop_all (the web process was still ending): a stop
	 * while starting, as those before it got */
	if (h->stopping_all[0] && !b->stop_pending)
		host_stop(h, b, "requested", h->stopping_all);
	b->state = H_RUNNING;
	b->pidfd = (int)syscall(SYS_pidfd_open, b->h.pid, 0);
	FAULT_POINT_STEP("host.started", b->purpose->name);
	b->purpose->started(h, b);
	if (b->stop_pending && b->state == H_RUNNING) {
		/* copies: host_stop writes b->cause and b->reason, and a stop while
		 * starting must not end with no cause (the web process refuses it) */
		char cause[sizeof(b->cause)], reason[sizeof(b->reason)];
		snprintf(cause, sizeof(cause), "%s", b->cause);
		snprintf(reason, sizeof(reason), "%s", b->reason);
		b->stop_pending = false;
		b->cause[0] = '\0';
		host_stop(h, b, cause, reason);
	}
}

const char *host_adopt_fields(struct host_box *b, json_t *j)
{
	const char *user = json_string_value(json_object_get(j, "user"));
	const char *id = json_string_value(json_object_get(j, "id"));
	json_t *g;
	size_t i;

	if (!user || !id || strlen(user) > LAUNCH_NAME_MAX)
		return NULL;
	snprintf(b->user, sizeof(b->user), "%s", user);
	b->host_uid = (uid_t)json_integer_value(json_object_get(j, "uid"));
	b->deadline_s = json_integer_value(json_object_get(j, "deadline"));
	json_array_foreach(json_object_get(j, "gpus"), i, g) {
		if (b->n_gpus < SANDBOX_MAX_GPUS)
			b->gpus[b->n_gpus++] = (unsigned)json_integer_value(g);
	}
	return id;
}

void host_adopt_end(struct host *h, struct host_box *b, bool adopted)
{
	b->state = H_ENDING;
	if (adopted) {
		sandbox_kill(&b->h, SIGKILL);
		if (launch_teardown(&b->h, &b->worker, &b->worker_fd) == 0)
			return;
	}
	host_mark_ended(h, b);
}

bool host_gpu_held(const struct host *h, unsigned gpu)
{
	for (int i = 0; i < HOST_SLOTS; i++) {
		const struct host_box *b = h->slot[i];
		if (!b || !b->used || b->state == H_ENDED)
			continue;
		for (unsigned k = 0; k < b->n_gpus; k++)
			if (gpudev_conflict(b->gpus[k], gpu))
				return true;
	}
	return false;
}

json_t *host_list(struct host *h, long long id)
{
	json_t *list = json_array(), *r;

	for (int k = 0; k < h->n_purposes; k++) {
		struct host_box *b;
		for (int i = 0; (b = host_next(h, h->purposes[k], &i));) {
			/* the reason is cut so that a full list stays one message */
			json_t *e = json_pack("{s:s,s:s,s:b,s:s,s:s%,s:b}", "user", b->user, "state",
					      state_names[b->state], "ready", b->ready, "cause",
					      b->cause, "reason", b->reason,
					      str_utf8_len(b->reason, LIST_REASON_MAX), "failed",
					      b->failed);
			b->purpose->list_entry(b, e);
			json_array_append_new(list, e);
		}
	}
	r = proto_ok(id);
	json_object_set_new(r, "sandboxes", list);
	return r;
}

void host_stop_all(struct host *h, const char *reason)
{
	struct host_box *b;

	snprintf(h->stopping_all, sizeof(h->stopping_all), "%s", reason);
	for (int i = 0; (b = host_next(h, NULL, &i));)
		host_stop(h, b, "requested", reason);
}

int host_live(const struct host *h)
{
	int n = 0;
	for (int i = 0; i < HOST_SLOTS; i++)
		n += h->slot[i] && h->slot[i]->used && h->slot[i]->state != H_ENDED;
	return n;
}

int host_busy(const struct host *h)
{
	int n = 0;
	for (int i = 0; i < HOST_SLOTS; i++) {
		const struct host_box *b = h->slot[i];
		n += b && b->used && b->state != H_ENDED && b->purpose->busy && b->purpose->busy(b);
	}
	return n;
}

void host_keep_all(struct host *h)
{
	h->listening = false; /* what sandboxes say now waits for the next supervisor */
	for (int k = 0; k < h->n_purposes; k++)
		if (h->purposes[k]->keep_all)
			h->purposes[k]->keep_all(h, h->own[k]);
}

bool host_listening(const struct host *h)
{
	return h->listening;
}

void host_set_listening(struct host *h, bool on)
{
	bool was = h->listening;

	h->listening = on;
	for (int k = 0; k < h->n_purposes; k++)
		if (h->purposes[k]->listening)
			h->purposes[k]->listening(h, h->own[k], on && !was);
}

int host_pollfds(struct host *h, struct pollfd *fds, int max)
{
	int n = 0;

	for (int k = 0; k < h->n_purposes; k++)
		if (h->purposes[k]->pollfds_all)
			n += h->purposes[k]->pollfds_all(h, h->own[k], fds + n, max - n);
	for (int i = 0; i < HOST_SLOTS; i++) {
		struct host_box *b = h->slot[i];
		if (!b || !b->used || b->state == H_ENDED)
			continue;
		if (b->worker_fd >= 0 && n < max)
			fds[n++] = (struct pollfd){.fd = b->worker_fd, .events = POLLIN};
		if (b->pidfd >= 0 && n < max)
			fds[n++] = (struct pollfd){.fd = b->pidfd, .events = POLLIN};
		if (b->purpose->pollfds)
			n += b->purpose->pollfds(h, b, fds + n, max - n);
	}
	return n;
}

static void on_fd(struct host *h, int fd)
{
	for (int k = 0; k < h->n_purposes; k++)
		if (h->purposes[k]->on_fd_all && h->purposes[k]->on_fd_all(h, h->own[k], fd))
			return;
	for (int i = 0; i < HOST_SLOTS; i++) {
		struct host_box *b = h->slot[i];
		if (!b || !b->used || b->state == H_ENDED)
			continue;
		if (fd == b->worker_fd && b->state == H_STARTING)
			return on_started(h, b);
		if (fd == b->worker_fd && b->state == H_ENDING)
			return host_mark_ended(h, b); /* EOF: the teardown worker is done */
		if (fd == b->pidfd && (b->state == H_RUNNING || b->state == H_STOPPING))
			return begin_teardown(h, b);
		if (fd == b->worker_fd || fd == b->pidfd)
			return;
		if (b->purpose->on_fd && b->purpose->on_fd(h, b, fd))
			return;
	}
}

void host_on_events(struct host *h, const struct pollfd *fds, int n)
{
	for (int k = 0; k < n; k++)
		if (fds[k].revents & (POLLIN | POLLHUP | POLLERR))
			on_fd(h, fds[k].fd);
}

static long long earlier(long long a, long long b)
{
	return a >= 0 && (b < 0 || a < b) ? a : b;
}

/* The network watchdog of every running sandbox, a runtime's and a pool's alike:
 * a dead pasta is restarted, a deleted veth or host table made again (loudly), as
 * the network is the sandbox's only way out and it would be cut off silently. */
static long long check_net(struct host *h, struct host_box *b, long long now)
{
	struct sandbox_spec s;
	char name[LAUNCH_NAME_MAX + 64];
	int rc;

	if (now < b->net_check_at_ms)
		return b->net_check_at_ms;
	b->net_check_at_ms = now + NET_CHECK_EVERY_MS;
	sandbox_spec_init(&s);
	s.state_dir = h->state_dir;
	s.cgroup_parent = launch_cgroup_parent(h->cfg);
	s.net_dns = h->cfg->net_dns;
	s.pasta_path = h->cfg->net_pasta;
	s.nft_path = h->cfg->net_nft;
	if ((rc = sandbox_net_check(&s, &b->h)) != 0) {
		describe(b, name, sizeof(name));
		log_warn("%s: its network path (pasta or veth) ended and was %s", name,
			 rc == 1 ? "restarted" : "not restarted");
	}
	return b->net_check_at_ms;
}

/* Timers of one running or stopping sandbox; returns when it is next due. */
static long long tick_box(struct host *h, struct host_box *b, long long now, int64_t wall)
{
	char name[LAUNCH_NAME_MAX + 64];

	if (b->state == H_RUNNING && !b->cause[0] && b->deadline_s <= wall)
		host_stop(h, b, "time_limit", b->purpose->deadline_reason);
	/* a grace stop is H_STOPPING; a kill leaves the box running with its cause set */
	bool killed = !b->purpose->grace && b->state == H_RUNNING && b->cause[0];

	if (b->state == H_STOPPING || killed) {
		if (now >= b->kill_at_ms) { /* killed: again until the pidfd says gone */
			describe(b, name, sizeof(name));
			if (b->state == H_STOPPING)
				log_warn("%s did not stop within the grace period: killing it",
					 name);
			sandbox_kill(&b->h, SIGKILL);
			b->kill_at_ms = now + KILL_AGAIN_MS;
		}
		return b->kill_at_ms;
	}
	if (b->state != H_RUNNING)
		return -1;
	long long due = earlier(check_net(h, b, now), now + (b->deadline_s - wall) * 1000);
	return earlier(b->purpose->tick ? b->purpose->tick(h, b, now, wall) : -1, due);
}

int host_tick(struct host *h)
{
	long long now = clock_ms(), next = -1;
	int64_t wall = time(NULL);

	for (int k = 0; k < h->n_purposes; k++)
		if (h->purposes[k]->tick_all)
			next = earlier(h->purposes[k]->tick_all(h, h->own[k], now, wall), next);
	for (int i = 0; i < HOST_SLOTS; i++) {
		struct host_box *b = h->slot[i];
		if (!b || !b->used)
			continue;
		if (b->state == H_ENDED && wall - b->ended_at_s > ENDED_KEEP_S) {
			if (b->purpose->forget)
				b->purpose->forget(b);
			b->used = false;
			continue;
		}
		next = earlier(tick_box(h, b, now, wall), next);
	}
	if (next < 0)
		return -1;
	return (int)(next - now < 0 ? 0 : next - now > TIMER_MAX_MS ? TIMER_MAX_MS : next - now);
}

static bool held(const struct host *h, const char *id)
{
	for (int i = 0; i < HOST_SLOTS; i++)
		if (h->slot[i] && h->slot[i]->used && strcmp(h->slot[i]->h.id, id) == 0)
			return true;
	return false;
}

/* A sandbox that runs but that no record names: the labd before this one died
 * between its start and the record (a start's last steps, its keeper), so nothing
 * would ever stop it. Torn down here, once every purpose has adopted its own. */
static void end_unrecorded(struct host *h)
{
	char dir[CONFIG_PATH_MAX + 16], id[SANDBOX_ID_MAX];
	struct sandbox_handle sh;
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/sandboxes", h->state_dir);
	if (!(d = opendir(dir)))
		return;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n <= 6 || n - 6 >= sizeof(id) || strcmp(e->d_name + n - 6, ".state") != 0)
			continue;
		snprintf(id, sizeof(id), "%.*s", (int)(n - 6), e->d_name);
		if (held(h, id) || sandbox_adopt(h->state_dir, id, &sh) < 0)
			continue;
		log_warn("sandbox %s runs but no record names it (labd died while starting it): "
			 "tearing it down", id);
		sandbox_kill(&sh, SIGKILL);
		if (sandbox_destroy(&sh) < 0)
			log_warn("teardown of sandbox %s incomplete; gc will retry", id);
		runkeeper_end(h->state_dir, id);
	}
	closedir(d);
}

struct host *host_new(const struct labd_config *cfg, const char *state_dir,
		      const struct host_purpose *const *purposes, int n, host_emit_fn emit,
		      void *ctx)
{
	struct host *h = calloc(1, sizeof(*h));

	if (!h || n > HOST_PURPOSES_MAX) {
		free(h);
		return NULL;
	}
	h->cfg = cfg;
	h->emit = emit;
	h->ctx = ctx;
	snprintf(h->state_dir, sizeof(h->state_dir), "%s", state_dir);
	if (!(h->uids = uidmap_new(cfg, state_dir))) {
		free(h);
		return NULL;
	}
	for (int k = 0; k < n; k++) {
		h->purposes[k] = purposes[k];
		h->own[k] = purposes[k]->init ? purposes[k]->init(h) : NULL;
		h->n_purposes = k + 1;
	}
	/* each adopts only once all are known: a GPU check sees every purpose */
	for (int k = 0; k < n; k++)
		purposes[k]->adopt_all(h);
	end_unrecorded(h);
	return h;
}

void host_free(struct host *h)
{
	if (!h)
		return;
	for (int i = 0; i < HOST_SLOTS; i++) {
		struct host_box *b = h->slot[i];
		if (b && b->used && b->purpose->forget)
			b->purpose->forget(b);
		if (b && b->used && b->state != H_ENDED) {
			close_fd(&b->pidfd);
			close_worker(b);
			sandbox_handle_clear(&b->h);
		}
		free(b);
	}
	for (int k = 0; k < h->n_purposes; k++)
		if (h->purposes[k]->release)
			h->purposes[k]->release(h->own[k]);
	uidmap_free(h->uids);
	free(h);
}
