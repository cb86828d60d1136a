/* nodes.c - the head's side of the node links; see nodes.h.
 *
 * Threads: one accepts; each accepted connection gets a thread of its own that
 * handshakes (link_accept), says hello to the node's supervisor through a local
 * backend over a socketpair, and then relays (link_relay) until the link ends. A
 * node is reference-counted: the table holds one reference, its relay thread one,
 * and every caller of nodes_hold one; the last release frees its local backend (which
 * joins that backend's reader) and its connection. */
#include "backend/nodes.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config/config.h"
#include "labd/log.h"

#define NODES_MAX 256

struct node {
	struct nodes *owner;
	struct node_info info;
	struct backend *backend;
	struct link_conn *conn;
	int seq_fd;      /* the relay's end of the socketpair */
	int refs;        /* under owner->lock */
	bool in_table;
};

struct nodes {
	struct nodes_hooks hooks;
	struct link_ctx *ctx;
	int listen_fd, stop_fd;
	pthread_t acceptor;
	pthread_mutex_t lock;
	pthread_cond_t idle;
	struct node *table[NODES_MAX];
	unsigned links; /* connection threads still running */
};

/* ---- the events of a node's local backend, with its name added ---- */

static void ev_ready(void *ctx, const char *user, int64_t runtime_id, const char *endpoint)
{
	struct node *nd = ctx;
	const struct nodes_hooks *h = &nd->owner->hooks;

	if (h->ready)
		h->ready(h->ctx, nd->info.name, user, runtime_id, endpoint);
}

static void ev_ended(void *ctx, const char *user, int64_t runtime_id, const char *cause,
		     bool failed, const char *reason)
{
	struct node *nd = ctx;
	const struct nodes_hooks *h = &nd->owner->hooks;

	if (h->ended)
		h->ended(h->ctx, nd->info.name, user, runtime_id, cause, failed, reason);
}

static void ev_pool_ready(void *ctx, const char *user, int64_t pool_id)
{
	struct node *nd = ctx;
	const struct nodes_hooks *h = &nd->owner->hooks;

	if (h->pool_ready)
		h->pool_ready(h->ctx, nd->info.name, user, pool_id);
}

static void ev_pool_ended(void *ctx, const char *user, int64_t pool_id, const char *cause,
			  bool failed, const char *reason)
{
	struct node *nd = ctx;
	const struct nodes_hooks *h = &nd->owner->hooks;

	if (h->pool_ended)
		h->pool_ended(h->ctx, nd->info.name, user, pool_id, cause, failed, reason);
}

static void ev_warning(void *ctx, const char *user, int64_t runtime_id, int64_t seconds_left)
{
	const struct backend_events *w = ((struct node *)ctx)->owner->hooks.web;

	if (w->warning)
		w->warning(w->ctx, user, runtime_id, seconds_left);
}

static void ev_job_phase(void *ctx, const char *user, int64_t pool_id, int64_t job_id,
			 const char *phase, int64_t at_ms)
{
	struct node *nd = ctx;
	const struct nodes_hooks *h = &nd->owner->hooks;

	if (h->job_phase)
		h->job_phase(h->ctx, nd->info.name, user, pool_id, job_id, phase, at_ms);
}

static void ev_job_exited(void *ctx, const char *user, int64_t pool_id, int64_t job_id,
			  const struct backend_job_exit *x)
{
	struct node *nd = ctx;
	const struct nodes_hooks *h = &nd->owner->hooks;

	if (h->job_exited)
		h->job_exited(h->ctx, nd->info.name, user, pool_id, job_id, x);
}

static void ev_job_sample(void *ctx, const char *user, int64_t pool_id, int64_t job_id,
			  const struct backend_job_sample *s)
{
	struct node *nd = ctx;
	const struct nodes_hooks *h = &nd->owner->hooks;

	if (h->job_sample)
		h->job_sample(h->ctx, nd->info.name, user, pool_id, job_id, s);
}

/* ---- the table ---- */

static void node_free(struct node *nd)
{
	backend_free(nd->backend); /* closes its end; its reader is joined */
	if (nd->seq_fd >= 0)
		close(nd->seq_fd);
	link_conn_free(nd->conn);
	free(nd);
}

/* Lets go of k references at once; the last frees nd. */
static void release_refs(struct node *nd, int k)
{
	struct nodes *n = nd->owner;
	bool last;

	pthread_mutex_lock(&n->lock);
	nd->refs -= k;
	last = nd->refs == 0;
	pthread_mutex_unlock(&n->lock);
	if (last)
		node_free(nd);
}

void nodes_release(struct node *nd)
{
	if (nd)
		release_refs(nd, 1);
}

/* Takes nd out of the table if it is there (the lock held); the table's reference
 * is the caller's to release. */
static bool unlist(struct nodes *n, struct node *nd)
{
	for (size_t i = 0; i < NODES_MAX; i++)
		if (n->table[i] == nd) {
			n->table[i] = NULL;
			nd->in_table = false;
			return true;
		}
	return false;
}

/* Puts nd in the table, in the place of a link of the same name (whose relay is told
 * to end: its socketpair end shut). -ENOSPC when full. */
static int enlist(struct nodes *n, struct node *nd)
{
	struct node *old = NULL;
	size_t free_at = NODES_MAX;
	int rc = 0;

	pthread_mutex_lock(&n->lock);
	for (size_t i = 0; i < NODES_MAX; i++) {
		if (n->table[i] && !strcmp(n->table[i]->info.name, nd->info.name)) {
			old = n->table[i];
			n->table[i] = NULL;
			old->in_table = false;
			free_at = i;
		} else if (!n->table[i] && free_at == NODES_MAX) {
			free_at = i;
		}
	}
	if (free_at == NODES_MAX) {
		rc = -ENOSPC;
	} else {
		n->table[free_at] = nd;
		nd->in_table = true;
		nd->refs++;
	}
	if (old)
		shutdown(old->seq_fd, SHUT_RDWR); /* its relay returns, then it goes */
	pthread_mutex_unlock(&n->lock);
	if (old) {
		log_info("node %s connected again: its old link is replaced", nd->info.name);
		nodes_release(old); /* the table's reference */
	}
	return rc;
}

struct node *nodes_hold(struct nodes *n, const char *name, struct node_info *info)
{
	struct node *found = NULL;

	pthread_mutex_lock(&n->lock);
	for (size_t i = 0; i < NODES_MAX && !found; i++)
		if (n->table[i] && !strcmp(n->table[i]->info.name, name))
			found = n->table[i];
	if (found) {
		found->refs++;
		if (info)
			*info = found->info;
	}
	pthread_mutex_unlock(&n->lock);
	return found;
}

size_t nodes_hold_all(struct nodes *n, struct node **out, size_t max)
{
	size_t k = 0;

	pthread_mutex_lock(&n->lock);
	for (size_t i = 0; i < NODES_MAX && k < max; i++)
		if (n->table[i]) {
			n->table[i]->refs++;
			out[k++] = n->table[i];
		}
	pthread_mutex_unlock(&n->lock);
	return k;
}

struct backend *nodes_backend(struct node *nd)
{
	return nd->backend;
}

const char *nodes_name(const struct node *nd)
{
	return nd->info.name;
}

/* ---- one link ---- */

static void read_hello(json_t *hello, struct node_info *info)
{
	json_t *g;
	size_t i;

	memset(info, 0, sizeof(*info));
	snprintf(info->name, sizeof(info->name), "%s",
		 json_string_value(json_object_get(hello, "name")));
	snprintf(info->data, sizeof(info->data), "%s",
		 json_string_value(json_object_get(hello, "data")));
	json_array_foreach(json_object_get(hello, "gpus"), i, g) {
		if (info->n_gpus < NODES_GPUS_MAX)
			info->gpus[info->n_gpus++] = (unsigned)json_integer_value(g);
	}
	info->cpus = json_integer_value(json_object_get(hello, "cpus"));
	info->memory_bytes = json_integer_value(json_object_get(hello, "memory_bytes"));
}

struct relay_arg {
	struct nodes *n;
	struct node *nd;
};

static void *relay_thread(void *arg)
{
	struct relay_arg *ra = arg;
	struct nodes *n = ra->n;
	struct node *nd = ra->nd;
	int rc = link_relay(nd->conn, nd->seq_fd, n->stop_fd, NULL);

	free(ra);
	if (rc < 0)
		log_warn("the link of node %s ended: %s", nd->info.name, strerror(-rc));
	else
		log_info("the link of node %s ended", nd->info.name);
	/* the local backend's reader sees EOF: its calls fail from now on */
	shutdown(nd->seq_fd, SHUT_RDWR);
	return NULL;
}

/* Hands an accepted, handshaken link its local backend. The relay runs first: the
 * hello of backend_local_new crosses it. 0, or a negative errno (nd freed). */
static int bring_up(struct nodes *n, struct node *nd, pthread_t *relay)
{
	struct backend_events ev = {
		.ready = ev_ready, .ended = ev_ended, .warning = ev_warning,
		.pool_ready = ev_pool_ready, .pool_ended = ev_pool_ended,
		.job_phase = ev_job_phase, .job_exited = ev_job_exited,
		.job_sample = ev_job_sample, .ctx = nd,
	};
	struct relay_arg *ra = malloc(sizeof(*ra));
	int sv[2];

	if (!ra || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		free(ra);
		node_free(nd);
		return -ENOMEM;
	}
	nd->seq_fd = sv[1];
	*ra = (struct relay_arg){n, nd};
	if (pthread_create(relay, NULL, relay_thread, ra) != 0) {
		free(ra);
		close(sv[0]);
		node_free(nd);
		return -EAGAIN;
	}
	nd->backend = backend_local_new(sv[0], &ev); /* says hello, or closes sv[0] */
	if (!nd->backend) {
		shutdown(nd->seq_fd, SHUT_RDWR);
		pthread_join(*relay, NULL);
		node_free(nd);
		return -EPROTO;
	}
	return 0;
}

struct conn_arg {
	struct nodes *n;
	int fd;
};

/* One accepted connection, from handshake to the link's end. */
static void serve_link(struct nodes *n, int fd)
{
	struct node *nd = calloc(1, sizeof(*nd));
	json_t *hello = NULL;
	pthread_t relay;

	if (!nd) {
		close(fd);
		return;
	}
	nd->owner = n;
	nd->seq_fd = -1;
	nd->refs = 1; /* this thread's */
	if (link_accept(n->ctx, fd, &hello, &nd->conn) < 0) {
		free(nd);
		return;
	}
	read_hello(hello, &nd->info);
	json_decref(hello);
	if (bring_up(n, nd, &relay) < 0)
		return; /* nd is gone with it */
	if (enlist(n, nd) < 0) {
		log_error("node %s refused: more than %d nodes", nd->info.name, NODES_MAX);
		shutdown(nd->seq_fd, SHUT_RDWR);
	} else {
		log_info("node %s is up (data %s, %zu GPUs)", nd->info.name, nd->info.data,
			 nd->info.n_gpus);
		if (n->hooks.up)
			n->hooks.up(n->hooks.ctx, &nd->info);
	}
	pthread_join(relay, NULL);
	pthread_mutex_lock(&n->lock);
	bool was_listed = unlist(n, nd);
	pthread_mutex_unlock(&n->lock);
	if (was_listed && n->hooks.down)
		n->hooks.down(n->hooks.ctx, nd->info.name);
	release_refs(nd, was_listed ? 2 : 1); /* this thread's, and the table's if it held one */
}

static void *conn_thread(void *arg)
{
	struct conn_arg *ca = arg;
	struct nodes *n = ca->n;
	int fd = ca->fd;

	free(ca);
	serve_link(n, fd);
	pthread_mutex_lock(&n->lock);
	n->links--;
	pthread_cond_broadcast(&n->idle);
	pthread_mutex_unlock(&n->lock);
	return NULL;
}

static void *accept_loop(void *arg)
{
	struct nodes *n = arg;
	struct pollfd p[2] = {{.fd = n->listen_fd, .events = POLLIN},
			      {.fd = n->stop_fd, .events = POLLIN}};

	for (;;) {
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		int fd = accept4(n->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		struct conn_arg *ca = malloc(sizeof(*ca));
		pthread_t t;
		if (!ca) {
			close(fd);
			continue;
		}
		*ca = (struct conn_arg){n, fd};
		pthread_mutex_lock(&n->lock);
		n->links++;
		pthread_mutex_unlock(&n->lock);
		if (pthread_create(&t, NULL, conn_thread, ca) != 0) {
			close(fd);
			free(ca);
			pthread_mutex_lock(&n->lock);
			n->links--;
			pthread_mutex_unlock(&n->lock);
			continue;
		}
		pthread_detach(t);
	}
	return NULL;
}

/* A listening TCP socket on "ADDRESS:PORT" (numeric). */
static int listen_on(const char *address)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1, rc = config_listen_sockaddr(address, &ss, &len);

	if (rc == -EINVAL)
		return log_error("[slurm] listen: bad address %s", address);
	if (rc < 0)
		return log_error("[slurm] listen: %s is not a numeric IP address", address);
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return log_errno("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 64) < 0) {
		log_errno("[slurm] listen on %s", address);
		close(fd);
		return -1;
	}
	return fd;
}

struct nodes *nodes_new(const char *listen_address, const struct link_secret *secret,
			const struct nodes_hooks *hooks)
{
	struct nodes *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->hooks = *hooks;
	n->listen_fd = n->stop_fd = -1;
	pthread_mutex_init(&n->lock, NULL);
	pthread_cond_init(&n->idle, NULL);
	n->ctx = link_ctx_server(secret);
	n->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (n->ctx && n->stop_fd >= 0)
		n->listen_fd = listen_on(listen_address);
	if (n->listen_fd < 0 || pthread_create(&n->acceptor, NULL, accept_loop, n) != 0) {
		if (n->listen_fd >= 0)
			close(n->listen_fd);
		if (n->stop_fd >= 0)
			close(n->stop_fd);
		link_ctx_free(n->ctx);
		free(n);
		return NULL;
	}
	log_info("listening for node links on %s", listen_address);
	return n;
}

void nodes_free(struct nodes *n)
{
	uint64_t one = 1;

	if (!n)
		return;
	/* never read: it stays readable and ends the acceptor and every relay */
	if (write(n->stop_fd, &one, sizeof(one)) < 0)
		log_errno("nodes: stop");
	pthread_join(n->acceptor, NULL);
	pthread_mutex_lock(&n->lock);
	while (n->links > 0)
		pthread_cond_wait(&n->idle, &n->lock);
	pthread_mutex_unlock(&n->lock);
	close(n->listen_fd);
	close(n->stop_fd);
	link_ctx_free(n->ctx);
	pthread_cond_destroy(&n->idle);
	pthread_mutex_destroy(&n->lock);
	free(n);
}

int nodes_endpoint(const char *data, const char *endpoint, char *out, size_t outlen)
{
	const char *path;
	int len;

	if (strncmp(endpoint, "unix:", 5) != 0)
		return -EINVAL;
	path = endpoint + 5;
	if (!link_data_path_ok(path) || !data[0])
		return -EINVAL;
	len = snprintf(out, outlen, "tcp:%s/%s", data, path);
	return len < 0 || (size_t)len >= outlen ? -EINVAL : 0;
}
