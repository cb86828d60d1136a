/* host_pool_requests.c - a pool's start and stop, a job's run and stop, and
 * the removal of gone jobs' logs, as the web process asks them; see
 * host_pool.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "labd/fault.h"
#include "labd/log.h"
#include "supervisor/host_pool.h"
#include "supervisor/host_pool_box.h"
#include "supervisor/startcheck.h"
#include "supervisor/uidmap.h"

static struct pool_box *find(struct host *h, const char *user, long long pool_id)
{
	struct host_box *b;
	for (int i = 0; (b = host_next(h, &host_pool, &i));) {
		struct pool_box *p = (struct pool_box *)b;
		if (p->pool_id == pool_id && strcmp(b->user, user) == 0)
			return p;
	}
	return NULL;
}

/* What only a pool start checks, before startcheck's table; NULL when fine, *code set. */
static const char *check_start(struct host *h, json_t *msg, const char **code)
{
	struct pool_box *p = find(h, proto_str(msg, "user"), proto_int(msg, "pool_id"));

	if (p && p->b.state != H_ENDED)
		return *code = "pool_exists", "this pool already runs";
	if (host_count(h, &host_pool, proto_str(msg, "user")) >=
	    (int)host_cfg(h)->jobs_max_pools_per_user)
		return *code = "too_many_pools", "the user holds [jobs] max_pools_per_user pools";
	return NULL;
}

/* startcheck's held callback: a GPU held by any sandbox of any purpose */
static bool gpu_held(const void *h, unsigned gpu)
{
	return host_gpu_held(h, gpu);
}

/* A host of a job on several nodes (peer_addr, peers, scratch_home): only on `labd
 * node`, where [node] data_listen names the node's own address on the cluster
 * network, the parent of the peer interface; the addresses checked strictly.  NULL
 * when fine (rq's peer fields filled), else why. */
static const char *check_peers(const struct labd_config *cfg, json_t *msg,
			       struct launch_request *rq, char *why, size_t len)
{
	const char *addr = proto_str(msg, "peer_addr"), *peers = proto_str(msg, "peers");
	unsigned port;

	if (!addr[0] && !peers[0] && !proto_bool(msg, "scratch_home"))
		return NULL;
	if (!cfg->node_mode)
		return "peer_addr, peers and scratch_home: only a node (labd node) runs a host "
		       "of a job on several nodes";
	if (!addr[0] != !peers[0])
		return "peer_addr and peers: both or neither";
	rq->scratch_home = proto_bool(msg, "scratch_home");
	if (!addr[0])
		return NULL;
	if (sandbox_peers_check(addr, peers, why, len) < 0)
		return why;
	if (config_split_listen(cfg->node_data_listen, rq->peer_via, sizeof(rq->peer_via),
				&port) < 0)
		return "[node] data_listen: no address";
	snprintf(rq->peer_addr, sizeof(rq->peer_addr), "%s", addr);
	snprintf(rq->peers, sizeof(rq->peers), "%s", peers);
	return NULL;
}

static void fill_request(json_t *msg, const struct startcheck_start *st,
			 struct launch_request *rq)
{
	snprintf(rq->user, sizeof(rq->user), "%s", proto_str(msg, "user"));
	rq->user_id = (uint32_t)proto_int(msg, "user_id");
	startcheck_fill(st, rq);
}

static json_t *refuse(long long id, const char *user, const char *code, const char *why)
{
	log_error("refused pool_start for %s: %s", user, why);
	return proto_error(id, code, why);
}

/* A refusal of startcheck's table: an expected one (a GPU still held by a sandbox
 * ending now) is news, not an error; the web process asks again next pass. */
static json_t *refuse_check(long long id, const char *user, enum startcheck_code c,
			    const char *why)
{
	if (!startcheck_expected(c))
		return refuse(id, user, startcheck_code_name(c), why);
	log_info("pool_start for %s waits: %s", user, why);
	return proto_error(id, startcheck_code_name(c), why);
}

json_t *host_pool_start(struct host *h, long long id, json_t *msg)
{
	const struct labd_config *cfg = host_cfg(h);
	const char *user = proto_str(msg, "user"), *code, *why = check_start(h, msg, &code);
	struct startcheck_start st;
	struct launch_request rq = {0};
	char reason[200], hash[IMAGE_HASH_MAX];
	enum startcheck_code c;
	struct pool_box *p;
	uid_t uid;
	int rc;

	if (why)
		return refuse(id, user, code, why);
	if ((why = check_peers(cfg, msg, &rq, reason, sizeof(reason))))
		return refuse(id, user, "bad_request", why);
	startcheck_read(cfg, msg, &st);
	st.live = host_live(h);
	c = startcheck_check(cfg, &st, gpu_held, h, &rq, hash, reason, sizeof(reason));
	if (c != STARTCHECK_OK)
		return refuse_check(id, user, c, reason);
	if (uidmap_claim(host_uids(h), user, proto_int(msg, "user_id"), &uid, reason,
			 sizeof(reason)) < 0)
		return refuse(id, user, "bad_uid", reason);
	if (!(p = (struct pool_box *)host_claim(h, &host_pool, NULL)))
		return proto_error(id, "busy", "too many pools");
	fill_request(msg, &st, &rq);
	host_pool_box_init(p);
	if ((rc = poollaunch_spawn(cfg, host_state_dir(h), &rq, proto_int(msg, "pool_id"),
				   &p->b.worker, &p->b.worker_fd, &p->io)) < 0)
		return proto_error(id, "sandbox_failed", strerror(-rc));
	p->b.used = true;
	p->b.state = H_STARTING;
	snprintf(p->b.user, sizeof(p->b.user), "%s", user);
	p->user_id = rq.user_id;
	p->pool_id = proto_int(msg, "pool_id");
	p->b.host_uid = uid;
	p->b.deadline_s = proto_int(msg, "deadline");
	p->b.n_gpus = rq.n_gpus;
	p->cpus_milli = rq.sizes.cpus_milli;
	p->scratch_home = rq.scratch_home;
	memcpy(p->b.gpus, rq.gpus, sizeof(p->b.gpus));
	log_info("building pool %lld of %s (worker %d)", p->pool_id, user, (int)p->b.worker);
	FAULT_POINT("job.pool.start");
	json_t *r = proto_ok(id);
	if (hash[0])
		json_object_set_new(r, "image_hash", json_string(hash));
	return r;
}

json_t *host_pool_stop(struct host *h, long long id, json_t *msg)
{
	struct pool_box *p = find(h, proto_str(msg, "user"), proto_int(msg, "pool_id"));
	const char *reason = proto_str(msg, "reason");

	if (!p || p->b.state == H_ENDED || p->b.state == H_ENDING)
		return proto_error(id, "not_found", "no such pool");
	host_stop(h, &p->b, "requested", reason[0] ? reason : "stopped");
	return proto_ok(id);
}

json_t *host_pool_job_run(struct host *h, long long id, json_t *msg)
{
	struct pool_box *p = find(h, proto_str(msg, "user"), proto_int(msg, "pool_id"));

	if (!p || p->b.state == H_ENDED || p->b.state == H_ENDING)
		return proto_error(id, "not_found", "no such pool");
	if (p->b.state != H_RUNNING || !p->b.ready || p->job.step != J_NONE)
		return proto_error(id, "pool_busy", "the pool is not idle and ready");
	if (p->b.deadline_s <= time(NULL))
		return proto_error(id, "pool_busy", "the pool is at its deadline");
	return jobrun_run(h, p, id, msg);
}

json_t *host_pool_job_stop(struct host *h, long long id, json_t *msg)
{
	struct pool_box *p = find(h, proto_str(msg, "user"), proto_int(msg, "pool_id"));

	if (!p || p->b.state != H_RUNNING || p->job.step == J_NONE ||
	    p->job.job_id != proto_int(msg, "job_id"))
		return proto_error(id, "not_found", "that job does not run in this pool");
	return jobrun_stop(h, p, id, msg);
}

/* Whether a pool holds job_id now: its log may still be written or copied. */
static bool job_held(struct host *h, long long job_id)
{
	struct host_box *b;

	for (int i = 0; (b = host_next(h, &host_pool, &i));) {
		struct pool_box *p = (struct pool_box *)b;
		if (p->job.step != J_NONE && p->job.job_id == job_id)
			return true;
	}
	return false;
}

json_t *host_pool_logs_remove(struct host *h, long long id, json_t *msg)
{
	json_t *ids = json_object_get(msg, "job_ids"), *v;
	char path[JOBLOG_PATH_MAX];
	size_t i;

	json_array_foreach(ids, i, v) {
		long long job_id = json_integer_value(v);
		if (job_held(h, job_id))
			continue; /* asked again once the job is off its pool */
		joblog_path(host_state_dir(h), job_id, path, sizeof(path));
		/* joblogs/ is root's: nothing in it is a link labd-web planted */
		if (unlink(path) < 0 && errno != ENOENT)
			log_warn("job log %s: cannot remove: %s", path, strerror(errno));
	}
	return proto_ok(id);
}
