/* Unit tests: the Slurm backend (backend/slurm.h) end to end against stand-ins: Slurm's
 * four tools are shell scripts that answer from files the test writes (so the
 * controller can be away, a job pending, running or failed at will), and a node is a
 * thread that dials the backend's listener over the real TLS-PSK link (proto/link.h),
 * says node_hello and answers the supervisor protocol as a node's supervisor would.
 * Covered: submit with the allocation's sizes, the pending reason and estimate, the
 * start on the allocated node with Slurm's GRES index mapped through the hello, the
 * endpoint rewritten to the node's data port, the controller away (nothing changes),
 * NODE_FAIL (the end with its cause, the node's sandbox stopped), a stop while queued
 * (scancel, the end "requested"), a stray job cancelled, job_shell refused; after a
 * restart, the list waits for Slurm's first answer, a running job is adopted and one that
 * ended meanwhile passes its end on; a pool of a job on two stand-in nodes (its peer
 * addresses, each host's start and spec, one ready, algo-1's phases, the first failure
 * passed on and the other host stopped, one end) adopted again with both hosts after
 * labd-web restarts. */
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/slurm.h"
#include "config/config.h"
#include "labd/clock.h"
#include "proto/link.h"
#include "proto/proto.h"

#define TOKEN "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ" /* 43 characters */
#define WAIT_MS 20000

static char dir[64];
static struct labd_config cfg;

/* ---- what the backend told the web process ---- */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int connected, readies, ends, pools_ready, pools_ended;
static char ready_endpoint[200], end_cause[20], end_reason[200];
static int64_t end_id;

static void ev_connected(void *ctx)
{
	(void)ctx;
	pthread_mutex_lock(&lock);
	connected++;
	pthread_mutex_unlock(&lock);
}

static void ev_ready(void *ctx, const char *user, int64_t id, const char *endpoint)
{
	(void)ctx;
	(void)user;
	(void)id;
	pthread_mutex_lock(&lock);
	readies++;
	snprintf(ready_endpoint, sizeof(ready_endpoint), "%s", endpoint);
	pthread_mutex_unlock(&lock);
}

static void ev_ended(void *ctx, const char *user, int64_t id, const char *cause, bool failed,
		     const char *reason)
{
	(void)ctx;
	(void)user;
	(void)failed;
	pthread_mutex_lock(&lock);
	ends++;
	end_id = id;
	snprintf(end_cause, sizeof(end_cause), "%s", cause);
	snprintf(end_reason, sizeof(end_reason), "%s", reason);
	pthread_mutex_unlock(&lock);
}

static void ev_pool_ready(void *ctx, const char *user, int64_t pool_id)
{
	(void)ctx;
	(void)user;
	(void)pool_id;
	pthread_mutex_lock(&lock);
	pools_ready++;
	pthread_mutex_unlock(&lock);
}

static void ev_pool_ended(void *ctx, const char *user, int64_t pool_id, const char *cause,
			  bool failed, const char *reason)
{
	(void)ctx;
	(void)user;
	(void)pool_id;
	(void)failed;
	pthread_mutex_lock(&lock);
	pools_ended++;
	snprintf(end_cause, sizeof(end_cause), "%s", cause);
	snprintf(end_reason, sizeof(end_reason), "%s", reason);
	pthread_mutex_unlock(&lock);
}

static int job_phases, job_exits, last_exit_code;
static char last_exit_kind[16];

static void ev_job_phase(void *ctx, const char *user, int64_t pool_id, int64_t job_id,
			 const char *phase, int64_t at_ms)
{
	(void)ctx, (void)user, (void)pool_id, (void)job_id, (void)phase, (void)at_ms;
	pthread_mutex_lock(&lock);
	job_phases++;
	pthread_mutex_unlock(&lock);
}

static void ev_job_exited(void *ctx, const char *user, int64_t pool_id, int64_t job_id,
			  const struct backend_job_exit *x)
{
	(void)ctx, (void)user, (void)pool_id, (void)job_id;
	pthread_mutex_lock(&lock);
	job_exits++;
	last_exit_code = x->code;
	snprintf(last_exit_kind, sizeof(last_exit_kind), "%s", x->kind);
	pthread_mutex_unlock(&lock);
}

static int counter(int *c)
{
	pthread_mutex_lock(&lock);
	int v = *c;
	pthread_mutex_unlock(&lock);
	return v;
}

static bool wait_count(int *c, int want)
{
	for (long long until = clock_ms() + WAIT_MS; clock_ms() < until; usleep(20000))
		if (counter(c) >= want)
			return true;
	return false;
}

/* ---- the stand-in tools ---- */

/* Written aside and renamed into place: a squeue that reads the queue meanwhile sees
 * the old answer or the new one, never an empty file (a job gone). */
static void write_file(const char *name, const char *text, mode_t mode)
{
	char path[128], tmp[140];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(tmp, mode), 0);
	assert_int_equal(rename(tmp, path), 0);
}

static bool file_has(const char *name, const char *text)
{
	char path[128], buf[4096] = "";
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!(f = fopen(path, "r")))
		return false;
	buf[fread(buf, 1, sizeof(buf) - 1, f)] = '\0';
	fclose(f);
	return strstr(buf, text) != NULL;
}

static bool wait_file_has(const char *name, const char *text)
{
	for (long long until = clock_ms() + WAIT_MS; clock_ms() < until; usleep(20000))
		if (file_has(name, text))
			return true;
	return false;
}

static void make_tools(void)
{
	char script[512];

	/* queue.next, when a test left one, is what Slurm lists once the job is submitted */
	snprintf(script, sizeof(script),
		 "#!/bin/sh\necho \"$@\" >> %s/sbatch.log\n"
		 "if [ -e %s/queue.next ]; then mv %s/queue.next %s/queue; fi\n"
		 "echo '100;labdtest'\n", dir, dir, dir, dir);
	write_file("sbatch", script, 0755);
	snprintf(script, sizeof(script),
		 "#!/bin/sh\nif [ -e %s/away ]; then echo 'squeue: error: Unable to contact slurm "
		 "controller (connect failure)' >&2; exit 1; fi\ncat %s/queue\n", dir, dir);
	write_file("squeue", script, 0755);
	snprintf(script, sizeof(script), "#!/bin/sh\necho 'JobId=100 JobState=RUNNING "
		 "JOB_GRES=gpu:1 Nodes=n1 CPU_IDs=0 Mem=1024 GRES=gpu:1(IDX:1) Features=(null)'\n");
	write_file("scontrol", script, 0755);
	snprintf(script, sizeof(script), "#!/bin/sh\necho \"$1\" >> %s/scancel.log\n", dir);
	write_file("scancel", script, 0755);
	write_file("queue", "", 0644);
}

/* ---- the stand-in node ---- */
static int node_starts, node_stops, node_job_runs, node_home_usages;
static char node_start_gpus[64];
static bool node_has_alice;

static void reply(struct link_conn *c, json_t *req, json_t *fields)
{
	json_t *r = proto_ok(json_integer_value(json_object_get(req, "id")));

	if (fields)
		json_object_update_new(r, fields);
	assert_int_equal(link_frame_write(c, r), 0);
	json_decref(r);
}

/* What each of the two nodes (n1, n2) saw of pool 9, a pool on both. */
#define TWO_POOL 9
struct seen {
	char peer_addr[20], peers[40];
	bool scratch_home;
	int current, job_stops, pool_stops;
	size_t channels; /* in its job's spec: every host gets them (algo-2 fetches them) */
	bool live; /* its sandbox of pool 9 runs: the node's list holds it */
	char master_addr[20], interface[16];
	int64_t stop_grace;
};
static struct seen seen[2];

static void send_event(struct link_conn *c, const char *type, json_t *fields)
{
	json_t *ev = proto_msg(type, -1);

	json_object_update_new(ev, fields);
	assert_int_equal(link_frame_write(c, ev), 0);
	json_decref(ev);
}

static void job_exit(struct link_conn *c, int64_t job, const char *kind, int code)
{
	send_event(c, "job_exited",
		   json_pack("{s:s,s:i,s:I,s:s,s:i,s:i,s:i,s:s,s:s,s:b}", "user", "erin", "pool_id",
			     TWO_POOL, "job_id", (json_int_t)job, "kind", kind, "code", code, "signal", 0,
			     "at_ms", 1000, "reason", "", "failure", "", "home_full", 0));
}

/* Pool 9 on node k (0: n1, 1: n2). Job 1: n2's command exits 3 at once, n1's runs
 * until stopped; job 2: both exit 0 (n2 first); job 3: n2's sandbox ends. Each
 * node says its phase: only n1's may reach the web. */
static void answer_two(struct link_conn *c, json_t *m, const char *type, int k)
{
	struct seen *me = &seen[k];
	json_int_t job = json_integer_value(json_object_get(m, "job_id"));

	reply(c, m, NULL);
	pthread_mutex_lock(&lock);
	if (!strcmp(type, "pool_start")) {
		snprintf(me->peer_addr, sizeof(me->peer_addr), "%s",
			 json_string_value(json_object_get(m, "peer_addr")));
		snprintf(me->peers, sizeof(me->peers), "%s",
			 json_string_value(json_object_get(m, "peers")));
		me->scratch_home = json_is_true(json_object_get(m, "scratch_home"));
		me->live = true;
	} else if (!strcmp(type, "job_run")) {
		json_t *spec = json_loads(json_string_value(json_object_get(m, "spec")), 0, NULL);
		json_t *hosts = json_object_get(spec, "hosts");
		me->current = (int)json_integer_value(json_object_get(hosts, "current"));
		snprintf(me->master_addr, sizeof(me->master_addr), "%s",
			 json_string_value(json_object_get(hosts, "master_addr")));
		snprintf(me->interface, sizeof(me->interface), "%s",
			 json_string_value(json_object_get(hosts, "interface")));
		me->channels = json_array_size(json_object_get(spec, "channels"));
		json_decref(spec);
	} else if (!strcmp(type, "job_stop")) {
		me->job_stops++;
		me->stop_grace = json_integer_value(json_object_get(m, "grace_s"));
	} else if (!strcmp(type, "pool_stop")) {
		me->pool_stops++;
		me->live = false;
	}
	if (!strcmp(type, "job_run") && k == 1 && job == 3)
		me->live = false; /* its sandbox ends (below) */
	pthread_mutex_unlock(&lock);
	if (!strcmp(type, "pool_start"))
		send_event(c, "pool_ready", json_pack("{s:s,s:i}", "user", "erin", "pool_id",
						      TWO_POOL));
	if (!strcmp(type, "job_run")) {
		send_event(c, "job_phase", json_pack("{s:s,s:i,s:I,s:s,s:i}", "user", "erin",
						     "pool_id", TWO_POOL, "job_id", job, "phase",
						     "training", "at_ms", 1000));
		if (k == 1 && job == 1)
			job_exit(c, job, "exited", 3);
		if (k == 1 && job == 2)
			job_exit(c, job, "exited", 0);
		if (k == 0 && job == 2) {
			usleep(200 * 1000); /* after n2's */
			job_exit(c, job, "exited", 0);
		}
		if (k == 1 && job == 3)
			send_event(c, "pool_ended",
				   json_pack("{s:s,s:i,s:s,s:b,s:s}", "user", "erin", "pool_id",
					     TWO_POOL, "cause", "oom", "failed", 1, "reason",
					     "out of memory"));
	}
	if (!strcmp(type, "job_stop"))
		job_exit(c, job, "stopped", 0);
	if (!strcmp(type, "pool_stop"))
		send_event(c, "pool_ended", json_pack("{s:s,s:i,s:s,s:b,s:s}", "user", "erin",
						      "pool_id", TWO_POOL, "cause", "requested",
						      "failed", 0, "reason", "stopped"));
}

static void answer(struct link_conn *c, json_t *m, int k)
{
	const char *type = json_string_value(json_object_get(m, "type"));

	if (json_integer_value(json_object_get(m, "pool_id")) == TWO_POOL) {
		answer_two(c, m, type, k);
		return;
	}
	if (!strcmp(type, "hello")) {
		reply(c, m, json_pack("{s:[]}", "warnings"));
	} else if (!strcmp(type, "sandbox_start")) {
		char *g = json_dumps(json_object_get(m, "gpus"), JSON_COMPACT);
		pthread_mutex_lock(&lock);
		snprintf(node_start_gpus, sizeof(node_start_gpus), "%s", g);
		node_starts++;
		node_has_alice = true;
		pthread_mutex_unlock(&lock);
		free(g);
		reply(c, m, NULL);
		json_t *ev = proto_msg("sandbox_ready", -1);
		json_object_update_new(ev, json_pack("{s:s,s:I,s:s}", "user", "alice", "runtime_id",
						     (json_int_t)5, "endpoint",
						     "unix:runtimes/alice/run/jupyter.sock"));
		assert_int_equal(link_frame_write(c, ev), 0);
		json_decref(ev);
	} else if (!strcmp(type, "pool_start")) {
		reply(c, m, NULL);
		json_t *ev = proto_msg("pool_ready", -1);
		json_object_update_new(ev, json_pack("{s:s,s:O}", "user", "dana", "pool_id",
						     json_object_get(m, "pool_id")));
		assert_int_equal(link_frame_write(c, ev), 0);
		json_decref(ev);
	} else if (!strcmp(type, "home_usage")) {
		pthread_mutex_lock(&lock);
		node_home_usages++;
		pthread_mutex_unlock(&lock);
		reply(c, m, json_pack("{s:b,s:b,s:i,s:i}", "exists", 1, "mounted", 1, "used_bytes",
				      4096, "size_bytes", 1 << 20));
	} else if (!strcmp(type, "job_run")) {
		pthread_mutex_lock(&lock);
		node_job_runs++;
		pthread_mutex_unlock(&lock);
		reply(c, m, NULL);
	} else if (!strcmp(type, "sandbox_list")) {
		pthread_mutex_lock(&lock);
		bool has = node_has_alice, pool = seen[k].live;
		pthread_mutex_unlock(&lock);
		json_t *l = has ? json_pack("[{s:s,s:i,s:s,s:b}]", "user", "alice", "runtime_id", 5,
					    "state", "running", "ready", 1)
				: json_array();
		if (pool)
			json_array_append_new(l, json_pack("{s:s,s:i,s:i,s:s,s:b}", "user", "erin",
							   "runtime_id", 0, "pool_id", TWO_POOL,
							   "state", "running", "ready", 1));
		reply(c, m, json_pack("{s:o}", "sandboxes", l));
	} else if (!strcmp(type, "sandbox_stop")) {
		const char *user = json_string_value(json_object_get(m, "user"));
		pthread_mutex_lock(&lock);
		node_stops++;
		if (!user || !strcmp(user, "alice"))
			node_has_alice = false;
		pthread_mutex_unlock(&lock);
		reply(c, m, NULL);
	} else {
		reply(c, m, NULL);
	}
}

/* Whether the stand-in nodes stop (else a node whose link ended dials again, as a
 * node does when the head's labd-web restarts). */
static bool nodes_done;

/* One link of node name (k: its index) until it ends. false when none was made. */
static bool node_link(const char *name, int k)
{
	struct link_secret secret = {.len = 32};
	struct link_ctx *ctx;
	struct link_conn *c = NULL;
	json_t *m;

	memset(secret.bytes, 7, 32);
	ctx = link_ctx_client(&secret, name);
	for (int i = 0; i < 100 && link_dial(ctx, cfg.slurm_listen, &c) < 0; i++)
		usleep(50000);
	if (!c) {
		link_ctx_free(ctx);
		return false;
	}
	m = json_pack("{s:s,s:s,s:s,s:[i,i],s:i,s:I}", "type", "node_hello", "name", name, "data",
		      k ? "198.18.0.3:9000" : "198.18.0.2:9000", "gpus", 4, 7, "cpus", 8,
		      "memory_bytes", (json_int_t)(16LL << 30));
	link_frame_write(c, m);
	json_decref(m);
	while (link_frame_read(c, &m) == 0) {
		answer(c, m, k);
		json_decref(m);
	}
	link_conn_free(c);
	link_ctx_free(ctx);
	return true;
}

static void *node_thread(void *arg)
{
	const char *name = arg;

	while (node_link(name, !strcmp(name, "n2")) && !__atomic_load_n(&nodes_done,
									 __ATOMIC_SEQ_CST))
		;
	return NULL;
}

/* ---- the test ---- */

static unsigned free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_int_equal(bind(fd, (struct sockaddr *)&a, len), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static void set_up(void)
{
	snprintf(dir, sizeof(dir), "/tmp/test_slurm_backend.XXXXXX");
	assert_non_null(mkdtemp(dir));
	make_tools();
	config_defaults(&cfg, false);
	snprintf(cfg.backend_kind, sizeof(cfg.backend_kind), "slurm");
	/* the head's job logs: a folder of the test's that has no joblogs/, so no pull
	 * reaches for the stand-in nodes' data ports */
	snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s", dir);
	snprintf(cfg.slurm_listen, sizeof(cfg.slurm_listen), "127.0.0.1:%u", free_port());
	snprintf(cfg.slurm_sbatch, sizeof(cfg.slurm_sbatch), "%s/sbatch", dir);
	snprintf(cfg.slurm_squeue, sizeof(cfg.slurm_squeue), "%s/squeue", dir);
	snprintf(cfg.slurm_scontrol, sizeof(cfg.slurm_scontrol), "%s/scontrol", dir);
	snprintf(cfg.slurm_scancel, sizeof(cfg.slurm_scancel), "%s/scancel", dir);
	cfg.slurm_poll_interval_ms = 100;
	cfg.slurm_timeout_s = 5;
	memset(cfg.link_secret, 7, 32);
	cfg.link_secret_len = 32;
}

static void test_runtime_on_a_node(void **state)
{
	struct backend_events ev = {.connected = ev_connected, .ready = ev_ready,
				    .ended = ev_ended, .pool_ready = ev_pool_ready,
				    .pool_ended = ev_pool_ended};
	struct backend_start st = {.user = "alice", .user_id = 3, .runtime_id = 5, .kind = "gpu",
				   .token = TOKEN, .deadline_s = time(NULL) + 3600,
				   .shape = {.n_gpus = 1, .gpus = {0}, .memory_bytes = 2LL << 30,
					     .cpus_milli = 1500}};
	char endpoint[BACKEND_ENDPOINT_MAX], err[160], text[BACKEND_QUEUE_TEXT_MAX];
	struct backend_sandbox *list;
	struct backend *b;
	pthread_t node;
	int64_t estimate;
	size_t n;
	(void)state;

	set_up();
	b = backend_slurm_new(&cfg, &ev);
	assert_non_null(b);
	assert_int_equal(pthread_create(&node, NULL, node_thread, "n1"), 0);
	assert_true(wait_count(&connected, 2)); /* the backend, then the node's link */

	/* taken at once; sbatch runs on the poll thread with the allocation's sizes */
	write_file("queue", "100|labd-rt-5|PENDING|Resources|n/a|2026-12-04T23:10:00|alice|n/a\n", 0644);
	assert_int_equal(backend_start(b, &st, endpoint, err, sizeof(err)), 0);
	assert_string_equal(endpoint, "");
	assert_int_equal(backend_start(b, &st, endpoint, err, sizeof(err)), -EEXIST);
	assert_true(wait_file_has("sbatch.log", "--job-name=labd-rt-5 --comment=alice "
						"--mem=2048M --cpus-per-task=2 --gres=gpu:1 --time=65"));
	/* pending: Slurm's reason and estimate, and the list says starting */
	for (long long until = clock_ms() + WAIT_MS;
	     backend_slurm_queue(b, 5, text, sizeof(text), &estimate) != 0 || estimate == 0;)
		assert_true(clock_ms() < until);
	assert_string_equal(text, "waiting in Slurm for free resources");
	int64_t placed;
	assert_int_equal(backend_slurm_placed_at(b, 5, &placed), 0);
	assert_int_equal(placed, 0); /* its start clock has not begun */
	assert_int_equal(backend_list(b, &list, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(list[0].state, "starting");
	free(list);

	/* running on n1 with GRES index 1: the node starts it on its GPU minor 7 */
	write_file("queue", "100|labd-rt-5|RUNNING|None|n1|2026-12-04T23:10:00|alice|n1\n", 0644);
	assert_true(wait_count(&readies, 1));
	assert_string_equal(node_start_gpus, "[7]");
	assert_string_equal(ready_endpoint, "tcp:198.18.0.2:9000/runtimes/alice/run/jupyter.sock");
	assert_int_equal(backend_slurm_queue(b, 5, text, sizeof(text), &estimate), -ENOENT);
	assert_int_equal(backend_slurm_placed_at(b, 5, &placed), 0);
	assert_true(placed >= time(NULL) - 60 && placed <= time(NULL));
	assert_int_equal(backend_list(b, &list, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(list[0].state, "running");
	free(list);

	/* a home's use is asked of the node that holds the user's runtime */
	struct backend_home home;
	assert_int_equal(backend_home_usage(b, "alice", 3, &home), 0);
	assert_int_equal(counter(&node_home_usages), 1);
	assert_true(home.exists && home.mounted && home.used_bytes == 4096);

	/* the controller away: unknown, nothing ends */
	write_file("away", "", 0644);
	usleep(500 * 1000);
	assert_int_equal(counter(&ends), 0);

	/* the node failed in Slurm: the end with its cause, the sandbox stopped there */
	write_file("queue", "100|labd-rt-5|NODE_FAIL|NodeDown|n1|2026-12-04T23:10:00|alice|n1\n", 0644);
	snprintf(err, sizeof(err), "%s/away", dir);
	unlink(err);
	assert_true(wait_count(&ends, 1));
	assert_string_equal(end_cause, "gone");
	assert_string_equal(end_reason, "the node n1 failed");
	assert_int_equal(counter(&node_stops), 1);

	/* a stop while queued: scancel, and the end is the stop's */
	st.user = "bob";
	st.runtime_id = 6;
	st.shape.n_gpus = 0;
	write_file("queue", "100|labd-rt-6|PENDING|Priority|n/a|N/A|bob|n/a\n"
			    "300|labd-rt-9|PENDING|Priority|n/a|N/A|carol|\n", 0644);
	assert_int_equal(backend_start(b, &st, endpoint, err, sizeof(err)), 0);
	for (long long until = clock_ms() + WAIT_MS;
	     backend_slurm_queue(b, 6, text, sizeof(text), &estimate) != 0 ||
	     strcmp(text, "waiting in Slurm behind jobs of higher priority");)
		assert_true(clock_ms() < until);
	/* a job of labd's name that nothing holds (a start whose process died) is cancelled */
	assert_true(wait_file_has("scancel.log", "300"));
	assert_int_equal(backend_stop(b, "bob", 6, "stopped by bob"), 0);
	assert_true(wait_count(&ends, 2));
	assert_int_equal(end_id, 6);
	assert_string_equal(end_cause, "requested");
	assert_string_equal(end_reason, "stopped by bob");
	assert_true(wait_file_has("scancel.log", "100"));


	/* a job pool: held by labd-pool-<id>, built on its node, its jobs sent there; Slurm's
	 * time limit ends it */
	struct backend_pool_start ps = {.user = "dana", .user_id = 4, .pool_id = 8,
					.deadline_s = time(NULL) + 600,
					.shape = {.memory_bytes = 1LL << 30, .cpus_milli = 1000}};
	write_file("queue", "100|labd-pool-8|RUNNING|None|n1|N/A|dana|n1\n", 0644);
	assert_int_equal(backend_job_run(b, "dana", 8, 1, "{}", err, sizeof(err)), -ENOENT);
	assert_int_equal(backend_pool_start(b, &ps, err, sizeof(err)), 0);
	assert_true(wait_file_has("sbatch.log", "--job-name=labd-pool-8 --comment=dana "
						"--mem=1024M --cpus-per-task=1"));
	assert_true(wait_count(&pools_ready, 1));
	assert_int_equal(backend_job_run(b, "dana", 8, 1, "{}", err, sizeof(err)), 0);
	assert_int_equal(counter(&node_job_runs), 1);
	write_file("queue", "100|labd-pool-8|TIMEOUT|TimeLimit|n1|N/A|dana|n1\n", 0644);
	assert_true(wait_count(&pools_ended, 1));
	assert_string_equal(end_cause, "time_limit");

	/* a shell into a job whose pool runs on no node now (the crossing itself:
	 * tests/integration/test_node_link.py, tests/slurm/test_slurm_runtime.py) */
	struct backend_shell sh = {.user = "alice", .pool_id = 1, .job_id = 1, .cols = 80,
				   .rows = 24};
	int fd;
	assert_int_equal(backend_job_shell(b, &sh, &fd, err, sizeof(err)), -ENOENT);
	assert_int_equal(fd, -1);

	__atomic_store_n(&nodes_done, true, __ATOMIC_SEQ_CST);
	backend_free(b);
	pthread_join(node, NULL);
	assert_int_equal(counter(&node_starts), 1);
	char rm[128];
	snprintf(rm, sizeof(rm), "rm -rf %s", dir);
	assert_int_equal(system(rm), 0);
}

static int seen_int(int *field)
{
	return counter(field);
}

/* A pool of a job on two nodes (docs/slurm.md "Jobs on several nodes"). */
static void test_pool_on_two_nodes(void **state)
{
	struct backend_events ev = {.connected = ev_connected, .pool_ready = ev_pool_ready,
				    .pool_ended = ev_pool_ended, .job_phase = ev_job_phase,
				    .job_exited = ev_job_exited};
	struct backend_pool_start ps = {.user = "erin", .user_id = 5, .pool_id = TWO_POOL,
					.deadline_s = time(NULL) + 600, .instances = 2,
					.shape = {.memory_bytes = 1LL << 30, .cpus_milli = 1000}};
	const char *spec = "{\"name\":\"t\",\"argv\":[\"true\"],\"grace_s\":7,"
			   "\"channels\":[{\"name\":\"train\",\"path\":\"d\"}]}";
	char err[160];
	struct backend *b;
	pthread_t n1, n2;
	(void)state;

	set_up();
	snprintf(cfg.slurm_job_addresses, sizeof(cfg.slurm_job_addresses), "198.18.5.0/29");
	pthread_mutex_lock(&lock);
	connected = pools_ready = pools_ended = job_phases = job_exits = 0;
	memset(seen, 0, sizeof(seen));
	pthread_mutex_unlock(&lock);
	__atomic_store_n(&nodes_done, false, __ATOMIC_SEQ_CST);
	b = backend_slurm_new(&cfg, &ev);
	assert_non_null(b);
	assert_int_equal(pthread_create(&n1, NULL, node_thread, "n1"), 0);
	assert_int_equal(pthread_create(&n2, NULL, node_thread, "n2"), 0);
	assert_true(wait_count(&connected, 3));

	/* one Slurm job over two nodes, its hosts' addresses named in its comment; running
	 * on n1 and n2: the pool started on both, ready once. Slurm lists it only once
	 * it was submitted (a slow poll pass must not meet it first) */
	write_file("queue.next", "100|labd-pool-9|RUNNING|None|n1|N/A|erin:198.18.5.1:2|n[1-2]\n",
		   0644);
	assert_int_equal(backend_pool_start(b, &ps, err, sizeof(err)), 0);
	assert_true(wait_file_has("sbatch.log", "--job-name=labd-pool-9 "
						"--comment=erin:198.18.5.1:2 "));
	assert_true(wait_file_has("sbatch.log", "--nodes=2 --ntasks-per-node=1"));
	assert_true(wait_count(&pools_ready, 1));
	pthread_mutex_lock(&lock);
	assert_string_equal(seen[0].peer_addr, "198.18.5.1");
	assert_string_equal(seen[0].peers, "198.18.5.2");
	assert_false(seen[0].scratch_home);
	assert_string_equal(seen[1].peer_addr, "198.18.5.2");
	assert_string_equal(seen[1].peers, "198.18.5.1");
	assert_true(seen[1].scratch_home);
	pthread_mutex_unlock(&lock);
	usleep(300 * 1000);
	assert_int_equal(counter(&pools_ready), 1);

	/* job 1: each host its spec; n2 fails: passed on at once, n1's stopped with the
	 * job's grace, its "stopped" not passed on; only algo-1's phase reaches the web */
	assert_int_equal(backend_job_run(b, "erin", TWO_POOL, 1, spec, err, sizeof(err)), 0);
	assert_true(wait_count(&job_exits, 1));
	assert_int_equal(last_exit_code, 3);
	assert_true(wait_count(&seen[0].job_stops, 1));
	usleep(300 * 1000);
	pthread_mutex_lock(&lock);
	assert_int_equal(job_exits, 1);
	assert_int_equal(job_phases, 1);
	assert_int_equal(seen[0].current, 1);
	assert_int_equal(seen[1].current, 2);
	assert_string_equal(seen[1].master_addr, "198.18.5.1");
	assert_string_equal(seen[1].interface, "peer0");
	assert_int_equal(seen[0].channels, 1);
	assert_int_equal(seen[1].channels, 1);
	assert_int_equal(seen[0].stop_grace, 7);
	assert_int_equal(seen[1].job_stops, 0);
	pthread_mutex_unlock(&lock);

	/* job 2: both exit 0: one exit, when the last host's came */
	assert_int_equal(backend_job_run(b, "erin", TWO_POOL, 2, spec, err, sizeof(err)), 0);
	assert_true(wait_count(&job_exits, 2));
	assert_int_equal(last_exit_code, 0);
	assert_string_equal(last_exit_kind, "exited");
	usleep(300 * 1000);
	assert_int_equal(counter(&job_exits), 2);
	assert_int_equal(seen_int(&seen[0].job_stops), 1);

	/* labd-web restarts: the pool is adopted with both hosts (the node list, the
	 * comment's addresses) once both nodes' lists hold it; the web sees one sandbox */
	backend_free(b);
	pthread_mutex_lock(&lock);
	connected = 0;
	pthread_mutex_unlock(&lock);
	b = backend_slurm_new(&cfg, &ev);
	assert_non_null(b);
	assert_true(wait_count(&connected, 3));
	struct backend_sandbox *list = NULL;
	size_t n = 0;
	for (long long until = clock_ms() + WAIT_MS;; usleep(50000)) {
		free(list);
		list = NULL;
		int rc = backend_list(b, &list, &n); /* -EAGAIN until Slurm's first answer */
		assert_true(rc == 0 || rc == -EAGAIN);
		if (rc == 0 && n == 1 && list[0].pool_id == TWO_POOL &&
		    !strcmp(list[0].state, "running"))
			break;
		assert_true(clock_ms() < until);
	}
	free(list);
	/* its addresses are taken: another pool on two nodes gets the next run */
	struct backend_pool_start other = ps;
	other.pool_id = 10;
	assert_int_equal(backend_pool_start(b, &other, err, sizeof(err)), 0);
	assert_true(wait_file_has("sbatch.log", "--job-name=labd-pool-10 "
						"--comment=erin:198.18.5.3:2 "));
	assert_true(wait_count(&pools_ended, 1)); /* Slurm has no job of it: gone */

	/* job 3: n2's sandbox ends: the pool ends once, n1's is stopped, Slurm's job
	 * cancelled */
	assert_int_equal(backend_job_run(b, "erin", TWO_POOL, 3, spec, err, sizeof(err)), 0);
	assert_true(wait_count(&pools_ended, 2));
	assert_string_equal(end_cause, "oom");
	assert_true(wait_count(&seen[0].pool_stops, 1));
	assert_true(wait_file_has("scancel.log", "100"));
	usleep(300 * 1000);
	assert_int_equal(counter(&pools_ended), 2);

	__atomic_store_n(&nodes_done, true, __ATOMIC_SEQ_CST);
	backend_free(b);
	pthread_join(n1, NULL);
	pthread_join(n2, NULL);
	char rm[128];
	snprintf(rm, sizeof(rm), "rm -rf %s", dir);
	assert_int_equal(system(rm), 0);
}

/* The head restarted: until Slurm's first answer the list decides nothing; then a
 * running job of labd's name is adopted (its node holds the sandbox: not cancelled) and
 * one that ended while no labd watched passes Slurm's end on. */
static void test_a_restart_adopts_and_passes_ends(void **state)
{
	struct backend_events ev = {.connected = ev_connected, .ready = ev_ready,
				    .ended = ev_ended, .pool_ready = ev_pool_ready,
				    .pool_ended = ev_pool_ended};
	struct backend_sandbox *list;
	struct backend *b;
	pthread_t node;
	char path[128];
	size_t n;
	(void)state;

	set_up();
	write_file("away", "", 0644);
	write_file("queue", "100|labd-rt-5|RUNNING|None|n1|N/A|alice|n1\n"
			    "101|labd-rt-8|CANCELLED|None|n1|N/A|fred|n1\n", 0644);
	pthread_mutex_lock(&lock);
	node_has_alice = true;
	int connected0 = connected, ends0 = ends;
	pthread_mutex_unlock(&lock);
	b = backend_slurm_new(&cfg, &ev);
	assert_non_null(b);
	__atomic_store_n(&nodes_done, false, __ATOMIC_SEQ_CST);
	assert_int_equal(pthread_create(&node, NULL, node_thread, "n1"), 0);
	assert_true(wait_count(&connected, connected0 + 1)); /* the node's link */
	/* no answer from Slurm yet: nothing is decided on the list */
	assert_int_equal(backend_list(b, &list, &n), -EAGAIN);
	assert_int_equal(counter(&ends), ends0);

	snprintf(path, sizeof(path), "%s/away", dir);
	unlink(path);
	assert_true(wait_count(&connected, connected0 + 2)); /* the first answer */
	assert_true(wait_count(&ends, ends0 + 1));
	assert_int_equal(end_id, 8);
	assert_string_equal(end_cause, "requested");
	assert_string_equal(end_reason, "cancelled in Slurm");
	assert_int_equal(backend_list(b, &list, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(list[0].runtime_id, 5);
	assert_string_equal(list[0].state, "running");
	free(list);
	usleep(500 * 1000); /* passes enough to verify the adopted job with its node */
	assert_false(file_has("scancel.log", "100"));
	assert_int_equal(counter(&ends), ends0 + 1); /* the ended job's end passed once */

	__atomic_store_n(&nodes_done, true, __ATOMIC_SEQ_CST);
	backend_free(b);
	pthread_join(node, NULL);
	char rm[128];
	snprintf(rm, sizeof(rm), "rm -rf %s", dir);
	assert_int_equal(system(rm), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_runtime_on_a_node),
		cmocka_unit_test(test_pool_on_two_nodes),
		cmocka_unit_test(test_a_restart_adopts_and_passes_ends),
	};
	return cmocka_run_group_tests_name("slurm_backend", tests, NULL, NULL);
}
