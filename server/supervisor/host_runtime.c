/* host_runtime.c - the runtime purpose of the sandbox host; see host_runtime.h. */
#include "supervisor/host_runtime.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "supervisor/homes.h"
#include "supervisor/host_homes.h"
#include "supervisor/host_runtime_box.h"
#include "supervisor/runkeeper.h"

#define PROBE_EVERY_MS 5        /* readiness: the user is waiting on this */
#define NET_CHECK_EVERY_MS 2000 /* is each egress runtime's pasta still there */

static void close_output(struct runtime_box *x)
{
	if (x->out_fd >= 0)
		close(x->out_fd);
	x->out_fd = -1;
}

static void describe_end(struct host_box *b, const struct sandbox_result *res)
{
	char why[200];

	if (res->kind == SANDBOX_OOM) {
		host_set_end(b, "oom", true,
			     "out of memory: the runtime used more than its memory limit");
		return;
	}
	if (b->requested)
		return; /* the stop's cause and reason stay */
	if (res->kind == SANDBOX_EXITED) {
		snprintf(why, sizeof(why), "jupyter exited with status %d", res->code);
		host_set_end(b, "exited", res->code != 0, why);
	} else if (res->kind == SANDBOX_SIGNALED) {
		snprintf(why, sizeof(why), "jupyter was killed by signal %d", res->signal);
		host_set_end(b, "signaled", true, why);
	} else {
		host_set_end(b, "gone", true, "the runtime ended");
	}
}

static void died(struct host *h, struct host_box *b, const struct sandbox_result *res)
{
	describe_end(b, res);
	runkeeper_end(host_state_dir(h), b->h.id); /* before the teardown kills the keeper */
	((struct runtime_box *)b)->keeper = 0;
}

static void started(struct host *h, struct host_box *b)
{
	struct runtime_box *x = (struct runtime_box *)b;
	char err[200];
	int rc;

	x->probe_at_ms = clock_ms();
	/* the output outlives this process from now on; a runtime without a keeper
	 * would stop starting kernels at the next restart: it fails the start */
	rc = runkeeper_start(host_cfg(h), host_state_dir(h), b->user, &b->h, x->out_fd,
			     &x->keeper);
	close_output(x);
	host_save(h, b);
	log_info("runtime of %s started: sandbox %s, pid %d", b->user, b->h.id, (int)b->h.pid);
	if (rc < 0) {
		snprintf(err, sizeof(err), "its output keeper could not start: %s", strerror(-rc));
		host_stop(h, b, "start_failed", err);
		b->failed = true;
	}
}

static void ending(struct host *h, struct host_box *b)
{
	(void)h;
	close_output((struct runtime_box *)b);
}


static void send_warnings(struct host *h, struct runtime_box *x, int64_t wall)
{
	const struct labd_config *cfg = host_cfg(h);

	for (unsigned i = 0; i < cfg->n_warn_before && i < 32; i++) {
		int64_t left = x->b.deadline_s - wall;
		if ((x->warned & (1u << i)) || left > cfg->warn_before_s[i])
			continue;
		x->warned |= 1u << i;
		json_t *e = host_event("sandbox_warning", &x->b);
		json_object_set_new(e, "seconds_left", json_integer(left > 0 ? left : 0));
		host_emit(h, e);
	}
}

static long long next_warning_ms(struct host *h, struct runtime_box *x, int64_t wall,
				 long long now)
{
	const struct labd_config *cfg = host_cfg(h);
	long long due = now + (x->b.deadline_s - wall) * 1000;

	for (unsigned i = 0; i < cfg->n_warn_before && i < 32; i++)
		if (!(x->warned & (1u << i))) {
			long long w = now + (x->b.deadline_s - cfg->warn_before_s[i] - wall) * 1000;
			due = w < due ? w : due;
		}
	return due;
}

/* A running runtime's pasta, restarted (loudly) when it died: the network is the
 * runtime's only way out, and a dead pasta would leave it silently cut off. */
static void check_net(struct host *h, struct runtime_box *x, long long now)
{
	struct sandbox_spec s;

	if (now < x->net_check_at_ms)
		return;
	x->net_check_at_ms = now + NET_CHECK_EVERY_MS;
	sandbox_spec_init(&s);
	s.state_dir = host_state_dir(h);
	s.cgroup_parent = launch_cgroup_parent(host_cfg(h));
	s.net_dns = host_cfg(h)->net_dns;
	s.pasta_path = host_cfg(h)->net_pasta;
	s.nft_path = host_cfg(h)->net_nft;
	int rc = sandbox_net_check(&s, &x->b.h);
	if (rc != 0)
		log_warn("runtime of %s: its network path (pasta or veth) ended and was %s", x->b.user,
			 rc == 1 ? "restarted" : "not restarted");
}

/* A running runtime's probe, network and warnings (the host did its deadline). */
static long long tick(struct host *h, struct host_box *b, long long now, int64_t wall)
{
	struct runtime_box *x = (struct runtime_box *)b;

	if (!b->ready && now >= x->probe_at_ms) {
		char run_dir[LAUNCH_PATH_MAX];
		launch_run_dir(host_state_dir(h), b->user, run_dir, sizeof(run_dir));
		if (launch_probe(run_dir, b->host_uid)) {
			char endpoint[LAUNCH_PATH_MAX];
			json_t *e = host_event("sandbox_ready", b);
			b->ready = true;
			log_info("runtime of %s answers", b->user);
			launch_endpoint(b->user, endpoint, sizeof(endpoint));
			json_object_set_new(e, "endpoint", json_string(endpoint));
			host_emit(h, e);
		}
		x->probe_at_ms = now + PROBE_EVERY_MS;
	}
	check_net(h, x, now);
	send_warnings(h, x, wall);
	long long due = b->ready ? next_warning_ms(h, x, wall, now) : x->probe_at_ms;
	return due < x->net_check_at_ms ? due : x->net_check_at_ms;
}

static void forget(struct host_box *b)
{
	close_output((struct runtime_box *)b);
}

static void *init(struct host *h)
{
	(void)h;
	host_runtime_log_warnings();
	return host_homes_new();
}

static void release(void *own)
{
	host_homes_free(own);
}

static long long tick_all(struct host *h, void *own, long long now, int64_t wall)
{
	return host_homes_tick(h, own, now, wall);
}

static int pollfds_all(struct host *h, void *own, struct pollfd *fds, int max)
{
	(void)h;
	return host_homes_pollfds(own, fds, max);
}

static bool on_fd_all(struct host *h, void *own, int fd)
{
	return host_homes_on_fd(h, own, fd);
}

const struct host_purpose host_runtime = {
	.name = "runtime",
	.ended_event = "sandbox_ended",
	.box_size = sizeof(struct runtime_box),
	.max_boxes = 256,
	.grace = true,
	.deadline_reason = "time limit reached",
	.init = init,
	.release = release,
	.describe = host_runtime_describe,
	.identify = host_runtime_identify,
	.record_path = host_runtime_record_path,
	.record_fields = host_runtime_record_fields,
	.adopt_all = host_runtime_adopt_all,
	.started = started,
	.died = died,
	.ending = ending,
	.tick = tick,
	.tick_all = tick_all,
	.pollfds_all = pollfds_all,
	.on_fd_all = on_fd_all,
	.list_entry = host_runtime_list_entry,
	.forget = forget,
};
