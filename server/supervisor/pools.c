/* pools.c - the job pools' sandboxes; see pools.h. */
#include "supervisor/pools.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "labd/str.h"
#include "supervisor/endcause.h"
#include "supervisor/keeper.h"
#include "supervisor/sizecap.h"
#include "supervisor/pool.h"
#include "supervisor/record.h"
#include "supervisor/startcheck.h"
#include "supervisor/uidmap.h"

#define MAX_POOLS 256
#define ENDED_KEEP_S 3600
#define LIST_REASON_MAX 96
#define KILL_AGAIN_MS 1000

static const char *const state_names[] = {"starting", "running", "stopping", "ended"};

struct pools {
	const struct labd_config *cfg;
	char state_dir[CONFIG_PATH_MAX];
	struct sandboxes *sb;
	struct sandboxes_events ev;
	/* a web process said hello: agents are read and jobs' ends said only
	 * then, so no outcome goes out to nobody (pools_set_listening) */
	bool listening, say_held;
	struct pool_box slot[MAX_POOLS];
};

bool pools_listening(const struct pools *ps)
{
	return ps->listening;
}

const struct labd_config *pools_cfg(const struct pools *ps)
{
	return ps->cfg;
}

const char *pools_state_dir(const struct pools *ps)
{
	return ps->state_dir;
}

void pools_emit(struct pools *ps, json_t *e)
{
	if (ps->ev.emit)
		ps->ev.emit(ps->ev.ctx, e);
	json_decref(e);
}

json_t *pools_event(const char *type, const struct pool_box *p)
{
	json_t *e = proto_msg(type, -1);
	json_object_set_new(e, "user", json_string(p->user));
	json_object_set_new(e, "pool_id", json_integer(p->pool_id));
	return e;
}

static struct pool_box *find(struct pools *ps, const char *user, long long pool_id)
{
	for (int i = 0; i < MAX_POOLS; i++) {
		struct pool_box *p = &ps->slot[i];
		if (p->used && p->pool_id == pool_id && strcmp(p->user, user) == 0)
			return p;
	}
	return NULL;
}

static struct pool_box *free_slot(struct pools *ps)
{
	for (int i = 0; i < MAX_POOLS; i++)
		if (!ps->slot[i].used)
			return &ps->slot[i];
	/* an ended pool's slot (kept only for the list) is reused */
	for (int i = 0; i < MAX_POOLS; i++)
		if (ps->slot[i].state == P_ENDED)
			return &ps->slot[i];
	return NULL;
}

static void record_path(const struct pools *ps, long long pool_id, char *out, size_t len)
{
	poollaunch_record_path(ps->state_dir, pool_id, out, len);
}

/* What a restarted supervisor needs to take the pool over (or end it and
 * free its GPUs): the sandbox, its sizes, whether it is ending, its job. */
static json_t *record_json(const struct pool_box *p)
{
	json_t *gpus = json_array();
	json_t *j = json_pack("{s:s,s:I,s:I,s:s,s:I,s:I,s:I,s:I,s:b}", "user", p->user, "user_id",
			      (json_int_t)p->user_id, "pool_id", (json_int_t)p->pool_id, "id",
			      p->h.id, "uid", (json_int_t)p->host_uid, "job_id",
			      (json_int_t)p->job.job_id, "deadline", (json_int_t)p->deadline_s,
			      "cpus_milli", (json_int_t)p->cpus_milli, "ready", p->ready);

	for (unsigned i = 0; i < p->n_gpus; i++)
		json_array_append_new(gpus, json_integer(p->gpus[i]));
	json_object_set_new(j, "gpus", gpus);
	if (p->cause[0]) /* killed: a new supervisor finishes the end */
		json_object_set_new(j, "ending",
				    json_pack("{s:s,s:s,s:b}", "cause", p->cause, "reason",
					      p->reason, "failed", p->failed));
	if (p->job.step != J_NONE)
		json_object_set_new(j, "job", jobrun_record((struct pool_box *)p));
	return j;
}

int pools_save(const struct pools *ps, const struct pool_box *p)
{
	char path[LAUNCH_PATH_MAX];
	json_t *j = record_json(p);
	int rc;

	record_path(ps, p->pool_id, path, sizeof(path));
	rc = record_save(path, j);
	json_decref(j);
	return rc;
}

/* The first cause stays (endcause.h), for runtimes and pools alike. */
_Static_assert(sizeof(((struct pool_box *)0)->cause) == ENDCAUSE_CAUSE_MAX &&
		       sizeof(((struct pool_box *)0)->reason) == ENDCAUSE_REASON_MAX,
	       "set_end writes endcause.h's sizes");
static void set_end(struct pool_box *p, const char *cause, bool failed, const char *reason)
{
	endcause_set(p->cause, p->reason, &p->failed, cause, failed, reason);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void close_io(struct pool_box *p)
{
	close_fd(&p->io.cmd_fd);
	close_fd(&p->io.status_fd);
	close_fd(&p->io.out_fd);
}

static void mark_ended(struct pools *ps, struct pool_box *p)
{
	char path[LAUNCH_PATH_MAX];
	json_t *e;

	/* its sandbox is torn down: a keeper a leaked writer kept alive goes too */
	if (p->keeper_sock[0]) {
		keeper_stop(p->keeper_sock);
		unlink(p->keeper_sock);
	}
	close_fd(&p->worker_fd);
	p->worker = 0;
	close_io(p);
	jobrun_clear(p);
	p->state = P_ENDED;
	p->ended_at_s = time(NULL);
	record_path(ps, p->pool_id, path, sizeof(path));
	unlink(path);
	poollaunch_remove(ps->state_dir, p->pool_id);
	if (!p->cause[0])
		set_end(p, "gone", true, "the pool ended");
	log_info("pool %lld of %s ended (%s): %s", p->pool_id, p->user, p->cause, p->reason);
	e = pools_event("pool_ended", p);
	json_object_set_new(e, "cause", json_string(p->cause));
	json_object_set_new(e, "failed", json_boolean(p->failed));
	json_object_set_new(e, "reason", json_string(p->reason));
	pools_emit(ps, e);
}

/* The sandbox's init is gone (or killed): the job's end, then the teardown. */
static void begin_teardown(struct pools *ps, struct pool_box *p, const struct sandbox_result *res)
{
	jobrun_pool_died(ps, p, res);
	if (res && res->kind == SANDBOX_OOM)
		set_end(p, "oom", true, "out of memory: the pool's agent was killed");
	set_end(p, "gone", true, "the pool's agent ended");
	close_fd(&p->pidfd);
	close_io(p);
	p->state = P_ENDING;
	if (launch_teardown(&p->h, &p->worker, &p->worker_fd) < 0) {
		log_warn("teardown of pool %lld could not start; gc will retry", p->pool_id);
		mark_ended(ps, p);
	}
}

void pools_kill(struct pools *ps, struct pool_box *p, const char *cause, const char *reason)
{
	if (p->state == P_STARTING) {
		p->stop_pending = true;
		set_end(p, cause, false, reason);
		return;
	}
	if (p->state != P_RUNNING)
		return;
	set_end(p, cause, strcmp(cause, "requested") != 0, reason);
	log_info("killing pool %lld of %s: %s", p->pool_id, p->user, reason);
	pools_save(ps, p); /* a new supervisor finishes this end */
	sandbox_kill(&p->h, SIGKILL);
	p->kill_again_ms = clock_ms() + KILL_AGAIN_MS;
	/* the pidfd reports the end: begin_teardown from there */
}

int pools_tell_agent(struct pools *ps, struct pool_box *p, const char *text, size_t len)
{
	ssize_t n;

	do
		n = write(p->io.cmd_fd, text, len);
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)len)
		return 0;
	/* a full pipe means the agent stopped reading: it cannot be driven */
	log_warn("pool %lld: cannot write to its agent: %s", p->pool_id,
		 n < 0 ? strerror(errno) : "short write");
	pools_kill(ps, p, "gone", "the pool's agent stopped answering");
	return -EIO;
}

bool pools_gpu_held(const struct pools *ps, unsigned gpu)
{
	for (int i = 0; i < MAX_POOLS; i++) {
		const struct pool_box *p = &ps->slot[i];
		if (!p->used || p->state == P_ENDED)
			continue;
		for (unsigned k = 0; k < p->n_gpus; k++)
			if (p->gpus[k] == gpu)
				return true;
	}
	return false;
}

static int user_pools(const struct pools *ps, const char *user)
{
	int n = 0;
	for (int i = 0; i < MAX_POOLS; i++)
		n += ps->slot[i].used && ps->slot[i].state != P_ENDED &&
		     strcmp(ps->slot[i].user, user) == 0;
	return n;
}

/* What only a pool start checks, before startcheck's table; NULL when fine, *code set. */
static const char *check_start(struct pools *ps, json_t *msg, const char **code)
{
	struct pool_box *p = find(ps, proto_str(msg, "user"), proto_int(msg, "pool_id"));

	if (p && p->state != P_ENDED)
		return *code = "pool_exists", "this pool already runs";
	if (user_pools(ps, proto_str(msg, "user")) >= (int)ps->cfg->jobs_max_pools_per_user)
		return *code = "too_many_pools", "the user holds [jobs] max_pools_per_user pools";
	return NULL;
}

/* startcheck's held callback: a GPU held by any sandbox or pool */
static bool gpu_held(const void *sb, unsigned gpu)
{
	return sandboxes_gpu_held(sb, gpu);
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

json_t *pools_start(struct pools *ps, long long id, json_t *msg)
{
	const char *user = proto_str(msg, "user"), *code, *why = check_start(ps, msg, &code);
	struct startcheck_start st;
	struct launch_request rq = {0};
	char reason[200], hash[IMAGE_HASH_MAX];
	enum startcheck_code c;
	struct pool_box *p;
	uid_t uid;
	int rc;

	if (why)
		return refuse(id, user, code, why);
	startcheck_read(ps->cfg, msg, &st);
	c = startcheck_check(ps->cfg, &st, gpu_held, ps->sb, &rq, hash, reason, sizeof(reason));
	if (c != STARTCHECK_OK)
		return refuse(id, user, startcheck_code_name(c), reason);
	if (uidmap_claim(sandboxes_uids(ps->sb), user, proto_int(msg, "user_id"), &uid, reason,
			 sizeof(reason)) < 0)
		return refuse(id, user, "bad_uid", reason);
	if (!(p = free_slot(ps)))
		return proto_error(id, "busy", "too many pools");
	fill_request(msg, &st.shape, &rq);
	memset(p, 0, sizeof(*p));
	p->pidfd = p->worker_fd = p->job.worker_fd = -1;
	p->job.log.fd = -1;
	p->h.status_fd = -1;
	p->io = (struct pool_pipes){-1, -1, -1};
	if ((rc = poollaunch_spawn(ps->cfg, ps->state_dir, &rq, proto_int(msg, "pool_id"),
				   &p->worker, &p->worker_fd, &p->io)) < 0)
		return proto_error(id, "sandbox_failed", strerror(-rc));
	p->used = true;
	p->state = P_STARTING;
	snprintf(p->user, sizeof(p->user), "%s", user);
	p->user_id = rq.user_id;
	p->pool_id = proto_int(msg, "pool_id");
	p->host_uid = uid;
	p->deadline_s = proto_int(msg, "deadline");
	p->n_gpus = rq.n_gpus;
	p->cpus_milli = rq.sizes.cpus_milli;
	memcpy(p->gpus, rq.gpus, sizeof(p->gpus));
	log_info("building pool %lld of %s (worker %d)", p->pool_id, user, (int)p->worker);
	json_t *r = proto_ok(id);
	if (hash[0])
		json_object_set_new(r, "image_hash", json_string(hash));
	return r;
}

json_t *pools_stop(struct pools *ps, long long id, json_t *msg)
{
	struct pool_box *p = find(ps, proto_str(msg, "user"), proto_int(msg, "pool_id"));
	const char *reason = proto_str(msg, "reason");

	if (!p || p->state == P_ENDED || p->state == P_ENDING)
		return proto_error(id, "not_found", "no such pool");
	pools_kill(ps, p, "requested", reason[0] ? reason : "stopped");
	return proto_ok(id);
}

json_t *pools_job_run(struct pools *ps, long long id, json_t *msg)
{
	struct pool_box *p = find(ps, proto_str(msg, "user"), proto_int(msg, "pool_id"));

	if (!p || p->state == P_ENDED || p->state == P_ENDING)
		return proto_error(id, "not_found", "no such pool");
	if (p->state != P_RUNNING || !p->ready || p->job.step != J_NONE)
		return proto_error(id, "pool_busy", "the pool is not idle and ready");
	if (p->deadline_s <= time(NULL))
		return proto_error(id, "pool_busy", "the pool is at its deadline");
	return jobrun_run(ps, p, id, msg);
}

json_t *pools_job_stop(struct pools *ps, long long id, json_t *msg)
{
	struct pool_box *p = find(ps, proto_str(msg, "user"), proto_int(msg, "pool_id"));

	if (!p || p->state != P_RUNNING || p->job.step == J_NONE ||
	    p->job.job_id != proto_int(msg, "job_id"))
		return proto_error(id, "not_found", "that job does not run in this pool");
	return jobrun_stop(ps, p, id, msg);
}

void pools_list(struct pools *ps, json_t *list)
{
	for (int i = 0; i < MAX_POOLS; i++) {
		struct pool_box *p = &ps->slot[i];
		if (!p->used)
			continue;
		json_array_append_new(
			list, json_pack("{s:s,s:i,s:s,s:b,s:s,s:s%,s:b,s:I,s:I}", "user", p->user,
					"runtime_id", 0, "state", state_names[p->state], "ready",
					p->ready, "cause", p->cause, "reason", p->reason,
					str_utf8_len(p->reason, LIST_REASON_MAX), "failed", p->failed,
					"pool_id", (json_int_t)p->pool_id, "job_id",
					(json_int_t)(p->job.step != J_NONE ? p->job.job_id : 0)));
	}
}

void pools_stop_all(struct pools *ps, const char *reason)
{
	for (int i = 0; i < MAX_POOLS; i++)
		if (ps->slot[i].used)
			pools_kill(ps, &ps->slot[i], "requested", reason);
}

int pools_live(const struct pools *ps)
{
	int n = 0;
	for (int i = 0; i < MAX_POOLS; i++)
		n += ps->slot[i].used && ps->slot[i].state != P_ENDED;
	return n;
}

static void say_ready(struct pools *ps, struct pool_box *p);

/* The keeper drains the agent's stderr (the job's output) into the current
 * job's log and holds the agent's stdin and stdout, so the pool outlives this
 * process (docs/jobs.md "Restarts"). */
static int start_keeper(struct pools *ps, struct pool_box *p)
{
	struct keeper_spec ks = {.sock_path = p->keeper_sock,
				 .cgroup_of = p->h.pid,
				 .drain_fd = p->io.out_fd,
				 .log_gid = launch_labd_gid(ps->cfg),
				 .held_fds = {p->io.cmd_fd, p->io.status_fd},
				 .n_held = 2};
	pid_t pid;
	int rc = keeper_start(&ks, &pid);

	close_fd(&p->io.out_fd); /* the keeper's now; this process never reads it */
	return rc;
}

static void on_started(struct pools *ps, struct pool_box *p)
{
	char err[200];
	int rc = launch_result(p->worker_fd, &p->h, err, sizeof(err));

	if (rc == -EAGAIN)
		return;
	close_fd(&p->worker_fd);
	p->worker = 0;
	if (rc < 0) {
		set_end(p, "start_failed", true, err);
		mark_ended(ps, p);
		return;
	}
	p->state = P_RUNNING;
	p->pidfd = (int)syscall(SYS_pidfd_open, p->h.pid, 0);
	keeper_sock_path(ps->state_dir, p->h.id, p->keeper_sock, sizeof(p->keeper_sock));
	if ((rc = start_keeper(ps, p)) < 0) {
		log_error("pool %lld of %s: its keeper could not start: %s", p->pool_id, p->user,
			  strerror(-rc));
		set_end(p, "start_failed", true, "the pool's keeper could not start");
		p->stop_pending = true;
	}
	pools_save(ps, p);
	log_info("pool %lld of %s started: sandbox %s", p->pool_id, p->user, p->h.id);
	if (p->ready && !p->stop_pending)
		say_ready(ps, p);
	if (p->stop_pending) {
		p->stop_pending = false;
		char cause[16], reason[200];
		snprintf(cause, sizeof(cause), "%s", p->cause);
		snprintf(reason, sizeof(reason), "%s", p->reason);
		p->cause[0] = '\0';
		pools_kill(ps, p, cause, reason);
	}
}

static void say_ready(struct pools *ps, struct pool_box *p)
{
	log_info("pool %lld of %s is ready", p->pool_id, p->user);
	pools_emit(ps, pools_event("pool_ready", p));
}

/* Status lines from the agent: ready once, then started/exited per job. */
static void on_status(struct pools *ps, struct pool_box *p)
{
	ssize_t n = read(p->io.status_fd, p->status_buf + p->status_len,
			 sizeof(p->status_buf) - p->status_len);
	struct agent_status st;
	int used;

	if (n <= 0) {
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			close_fd(&p->io.status_fd); /* the agent is gone: the pidfd follows */
		return;
	}
	p->status_len += (size_t)n;
	while (p->status_len > 0 && (used = agentio_parse(p->status_buf, p->status_len, &st)) != 0) {
		if (used < 0 || (st.said == AGENT_READY && p->ready)) {
			log_error("pool %lld of %s: its agent said something malformed", p->pool_id,
				  p->user);
			p->status_len = 0;
			close_fd(&p->io.status_fd);
			pools_kill(ps, p, "gone", "the pool's agent broke its protocol");
			return;
		}
		memmove(p->status_buf, p->status_buf + used, p->status_len - (size_t)used);
		p->status_len -= (size_t)used;
		if (st.said == AGENT_READY) {
			p->ready = true;
			/* the agent may speak before the start worker's report is read:
			 * ready is said once the pool runs (on_started) */
			if (p->state == P_RUNNING)
				say_ready(ps, p);
		} else {
			jobrun_on_agent(ps, p, &st);
		}
	}
}

int pools_pollfds(struct pools *ps, struct pollfd *fds, int max)
{
	int n = 0;

	for (int i = 0; i < MAX_POOLS; i++) {
		struct pool_box *p = &ps->slot[i];
		/* the agent's lines wait in its pipe while no web process listens */
		const int want[] = {p->worker_fd, p->pidfd, ps->listening ? p->io.status_fd : -1,
				    p->job.worker_fd};
		if (!p->used || p->state == P_ENDED)
			continue;
		for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++)
			if (want[k] >= 0 && n < max)
				fds[n++] = (struct pollfd){.fd = want[k], .events = POLLIN};
	}
	return n;
}

static void on_pidfd(struct pools *ps, struct pool_box *p)
{
	struct sandbox_result res;

	/* the job's last words are in its log before its end is said (a keeper
	 * already gone has written them) */
	if (p->job.step != J_NONE)
		keeper_sync(p->keeper_sock, NULL);
	if (sandbox_wait(&p->h, &res) < 0)
		memset(&res, 0, sizeof(res)), res.kind = SANDBOX_UNKNOWN;
	begin_teardown(ps, p, &res);
}

static void on_fd(struct pools *ps, struct pool_box *p, int fd)
{
	if (fd == p->worker_fd && p->state == P_STARTING)
		on_started(ps, p);
	else if (fd == p->worker_fd && p->state == P_ENDING)
		mark_ended(ps, p);
	else if (fd == p->pidfd && p->state == P_RUNNING)
		on_pidfd(ps, p);
	else if (fd == p->io.status_fd)
		on_status(ps, p);
	else if (fd == p->job.worker_fd)
		jobrun_on_worker(ps, p);
}

void pools_on_events(struct pools *ps, const struct pollfd *fds, int n)
{
	for (int k = 0; k < n; k++) {
		if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		for (int i = 0; i < MAX_POOLS; i++) {
			struct pool_box *p = &ps->slot[i];
			if (!p->used || p->state == P_ENDED)
				continue;
			if (fds[k].fd == p->worker_fd || fds[k].fd == p->pidfd ||
			    fds[k].fd == p->io.status_fd || fds[k].fd == p->job.worker_fd) {
				on_fd(ps, p, fds[k].fd);
				break;
			}
		}
	}
}

static long long tick_one(struct pools *ps, struct pool_box *p, long long now, int64_t wall)
{
	if (p->state != P_RUNNING)
		return -1;
	if (p->deadline_s <= wall && !p->cause[0])
		pools_kill(ps, p, "time_limit", "the pool reached its deadline");
	if (p->cause[0]) { /* killed: again until the pidfd says gone */
		if (now >= p->kill_again_ms) {
			sandbox_kill(&p->h, SIGKILL);
			p->kill_again_ms = now + KILL_AGAIN_MS;
		}
		return p->kill_again_ms;
	}
	long long due = now + (p->deadline_s - wall) * 1000, job = jobrun_tick(ps, p, now);
	return job >= 0 && job < due ? job : due;
}

int pools_tick(struct pools *ps)
{
	long long now = clock_ms(), next = -1;
	int64_t wall = time(NULL);
	bool say_held = ps->say_held;

	ps->say_held = false; /* after hello's reply: ends held meanwhile go out now */
	for (int i = 0; i < MAX_POOLS; i++) {
		struct pool_box *p = &ps->slot[i];
		if (!p->used)
			continue;
		if (p->state == P_ENDED && wall - p->ended_at_s > ENDED_KEEP_S) {
			p->used = false;
			continue;
		}
		if (say_held && p->state == P_RUNNING)
			jobrun_say_held(ps, p);
		long long due = tick_one(ps, p, now, wall);
		if (due >= 0 && (next < 0 || due < next))
			next = due;
	}
	return next < 0 ? -1 : (int)(next - now < 0 ? 0 : next - now > 60000 ? 60000 : next - now);
}

/* Ends a pool a previous supervisor left that cannot be taken over (its
 * sandbox or its keeper is gone, or it was ending): killed and torn down, its
 * GPUs held until then; a job in it is lost (the web process retries it). */
static void adopt_end(struct pools *ps, struct pool_box *p, bool adopted)
{
	p->state = P_ENDING;
	if (adopted) {
		sandbox_kill(&p->h, SIGKILL);
		if (launch_teardown(&p->h, &p->worker, &p->worker_fd) == 0)
			return;
	}
	mark_ended(ps, p);
}

/* Takes over a running pool: the agent's pipes from its keeper, the job in it. */
static int adopt_running(struct pools *ps, struct pool_box *p, json_t *j)
{
	int fds[KEEPER_HELD_MAX];
	unsigned n = 0;
	int rc = keeper_fetch(p->keeper_sock, fds, KEEPER_HELD_MAX, &n);

	if (rc < 0 || n != 2) {
		for (unsigned i = 0; rc == 0 && i < n; i++)
			close(fds[i]);
		log_warn("pool %lld of %s: its keeper is gone (%s)", p->pool_id, p->user,
			 rc < 0 ? strerror(-rc) : "it holds no pipes");
		return rc < 0 ? rc : -EPROTO;
	}
	p->io.cmd_fd = fds[0];
	p->io.status_fd = fds[1];
	if (fcntl(p->io.cmd_fd, F_SETFL, O_NONBLOCK) < 0 ||
	    fcntl(p->io.status_fd, F_SETFL, O_NONBLOCK) < 0)
		return -errno;
	p->pidfd = (int)syscall(SYS_pidfd_open, p->h.pid, 0);
	if (p->pidfd < 0)
		return -errno;
	p->state = P_RUNNING;
	json_t *job = json_object_get(j, "job");
	if (job && (rc = jobrun_restore(ps, p, job)) < 0)
		return rc;
	return 0;
}

/* A pool a previous supervisor left: taken over where that one left it (the
 * agent's status lines written meanwhile wait in its pipe), or ended. */
static void adopt_one(struct pools *ps, json_t *j)
{
	const char *user = json_string_value(json_object_get(j, "user"));
	const char *id = json_string_value(json_object_get(j, "id"));
	json_t *ending = json_object_get(j, "ending");
	struct pool_box *p = free_slot(ps);
	bool adopted;
	json_t *g;
	size_t i;

	if (!p || !user || !id || strlen(user) > LAUNCH_NAME_MAX)
		return;
	memset(p, 0, sizeof(*p));
	p->pidfd = p->worker_fd = p->job.worker_fd = p->job.log.fd = -1;
	p->h.status_fd = -1;
	p->io = (struct pool_pipes){-1, -1, -1};
	p->used = true;
	snprintf(p->user, sizeof(p->user), "%s", user);
	p->pool_id = json_integer_value(json_object_get(j, "pool_id"));
	p->user_id = (uint32_t)json_integer_value(json_object_get(j, "user_id"));
	p->host_uid = (uid_t)json_integer_value(json_object_get(j, "uid"));
	p->deadline_s = json_integer_value(json_object_get(j, "deadline"));
	p->cpus_milli = (uint32_t)json_integer_value(json_object_get(j, "cpus_milli"));
	p->ready = json_is_true(json_object_get(j, "ready"));
	keeper_sock_path(ps->state_dir, id, p->keeper_sock, sizeof(p->keeper_sock));
	json_array_foreach(json_object_get(j, "gpus"), i, g) {
		if (p->n_gpus < SANDBOX_MAX_GPUS)
			p->gpus[p->n_gpus++] = (unsigned)json_integer_value(g);
	}
	adopted = sandbox_adopt(ps->state_dir, id, &p->h) == 0;
	if (ending) { /* it was being killed: that end is finished */
		set_end(p, json_string_value(json_object_get(ending, "cause")) ?: "gone",
			json_is_true(json_object_get(ending, "failed")),
			json_string_value(json_object_get(ending, "reason")) ?: "it was ending");
		adopt_end(ps, p, adopted);
		return;
	}
	if (adopted && adopt_running(ps, p, j) == 0) {
		log_info("re-adopted pool %lld of %s (sandbox %s)", p->pool_id, user, id);
		pools_save(ps, p);
		return;
	}
	close_fd(&p->pidfd);
	close_io(p);
	jobrun_clear(p);
	set_end(p, "gone", true,
		json_integer_value(json_object_get(j, "job_id"))
			? "the supervisor restarted and the pool's sandbox or keeper is gone: the job is lost"
			: "the supervisor restarted and the pool's sandbox or keeper is gone");
	adopt_end(ps, p, adopted);
}

void pools_set_listening(struct pools *ps, bool on)
{
	ps->say_held = on && !ps->listening;
	ps->listening = on;
}

void pools_keep_all(struct pools *ps)
{
	/* what the agents say from now on waits in their pipes for the next supervisor */
	ps->listening = false;
	ps->say_held = false;
}

int pools_busy(const struct pools *ps)
{
	int n = 0;
	for (int i = 0; i < MAX_POOLS; i++) {
		const struct pool_box *p = &ps->slot[i];
		n += p->used && p->state != P_ENDED && (p->worker_fd >= 0 || p->job.worker_fd >= 0);
	}
	return n;
}

static void adopt_all(struct pools *ps)
{
	char dir[LAUNCH_PATH_MAX], path[LAUNCH_PATH_MAX + 300];
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/pools", ps->state_dir);
	d = opendir(dir);
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/record.json", dir, e->d_name);
		json_t *j = json_load_file(path, 0, NULL);
		if (j)
			adopt_one(ps, j);
		else /* a build that never finished: nothing holds it */
			poollaunch_remove(ps->state_dir, strtoll(e->d_name, NULL, 10));
		json_decref(j);
	}
	if (d)
		closedir(d);
}

struct pools *pools_new(const struct labd_config *cfg, const char *state_dir,
			struct sandboxes *sb, const struct sandboxes_events *ev)
{
	struct pools *ps = calloc(1, sizeof(*ps));

	if (!ps)
		return NULL;
	ps->cfg = cfg;
	ps->sb = sb;
	if (ev)
		ps->ev = *ev;
	snprintf(ps->state_dir, sizeof(ps->state_dir), "%s", state_dir);
	if (joblog_prepare_dir(state_dir, launch_labd_gid(cfg)) < 0)
		log_warn("cannot prepare %s/joblogs", state_dir);
	adopt_all(ps);
	return ps;
}

void pools_free(struct pools *ps)
{
	if (!ps)
		return;
	for (int i = 0; i < MAX_POOLS; i++) {
		struct pool_box *p = &ps->slot[i];
		if (!p->used || p->state == P_ENDED)
			continue;
		close_fd(&p->pidfd);
		close_fd(&p->worker_fd);
		close_io(p);
		jobrun_clear(p);
		sandbox_handle_clear(&p->h);
	}
	free(ps);
}
