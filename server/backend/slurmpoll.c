/* slurmpoll.c - the Slurm backend's poll thread: every [slurm] poll_interval (or at
 * once when poked) it submits new holders, reads ONE squeue for all of labd's jobs,
 * matches it to the holders (adopting jobs after a restart, finding lost submits by
 * name), starts sandboxes on the nodes whose jobs run, and ends what Slurm or labd
 * ended. An unknown answer (the controller away) changes nothing. See slurmint.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/slurmint.h"
#include "labd/clock.h"
#include "labd/log.h"

/* How long a job that runs may wait for its node's link before its start fails. */
#define NODE_WAIT_MS 60000

/* The next holder after h (NULL: the first), read under the lock. */
static struct holder *next_of(struct slurm *s, struct holder *h)
{
	struct holder *n;

	pthread_mutex_lock(&s->lock);
	n = h ? h->next : s->holders;
	pthread_mutex_unlock(&s->lock);
	return n;
}

static void remove_holder(struct slurm *s, struct holder *h)
{
	pthread_mutex_lock(&s->lock);
	for (struct holder **pp = &s->holders; *pp; pp = &(*pp)->next)
		if (*pp == h) {
			*pp = h->next;
			break;
		}
	pthread_mutex_unlock(&s->lock);
	free(h);
}

static void cancel_job(struct slurm *s, int64_t job_id, int *rc)
{
	int r = slurmcli_cancel(&s->tools, job_id);

	if (r == 0)
		s->cancelled[s->n_cancelled++ % 64] = job_id;
	if (rc)
		*rc = r;
}

static bool recently_cancelled(const struct slurm *s, int64_t job_id)
{
	for (unsigned i = 0; i < 64 && i < s->n_cancelled; i++)
		if (s->cancelled[i] == job_id)
			return true;
	return false;
}

/* ---- submitting ---- */

static void fill_submit(const struct slurm *s, const struct holder *h, struct slurm_submit *sub)
{
	const struct labd_config *cfg = s->cfg;
	int64_t mem = h->shape.memory_bytes ? h->shape.memory_bytes : (int64_t)cfg->memory_bytes;
	int64_t cpus = h->shape.cpus_milli ? h->shape.cpus_milli : (int64_t)cfg->cpus_milli;
	int64_t left = h->deadline_s - (int64_t)time(NULL);

	*sub = (struct slurm_submit){
		.pool = h->pool, .id = h->id, .user = h->user,
		.memory_mb = mem > 0 ? (mem + (1 << 20) - 1) >> 20 : 1024,
		.cpus = cpus > 0 ? (unsigned)((cpus + 999) / 1000) : 1,
		.gpus = h->shape.n_gpus,
		.seconds = (left > 0 ? left : 0) + cfg->slurm_time_grace_s,
		.partition = cfg->slurm_partition,
		.nodes = h->instances > 1 ? (unsigned)h->instances : 1,
	};
	if (sub->seconds < 60)
		sub->seconds = 60;
}

static void submit_one(struct slurm *s, struct holder *h)
{
	struct slurm_submit sub;
	char err[SLURM_TEXT_MAX], reason[SLURM_TEXT_MAX + 40];
	int64_t job_id = 0;
	int rc;

	pthread_mutex_lock(&s->lock);
	bool due = h->phase == H_SUBMIT && !h->submit_lost && !h->stop_asked && !h->end_passed;
	fill_submit(s, h, &sub);
	pthread_mutex_unlock(&s->lock);
	if (!due)
		return;
	rc = slurmcli_submit(&s->tools, &sub, &job_id, err, sizeof(err));
	pthread_mutex_lock(&s->lock);
	if (rc == 0) {
		h->job_id = job_id;
		h->phase = H_QUEUED;
	} else if (rc == -EAGAIN) {
		h->submit_lost = true; /* taken or not: the next squeue tells by its name */
	}
	pthread_mutex_unlock(&s->lock);
	if (rc == 0) {
		log_info("%s %lld of %s: Slurm job %lld", h->pool ? "pool" : "runtime",
			 (long long)h->id, h->user, (long long)job_id);
	} else if (rc == -EAGAIN) {
		log_warn("sbatch for %s %lld: no answer (%s); looking for it by name",
			 h->pool ? "pool" : "runtime", (long long)h->id, err);
	} else {
		snprintf(reason, sizeof(reason), "could not start: Slurm refused: %s", err);
		pthread_mutex_lock(&s->lock);
		h->end_passed = true;
		/* a refusal may still have made the job: the next squeue cancels it */
		h->submit_lost = true;
		pthread_mutex_unlock(&s->lock);
		slurm_pass_end(s, h, "start_failed", true, reason);
	}
}

/* ---- one squeue against the holders ---- */

static const struct slurm_job *job_of(const struct slurm_job *jobs, size_t n, bool pool,
				      int64_t id, int64_t prefer)
{
	const struct slurm_job *found = NULL;

	for (size_t i = 0; i < n; i++)
		if (jobs[i].pool == pool && jobs[i].id == id &&
		    (!found || jobs[i].job_id == prefer ||
		     (found->job_id != prefer &&
		      slurmcli_phase(found->state) == SLURM_PHASE_ENDED)))
			found = &jobs[i];
	return found;
}

/* Under the lock: one holder against the answer. */
static void match_one(struct holder *h, const struct slurm_job *j)
{
	if (!j) {
		if (h->job_id)
			h->slurm_ended = h->gone = true; /* Slurm no longer knows it */
		else if (h->submit_lost)
			h->submit_lost = false; /* never taken: submit again */
		return;
	}
	if (h->job_id == 0 || h->submit_lost) {
		h->job_id = j->job_id;
		h->submit_lost = false;
		if (h->phase == H_SUBMIT)
			h->phase = H_QUEUED;
	}
	if (j->job_id != h->job_id)
		return;
	snprintf(h->sstate, sizeof(h->sstate), "%s", j->state);
	snprintf(h->sreason, sizeof(h->sreason), "%s", j->reason);
	h->start_at = j->start_at;
	if (j->host[0] && !h->node[0])
		snprintf(h->node, sizeof(h->node), "%s", j->host);
	if (slurmcli_phase(j->state) == SLURM_PHASE_ENDED)
		h->slurm_ended = true;
}

/* Under the lock, on the first answer after a start: a job of labd's name that
 * ended while no labd watched (cancelled, failed, its node lost) and that no later
 * job of the same name replaced. Its end is passed on as Slurm's (the web process
 * ignores it for a runtime or pool already ended); its sandbox, if its node still
 * runs one, is then a stray that the node's next list shows. */
static void adopt_ended(struct slurm *s, const struct slurm_job *j)
{
	struct holder *h;

	if (!j->user[0] || !(h = calloc(1, sizeof(*h))))
		return;
	h->pool = j->pool;
	h->id = j->id;
	h->job_id = j->job_id;
	h->phase = H_ON_NODE;
	h->verified = h->slurm_ended = true;
	snprintf(h->user, sizeof(h->user), "%s", j->user);
	snprintf(h->node, sizeof(h->node), "%s", j->host);
	snprintf(h->sstate, sizeof(h->sstate), "%s", j->state);
	snprintf(h->sreason, sizeof(h->sreason), "%s", j->reason);
	h->next = s->holders;
	s->holders = h;
}

/* Jobs of labd's name that no holder accounts for: a running one whose user the
 * comment names is adopted (this process restarted; its node's list decides), any
 * other is cancelled (its start's request died with the old process). Also the
 * second job of a name submitted twice. */
static void adopt(struct slurm *s, const struct slurm_job *jobs, size_t n, bool first)
{
	int64_t cancel[64] = {0}; /* zeroed: gcc's analyzer loses count of nc across the loop */
	size_t nc = 0;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		const struct slurm_job *j = &jobs[i];
		struct holder *h = slurm_find(s, j->pool, j->id);
		enum slurm_phase ph = slurmcli_phase(j->state);
		if (first && !h && (ph == SLURM_PHASE_ENDED || ph == SLURM_PHASE_ENDING) &&
		    job_of(jobs, n, j->pool, j->id, 0) == j)
			adopt_ended(s, j);
		if (ph == SLURM_PHASE_ENDED || ph == SLURM_PHASE_ENDING ||
		    recently_cancelled(s, j->job_id))
			continue;
		if (h && h->job_id == j->job_id)
			continue;
		if (!h && ph == SLURM_PHASE_RUNNING && j->user[0] && j->host[0] &&
		    (h = calloc(1, sizeof(*h)))) {
			h->pool = j->pool;
			h->id = j->id;
			h->job_id = j->job_id;
			h->phase = H_ON_NODE;
			snprintf(h->user, sizeof(h->user), "%s", j->user);
			snprintf(h->node, sizeof(h->node), "%s", j->host);
			snprintf(h->sstate, sizeof(h->sstate), "%s", j->state);
			h->next = s->holders;
			s->holders = h;
			log_info("adopted Slurm job %lld (%s %lld of %s on %s)", (long long)j->job_id,
				 j->pool ? "pool" : "runtime", (long long)j->id, j->user, j->host);
			continue;
		}
		if (nc < 64)
			cancel[nc++] = j->job_id;
	}
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < nc; i++) {
		log_warn("cancelling Slurm job %lld: no runtime or pool of labd's holds it",
			 (long long)cancel[i]);
		cancel_job(s, cancel[i], NULL);
	}
}

static void apply_queue(struct slurm *s, const struct slurm_job *jobs, size_t n, bool first)
{
	pthread_mutex_lock(&s->lock);
	for (struct holder *h = s->holders; h; h = h->next)
		if (!h->slurm_ended)
			match_one(h, job_of(jobs, n, h->pool, h->id, h->job_id));
	pthread_mutex_unlock(&s->lock);
	adopt(s, jobs, n, first);
}

/* ---- starting on the node ---- */

/* Fails a start that cannot happen: cancel the allocation, pass the end. */
static void fail_start(struct slurm *s, struct holder *h, const char *why)
{
	char reason[SLURM_TEXT_MAX + 20];

	snprintf(reason, sizeof(reason), "could not start: %s", why);
	log_warn("%s %lld of %s: %s", h->pool ? "pool" : "runtime", (long long)h->id, h->user,
		 reason);
	pthread_mutex_lock(&s->lock);
	h->end_passed = true;
	pthread_mutex_unlock(&s->lock);
	slurm_pass_end(s, h, "start_failed", true, reason);
}

/* The node-local GPU minors of the job's GRES indices into sh. 0, -EAGAIN, or -EINVAL
 * with why. */
static int node_gpus(struct slurm *s, const struct holder *h, const struct node_info *info,
		     struct box_shape *sh, char *why, size_t whylen)
{
	unsigned idx[BOX_GPUS_MAX];
	size_t n;
	int rc = slurmcli_job_gpus(&s->tools, h->job_id, idx, BOX_GPUS_MAX, &n);

	if (rc == -EAGAIN)
		return rc;
	if (rc < 0 || n != h->shape.n_gpus) {
		snprintf(why, whylen, "Slurm did not say which GPUs job %lld holds",
			 (long long)h->job_id);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		if (idx[i] >= info->n_gpus) {
			snprintf(why, whylen, "Slurm gave GPU %u of node %s, which has %zu", idx[i],
				 info->name, info->n_gpus);
			return -EINVAL;
		}
		sh->gpus[i] = info->gpus[idx[i]];
	}
	sh->n_gpus = (unsigned)n;
	return 0;
}

/* The ordinary start (or pool_start) to the node's supervisor. */
static int node_start(struct slurm *s, struct holder *h, struct node *nd,
		      const struct box_shape *sh, char *err, size_t errlen)
{
	char endpoint[BACKEND_ENDPOINT_MAX];

	(void)s;
	if (h->pool) {
		struct backend_pool_start ps = {.user = h->user, .user_id = h->user_id,
						.pool_id = h->id, .deadline_s = h->deadline_s,
						.shape = *sh};
		return backend_pool_start(nodes_backend(nd), &ps, err, errlen);
	}
	struct backend_start st = {.user = h->user, .user_id = h->user_id, .runtime_id = h->id,
				   .kind = h->kind, .token = h->token,
				   .deadline_s = h->deadline_s, .shape = *sh};
	return backend_start(nodes_backend(nd), &st, endpoint, err, errlen);
}

static void start_one(struct slurm *s, struct holder *h)
{
	struct node_info info;
	struct box_shape sh;
	struct node *nd;
	char err[SLURM_TEXT_MAX] = "";
	int rc;

	pthread_mutex_lock(&s->lock);
	bool due = h->phase == H_QUEUED && h->have_request && !h->stop_asked && !h->end_passed &&
		   !h->slurm_ended && h->node[0] &&
		   slurmcli_phase(h->sstate) == SLURM_PHASE_RUNNING;
	sh = h->shape;
	sh.image = h->image;
	pthread_mutex_unlock(&s->lock);
	if (!due)
		return;
	if (h->instances > 1) { /* its N nodes are held; the sandboxes on them are not built */
		snprintf(err, sizeof(err), "a job on %d hosts: Slurm gave the nodes, but this labd "
			 "does not start a job's sandbox on several nodes yet", h->instances);
		fail_start(s, h, err);
		return;
	}
	nd = nodes_hold(s->nodes, h->node, &info);
	if (!nd) {
		long long now = clock_ms();
		if (!h->node_wait_ms)
			h->node_wait_ms = now;
		if (now - h->node_wait_ms > NODE_WAIT_MS) {
			snprintf(err, sizeof(err), "Slurm placed it on node %s, whose labd is not "
				 "connected", h->node);
			fail_start(s, h, err);
		}
		return;
	}
	rc = sh.n_gpus ? node_gpus(s, h, &info, &sh, err, sizeof(err)) : 0;
	if (rc == 0)
		rc = node_start(s, h, nd, &sh, err, sizeof(err));
	nodes_release(nd);
	if (rc == -EAGAIN)
		return;
	if (rc == 0 || rc == -ETIMEDOUT) { /* a lost reply: the node's list tells */
		pthread_mutex_lock(&s->lock);
		h->phase = H_ON_NODE;
		if (!h->placed_at)
			h->placed_at = (int64_t)time(NULL);
		pthread_mutex_unlock(&s->lock);
		return;
	}
	if (!err[0])
		snprintf(err, sizeof(err), "node %s: %s", h->node, strerror(-rc));
	fail_start(s, h, err);
}

/* ---- ends ---- */

static bool node_up(struct slurm *s, const char *name)
{
	struct known_node *k;
	bool up;

	pthread_mutex_lock(&s->lock);
	k = slurm_known(s, name);
	up = k && k->up;
	pthread_mutex_unlock(&s->lock);
	return up;
}

/* Stops the holder's sandbox on its node, when its link is up (best effort). */
static void stop_on_node(struct slurm *s, struct holder *h, const char *reason)
{
	struct node *nd = h->node[0] ? nodes_hold(s->nodes, h->node, NULL) : NULL;

	if (!nd)
		return;
	if (h->pool)
		backend_pool_stop(nodes_backend(nd), h->user, h->id, reason);
	else
		backend_stop(nodes_backend(nd), h->user, h->id, reason);
	nodes_release(nd);
}

/* Whether the node's list holds (pool, id): 1, 0, or -1 when it did not answer. */
static int node_holds(struct node *nd, bool pool, int64_t id)
{
	struct backend_sandbox *l = NULL;
	size_t n = 0;
	int found = 0;

	if (backend_list(nodes_backend(nd), &l, &n) < 0)
		return -1;
	for (size_t i = 0; i < n && !found; i++)
		found = pool ? l[i].pool_id == id : (l[i].pool_id == 0 && l[i].runtime_id == id);
	free(l);
	return found;
}

/* A job adopted after a restart: its node must hold its sandbox once the node's link
 * is up (else the start never reached it: cancel it); a node that stays away longer
 * than NODE_WAIT_MS leaves it to Slurm's end. true when it is done. */
static bool verify_adopted(struct slurm *s, struct holder *h, const struct holder *c)
{
	struct node *nd = nodes_hold(s->nodes, c->node, NULL);
	int held = nd ? node_holds(nd, c->pool, c->id) : -1;
	long long now = clock_ms();
	int rc = 0;

	if (nd)
		nodes_release(nd);
	if (!h->node_wait_ms)
		h->node_wait_ms = now;
	if (held == 1) {
		pthread_mutex_lock(&s->lock);
		h->verified = true;
		pthread_mutex_unlock(&s->lock);
		return false;
	}
	if (held < 0 && now - h->node_wait_ms <= NODE_WAIT_MS)
		return false;
	log_warn("cancelling Slurm job %lld: node %s does not hold %s %lld", (long long)c->job_id,
		 c->node, c->pool ? "pool" : "runtime", (long long)c->id);
	cancel_job(s, c->job_id, &rc);
	pthread_mutex_lock(&s->lock);
	h->end_passed = true;
	pthread_mutex_unlock(&s->lock);
	slurm_pass_end(s, h, "gone", true, "its node does not hold its sandbox");
	return rc == 0;
}

/* What is left of one holder after the pass; true when it is done (removed). */
static bool finish_one(struct slurm *s, struct holder *h)
{
	struct holder c;
	struct slurm_end end;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	c = *h;
	pthread_mutex_unlock(&s->lock);
	if (c.end_passed) {
		if (c.submit_lost)
			return false; /* the next answer names its job, or says there is none */
		if (c.job_id && !c.slurm_ended)
			cancel_job(s, c.job_id, &rc);
		return rc == 0;
	}
	if (!c.have_request && c.phase == H_ON_NODE && !c.verified)
		return verify_adopted(s, h, &c);
	if (c.slurm_ended) {
		if (c.gone)
			end = (struct slurm_end){.cause = "gone", .failed = true};
		else
			slurmcli_end(c.sstate, c.sreason, c.node, c.stop_asked, &end);
		if (c.gone)
			snprintf(end.reason, sizeof(end.reason),
				 "Slurm no longer knows its allocation (job %lld)", (long long)c.job_id);
		else if (c.stop_asked && !strcmp(end.cause, "requested"))
			snprintf(end.reason, sizeof(end.reason), "%s", c.stop_reason);
		if (c.phase == H_ON_NODE)
			stop_on_node(s, h, end.reason);
		slurm_pass_end(s, h, end.cause, end.failed, end.reason);
		return true;
	}
	/* a stop the node cannot carry out: nothing is started there, its link is
	 * down, or it holds none: Slurm's end is the end */
	if (c.stop_asked && (c.phase != H_ON_NODE || c.node_lost || !node_up(s, c.node))) {
		if (c.job_id)
			cancel_job(s, c.job_id, &rc);
		pthread_mutex_lock(&s->lock);
		h->end_passed = true;
		pthread_mutex_unlock(&s->lock);
		slurm_pass_end(s, h, "requested", false, c.stop_reason);
		return (c.job_id == 0 || rc == 0) && c.phase != H_SUBMIT;
	}
	return false;
}

/* What is new of the log of a pool's running job. */
static void pull_log(struct slurm *s, struct holder *h)
{
	char node[LINK_NAME_MAX + 1];

	pthread_mutex_lock(&s->lock);
	int64_t job_id = h->pool && h->phase == H_ON_NODE && !h->end_passed ? h->running_job : 0;
	snprintf(node, sizeof(node), "%s", h->node);
	pthread_mutex_unlock(&s->lock);
	if (job_id)
		slurm_pull_log(s, node, h->id, job_id, false);
}

static void pass(struct slurm *s)
{
	struct slurm_job *jobs = NULL;
	size_t n = 0;
	bool first = false;

	for (struct holder *h = next_of(s, NULL); h; h = next_of(s, h))
		submit_one(s, h);
	if (slurmcli_queue(&s->tools, &jobs, &n) == 0) {
		pthread_mutex_lock(&s->lock);
		first = !s->queue_seen;
		pthread_mutex_unlock(&s->lock);
		apply_queue(s, jobs, n, first);
	}
	free(jobs);
	for (struct holder *h = next_of(s, NULL); h; h = next_of(s, h))
		start_one(s, h);
	for (struct holder *h = next_of(s, NULL); h; h = next_of(s, h))
		pull_log(s, h);
	for (struct holder *h = next_of(s, NULL), *next; h; h = next) {
		next = next_of(s, h);
		if (finish_one(s, h))
			remove_holder(s, h);
	}
	if (first) { /* what ran before is adopted and what ended passed on: reconcile */
		pthread_mutex_lock(&s->lock);
		s->queue_seen = true;
		pthread_mutex_unlock(&s->lock);
		if (s->ev.connected)
			s->ev.connected(s->ev.ctx);
	}
}

/* With no holder there is nothing to follow: a pass now and then still cancels a job
 * of labd's name that nothing holds (a start whose process died), and a start pokes. */
#define IDLE_POLL_MS 60000

void *slurm_poll_loop(void *arg)
{
	struct slurm *s = arg;
	struct timespec until;

	for (;;) {
		pthread_mutex_lock(&s->lock);
		/* before the first answer, what a previous process left waits for it */
		clock_deadline(&until, s->holders || !s->queue_seen
					       ? (long long)s->cfg->slurm_poll_interval_ms
					       : IDLE_POLL_MS);
		while (!s->poked && !s->stopping)
			if (pthread_cond_timedwait(&s->wake, &s->lock, &until) == ETIMEDOUT)
				break;
		s->poked = false;
		bool stop = s->stopping;
		pthread_mutex_unlock(&s->lock);
		if (stop)
			break;
		pass(s);
	}
	return NULL;
}
