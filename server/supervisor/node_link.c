/* node_link.c - the link process of `labd node`; see node.h.
 *
 * It is to the supervisor what labd-web is on the head: the other end of the channel,
 * unprivileged, restarted with backoff when it dies, and sandboxes keep running
 * meanwhile. It only carries bytes: the head's labd-web speaks the channel's protocol
 * through it and the supervisor checks every message as it does the web process's. */
#include "supervisor/node.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "labd/clock.h"
#include "labd/log.h"
#include "proto/link.h"
#include "supervisor/node_data.h"

#define DIAL_MIN_MS 200
#define DIAL_MAX_MS 5000

static void process_setup(const struct labd_config *cfg)
{
	enum log_level level;
	sigset_t all;

	/* the supervisor's mask (its signalfd's) came with the fork: SIGTERM ends a link */
	sigfillset(&all);
	sigprocmask(SIG_UNBLOCK, &all, NULL);
	log_set_tag("labd-link");
	prctl(PR_SET_NAME, "labd-link", 0, 0, 0);
	if (log_level_parse(cfg->log_level, &level) == 0)
		log_set_level(level);
	signal(SIGPIPE, SIG_IGN);
}

/* Waits ms, or less when the supervisor's end closes (then the process exits: a
 * link with no supervisor has nothing to carry). */
static void wait_or_orphaned(int channel_fd, int ms)
{
	struct pollfd p = {.fd = channel_fd, .events = POLLIN};

	if (poll(&p, 1, ms) > 0 && (p.revents & (POLLHUP | POLLERR))) {
		log_info("the supervisor is gone: exiting");
		_exit(0);
	}
}

/* Dials until the head answers, from DIAL_MIN_MS doubling to DIAL_MAX_MS between
 * tries; logs the first failure and each change of reason, not every try. */
static struct link_conn *dial_head(const struct labd_config *cfg, struct link_ctx *ctx,
				   int channel_fd)
{
	struct link_conn *c = NULL;
	int backoff_ms = DIAL_MIN_MS, last_rc = 0, rc;

	while ((rc = link_dial(ctx, cfg->node_head, &c)) < 0) {
		if (rc != last_rc)
			log_warn("cannot reach the head at %s: %s%s; retrying", cfg->node_head,
				 strerror(-rc),
				 rc == -EACCES ? " (the head refused the key: are both secret files "
						 "the same?)"
					       : "");
		last_rc = rc;
		wait_or_orphaned(channel_fd, backoff_ms);
		backoff_ms = backoff_ms * 2 > DIAL_MAX_MS ? DIAL_MAX_MS : backoff_ms * 2;
	}
	return c;
}

_Noreturn void node_link_main(const struct labd_config *cfg, const struct privdrop_user *u,
			      int channel_fd, int data_fd)
{
	struct link_secret secret;
	struct link_shells *shells;
	struct link_ctx *ctx;
	struct link_conn *c;
	json_t *hello;
	int rc;

	process_setup(cfg);
	link_secret_set(&secret, cfg->link_secret, cfg->link_secret_len);
	if (privdrop_to(u) < 0)
		_exit(1);
	/* after the drop: a change of credentials clears it */
	prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
	if (chdir(cfg->state_dir) < 0) {
		log_errno("chdir %s", cfg->state_dir);
		_exit(1);
	}
	if (!(shells = link_shells_new()) ||
	    node_data_start(data_fd, &secret, cfg->node_data_max_connections, shells) < 0)
		_exit(1);
	if (!(ctx = link_ctx_client(&secret, cfg->node_name)))
		_exit(1);
	link_secret_clear(&secret); /* the context and the data port hold their copies */
	c = dial_head(cfg, ctx, channel_fd);
	hello = node_hello(cfg);
	rc = hello ? link_frame_write(c, hello) : -ENOMEM;
	json_decref(hello);
	if (rc == 0) {
		log_info("linked to the head at %s as node %s", cfg->node_head, cfg->node_name);
		rc = link_relay(c, channel_fd, -1, shells);
	}
	if (rc < 0)
		log_warn("the link to the head ended: %s", strerror(-rc));
	else
		log_info("the link to the head ended");
	link_conn_free(c);
	link_ctx_free(ctx);
	_exit(0);
}
