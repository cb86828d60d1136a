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

#include "backend/slurmhosts.h"
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
	if (h->peer_n)
		slurmaddrs_release(&s->addrs, h->id);
	pthread_mutex_unlock(&s->lock);
	free(h->hosts);
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
		.peer_first = h->peer_first, .peer_n = h->peer_n,
	};
	if (sub->seconds < 60)
		sub->seconds = 60;
}

/* Under the lock: the peer addresses of a pool on several hosts, taken before its
 * submit (the Slurm job's comment names them). Not before one squeue was read, so
 * adopted pools have taken theirs back; none free: it waits. true when taken. */
static bool take_addresses(struct slurm *s, struct holder *h, int *rc)
{
	uint32_t first;

	if (!s->queue_seen)
		return false;
	*rc = slurmaddrs_take(&s->addrs, h->id, (unsigned)h->instances, &first);
	if (*rc == -ENOSPC && !h->node_wait_ms) {
		h->node_wait_ms = clock_ms(); /* said once */
		log_warn("pool %lld waits for %d free addresses of [slurm] job_addresses",
			 (long long)h->id, h->instances);
	}
	if (*rc < 0)
		return false;
	h->peer_first = first;
	h->peer_n = (unsigned)h->instances;
	h->node_wait_ms = 0;
	return true;
}

static void submit_one(struct slurm *s, struct holder *h)
{
	struct slurm_submit sub;
	char err[SLURM_TEXT_MAX], reason[SLURM_TEXT_MAX + 40];
	int64_t job_id = 0;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	bool due = h->phase == H_SUBMIT && !h->submit_lost && !h->stop_asked && !h->end_passed;
	if (due && h->instances > 1 && !h->peer_n)
		due = take_addresses(s, h, &rc);
	if (rc == -EINVAL)
		h->end_passed = true; /* before any submit: no Slurm job to cancel */
	fill_submit(s, h, &sub);
	pthread_mutex_unlock(&s->lock);
	if (rc == -EINVAL)
		slurm_pass_end(s, h, "start_failed", true,
			       "could not start: [slurm] job_addresses has no run of that many "
			       "addresses for a job on several nodes");
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
	if (j->nodes[0] && !h->nodelist[0])
		snprintf(h->nodelist, sizeof(h->nodelist), "%s", j->nodes);
	if (slurmcli_phase(j->state) == SLURM_PHASE_ENDED)
		h->slurm_ended = true;
}

/* Under the lock: the hosts of a pool on several nodes from its node list (algo-1
 * first) with their peer addresses. 0, or -EINVAL with why. */
static int make_hosts(struct holder *h, char *why, size_t whylen)
{
	char names[JOBHOSTS_MAX][LINK_NAME_MAX + 1];
	size_t n = 0;

	if (h->hosts)
		return 0;
	if (slurmhosts_expand(h->nodelist, names, JOBHOSTS_MAX, &n) < 0 ||
	    n != (size_t)h->instances || h->peer_n != n) {
		snprintf(why, whylen, "Slurm gave the nodes %.60s for a job on %d hosts",
			 h->nodelist, h->instances);
		return -EINVAL;
	}
	struct holder_host *hosts = calloc(n, sizeof(*hosts));
	if (!hosts) {
		snprintf(why, whylen, "out of memory");
		return -EINVAL;
	}
	for (size_t k = 0; k < n; k++) {
		snprintf(hosts[k].node, sizeof(hosts[k].node), "%.*s", LINK_NAME_MAX, names[k]);
		slurmaddrs_text(h->peer_first + (uint32_t)k, hosts[k].addr);
	}
	h->hosts = hosts; /* freed with the holder (remove_holder) */
	snprintf(h->node, sizeof(h->node), "%.*s", LINK_NAME_MAX, names[0]);
	return 0;
}

/* Under the lock: the hosts of an adopted pool on several nodes, from its node list,
 * and their peer addresses (the job's comment) taken back. */
static void adopt_hosts(struct slurm *s, struct holder *h, const struct slurm_job *j)
{
	char why[SLURM_TEXT_MAX];

	h->instances = 1;
	if (!j->pool || j->peer_n < 2)
		return;
	snprintf(h->nodelist, sizeof(h->nodelist), "%s", j->nodes);
	h->instances = (int)j->peer_n;
	h->peer_first = j->peer_first;
	h->peer_n = j->peer_n;
	if (make_hosts(h, why, sizeof(why)) < 0) {
		log_warn("Slurm job %lld: %s", (long long)j->job_id, why);
		h->instances = 1; /* verify_adopted finds it on its batch host alone */
		h->peer_first = h->peer_n = 0;
		h->nodelist[0] = '\0';
		return;
	}
	if (slurmaddrs_mark(&s->addrs, h->id, j->peer_first, j->peer_n) < 0)
		log_warn("pool %lld: its peer addresses are not free in [slurm] job_addresses "
			 "(changed since it started?)", (long long)h->id);
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
			adopt_hosts(s, h, j);
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

/* Whether a start has waited too long for a node's link (counting from now on the
 * first call); fails it then. */
static bool node_waited_out(struct slurm *s, struct holder *h, const char *node)
{
	char err[SLURM_TEXT_MAX];
	long long now = clock_ms();

	if (!h->node_wait_ms)
		h->node_wait_ms = now;
	if (now - h->node_wait_ms <= NODE_WAIT_MS)
		return false;
	snprintf(err, sizeof(err), "Slurm placed it on node %s, whose labd is not connected",
		 node);
	fail_start(s, h, err);
	return true;
}

/* Stops the pool's sandbox on the first n of its hosts (a start that failed part way). */
static void stop_hosts(struct slurm *s, const struct holder *h, int n, const char *reason)
{
	char names[JOBHOSTS_MAX][LINK_NAME_MAX + 1];

	for (int k = 0; k < n; k++)
		snprintf(names[k], sizeof(names[0]), "%s", h->hosts[k].node);
	slurm_stop_on(s, true, h->user, h->id, names, n, reason);
}

/* The other hosts' peer addresses for host k: "a,b,c". */
static void peers_of(const struct holder *h, int k, char *out, size_t outlen)
{
	size_t used = 0;

	out[0] = '\0';
	for (int i = 0; i < h->instances && used < outlen; i++)
		if (i != k)
			used += (size_t)snprintf(out + used, outlen - used, "%s%s", used ? "," : "",
						 h->hosts[i].addr);
}

/* The same pool started on each of its nodes (docs/slurm.md "Jobs on several nodes"):
 * host k gets its peer address, the others' as its peers, and, past algo-1, a
 * scratch home (the user's home has one writer: algo-1). Every node must be connected
 * first; a start one node refuses fails the pool, and the others are stopped. */
static void start_hosts(struct slurm *s, struct holder *h, const struct box_shape *sh)
{
	char err[SLURM_TEXT_MAX] = "", peers[JOBHOSTS_MAX * SLURMADDRS_TEXT_MAX];
	int rc, k;

	pthread_mutex_lock(&s->lock);
	rc = make_hosts(h, err, sizeof(err));
	pthread_mutex_unlock(&s->lock);
	if (rc < 0) {
		fail_start(s, h, err);
		return;
	}
	for (k = 0; k < h->instances; k++) {
		struct node *nd = nodes_hold(s->nodes, h->hosts[k].node, NULL);
		if (!nd) {
			node_waited_out(s, h, h->hosts[k].node);
			return;
		}
		nodes_release(nd);
	}
	if (sh->n_gpus) { /* Slurm's GRES index per node is not read yet */
		fail_start(s, h, "a job on several nodes with GPUs is not supported on Slurm yet");
		return;
	}
	for (k = 0, rc = 0; k < h->instances && rc == 0; k++) {
		struct node *nd = nodes_hold(s->nodes, h->hosts[k].node, NULL);
		peers_of(h, k, peers, sizeof(peers));
		struct backend_pool_start ps = {.user = h->user, .user_id = h->user_id,
						.pool_id = h->id, .deadline_s = h->deadline_s,
						.shape = *sh, .instances = h->instances,
						.peer_addr = h->hosts[k].addr, .peers = peers,
						.scratch_home = k > 0};
		rc = nd ? backend_pool_start(nodes_backend(nd), &ps, err, sizeof(err)) : -ENOTCONN;
		if (nd)
			nodes_release(nd);
		if (rc == -ETIMEDOUT)
			rc = 0; /* a lost reply: its list or its events tell */
		if (rc < 0 && !err[0])
			snprintf(err, sizeof(err), "node %s: %s", h->hosts[k].node, strerror(-rc));
	}
	if (rc < 0) {
		stop_hosts(s, h, k - 1, "the job's start failed on another host");
		fail_start(s, h, err);
		return;
	}
	pthread_mutex_lock(&s->lock);
	h->phase = H_ON_NODE;
	if (!h->placed_at)
		h->placed_at = (int64_t)time(NULL);
	pthread_mutex_unlock(&s->lock);
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
	if (h->instances > 1) {
		start_hosts(s, h, &sh);
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

/* Stops the holder's sandbox on its node, or on each of its hosts whose sandbox did
 * not end, where the link is up (best effort). */
static void stop_on_node(struct slurm *s, struct holder *h, const char *reason)
{
	char names[JOBHOSTS_MAX][LINK_NAME_MAX + 1];
	int n;

	pthread_mutex_lock(&s->lock);
	n = slurm_holder_nodes(h, names);
	pthread_mutex_unlock(&s->lock);
	slurm_stop_on(s, h->pool, h->user, h->id, names, n, reason);
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

/* A job adopted after a restart: its node (each of its hosts' nodes) must hold its
 * sandbox once the node's link is up (else the start never reached it: cancel it); a
 * node that stays away longer than NODE_WAIT_MS leaves it to Slurm's end. true when
 * it is done. */
static bool verify_adopted(struct slurm *s, struct holder *h, const struct holder *c)
{
	char names[JOBHOSTS_MAX][LINK_NAME_MAX + 1];
	int n = 1, held = 1;
	long long now = clock_ms();
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	if (h->hosts)
		for (n = 0; n < h->instances; n++)
			snprintf(names[n], sizeof(names[0]), "%s", h->hosts[n].node);
	else
		snprintf(names[0], sizeof(names[0]), "%s", c->node);
	pthread_mutex_unlock(&s->lock);
	for (int k = 0; k < n && held != 0; k++) {
		struct node *nd = nodes_hold(s->nodes, names[k], NULL);
		int one = nd ? node_holds(nd, c->pool, c->id) : -1;
		if (nd)
			nodes_release(nd);
		held = one == 0 ? 0 : one < 0 ? -1 : held;
	}
	if (!h->node_wait_ms)
		h->node_wait_ms = now;
	if (held == 1) {
		pthread_mutex_lock(&s->lock);
		h->verified = h->ready = true;
		for (int k = 0; h->hosts && k < h->instances; k++)
			h->hosts[k].ready = true;
		pthread_mutex_unlock(&s->lock);
		return false;
	}
	if (held < 0 && now - h->node_wait_ms <= NODE_WAIT_MS)
		return false;
	log_warn("cancelling Slurm job %lld: a node of %s does not hold %s %lld",
		 (long long)c->job_id, c->nodelist[0] ? c->nodelist : c->node,
		 c->pool ? "pool" : "runtime", (long long)c->id);
	stop_on_node(s, h, "its sandbox is not on every node of its allocation");
	cancel_job(s, c->job_id, &rc);
	pthread_mutex_lock(&s->lock);
	h->end_passed = true;
	pthread_mutex_unlock(&s->lock);
	slurm_pass_end(s, h, "gone", true, "its node does not hold its sandbox");
	return rc == 0;
}

/* A pool stop that waited for its hosts' jobs (slurm.c, grace_first): due once each
 * host's job or sandbox ended, or the job's grace passed. */
static bool stop_waited(struct slurm *s, struct holder *h, long long until_ms)
{
	bool due;

	pthread_mutex_lock(&s->lock);
	due = !slurm_hosts_running(h) || clock_ms() >= until_ms;
	if (due)
		h->stop_wait_until_ms = 0;
	pthread_mutex_unlock(&s->lock);
	return due;
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
		if (c.hosts && c.phase == H_ON_NODE) /* one host's end is the pool's */
			stop_on_node(s, h, "another host of the job's sandbox ended");
		if (c.job_id && !c.slurm_ended)
			cancel_job(s, c.job_id, &rc);
		return rc == 0;
	}
	if (!c.have_request && c.phase == H_ON_NODE && !c.verified)
		return verify_adopted(s, h, &c);
	if (c.stop_wait_until_ms && stop_waited(s, h, c.stop_wait_until_ms))
		stop_on_node(s, h, c.stop_reason);
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

/* ---- the jobs in pools: their logs, and a failed host's job ended everywhere ---- */

/* One holder's running job: where its command still runs, the log's new bytes are
 * pulled to the head, and after one host's failure the job is stopped there with its
 * grace (the failure was passed on: on_job_exited). */
static void follow_job(struct slurm *s, struct holder *h)
{
	char names[JOBHOSTS_MAX][LINK_NAME_MAX + 1], data[JOBHOSTS_MAX][128];
	int hostno[JOBHOSTS_MAX], n = 0, count = 1;
	int64_t job, grace;
	bool stop;

	pthread_mutex_lock(&s->lock);
	job = h->phase == H_ON_NODE && !h->end_passed ? h->run_job : 0;
	stop = job && h->stop_others;
	h->stop_others = false;
	grace = h->run_grace_s;
	if (job && h->hosts) {
		count = h->instances;
		for (int k = 0; k < h->instances; k++)
			if (!h->hosts[k].exited) {
				hostno[n] = k + 1;
				snprintf(names[n], sizeof(names[0]), "%s", h->hosts[k].node);
				slurm_node_data(s, names[n], data[n], sizeof(data[0]));
				n++;
			}
	} else if (job) {
		hostno[n] = 1;
		snprintf(names[n], sizeof(names[0]), "%s", h->node);
		slurm_node_data(s, names[n], data[n], sizeof(data[0]));
		n++;
	}
	pthread_mutex_unlock(&s->lock);
	for (int i = 0; i < n; i++) {
		if (data[i][0] && s->logs)
			slurmlogs_pull(s->logs, data[i], job, hostno[i], count, false);
		if (!stop)
			continue;
		struct node *nd = nodes_hold(s->nodes, names[i], NULL);
		if (nd) {
			backend_job_stop(nodes_backend(nd), h->user, h->id, job, grace);
			nodes_release(nd);
		}
	}
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
		if (h->pool)
			follow_job(s, h);
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
