/* host_pool.c - the job pool purpose of the sandbox host; see host_pool.h. */
#include "supervisor/host_pool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "labd/log.h"
#include "supervisor/host_pool_box.h"
#include "supervisor/keeper.h"
#include "supervisor/startcheck.h"
#include "supervisor/uidmap.h"

/* The pools' share of the host. */
struct pool_own {
	bool say_held; /* after hello's reply: ends held meanwhile go out at the next tick */
};

static struct pool_box *find(struct host *h, const char *user, long long pool_id)
{
	struct host_box *b;
	for (int i = 0; (b = host_next(h, &host_pool, &i));) {
		struct pool_box *p = (struct pool_box *)b;
		if (p->pool_id == pool_id && strcmp(b->user, user) == 0)
			return p;
	}
	return NULL;
}

/* What only a pool start checks, before startcheck's table; NULL when fine, *code set. */
static const char *check_start(struct host *h, json_t *msg, const char **code)
{
	struct pool_box *p = find(h, proto_str(msg, "user"), proto_int(msg, "pool_id"));

	if (p && p->b.state != H_ENDED)
		return *code = "pool_exists", "this pool already runs";
	if (host_count(h, &host_pool, proto_str(msg, "user")) >=
	    (int)host_cfg(h)->jobs_max_pools_per_user)
		return *code = "too_many_pools", "the user holds [jobs] max_pools_per_user pools";
	return NULL;
}

/* startcheck's held callback: a GPU held by any sandbox of any purpose */
static bool gpu_held(const void *h, unsigned gpu)
{
	return host_gpu_held(h, gpu);
}

static void fill_request(json_t *msg, const struct box_shape *shape, struct launch_request *rq)
{
	snprintf(rq->user, sizeof(rq->user), "%s", proto_str(msg, "user"));
	rq->user_id = (uint32_t)proto_int(msg, "user_id");
	startcheck_fill(shape, rq);
}

static json_t *refuse(long long id, const char *user, const char *code, const char *why)
{
	log_error("refused pool_start for %s: %s", user, why);
	return proto_error(id, code, why);
}

json_t *host_pool_start(struct host *h, long long id, json_t *msg)
{
	const struct labd_config *cfg = host_cfg(h);
	const char *user = proto_str(msg, "user"), *code, *why = check_start(h, msg, &code);
	struct startcheck_start st;
	struct launch_request rq = {0};
	char reason[200], hash[IMAGE_HASH_MAX];
	enum startcheck_code c;
	struct pool_box *p;
	uid_t uid;
	int rc;

	if (why)
		return refuse(id, user, code, why);
	startcheck_read(cfg, msg, &st);
	c = startcheck_check(cfg, &st, gpu_held, h, &rq, hash, reason, sizeof(reason));
	if (c != STARTCHECK_OK)
		return refuse(id, user, startcheck_code_name(c), reason);
	if (uidmap_claim(host_uids(h), user, proto_int(msg, "user_id"), &uid, reason,
			 sizeof(reason)) < 0)
		return refuse(id, user, "bad_uid", reason);
	if (!(p = (struct pool_box *)host_claim(h, &host_pool, NULL)))
		return proto_error(id, "busy", "too many pools");
	fill_request(msg, &st.shape, &rq);
	host_pool_box_init(p);
	if ((rc = poollaunch_spawn(cfg, host_state_dir(h), &rq, proto_int(msg, "pool_id"),
				   &p->b.worker, &p->b.worker_fd, &p->io)) < 0)
		return proto_error(id, "sandbox_failed", strerror(-rc));
	p->b.used = true;
	p->b.state = H_STARTING;
	snprintf(p->b.user, sizeof(p->b.user), "%s", user);
	p->user_id = rq.user_id;
	p->pool_id = proto_int(msg, "pool_id");
	p->b.host_uid = uid;
	p->b.deadline_s = proto_int(msg, "deadline");
	p->b.n_gpus = rq.n_gpus;
	p->cpus_milli = rq.sizes.cpus_milli;
	memcpy(p->b.gpus, rq.gpus, sizeof(p->b.gpus));
	log_info("building pool %lld of %s (worker %d)", p->pool_id, user, (int)p->b.worker);
	json_t *r = proto_ok(id);
	if (hash[0])
		json_object_set_new(r, "image_hash", json_string(hash));
	return r;
}

json_t *host_pool_stop(struct host *h, long long id, json_t *msg)
{
	struct pool_box *p = find(h, proto_str(msg, "user"), proto_int(msg, "pool_id"));
	const char *reason = proto_str(msg, "reason");

	if (!p || p->b.state == H_ENDED || p->b.state == H_ENDING)
		return proto_error(id, "not_found", "no such pool");
	host_stop(h, &p->b, "requested", reason[0] ? reason : "stopped");
	return proto_ok(id);
}

json_t *host_pool_job_run(struct host *h, long long id, json_t *msg)
{
	struct pool_box *p = find(h, proto_str(msg, "user"), proto_int(msg, "pool_id"));

	if (!p || p->b.state == H_ENDED || p->b.state == H_ENDING)
		return proto_error(id, "not_found", "no such pool");
	if (p->b.state != H_RUNNING || !p->b.ready || p->job.step != J_NONE)
		return proto_error(id, "pool_busy", "the pool is not idle and ready");
	if (p->b.deadline_s <= time(NULL))
		return proto_error(id, "pool_busy", "the pool is at its deadline");
	return jobrun_run(h, p, id, msg);
}

json_t *host_pool_job_stop(struct host *h, long long id, json_t *msg)
{
	struct pool_box *p = find(h, proto_str(msg, "user"), proto_int(msg, "pool_id"));

	if (!p || p->b.state != H_RUNNING || p->job.step == J_NONE ||
	    p->job.job_id != proto_int(msg, "job_id"))
		return proto_error(id, "not_found", "that job does not run in this pool");
	return jobrun_stop(h, p, id, msg);
}

static void say_ready(struct host *h, struct pool_box *p)
{
	log_info("pool %lld of %s is ready", p->pool_id, p->b.user);
	host_emit(h, host_event("pool_ready", &p->b));
}

/* The keeper drains the agent's stderr (the job's output) into the current
 * job's log and holds the agent's stdin and stdout, so the pool outlives this
 * process (docs/jobs.md "Restarts"). */
static int start_keeper(struct host *h, struct pool_box *p)
{
	struct keeper_spec ks = {.sock_path = p->keeper_sock,
				 .cgroup_of = p->b.h.pid,
				 .drain_fd = p->io.out_fd,
				 .log_gid = launch_labd_gid(host_cfg(h)),
				 .held_fds = {p->io.cmd_fd, p->io.status_fd},
				 .n_held = 2};
	pid_t pid;
	int rc = keeper_start(&ks, &pid);

	host_pool_close_fd(&p->io.out_fd); /* the keeper's now; this process never reads it */
	return rc;
}

static void started(struct host *h, struct host_box *b)
{
	struct pool_box *p = (struct pool_box *)b;
	int rc;

	keeper_sock_path(host_state_dir(h), b->h.id, p->keeper_sock, sizeof(p->keeper_sock));
	if ((rc = start_keeper(h, p)) < 0) {
		log_error("pool %lld of %s: its keeper could not start: %s", p->pool_id, b->user,
			  strerror(-rc));
		host_set_end(b, "start_failed", true, "the pool's keeper could not start");
		b->stop_pending = true;
	}
	host_save(h, b);
	log_info("pool %lld of %s started: sandbox %s", p->pool_id, b->user, b->h.id);
	if (b->ready && !b->stop_pending)
		say_ready(h, p);
}

/* Status lines from the agent: ready once, then started/exited per job. */
static void on_status(struct host *h, struct pool_box *p)
{
	ssize_t n = read(p->io.status_fd, p->status_buf + p->status_len,
			 sizeof(p->status_buf) - p->status_len);
	struct agent_status st;
	int used;

	if (n <= 0) {
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			host_pool_close_fd(&p->io.status_fd); /* the agent is gone: the pidfd follows */
		return;
	}
	p->status_len += (size_t)n;
	while (p->status_len > 0 && (used = agentio_parse(p->status_buf, p->status_len, &st)) != 0) {
		if (used < 0 || (st.said == AGENT_READY && p->b.ready)) {
			log_error("pool %lld of %s: its agent said something malformed", p->pool_id,
				  p->b.user);
			p->status_len = 0;
			host_pool_close_fd(&p->io.status_fd);
			host_stop(h, &p->b, "gone", "the pool's agent broke its protocol");
			return;
		}
		memmove(p->status_buf, p->status_buf + used, p->status_len - (size_t)used);
		p->status_len -= (size_t)used;
		if (st.said == AGENT_READY) {
			p->b.ready = true;
			/* the agent may speak before the start worker's report is read:
			 * ready is said once the pool runs (started) */
			if (p->b.state == H_RUNNING)
				say_ready(h, p);
		} else {
			jobrun_on_agent(h, p, &st);
		}
	}
}

static int pollfds(struct host *h, struct host_box *b, struct pollfd *fds, int max)
{
	struct pool_box *p = (struct pool_box *)b;
	/* the agent's lines wait in its pipe while no web process listens */
	const int want[] = {host_listening(h) ? p->io.status_fd : -1, p->job.worker_fd};
	int n = 0;

	for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++)
		if (want[k] >= 0 && n < max)
			fds[n++] = (struct pollfd){.fd = want[k], .events = POLLIN};
	return n;
}

static bool on_fd(struct host *h, struct host_box *b, int fd)
{
	struct pool_box *p = (struct pool_box *)b;

	if (fd == p->io.status_fd)
		on_status(h, p);
	else if (fd == p->job.worker_fd)
		jobrun_on_worker(h, p);
	else
		return false;
	return true;
}

/* The sandbox's init is gone (or killed): the job's end, before the teardown. */
static void died(struct host *h, struct host_box *b, const struct sandbox_result *res)
{
	struct pool_box *p = (struct pool_box *)b;

	/* the job's last words are in its log before its end is said (a keeper
	 * already gone has written them) */
	if (p->job.step != J_NONE)
		keeper_sync(p->keeper_sock, NULL);
	jobrun_pool_died(h, p, res);
	if (res->kind == SANDBOX_OOM)
		host_set_end(b, "oom", true, "out of memory: the pool's agent was killed");
	host_set_end(b, "gone", true, "the pool's agent ended");
	host_pool_close_io(p);
}

static void ending(struct host *h, struct host_box *b)
{
	struct pool_box *p = (struct pool_box *)b;

	/* its sandbox is torn down: a keeper a leaked writer kept alive goes too */
	if (p->keeper_sock[0]) {
		keeper_stop(p->keeper_sock);
		unlink(p->keeper_sock);
	}
	host_pool_close_io(p);
	jobrun_clear(p);
	poollaunch_remove(host_state_dir(h), p->pool_id);
}

static long long tick(struct host *h, struct host_box *b, long long now, int64_t wall)
{
	(void)wall;
	return jobrun_tick(h, (struct pool_box *)b, now);
}

static long long tick_all(struct host *h, void *own, long long now, int64_t wall)
{
	struct pool_own *po = own;
	struct host_box *b;

	(void)now;
	(void)wall;
	if (!po->say_held)
		return -1;
	po->say_held = false; /* after hello's reply: ends held meanwhile go out now */
	for (int i = 0; (b = host_next(h, &host_pool, &i));)
		if (b->state == H_RUNNING)
			jobrun_say_held(h, (struct pool_box *)b);
	return -1;
}

static bool busy(const struct host_box *b)
{
	return b->worker_fd >= 0 || ((const struct pool_box *)b)->job.worker_fd >= 0;
}

static void keep_all(struct host *h, void *own)
{
	(void)h;
	((struct pool_own *)own)->say_held = false;
}

static void listening(struct host *h, void *own, bool fresh)
{
	(void)h;
	((struct pool_own *)own)->say_held = fresh;
}

static void forget(struct host_box *b)
{
	host_pool_close_io((struct pool_box *)b);
	jobrun_clear((struct pool_box *)b);
}

static void *init(struct host *h)
{
	if (joblog_prepare_dir(host_state_dir(h), launch_labd_gid(host_cfg(h))) < 0)
		log_warn("cannot prepare %s/joblogs", host_state_dir(h));
	return calloc(1, sizeof(struct pool_own));
}

const struct host_purpose host_pool = {
	.name = "pool",
	.ended_event = "pool_ended",
	.box_size = sizeof(struct pool_box),
	.max_boxes = 256,
	.grace = false,
	.deadline_reason = "the pool reached its deadline",
	.init = init,
	.release = free,
	.describe = host_pool_describe,
	.identify = host_pool_identify,
	.record_path = host_pool_record_path,
	.record_fields = host_pool_record_fields,
	.adopt_all = host_pool_adopt_all,
	.started = started,
	.died = died,
	.ending = ending,
	.tick = tick,
	.tick_all = tick_all,
	.pollfds = pollfds,
	.on_fd = on_fd,
	.list_entry = host_pool_list_entry,
	.busy = busy,
	.keep_all = keep_all,
	.listening = listening,
	.forget = forget,
};
