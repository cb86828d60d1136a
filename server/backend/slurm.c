/* slurm.c - the Slurm backend's operations and the nodes' events; see slurm.h and,
 * for the holders and the locking, slurmint.h.
 *
 * A start only records its holder and wakes the poll thread (slurmpoll.c), which
 * submits it: no Slurm tool ever runs on a request path. Calls about a sandbox that
 * runs (stop, jobs in a pool) go to its node's supervisor over the node's link. */
#include "backend/slurm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "backend/slurmhosts.h"
#include "backend/slurmint.h"
#include "backend/slurmshell.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "proto/jobhosts.h"

struct holder *slurm_find(struct slurm *s, bool pool, int64_t id)
{
	for (struct holder *h = s->holders; h; h = h->next)
		if (h->pool == pool && h->id == id)
			return h;
	return NULL;
}

struct known_node *slurm_known(struct slurm *s, const char *name)
{
	for (size_t i = 0; i < s->n_known; i++)
		if (!strcmp(s->known[i].info.name, name))
			return &s->known[i];
	return NULL;
}

int slurm_host_of(const struct holder *h, const char *node)
{
	for (int k = 0; h->hosts && k < h->instances; k++)
		if (!strcmp(h->hosts[k].node, node))
			return k;
	return -1;
}

void slurm_node_data(struct slurm *s, const char *node, char *out, size_t outlen)
{
	struct known_node *k = slurm_known(s, node);

	/* a node whose link is down would cost each pull the connect's wait */
	snprintf(out, outlen, "%s", k && k->up ? k->info.data : "");
}

void slurm_poke(struct slurm *s)
{
	pthread_mutex_lock(&s->lock);
	s->poked = true;
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
}

void slurm_pass_end(struct slurm *s, const struct holder *h, const char *cause, bool failed,
		    const char *reason)
{
	if (h->pool && s->ev.pool_ended)
		s->ev.pool_ended(s->ev.ctx, h->user, h->id, cause, failed, reason);
	else if (!h->pool && s->ev.ended)
		s->ev.ended(s->ev.ctx, h->user, h->id, cause, failed, reason);
}

/* ---- the nodes' events ---- */

static void on_up(void *ctx, const struct node_info *info)
{
	struct slurm *s = ctx;
	struct known_node *k;

	pthread_mutex_lock(&s->lock);
	k = slurm_known(s, info->name);
	if (!k && s->n_known < SLURM_NODES_MAX)
		k = &s->known[s->n_known++];
	if (k) {
		k->info = *info;
		k->up = true;
	}
	pthread_mutex_unlock(&s->lock);
	slurm_poke(s);
	if (s->ev.connected)
		s->ev.connected(s->ev.ctx); /* its sandboxes are known again: reconcile */
}

static void on_down(void *ctx, const char *node)
{
	struct slurm *s = ctx;
	struct known_node *k;

	pthread_mutex_lock(&s->lock);
	k = slurm_known(s, node);
	if (k)
		k->up = false;
	pthread_mutex_unlock(&s->lock);
}

/* A node's end of a holder's sandbox: passed on once; the poll thread cancels the
 * allocation. false when the end was passed already (Slurm's came first). */
static bool node_ended(struct slurm *s, bool pool, int64_t id)
{
	struct holder *h;
	bool first = true;

	pthread_mutex_lock(&s->lock);
	h = slurm_find(s, pool, id);
	if (h) {
		first = !h->end_passed;
		h->end_passed = true;
	}
	pthread_mutex_unlock(&s->lock);
	slurm_poke(s);
	return first;
}

static void on_ready(void *ctx, const char *node, const char *user, int64_t runtime_id,
		     const char *endpoint)
{
	struct slurm *s = ctx;
	struct known_node *k;
	struct holder *h;
	char data[sizeof(k->info.data)] = "", tcp[BACKEND_ENDPOINT_MAX];

	pthread_mutex_lock(&s->lock);
	if ((h = slurm_find(s, false, runtime_id))) {
		h->ready = true;
		h->phase = H_ON_NODE; /* its ready may come before the start's reply is read */
		if (!h->placed_at)
			h->placed_at = (int64_t)time(NULL);
	}
	if ((k = slurm_known(s, node)))
		snprintf(data, sizeof(data), "%s", k->info.data);
	pthread_mutex_unlock(&s->lock);
	if (nodes_endpoint(data, endpoint, tcp, sizeof(tcp)) < 0) {
		log_error("node %s: runtime %lld of %s ready at %.80s, which the head cannot "
			  "reach", node, (long long)runtime_id, user, endpoint);
		return;
	}
	if (s->ev.ready)
		s->ev.ready(s->ev.ctx, user, runtime_id, tcp);
}

static void on_ended(void *ctx, const char *node, const char *user, int64_t runtime_id,
		     const char *cause, bool failed, const char *reason)
{
	struct slurm *s = ctx;

	(void)node;
	if (node_ended(s, false, runtime_id) && s->ev.ended)
		s->ev.ended(s->ev.ctx, user, runtime_id, cause, failed, reason);
}

/* A pool is ready when its sandbox is: on several hosts, when every host's is. */
static void on_pool_ready(void *ctx, const char *node, const char *user, int64_t pool_id)
{
	struct slurm *s = ctx;
	bool pass = true;

	pthread_mutex_lock(&s->lock);
	struct holder *h = slurm_find(s, true, pool_id);
	if (h && h->hosts) {
		int k = slurm_host_of(h, node);
		if (k >= 0)
			h->hosts[k].ready = true;
		for (int i = 0; i < h->instances; i++)
			pass = pass && h->hosts[i].ready;
		pass = pass && !h->ready; /* once */
	}
	if (h && pass) {
		h->ready = true;
		h->phase = H_ON_NODE;
	}
	pthread_mutex_unlock(&s->lock);
	if (pass && s->ev.pool_ready)
		s->ev.pool_ready(s->ev.ctx, user, pool_id);
}

/* On several hosts the first sandbox's end is the pool's: the poll thread stops the
 * others (finish_one), and theirs are not passed on. */
static void on_pool_ended(void *ctx, const char *node, const char *user, int64_t pool_id,
			  const char *cause, bool failed, const char *reason)
{
	struct slurm *s = ctx;

	pthread_mutex_lock(&s->lock);
	struct holder *h = slurm_find(s, true, pool_id);
	int k = h ? slurm_host_of(h, node) : -1;
	if (k >= 0)
		h->hosts[k].ended = true;
	pthread_mutex_unlock(&s->lock);
	if (node_ended(s, true, pool_id) && s->ev.pool_ended)
		s->ev.pool_ended(s->ev.ctx, user, pool_id, cause, failed, reason);
}

/* Whether a job's phase or sample from node is the job's: on several hosts only
 * algo-1's are (its metrics and phases stand for the job). */
static bool from_first_host(struct slurm *s, const char *node, int64_t pool_id)
{
	bool first = true;

	pthread_mutex_lock(&s->lock);
	struct holder *h = slurm_find(s, true, pool_id);
	if (h && h->hosts)
		first = !strcmp(h->hosts[0].node, node);
	pthread_mutex_unlock(&s->lock);
	return first;
}

static void on_job_phase(void *ctx, const char *node, const char *user, int64_t pool_id,
			 int64_t job_id, const char *phase, int64_t at_ms)
{
	struct slurm *s = ctx;

	if (from_first_host(s, node, pool_id) && s->ev.job_phase)
		s->ev.job_phase(s->ev.ctx, user, pool_id, job_id, phase, at_ms);
}

static void keep_exit(struct holder_exit *e, const struct backend_job_exit *x)
{
	snprintf(e->kind, sizeof(e->kind), "%s", x->kind ? x->kind : "exited");
	e->code = x->code;
	e->signal = x->signal;
	e->at_ms = x->at_ms;
	snprintf(e->reason, sizeof(e->reason), "%s", x->reason ? x->reason : "");
	snprintf(e->failure, sizeof(e->failure), "%s", x->failure ? x->failure : "");
	e->home_full = x->home_full;
}

/* One host's end of the job of a pool on several hosts (under the lock): what to pass
 * on into *out. The first failure at once (the others are stopped with the job's
 * grace); when every host exited 0, algo-1's exit. false: nothing (yet). */
static bool host_exited(struct holder *h, int k, const struct backend_job_exit *x,
			struct holder_exit *out)
{
	bool ok = x->kind && !strcmp(x->kind, "exited") && x->code == 0, all = true;

	h->hosts[k].exited = true;
	if (k == 0)
		keep_exit(&h->exit, x);
	if (h->exit_passed)
		return false;
	if (!ok) {
		keep_exit(out, x);
		h->exit_passed = h->stop_others = true;
		return true;
	}
	for (int i = 0; i < h->instances; i++)
		all = all && h->hosts[i].exited;
	if (!all) /* algo-1's among them: h->exit is kept */
		return false;
	*out = h->exit;
	h->exit_passed = true;
	return true;
}

/* A job's end: its log's last bytes are pulled from the node first, so the log is
 * whole when the web reads it as ended. */
static void on_job_exited(void *ctx, const char *node, const char *user, int64_t pool_id,
			  int64_t job_id, const struct backend_job_exit *x)
{
	struct slurm *s = ctx;
	char data[128] = "";
	struct holder_exit e;
	bool several = false, pass = true;
	int k = 0, n = 1;

	pthread_mutex_lock(&s->lock);
	struct holder *h = slurm_find(s, true, pool_id);
	slurm_node_data(s, node, data, sizeof(data));
	if (h && h->hosts) {
		several = true;
		n = h->instances;
		k = slurm_host_of(h, node);
		if (h->run_job == 0)
			h->run_job = job_id; /* adopted after a restart */
		pass = k >= 0 && h->run_job == job_id && !h->hosts[k].exited;
	} else if (h && h->run_job == job_id) {
		h->run_job = 0;
	}
	pthread_mutex_unlock(&s->lock);
	if (!pass) /* a host not of the pool's, or an end already counted */
		return;
	int rc = data[0] && s->logs ? slurmlogs_pull(s->logs, data, job_id, k + 1, n, true) : 0;
	if (rc < 0)
		log_warn("job %lld's log: its rest could not be taken from node %s: %s",
			 (long long)job_id, node, strerror(-rc));
	if (several) {
		pthread_mutex_lock(&s->lock);
		h = slurm_find(s, true, pool_id);
		pass = h && h->hosts && h->run_job == job_id && host_exited(h, k, x, &e);
		pthread_mutex_unlock(&s->lock);
		if (!pass)
			return;
		slurm_poke(s); /* the other hosts' jobs are stopped on the poll thread */
		struct backend_job_exit out = {.kind = e.kind, .code = e.code, .signal = e.signal,
					       .at_ms = e.at_ms, .reason = e.reason,
					       .failure = e.failure, .home_full = e.home_full};
		if (s->ev.job_exited)
			s->ev.job_exited(s->ev.ctx, user, pool_id, job_id, &out);
		return;
	}
	if (s->ev.job_exited)
		s->ev.job_exited(s->ev.ctx, user, pool_id, job_id, x);
}

static void on_job_sample(void *ctx, const char *node, const char *user, int64_t pool_id,
			  int64_t job_id, const struct backend_job_sample *sample)
{
	struct slurm *s = ctx;

	/* a job that runs since before a web restart: its log is pulled from now on */
	pthread_mutex_lock(&s->lock);
	struct holder *h = slurm_find(s, true, pool_id);
	if (h && !h->run_job)
		h->run_job = job_id;
	pthread_mutex_unlock(&s->lock);
	if (from_first_host(s, node, pool_id) && s->ev.job_sample)
		s->ev.job_sample(s->ev.ctx, user, pool_id, job_id, sample);
}

/* ---- starts and stops ---- */

/* A new holder for a start (under the lock). */
static struct holder *new_holder(struct slurm *s, bool pool, int64_t id, const char *user,
				 int64_t user_id, int64_t deadline_s, const struct box_shape *sh)
{
	struct holder *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->pool = pool;
	h->id = id;
	snprintf(h->user, sizeof(h->user), "%s", user);
	h->user_id = user_id;
	h->deadline_s = deadline_s;
	h->shape = *sh;
	snprintf(h->image, sizeof(h->image), "%s", sh->image ? sh->image : "");
	h->shape.image = NULL; /* h->image is the copy */
	h->have_request = true;
	h->phase = H_SUBMIT;
	h->next = s->holders;
	s->holders = h;
	return h;
}

static bool request_fits(const char *user, const struct box_shape *sh, char *err, size_t errlen)
{
	if (strlen(user) >= SLURM_USER_MAX || (sh->image && strlen(sh->image) >= SLURM_IMAGE_MAX)) {
		snprintf(err, errlen, "the user's name or image name is too long");
		return false;
	}
	return true;
}

static int slurm_start(struct backend *b, const struct backend_start *st, char *endpoint,
		       char *err, size_t errlen)
{
	struct slurm *s = (struct slurm *)b;
	struct holder *h;
	int rc = 0;

	endpoint[0] = '\0';
	if (st->image_hash)
		st->image_hash[0] = '\0';
	if (!request_fits(st->user, &st->shape, err, errlen) ||
	    strlen(st->token) >= SLURM_TOKEN_MAX || strlen(st->kind) >= sizeof(h->kind))
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	for (h = s->holders; h; h = h->next)
		if (!h->pool && !h->end_passed && !strcmp(h->user, st->user))
			break;
	if (h) {
		rc = -EEXIST;
	} else if (!(h = new_holder(s, false, st->runtime_id, st->user, st->user_id,
				    st->deadline_s, &st->shape))) {
		rc = -ENOMEM;
	} else {
		snprintf(h->kind, sizeof(h->kind), "%s", st->kind);
		snprintf(h->token, sizeof(h->token), "%s", st->token);
	}
	pthread_mutex_unlock(&s->lock);
	if (rc == 0)
		slurm_poke(s);
	else if (rc == -EEXIST)
		snprintf(err, errlen, "%s already has a runtime", st->user);
	return rc;
}

static int slurm_pool_start(struct backend *b, const struct backend_pool_start *ps, char *err,
			    size_t errlen)
{
	struct slurm *s = (struct slurm *)b;
	struct holder *h;
	int rc = 0;

	if (ps->image_hash)
		ps->image_hash[0] = '\0';
	if (!request_fits(ps->user, &ps->shape, err, errlen))
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	if (slurm_find(s, true, ps->pool_id))
		rc = -EEXIST;
	else if (!(h = new_holder(s, true, ps->pool_id, ps->user, ps->user_id, ps->deadline_s,
				  &ps->shape)))
		rc = -ENOMEM;
	else
		h->instances = ps->instances > 1 ? ps->instances : 1;
	pthread_mutex_unlock(&s->lock);
	if (rc == 0)
		slurm_poke(s);
	else
		snprintf(err, errlen, "pool %lld exists", (long long)ps->pool_id);
	return rc;
}

/* A sandbox that no holder accounts for: asks every node. */
static int stop_anywhere(struct slurm *s, bool pool, const char *user, int64_t id,
			 const char *reason)
{
	struct node *all[SLURM_NODES_MAX];
	size_t n = nodes_hold_all(s->nodes, all, SLURM_NODES_MAX);
	int rc = -ENOENT;

	for (size_t i = 0; i < n; i++) {
		struct backend *nb = nodes_backend(all[i]);
		if (rc != 0 && (pool ? backend_pool_stop(nb, user, id, reason)
				     : backend_stop(nb, user, id, reason)) == 0)
			rc = 0;
		nodes_release(all[i]);
	}
	return rc;
}

int slurm_holder_nodes(const struct holder *h, char names[][LINK_NAME_MAX + 1])
{
	int n = 0;

	if (!h->hosts) {
		if (h->node[0])
			snprintf(names[n++], LINK_NAME_MAX + 1, "%s", h->node);
		return n;
	}
	for (int k = 0; k < h->instances; k++)
		if (!h->hosts[k].ended)
			snprintf(names[n++], LINK_NAME_MAX + 1, "%s", h->hosts[k].node);
	return n;
}

bool slurm_hosts_running(const struct holder *h)
{
	for (int k = 0; h->hosts && k < h->instances; k++)
		if (!h->hosts[k].exited && !h->hosts[k].ended)
			return true;
	return false;
}

int slurm_stop_on(struct slurm *s, bool pool, const char *user, int64_t id,
		  char names[][LINK_NAME_MAX + 1], int n, const char *reason)
{
	int lost = 0;

	for (int i = 0; i < n; i++) {
		struct node *nd = nodes_hold(s->nodes, names[i], NULL);
		if (!nd)
			continue;
		int rc = pool ? backend_pool_stop(nodes_backend(nd), user, id, reason)
			      : backend_stop(nodes_backend(nd), user, id, reason);
		nodes_release(nd);
		lost += rc == -ENOENT;
	}
	return lost;
}

/* Under the lock: whether a pool stop waits. After one host of a job on several
 * failed, the others' commands are being stopped with the job's grace; a pool stop
 * (the web lets the pool go once the job is over) would end them without it, so the
 * poll thread stops the pool once they ended or the grace passed (finish_one). */
static bool grace_first(struct holder *h)
{
	if (!h->pool || !h->hosts || !h->exit_passed || !slurm_hosts_running(h))
		return false;
	if (!h->stop_wait_until_ms)
		h->stop_wait_until_ms = clock_ms() + (h->run_grace_s + 5) * 1000;
	return true;
}

static int stop_holder(struct slurm *s, bool pool, const char *user, int64_t id,
		       const char *reason)
{
	struct holder *h;
	char nodes[JOBHOSTS_MAX][LINK_NAME_MAX + 1];
	int64_t found_id = id;
	int n_nodes = 0, lost = 0;

	pthread_mutex_lock(&s->lock);
	for (h = s->holders; h; h = h->next)
		if (h->pool == pool && !strcmp(h->user, user) && (id == 0 || h->id == id))
			break;
	if (h) {
		h->stop_asked = true;
		snprintf(h->stop_reason, sizeof(h->stop_reason), "%s", reason);
		if (h->phase == H_ON_NODE && !grace_first(h))
			n_nodes = slurm_holder_nodes(h, nodes);
		found_id = h->id;
	}
	pthread_mutex_unlock(&s->lock);
	if (!h)
		return stop_anywhere(s, pool, user, id, reason);
	lost = slurm_stop_on(s, pool, user, found_id, nodes, n_nodes, reason);
	if (n_nodes > 0 && lost == n_nodes) {
		pthread_mutex_lock(&s->lock);
		if ((h = slurm_find(s, pool, found_id)))
			h->node_lost = true;
		pthread_mutex_unlock(&s->lock);
	}
	slurm_poke(s);
	return 0;
}

static int slurm_stop(struct backend *b, const char *user, int64_t runtime_id,
		      const char *reason)
{
	return stop_holder((struct slurm *)b, false, user, runtime_id, reason);
}

static int slurm_pool_stop(struct backend *b, const char *user, int64_t pool_id,
			   const char *reason)
{
	return stop_holder((struct slurm *)b, true, user, pool_id, reason);
}

/* ---- the list: the nodes' sandboxes and the holders not (yet, or no more) seen ---- */

static bool listed(const struct backend_sandbox *l, size_t n, bool pool, int64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (pool ? l[i].pool_id == id : (l[i].pool_id == 0 && l[i].runtime_id == id))
			return true;
	return false;
}

/* Appends one node's list to *out. */
static int append_node(struct node *nd, struct backend_sandbox **out, size_t *n, size_t *cap)
{
	struct backend_sandbox *l = NULL;
	size_t k = 0;
	int rc = backend_list(nodes_backend(nd), &l, &k);

	if (rc == 0 && *n + k > *cap) {
		size_t want = (*n + k) * 2 + 16;
		struct backend_sandbox *more = realloc(*out, want * sizeof(*more));
		if (!more)
			rc = -ENOMEM;
		else
			*out = more, *cap = want;
	}
	if (rc == 0 && k > 0) {
		memcpy(*out + *n, l, k * sizeof(*l));
		*n += k;
	}
	free(l);
	return rc;
}

/* A holder no node lists: starting while Slurm holds it queued or the node has not
 * taken it, as it was while its node's link is down (unknown, not gone). */
static void holder_entry(const struct holder *h, struct backend_sandbox *e)
{
	memset(e, 0, sizeof(*e));
	snprintf(e->user, sizeof(e->user), "%s", h->user);
	if (h->pool)
		e->pool_id = h->id;
	else
		e->runtime_id = h->id;
	e->ready = h->ready;
	snprintf(e->state, sizeof(e->state), "%s",
		 h->phase == H_ON_NODE && h->ready ? "running" : "starting");
}

/* A pool on several hosts is one sandbox to the web: algo-1's stands for it (the
 * others' ends show as the pool's through on_pool_ended). Drops from l[0..n) the
 * entries of such pools that node is not algo-1 of; how many are left. */
static size_t only_first_hosts(struct slurm *s, const char *node, struct backend_sandbox *l,
			       size_t n)
{
	size_t kept = 0;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		struct holder *h = l[i].pool_id ? slurm_find(s, true, l[i].pool_id) : NULL;
		if (h && h->hosts && strcmp(h->hosts[0].node, node))
			continue;
		l[kept++] = l[i];
	}
	pthread_mutex_unlock(&s->lock);
	return kept;
}

static int slurm_list(struct backend *b, struct backend_sandbox **out, size_t *n)
{
	struct slurm *s = (struct slurm *)b;
	struct node *all[SLURM_NODES_MAX];
	size_t k, cap = 0;
	char up[SLURM_NODES_MAX][LINK_NAME_MAX + 1];
	size_t n_up = 0;

	*out = NULL;
	*n = 0;
	pthread_mutex_lock(&s->lock);
	bool seen = s->queue_seen;
	pthread_mutex_unlock(&s->lock);
	if (!seen) /* what ran before a restart is adopted with the first answer */
		return -EAGAIN;
	k = nodes_hold_all(s->nodes, all, SLURM_NODES_MAX);
	for (size_t i = 0; i < k; i++) {
		size_t before = *n;
		/* a node that does not answer is as one whose link is down */
		if (append_node(all[i], out, n, &cap) == 0)
			snprintf(up[n_up++], sizeof(up[0]), "%s", nodes_name(all[i]));
		*n = before + only_first_hosts(s, nodes_name(all[i]), *out + before, *n - before);
		nodes_release(all[i]);
	}
	pthread_mutex_lock(&s->lock);
	for (struct holder *h = s->holders; h; h = h->next) {
		bool node_answered = false;
		if (h->end_passed || listed(*out, *n, h->pool, h->id))
			continue;
		for (size_t i = 0; i < n_up && h->phase == H_ON_NODE; i++)
			node_answered = node_answered || !strcmp(up[i], h->node);
		if (node_answered && !h->node_lost)
			continue; /* its node answered without it: gone there */
		if (*n == cap) {
			cap = cap * 2 + 16;
			struct backend_sandbox *more = realloc(*out, cap * sizeof(*more));
			if (!more)
				break;
			*out = more;
		}
		holder_entry(h, &(*out)[(*n)++]);
	}
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* ---- jobs in a pool: to the node holding it, or to each of its hosts ---- */

/* The nodes of a started pool into names (algo-1 first), its job now set to job_id
 * (0: left as it is) with grace_s. How many; 0 when it runs on no node. */
static int pool_nodes(struct slurm *s, int64_t pool_id, int64_t job_id, int64_t grace_s,
		      char names[][LINK_NAME_MAX + 1], char (*addr0)[SLURMADDRS_TEXT_MAX])
{
	int n = 0;

	pthread_mutex_lock(&s->lock);
	struct holder *h = slurm_find(s, true, pool_id);
	if (h && h->phase == H_ON_NODE && h->hosts) {
		for (n = 0; n < h->instances; n++)
			snprintf(names[n], LINK_NAME_MAX + 1, "%s", h->hosts[n].node);
		snprintf(*addr0, SLURMADDRS_TEXT_MAX, "%s", h->hosts[0].addr);
	} else if (h && h->phase == H_ON_NODE) {
		snprintf(names[n++], LINK_NAME_MAX + 1, "%s", h->node);
	}
	if (n && job_id) {
		h->run_job = job_id;
		h->run_grace_s = grace_s;
		h->exit_passed = h->stop_others = false;
		for (int k = 0; h->hosts && k < h->instances; k++)
			h->hosts[k].exited = false;
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* The job's grace_s from its spec (the supervisor's default when absent). */
static int64_t spec_grace(const char *spec_json)
{
	json_t *root = json_loads(spec_json, 0, NULL);
	json_t *g = json_object_get(root, "grace_s");
	int64_t grace = json_is_integer(g) ? (int64_t)json_integer_value(g) : 30;

	json_decref(root);
	return grace;
}

/* job_run to one node: host k (0-based) of n, or the spec as it is for one host. */
static int run_on(struct slurm *s, const char *node, const char *user, int64_t pool_id,
		  int64_t job_id, const char *spec_json, int k, int n, const char *addr0,
		  char *err, size_t errlen)
{
	struct node *nd = nodes_hold(s->nodes, node, NULL);
	char *spec = NULL;
	int rc;

	if (!nd) {
		snprintf(err, errlen, "pool %lld: node %s is not connected", (long long)pool_id,
			 node);
		return -ENOENT;
	}
	rc = n > 1 ? slurmhosts_spec(spec_json, k + 1, n, addr0, SLURM_MASTER_PORT, &spec) : 0;
	if (rc < 0)
		snprintf(err, errlen, "the job spec is not a JSON object");
	else
		rc = backend_job_run(nodes_backend(nd), user, pool_id, job_id,
				     spec ? spec : spec_json, err, errlen);
	free(spec);
	nodes_release(nd);
	return rc;
}

static int slurm_job_run(struct backend *b, const char *user, int64_t pool_id, int64_t job_id,
			 const char *spec_json, char *err, size_t errlen)
{
	struct slurm *s = (struct slurm *)b;
	char names[JOBHOSTS_MAX][LINK_NAME_MAX + 1], addr0[SLURMADDRS_TEXT_MAX] = "";
	int n = pool_nodes(s, pool_id, job_id, spec_grace(spec_json), names, &addr0), k, rc = 0;

	if (n == 0) {
		snprintf(err, errlen, "pool %lld runs on no connected node", (long long)pool_id);
		return -ENOENT;
	}
	for (k = 0; k < n && rc == 0; k++)
		rc = run_on(s, names[k], user, pool_id, job_id, spec_json, k, n, addr0, err,
			    errlen);
	if (rc == 0)
		return 0;
	/* not taken everywhere: not run at all (the hosts that took it are stopped, and
	 * their ends are not the job's) */
	pthread_mutex_lock(&s->lock);
	struct holder *h = slurm_find(s, true, pool_id);
	if (h && h->run_job == job_id)
		h->run_job = 0;
	pthread_mutex_unlock(&s->lock);
	for (int i = 0; i < k - 1; i++) {
		struct node *nd = nodes_hold(s->nodes, names[i], NULL);
		if (nd) {
			backend_job_stop(nodes_backend(nd), user, pool_id, job_id, 0);
			nodes_release(nd);
		}
	}
	return rc;
}

static int slurm_job_stop(struct backend *b, const char *user, int64_t pool_id, int64_t job_id,
			  int64_t grace_s)
{
	struct slurm *s = (struct slurm *)b;
	char names[JOBHOSTS_MAX][LINK_NAME_MAX + 1], addr0[SLURMADDRS_TEXT_MAX];
	int n = pool_nodes(s, pool_id, 0, 0, names, &addr0), rc = -ENOENT;

	for (int k = 0; k < n; k++) {
		struct node *nd = nodes_hold(s->nodes, names[k], NULL);
		int r = nd ? backend_job_stop(nodes_backend(nd), user, pool_id, job_id, grace_s)
			   : -ENOENT;
		if (nd)
			nodes_release(nd);
		if (r == 0 || rc == -ENOENT)
			rc = r;
	}
	return rc;
}

/* Every node removes what it has of these logs; a node whose link is down is asked
 * again with the next sweep (the caller repeats what did not return 0). */
static int slurm_job_logs_remove(struct backend *b, const int64_t *job_ids, size_t n)
{
	struct slurm *s = (struct slurm *)b;
	struct node *all[SLURM_NODES_MAX];
	size_t k = nodes_hold_all(s->nodes, all, SLURM_NODES_MAX);
	int rc = 0;

	for (size_t i = 0; i < n; i++) /* the head's copies */
		slurmlogs_forget(s->logs, job_ids[i]);
	for (size_t i = 0; i < k; i++) {
		int r = backend_job_logs_remove(nodes_backend(all[i]), job_ids, n);
		if (r < 0)
			rc = r;
		nodes_release(all[i]);
	}
	return rc;
}

/* ---- homes: image files on storage every node shares ---- */

/* The node that holds the user's runtime, else any connected node (each sees the
 * shared homes folder); held, or NULL when none is connected. */
static struct node *home_node(struct slurm *s, const char *user)
{
	char node[LINK_NAME_MAX + 1] = "";
	struct node *all[SLURM_NODES_MAX], *nd = NULL;
	size_t k;

	pthread_mutex_lock(&s->lock);
	for (struct holder *h = s->holders; h; h = h->next)
		if (!h->pool && h->phase == H_ON_NODE && !strcmp(h->user, user))
			snprintf(node, sizeof(node), "%s", h->node);
	pthread_mutex_unlock(&s->lock);
	if (node[0] && (nd = nodes_hold(s->nodes, node, NULL)))
		return nd;
	k = nodes_hold_all(s->nodes, all, SLURM_NODES_MAX);
	for (size_t i = 0; i < k; i++) {
		if (!nd)
			nd = all[i];
		else
			nodes_release(all[i]);
	}
	return nd;
}

static int slurm_home_usage(struct backend *b, const char *user, int64_t user_id,
			    struct backend_home *out)
{
	struct node *nd = home_node((struct slurm *)b, user);
	int rc;

	if (!nd)
		return -ENOTCONN;
	rc = backend_home_usage(nodes_backend(nd), user, user_id, out);
	nodes_release(nd);
	return rc;
}

static int slurm_home_resize(struct backend *b, const char *user, int64_t user_id,
			     int64_t size_bytes, enum backend_home_applied *applied)
{
	struct node *nd = home_node((struct slurm *)b, user);
	int rc;

	if (!nd)
		return -ENOTCONN;
	rc = backend_home_resize(nodes_backend(nd), user, user_id, size_bytes, applied);
	nodes_release(nd);
	return rc;
}

/* Through the node's data port (slurmshell.h): the fd is a TCP connection. */
static int slurm_job_shell(struct backend *b, const struct backend_shell *sh, int *fd,
			   char *err, size_t errlen)
{
	return slurm_shell_open((struct slurm *)b, sh, fd, err, errlen);
}

static int slurm_user_deleted(struct backend *b, const char *user, int64_t user_id)
{
	struct slurm *s = (struct slurm *)b;
	struct node *all[SLURM_NODES_MAX];
	size_t k = nodes_hold_all(s->nodes, all, SLURM_NODES_MAX);
	int rc = 0;

	slurm_stop(b, user, 0, "the user was deleted");
	for (size_t i = 0; i < k; i++) {
		int r = backend_user_deleted(nodes_backend(all[i]), user, user_id);
		if (r < 0)
			rc = r;
		nodes_release(all[i]);
	}
	return rc;
}

/* The head answers for itself: Slurm's controller being away is "unknown" per job,
 * not a backend that is gone. */
static int slurm_ping(struct backend *b)
{
	(void)b;
	return 0;
}

static void slurm_free(struct backend *b)
{
	struct slurm *s = (struct slurm *)b;

	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->poller, NULL);
	nodes_free(s->nodes); /* its events end before the holders go */
	while (s->holders) {
		struct holder *h = s->holders;
		s->holders = h->next;
		free(h->hosts);
		free(h);
	}
	slurmlogs_free(s->logs);
	pthread_cond_destroy(&s->wake);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static const struct backend_ops slurm_ops = {
	.start = slurm_start,
	.stop = slurm_stop,
	.list = slurm_list,
	.ping = slurm_ping,
	.free = slurm_free,
	.user_deleted = slurm_user_deleted,
	.home_usage = slurm_home_usage,
	.home_resize = slurm_home_resize,
	.pool_start = slurm_pool_start,
	.pool_stop = slurm_pool_stop,
	.job_run = slurm_job_run,
	.job_stop = slurm_job_stop,
	.job_logs_remove = slurm_job_logs_remove,
	.job_shell = slurm_job_shell,
	.job_shell_resize = slurm_job_shell_resize,
};

int backend_slurm_queue(struct backend *b, int64_t runtime_id, char *text, size_t textlen,
			int64_t *estimate_at)
{
	struct slurm *s = (struct slurm *)b;
	int rc = -ENOENT;

	*estimate_at = 0;
	if (!b || b->ops != &slurm_ops)
		return -ENOENT;
	pthread_mutex_lock(&s->lock);
	struct holder *h = slurm_find(s, false, runtime_id);
	if (h && h->phase != H_ON_NODE && !h->end_passed) {
		if (slurmcli_phase(h->sstate) == SLURM_PHASE_PENDING) {
			slurmcli_pending_text(h->sreason, text, textlen);
			*estimate_at = h->start_at;
		} else {
			snprintf(text, textlen, "%s", h->job_id ? "starting on its Slurm node"
							       : "being submitted to Slurm");
		}
		rc = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int backend_slurm_placed_at(struct backend *b, int64_t runtime_id, int64_t *at)
{
	struct slurm *s = (struct slurm *)b;
	int rc = -ENOENT;

	*at = 0;
	if (!b || b->ops != &slurm_ops)
		return -ENOENT;
	pthread_mutex_lock(&s->lock);
	struct holder *h = slurm_find(s, false, runtime_id);
	if (h && !h->end_passed) {
		*at = h->placed_at;
		rc = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static void init_wake(pthread_cond_t *c)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
}

struct backend *backend_slurm_new(const struct labd_config *cfg, const struct backend_events *ev)
{
	struct slurm *s = calloc(1, sizeof(*s));
	struct link_secret secret;
	struct nodes_hooks hooks = {
		.up = on_up, .down = on_down, .ready = on_ready, .ended = on_ended,
		.pool_ready = on_pool_ready, .pool_ended = on_pool_ended,
		.job_phase = on_job_phase, .job_exited = on_job_exited, .job_sample = on_job_sample,
	};

	if (!s)
		return NULL;
	s->base.ops = &slurm_ops;
	s->cfg = cfg;
	s->ev = *ev;
	s->tools = (struct slurm_tools){cfg->slurm_sbatch, cfg->slurm_squeue, cfg->slurm_scontrol,
					cfg->slurm_scancel, (int)(cfg->slurm_timeout_s * 1000)};
	if (slurmaddrs_init(&s->addrs, cfg->slurm_job_addresses) < 0)
		log_error("[slurm] job_addresses %s is not a network: no job runs on several nodes",
			  cfg->slurm_job_addresses);
	pthread_mutex_init(&s->lock, NULL);
	init_wake(&s->wake);
	s->poked = true; /* the first pass at once: jobs of a previous process are adopted */
	hooks.web = &s->ev;
	hooks.ctx = s;
	link_secret_set(&secret, cfg->link_secret, cfg->link_secret_len); /* root read it (main.c) */
	s->logs = slurmlogs_new(cfg->state_dir, &secret);
	s->nodes = secret.len >= LINK_SECRET_MIN ? nodes_new(cfg->slurm_listen, &secret, &hooks)
						 : NULL;
	link_secret_clear(&secret);
	if (!s->nodes || !s->logs || pthread_create(&s->poller, NULL, slurm_poll_loop, s) != 0) {
		if (!s->nodes)
			log_error("the Slurm backend cannot listen for nodes (%s; a secret of %zu "
				  "bytes)", cfg->slurm_listen, cfg->link_secret_len);
		nodes_free(s->nodes);
		slurmlogs_free(s->logs);
		pthread_cond_destroy(&s->wake);
		pthread_mutex_destroy(&s->lock);
		free(s);
		return NULL;
	}
	/* the list answers (ev.connected) once the first squeue adopted what runs */
	log_info("the Slurm backend is up: squeue every %lld ms",
		 (long long)cfg->slurm_poll_interval_ms);
	return &s->base;
}
