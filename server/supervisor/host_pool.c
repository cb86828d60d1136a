/* host_pool.c - the job pool purpose of the sandbox host; see host_pool.h. */
#include "supervisor/host_pool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "labd/log.h"
#include "supervisor/host_pool_box.h"
#include "supervisor/host_shell.h"
#include "supervisor/keeper.h"

/* The pools' share of the host. */
struct pool_own {
	bool say_held; /* after hello's reply: ends held meanwhile go out at the next tick */
	struct host_shells *shells; /* shells into running jobs, while they start */
};

struct host_shells *host_pool_shells(struct host *h)
{
	struct pool_own *po = host_own(h, &host_pool);
	return po ? po->shells : NULL;
}

static void say_ready(struct host *h, struct pool_box *p)
{
	log_info("pool %lld of %s is ready", p->pool_id, p->b.user);
	host_emit(h, host_event("pool_ready", &p->b));
}

/* The keeper drains the agent's stderr (the job's output) into the current
 * job's log and holds the agent's stdin and stdout, so the pool outlives this
 * process (docs/jobs.md "Restarts"), and the pipe where init says how the agent
 * ended: a restarted supervisor still tells a job that killed its agent from a
 * lost sandbox (jobrun.c, killed_by_job). */
static int start_keeper(struct host *h, struct pool_box *p)
{
	struct keeper_spec ks = {.sock_path = p->keeper_sock,
				 .cgroup_of = p->b.h.pid,
				 .drain_fd = p->io.out_fd,
				 .log_gid = launch_labd_gid(host_cfg(h)),
				 .held_fds = {p->io.cmd_fd, p->io.status_fd, p->b.h.status_fd},
				 .n_held = p->b.h.status_fd >= 0 ? 3 : 2};
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
	long long shells = host_shells_tick(h, po->shells, now);

	(void)wall;
	if (!po->say_held)
		return shells;
	po->say_held = false; /* after hello's reply: ends held meanwhile go out now */
	for (int i = 0; (b = host_next(h, &host_pool, &i));)
		if (b->state == H_RUNNING)
			jobrun_say_held(h, (struct pool_box *)b);
	return shells;
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

static int pollfds_all(struct host *h, void *own, struct pollfd *fds, int max)
{
	(void)h;
	return host_shells_pollfds(((struct pool_own *)own)->shells, fds, max);
}

static bool on_fd_all(struct host *h, void *own, int fd)
{
	return host_shells_on_fd(h, ((struct pool_own *)own)->shells, fd);
}

static void *init(struct host *h)
{
	struct pool_own *po;

	if (joblog_prepare_dir(host_state_dir(h), launch_labd_gid(host_cfg(h)),
			       joblog_dir_mode(host_cfg(h)->backend_kind)) < 0)
		log_warn("cannot prepare %s/joblogs", host_state_dir(h));
	if (!(po = calloc(1, sizeof(*po))) || !(po->shells = host_shells_new())) {
		free(po);
		return NULL;
	}
	return po;
}

static void release(void *own)
{
	struct pool_own *po = own;

	if (po)
		host_shells_free(po->shells);
	free(po);
}

const struct host_purpose host_pool = {
	.name = "pool",
	.ended_event = "pool_ended",
	.box_size = sizeof(struct pool_box),
	.max_boxes = 256,
	.grace = false,
	.deadline_reason = "the pool reached its deadline",
	.init = init,
	.release = release,
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
	.pollfds_all = pollfds_all,
	.on_fd = on_fd,
	.on_fd_all = on_fd_all,
	.list_entry = host_pool_list_entry,
	.busy = busy,
	.keep_all = keep_all,
	.listening = listening,
	.forget = forget,
};
