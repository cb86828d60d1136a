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

#include "backend/slurmint.h"
#include "backend/slurmshell.h"
#include "labd/log.h"

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

static void on_pool_ready(void *ctx, const char *node, const char *user, int64_t pool_id)
{
	struct slurm *s = ctx;

	(void)node;
	pthread_mutex_lock(&s->lock);
	struct holder *h = slurm_find(s, true, pool_id);
	if (h) {
		h->ready = true;
		h->phase = H_ON_NODE;
	}
	pthread_mutex_unlock(&s->lock);
	if (s->ev.pool_ready)
		s->ev.pool_ready(s->ev.ctx, user, pool_id);
}

static void on_pool_ended(void *ctx, const char *node, const char *user, int64_t pool_id,
			  const char *cause, bool failed, const char *reason)
{
	struct slurm *s = ctx;

	(void)node;
	if (node_ended(s, true, pool_id) && s->ev.pool_ended)
		s->ev.pool_ended(s->ev.ctx, user, pool_id, cause, failed, reason);
}

static void set_running_job(struct slurm *s, int64_t pool_id, int64_t was, int64_t job_id);

/* A job's events: passed on as they are (one host per job). */
static void on_job_phase(void *ctx, const char *node, const char *user, int64_t pool_id,
			 int64_t job_id, const char *phase, int64_t at_ms)
{
	struct slurm *s = ctx;

	(void)node;
	if (s->ev.job_phase)
		s->ev.job_phase(s->ev.ctx, user, pool_id, job_id, phase, at_ms);
}

/* The job's log is whole on the head before the web marks the job ended. */
static void on_job_exited(void *ctx, const char *node, const char *user, int64_t pool_id,
			  int64_t job_id, const struct backend_job_exit *x)
{
	struct slurm *s = ctx;

	slurm_pull_log(s, node, pool_id, job_id, true);
	if (s->ev.job_exited)
		s->ev.job_exited(s->ev.ctx, user, pool_id, job_id, x);
}

static void on_job_sample(void *ctx, const char *node, const char *user, int64_t pool_id,
			  int64_t job_id, const struct backend_job_sample *sample)
{
	struct slurm *s = ctx;

	(void)node;
	/* a job that runs since before a web restart: its log is pulled from now on */
	set_running_job(s, pool_id, 0, job_id);
	if (s->ev.job_sample)
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

static int stop_holder(struct slurm *s, bool pool, const char *user, int64_t id,
		       const char *reason)
{
	struct holder *h;
	char node[LINK_NAME_MAX + 1] = "";
	int64_t found_id = id;
	bool on_node = false;

	pthread_mutex_lock(&s->lock);
	for (h = s->holders; h; h = h->next)
		if (h->pool == pool && !strcmp(h->user, user) && (id == 0 || h->id == id))
			break;
	if (h) {
		h->stop_asked = true;
		snprintf(h->stop_reason, sizeof(h->stop_reason), "%s", reason);
		on_node = h->phase == H_ON_NODE;
		snprintf(node, sizeof(node), "%s", h->node);
		found_id = h->id;
	}
	pthread_mutex_unlock(&s->lock);
	if (!h)
		return stop_anywhere(s, pool, user, id, reason);
	if (on_node) {
		struct node *nd = nodes_hold(s->nodes, node, NULL);
		int rc = -ENOTCONN;
		if (nd) {
			rc = pool ? backend_pool_stop(nodes_backend(nd), user, found_id, reason)
				  : backend_stop(nodes_backend(nd), user, found_id, reason);
			nodes_release(nd);
		}
		if (rc == -ENOENT) {
			pthread_mutex_lock(&s->lock);
			if ((h = slurm_find(s, pool, found_id)))
				h->node_lost = true;
			pthread_mutex_unlock(&s->lock);
		}
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
		/* a node that does not answer is as one whose link is down */
		if (append_node(all[i], out, n, &cap) == 0)
			snprintf(up[n_up++], sizeof(up[0]), "%s", nodes_name(all[i]));
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

/* ---- jobs in a pool: to the node holding it ---- */

static struct node *pool_node(struct slurm *s, int64_t pool_id)
{
	char node[LINK_NAME_MAX + 1] = "";

	pthread_mutex_lock(&s->lock);
	struct holder *h = slurm_find(s, true, pool_id);
	if (h && h->phase == H_ON_NODE)
		snprintf(node, sizeof(node), "%s", h->node);
	pthread_mutex_unlock(&s->lock);
	return node[0] ? nodes_hold(s->nodes, node, NULL) : NULL;
}

/* The pool's running job becomes job_id when it was was (0: whatever it was). */
static void set_running_job(struct slurm *s, int64_t pool_id, int64_t was, int64_t job_id)
{
	pthread_mutex_lock(&s->lock);
	struct holder *h = slurm_find(s, true, pool_id);
	if (h && (was == 0 || h->running_job == was))
		h->running_job = job_id;
	pthread_mutex_unlock(&s->lock);
}

void slurm_pull_log(struct slurm *s, const char *node, int64_t pool_id, int64_t job_id,
		    bool final)
{
	char data[sizeof(((struct node_info *)0)->data)] = "";

	pthread_mutex_lock(&s->lock);
	struct known_node *k = slurm_known(s, node);
	if (k && k->up) /* a node whose link is down would cost each pass the connect's wait */
		snprintf(data, sizeof(data), "%s", k->info.data);
	pthread_mutex_unlock(&s->lock);
	int rc = data[0] ? slurmlogs_pull(s->logs, data, job_id, 1, 1, final) : 0;
	if (rc < 0 && final)
		log_warn("job %lld's log: its rest could not be taken from node %s: %s",
			 (long long)job_id, node, strerror(-rc));
	if (final)
		set_running_job(s, pool_id, job_id, 0);
}

static int slurm_job_run(struct backend *b, const char *user, int64_t pool_id, int64_t job_id,
			 const char *spec_json, char *err, size_t errlen)
{
	struct node *nd = pool_node((struct slurm *)b, pool_id);
	int rc;

	if (!nd) {
		snprintf(err, errlen, "pool %lld runs on no connected node", (long long)pool_id);
		return -ENOENT;
	}
	/* before the run: its exit may come before the call returns */
	set_running_job((struct slurm *)b, pool_id, 0, job_id);
	rc = backend_job_run(nodes_backend(nd), user, pool_id, job_id, spec_json, err, errlen);
	nodes_release(nd);
	if (rc < 0)
		set_running_job((struct slurm *)b, pool_id, job_id, 0);
	return rc;
}

static int slurm_job_stop(struct backend *b, const char *user, int64_t pool_id, int64_t job_id,
			  int64_t grace_s)
{
	struct node *nd = pool_node((struct slurm *)b, pool_id);
	int rc;

	if (!nd)
		return -ENOENT;
	rc = backend_job_stop(nodes_backend(nd), user, pool_id, job_id, grace_s);
	nodes_release(nd);
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
	slurmlogs_free(s->logs);
	while (s->holders) {
		struct holder *h = s->holders;
		s->holders = h->next;
		free(h);
	}
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
	struct link_secret secret = {.len = cfg->link_secret_len};
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
	pthread_mutex_init(&s->lock, NULL);
	init_wake(&s->wake);
	s->poked = true; /* the first pass at once: jobs of a previous process are adopted */
	hooks.web = &s->ev;
	hooks.ctx = s;
	/* root read it before the fork (main.c) */
	if (secret.len > sizeof(secret.bytes))
		secret.len = 0;
	memcpy(secret.bytes, cfg->link_secret, secret.len);
	s->logs = slurmlogs_new(cfg->state_dir, &secret);
	s->nodes = secret.len >= LINK_SECRET_MIN ? nodes_new(cfg->slurm_listen, &secret, &hooks)
						 : NULL;
	link_secret_clear(&secret);
	if (!s->logs || !s->nodes || pthread_create(&s->poller, NULL, slurm_poll_loop, s) != 0) {
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
