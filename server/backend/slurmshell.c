/* slurmshell.c - a shell into a job on a Slurm node; see slurmshell.h. */
#include "backend/slurmshell.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/slurmint.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "proto/link.h"

#define CONNECT_MS 2000 /* as the proxy's and the log pulls' */
#define ANSWER_MS 2000  /* a resize's close from the node */
#define OPEN_MAX 128    /* shells the head remembers for resizes (labd-web allows 64) */

/* The data connections handed out, by fd; one whose fd no longer names its socket
 * (closed by the relay, the number reused) is stale and its slot free again. */
static struct {
	int fd;
	dev_t dev;
	ino_t ino;
	char data[128];
	char token[LINK_SHELL_TOKEN_HEX + 1];
} open_shells[OPEN_MAX];
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;

static bool same_socket(int i, int fd)
{
	struct stat st;

	return open_shells[i].token[0] && open_shells[i].fd == fd && fstat(fd, &st) == 0 &&
	       st.st_dev == open_shells[i].dev && st.st_ino == open_shells[i].ino;
}

/* Remembers fd's node and token; false when every slot holds a live shell. */
static bool remember(int fd, const char *data, const char *token)
{
	struct stat st;
	int free_slot = -1;

	if (fstat(fd, &st) < 0)
		return false;
	pthread_mutex_lock(&open_lock);
	for (int i = 0; i < OPEN_MAX && free_slot < 0; i++)
		if (!open_shells[i].token[0] || open_shells[i].fd == fd || !same_socket(i, open_shells[i].fd))
			free_slot = i;
	if (free_slot >= 0) {
		open_shells[free_slot].fd = fd;
		open_shells[free_slot].dev = st.st_dev;
		open_shells[free_slot].ino = st.st_ino;
		snprintf(open_shells[free_slot].data, sizeof(open_shells[free_slot].data), "%s", data);
		snprintf(open_shells[free_slot].token, sizeof(open_shells[free_slot].token), "%s", token);
	}
	pthread_mutex_unlock(&open_lock);
	return free_slot >= 0;
}

/* The node of the holder's host algo-<host> (1 or 0: the holder's own, algo-1's), or ""
 * when the job has no such host or its sandbox there ended. Under s->lock. */
static void host_node(const struct holder *h, int host, char *node, size_t len)
{
	if (host <= 1)
		snprintf(node, len, "%s", h->node);
	else if (h->hosts && host <= h->instances && !h->hosts[host - 1].ended)
		snprintf(node, len, "%s", h->hosts[host - 1].node);
}

int slurm_shell_open(struct slurm *s, const struct backend_shell *sh, int *fd, char *err,
		     size_t errlen)
{
	char node[LINK_NAME_MAX + 1] = "", token[LINK_SHELL_TOKEN_HEX + 1], path[256];
	struct link_secret secret;
	struct node_info info;
	struct holder *h;
	struct node *nd;
	int rc;

	*fd = -1;
	pthread_mutex_lock(&s->lock);
	h = slurm_find(s, true, sh->pool_id);
	if (h && h->phase == H_ON_NODE && !h->end_passed && !strcmp(h->user, sh->user))
		host_node(h, sh->host, node, sizeof(node));
	pthread_mutex_unlock(&s->lock);
	if (!node[0]) {
		if (sh->host > 1)
			snprintf(err, errlen, "the job's sandbox does not run on algo-%d now", sh->host);
		else
			snprintf(err, errlen, "the job's sandbox does not run on a node now");
		return -ENOENT;
	}
	if (!(nd = nodes_hold(s->nodes, node, &info))) {
		snprintf(err, errlen, "the link to the job's node %s is down", node);
		return -ENOTCONN;
	}
	rc = backend_local_job_shell_token(nodes_backend(nd), sh, token, sizeof(token), err, errlen);
	nodes_release(nd);
	if (rc < 0)
		return rc;
	link_secret_set(&secret, s->cfg->link_secret, s->cfg->link_secret_len);
	if ((rc = link_data_shell_path(token, 0, 0, path, sizeof(path))) == 0)
		rc = link_data_connect(&secret, info.data, path, CONNECT_MS);
	link_secret_clear(&secret);
	if (rc < 0) {
		snprintf(err, errlen, "cannot reach the data port of node %s: %s", node, strerror(-rc));
		return rc;
	}
	/* keystrokes go out as typed; a node that vanished is found out */
	setsockopt(rc, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
	setsockopt(rc, SOL_SOCKET, SO_KEEPALIVE, &(int){1}, sizeof(int));
	if (!remember(rc, info.data, token))
		log_warn("job %lld: its shell cannot be resized (too many shells open)",
			 (long long)sh->job_id);
	*fd = rc;
	return 0;
}

/* Waits for the node's close of a resize's connection. */
static int answered(int c)
{
	long long deadline_ms = clock_ms() + ANSWER_MS;
	char byte;

	for (;;) {
		struct pollfd p = {.fd = c, .events = POLLIN};
		long long left = deadline_ms - clock_ms();
		if (left <= 0 || poll(&p, 1, (int)left) == 0)
			return -ETIMEDOUT;
		ssize_t n = read(c, &byte, 1);
		if (n == 0)
			return 0;
		if (n < 0 && errno != EINTR && errno != EAGAIN)
			return -errno;
	}
}

int slurm_job_shell_resize(struct backend *b, int fd, int cols, int rows)
{
	const struct labd_config *cfg = ((struct slurm *)b)->cfg;
	char data[128] = "", token[LINK_SHELL_TOKEN_HEX + 1] = "", path[256];
	struct link_secret secret;
	int rc;

	pthread_mutex_lock(&open_lock);
	for (int i = 0; i < OPEN_MAX && !token[0]; i++)
		if (same_socket(i, fd)) {
			snprintf(data, sizeof(data), "%s", open_shells[i].data);
			snprintf(token, sizeof(token), "%s", open_shells[i].token);
		}
	pthread_mutex_unlock(&open_lock);
	if (!token[0])
		return -ENOENT;
	if ((rc = link_data_shell_path(token, cols, rows, path, sizeof(path))) < 0)
		return rc;
	link_secret_set(&secret, cfg->link_secret, cfg->link_secret_len);
	rc = link_data_connect(&secret, data, path, CONNECT_MS);
	link_secret_clear(&secret);
	if (rc < 0)
		return rc;
	int c = rc;
	rc = answered(c);
	close(c);
	return rc;
}
