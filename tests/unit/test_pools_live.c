/* Live test of the supervisor's job pools over its own protocol: the real
 * channel table, the host with both purposes, pools, agent, sandboxes, mounts
 * and cgroups (root only), driven as labd-web drives them, without the web
 * process. pool_start -> pool_ready -> job_run of a shell command -> phases -> log file -> job_exited;
 * a second job in the same pool; job_stop with grace (and a job that ignores
 * SIGTERM: its pool is killed); max runtime; OOM; a bad spec. Prints the
 * measured pool_start->pool_ready and job_run->training times (median of
 * POOLS_RUNS, default 20). */
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#include "config/config.h"
#include "labd/clock.h"
#include "proto/proto.h"
#include "supervisor/channel.h"
#include "supervisor/host.h"
#include "supervisor/host_pool.h"
#include "supervisor/host_runtime.h"
#include "supervisor/statedir.h"

#define USER "pooltest"
#define USER_ID 4242
#define HOST_UID (200000 + USER_ID)

static struct {
	struct labd_config cfg;
	char dir[64];
	struct host *host;
	struct channel *ch;
	int web;
	long long next_id;
	json_t *seen; /* messages that reached the web end, oldest first */
} T;

static void emit(void *ctx, json_t *e)
{
	(void)ctx;
	channel_emit(T.ch, e);
}

static const struct host_purpose *const purposes[] = {&host_runtime, &host_pool};

/* One turn of the supervisor's loop, then what reached the web end. */
static void turn(int max_ms)
{
	struct pollfd fds[2048] = {{.fd = channel_fd(T.ch), .events = POLLIN}};
	int t = host_tick(T.host), ms = t >= 0 && t < max_ms ? t : max_ms;
	int n = host_pollfds(T.host, fds + 1, 2000);
	json_t *m;

	poll(fds, (nfds_t)(1 + n), ms);
	if (fds[0].revents & POLLIN)
		assert_int_equal(channel_on_readable(T.ch), 0);
	host_on_events(T.host, fds + 1, n);
	while (proto_recv(T.web, &m) == 0)
		json_array_append_new(T.seen, m);
}

/* Takes the first seen message of type matching (field == value, when given). */
static json_t *take(const char *type, const char *field, const char *value, int timeout_ms)
{
	long long until = clock_ms() + timeout_ms;

	for (;;) {
		size_t i;
		json_t *m;
		json_array_foreach(T.seen, i, m) {
			if (strcmp(json_string_value(json_object_get(m, "type")), type) != 0)
				continue;
			if (field && strcmp(proto_str(m, field), value) != 0)
				continue;
			json_incref(m);
			json_array_remove(T.seen, i);
			return m;
		}
		if (clock_ms() > until)
			fail_msg("no %s%s%s within %d ms", type, field ? " " : "", value ? value : "",
				 timeout_ms);
		turn(50);
	}
}

/* The first seen message of type, if there is one now. */
static json_t *take_now(const char *type)
{
	size_t i;
	json_t *m;

	json_array_foreach(T.seen, i, m) {
		if (strcmp(json_string_value(json_object_get(m, "type")), type) == 0)
			return m;
	}
	return NULL;
}

static json_t *request(json_t *msg)
{
	long long id = T.next_id++;
	char idtext[24];

	json_object_set_new(msg, "v", json_integer(PROTO_VERSION));
	json_object_set_new(msg, "id", json_integer(id));
	assert_int_equal(proto_send(T.web, msg), 0);
	json_decref(msg);
	snprintf(idtext, sizeof(idtext), "%lld", id);
	for (long long until = clock_ms() + 10000; clock_ms() < until;) {
		size_t i;
		json_t *m;
		json_array_foreach(T.seen, i, m) {
			if (strcmp(proto_str(m, "type"), "reply") == 0 && proto_int(m, "id") == id) {
				json_incref(m);
				json_array_remove(T.seen, i);
				return m;
			}
		}
		turn(50);
	}
	fail_msg("no reply to %s", idtext);
	return NULL;
}

static void pool_start(long long pool_id, long long memory_bytes)
{
	json_t *r = request(json_pack("{s:s,s:s,s:i,s:I,s:I,s:[],s:I,s:i}", "type", "pool_start",
				      "user", USER, "user_id", USER_ID, "pool_id",
				      (json_int_t)pool_id, "deadline", (json_int_t)time(NULL) + 600,
				      "gpus", "memory_bytes", (json_int_t)memory_bytes, "network", 0));
	if (!proto_bool(r, "ok"))
		fail_msg("pool_start: %s", proto_str(r, "message"));
	json_decref(r);
}

static json_t *wait_pool(const char *type, long long pool_id, int timeout_ms)
{
	char id[24];
	snprintf(id, sizeof(id), "%lld", pool_id);
	for (;;) {
		json_t *m = take(type, NULL, NULL, timeout_ms);
		if (proto_int(m, "pool_id") == pool_id)
			return m;
		json_decref(m);
	}
}

static json_t *job_run(long long pool_id, long long job_id, const char *script,
		       long long max_runtime_s)
{
	json_array_clear(T.seen); /* what earlier jobs said is not this one's */
	json_t *spec = json_pack("{s:s,s:[s,s,s],s:{s:s},s:s,s:{s:f,s:s},s:[{s:s,s:s}],s:s,s:s,"
				 "s:I,s:i}",
				 "name", "job-test", "argv", "sh", "-c", script, "env", "MY_VAR",
				 "mine", "cwd", "", "hyperparameters", "lr", 0.5, "opt", "adam",
				 "channels", "name", "train", "path", "data/train", "output_path",
				 "out", "checkpoint_path", "out/ckpt", "max_runtime_s",
				 (json_int_t)max_runtime_s, "grace_s", 2);
	char *text = json_dumps(spec, JSON_COMPACT);
	json_t *r = request(json_pack("{s:s,s:s,s:I,s:I,s:s}", "type", "job_run", "user", USER,
				      "pool_id", (json_int_t)pool_id, "job_id", (json_int_t)job_id,
				      "spec", text));
	free(text);
	json_decref(spec);
	return r;
}

/* Runs a job to its end; returns job_exited. */
static json_t *run_to_end(long long pool_id, long long job_id, const char *script, int timeout_ms)
{
	json_t *r = job_run(pool_id, job_id, script, 60);
	if (!proto_bool(r, "ok"))
		fail_msg("job_run %lld: %s", job_id, proto_str(r, "message"));
	json_decref(r);
	return take("job_exited", NULL, NULL, timeout_ms);
}

static char *slurp(const char *path)
{
	static char buf[65536];
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return x < y ? -1 : x > y;
}

static void hello(void)
{
	json_decref(request(json_pack("{s:s,s:s}", "type", "hello", "version", LABD_VERSION)));
}

/* A supervisor restart: a new host takes the sandboxes over from their records,
 * and a new channel listens once its web process says hello. */
static void restart(void)
{
	int sv[2];

	channel_free(T.ch);
	T.ch = NULL; /* the new host's adoption emits before the new channel exists */
	close(T.web);
	host_free(T.host);
	T.host = host_new(&T.cfg, T.dir, purposes, 2, emit, NULL);
	assert_non_null(T.host);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	T.ch = channel_new(sv[0], T.host);
	T.web = sv[1];
}

static int setup(void **state)
{
	(void)state;
	if (geteuid() != 0)
		return 0;
	int sv[2];
	unit_tempdir(T.dir);
	chmod(T.dir, 0755);
	config_defaults(&T.cfg, false);
	T.cfg.uid_base = 200000; /* what labd's start settles "auto" to (uidmap_settle_base) */
	snprintf(T.cfg.state_dir, sizeof(T.cfg.state_dir), "%s", T.dir);
	T.cfg.home_size_bytes = 256ULL << 20;
	T.cfg.jobs_sample_interval_ms = 200;
	assert_int_equal(statedir_prepare(T.dir, "", 0, 0750), 0);
	T.host = host_new(&T.cfg, T.dir, purposes, 2, emit, NULL);
	assert_non_null(T.host);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	T.ch = channel_new(sv[0], T.host);
	T.web = sv[1];
	T.seen = json_array();
	hello();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (geteuid() != 0)
		return 0;
	host_stop_all(T.host, "test over");
	for (long long until = clock_ms() + 20000; host_live(T.host) && clock_ms() < until;)
		turn(50);
	channel_free(T.ch);
	host_free(T.host);
	close(T.web);
	json_decref(T.seen);
	unit_rmdir(T.dir);
	return 0;
}

static void home_dir(const char *rel)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/homes/%d/mnt/%s", T.dir, USER_ID, rel);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(chown(path, HOST_UID, HOST_UID), 0);
}

static void test_pool_and_jobs(void **state)
{
	char path[256], *text;
	json_t *m;
	(void)state;
	if (geteuid() != 0)
		skip();
	int runs = getenv("POOLS_RUNS") ? (int)strtol(getenv("POOLS_RUNS"), NULL, 10) : 20;
	long long t0 = clock_ms();
	pool_start(1, 512LL << 20);
	json_decref(wait_pool("pool_ready", 1, 30000));
	long long cold_ms = clock_ms() - t0;

	/* the home is mounted while the pool holds it: the channel's folder */
	home_dir("data");
	home_dir("data/train");
	snprintf(path, sizeof(path), "%s/homes/%d/mnt/data/train/x.csv", T.dir, USER_ID);
	FILE *f = fopen(path, "w");
	fputs("1,2\n", f);
	fclose(f);

	m = run_to_end(1, 101,
		       "echo out-line; echo err-line >&2; cat /opt/ml/input/data/train/x.csv; "
		       "cat $SM_INPUT_CONFIG_DIR/hyperparameters.json; echo; echo hp=$SM_HP_OPT "
		       "var=$MY_VAR ch=$SM_CHANNELS; echo model > /opt/ml/model/m.txt; "
		       "touch /opt/ml/input/data/train/nope 2>/dev/null || echo ro-ok",
		       30000);
	assert_string_equal(proto_str(m, "kind"), "exited");
	assert_int_equal(proto_int(m, "code"), 0);
	json_decref(m);
	snprintf(path, sizeof(path), "%s/joblogs/101.log", T.dir);
	text = slurp(path);
	assert_non_null(strstr(text, "out-line\n"));
	assert_non_null(strstr(text, "err-line\n"));
	assert_non_null(strstr(text, "1,2\n"));
	assert_non_null(strstr(text, "\"lr\": 0.5") ?: strstr(text, "\"lr\":0.5"));
	assert_non_null(strstr(text, "hp=adam var=mine ch=[\"train\"]"));
	assert_non_null(strstr(text, "ro-ok"));
	snprintf(path, sizeof(path), "%s/homes/%d/mnt/out/model/m.txt", T.dir, USER_ID);
	assert_string_equal(slurp(path), "model\n");
	snprintf(path, sizeof(path), "%s/homes/%d/mnt/out/log.txt", T.dir, USER_ID);
	assert_non_null(strstr(slurp(path), "out-line"));
	/* the phases came in order */
	m = take("job_phase", "phase", "downloading", 1000);
	json_decref(m);
	json_decref(take("job_phase", "phase", "training", 1000));
	json_decref(take("job_phase", "phase", "uploading", 1000));

	/* warm: job_run -> training, again and again in the same pool */
	long long warm[64];
	runs = runs > 64 ? 64 : runs < 1 ? 1 : runs;
	for (int i = 0; i < runs; i++) {
		long long s = clock_ms();
		json_t *r = job_run(1, 200 + i, "exit 0", 60);
		assert_true(proto_bool(r, "ok"));
		json_decref(r);
		json_decref(take("job_phase", "phase", "training", 10000));
		warm[i] = clock_ms() - s;
		m = take("job_exited", NULL, NULL, 10000);
		assert_string_equal(proto_str(m, "kind"), "exited");
		json_decref(m);
	}
	qsort(warm, (size_t)runs, sizeof(warm[0]), cmp_ll);
	print_message("pools: pool_start->pool_ready %lld ms (cold, first); job_run->training "
		      "median %lld ms, max %lld ms over %d runs\n",
		      cold_ms, warm[runs / 2], warm[runs - 1], runs);

	/* nothing of job N survives into N+1 */
	m = run_to_end(1, 300, "sleep 1000 & echo started-bg", 10000);
	json_decref(m);
	m = run_to_end(1, 301, "pgrep -x sleep && echo LEFTOVER || echo clean", 10000);
	json_decref(m);
	snprintf(path, sizeof(path), "%s/joblogs/301.log", T.dir);
	assert_non_null(strstr(slurp(path), "clean"));

	/* a bad spec is refused, naming the field, and the pool stays idle */
	json_t *r = request(json_pack("{s:s,s:s,s:i,s:i,s:s}", "type", "job_run", "user", USER,
				      "pool_id", 1, "job_id", 400, "spec",
				      "{\"name\":\"x\",\"argv\":[\"true\"],\"output_path\":\"/etc\","
				      "\"checkpoint_path\":\"c\",\"max_runtime_s\":5}"));
	assert_false(proto_bool(r, "ok"));
	assert_string_equal(proto_str(r, "code"), "bad_spec");
	assert_non_null(strstr(proto_str(r, "message"), "output_path"));
	json_decref(r);

	/* stop with grace: the script saves on SIGTERM */
	r = job_run(1, 500, "trap 'echo saved > /opt/ml/checkpoints/c; exit 3' TERM; "
			    "sleep 100 & wait", 60);
	assert_true(proto_bool(r, "ok"));
	json_decref(r);
	json_decref(take("job_phase", "phase", "training", 10000));
	/* samples every [jobs] sample_interval (200 ms here) while it trains */
	m = take("job_sample", NULL, NULL, 3000);
	assert_int_equal(proto_int(m, "job_id"), 500);
	assert_true(proto_int(m, "memory_bytes") > 0);
	assert_int_equal(proto_int(m, "memory_limit_bytes"), 512LL << 20);
	json_decref(m);
	json_decref(take("job_sample", NULL, NULL, 3000));
	json_decref(request(json_pack("{s:s,s:s,s:i,s:i,s:i}", "type", "job_stop", "user", USER,
				      "pool_id", 1, "job_id", 500, "grace_s", 10)));
	m = take("job_exited", NULL, NULL, 10000);
	assert_string_equal(proto_str(m, "kind"), "stopped");
	assert_int_equal(proto_int(m, "code"), 3);
	json_decref(m);
	snprintf(path, sizeof(path), "%s/homes/%d/mnt/out/ckpt/c", T.dir, USER_ID);
	assert_string_equal(slurp(path), "saved\n");

	/* max runtime: SIGTERM at 1 s; grace 2 s */
	r = job_run(1, 601, "sleep 100", 1);
	json_decref(r);
	m = take("job_exited", NULL, NULL, 10000);
	assert_string_equal(proto_str(m, "kind"), "max_runtime");
	json_decref(m);

	/* a job that ignores SIGTERM: after the grace its whole pool is killed */
	r = job_run(1, 700, "trap '' TERM; while :; do sleep 0.1; done", 60);
	json_decref(r);
	json_decref(take("job_phase", "phase", "training", 10000));
	usleep(300000);
	json_decref(request(json_pack("{s:s,s:s,s:i,s:i,s:i}", "type", "job_stop", "user", USER,
				      "pool_id", 1, "job_id", 700, "grace_s", 1)));
	m = take("job_exited", NULL, NULL, 10000);
	assert_string_equal(proto_str(m, "kind"), "stopped");
	json_decref(m);
	json_decref(wait_pool("pool_ended", 1, 20000));

	/* OOM in a small pool, said plainly */
	pool_start(2, 64LL << 20);
	json_decref(wait_pool("pool_ready", 2, 30000));
	m = run_to_end(2, 800, "python3 -c 'a = bytearray(400 << 20); print(len(a))'", 30000);
	assert_string_equal(proto_str(m, "kind"), "oom");
	json_decref(m);

	/* pool_stop: killed at once, pool_ended requested */
	json_decref(request(json_pack("{s:s,s:s,s:i,s:s}", "type", "pool_stop", "user", USER,
				      "pool_id", 2, "reason", "released")));
	m = wait_pool("pool_ended", 2, 20000);
	assert_string_equal(proto_str(m, "cause"), "requested");
	json_decref(m);

	/* a supervisor restart: the new supervisor takes the pool over from its
	 * keeper; the job runs on, what it printed meanwhile is in its log once, and
	 * its end is said once a web process listens */
	pool_start(3, 256LL << 20);
	json_decref(wait_pool("pool_ready", 3, 30000));
	json_decref(job_run(3, 900, "echo before; sleep 2; echo after", 60));
	json_decref(take("job_phase", "phase", "training", 10000));
	restart();
	for (long long until = clock_ms() + 3000; clock_ms() < until;)
		turn(50); /* the job ends meanwhile: nobody listens, it is not read yet */
	assert_null(take_now("job_exited"));
	hello();
	m = take("job_exited", NULL, NULL, 20000);
	assert_int_equal(proto_int(m, "job_id"), 900);
	assert_string_equal(proto_str(m, "kind"), "exited");
	assert_int_equal(proto_int(m, "code"), 0);
	json_decref(m);
	snprintf(path, sizeof(path), "%s/joblogs/900.log", T.dir);
	assert_string_equal(slurp(path), "before\nafter\n");

	/* an upload that ends while no web process listens: its end is held, in the
	 * record across another restart, and said once one listens */
	json_decref(job_run(3, 901, "echo held", 60));
	json_decref(take("job_phase", "phase", "uploading", 10000));
	host_set_listening(T.host, false);
	for (long long until = clock_ms() + 1500; clock_ms() < until;)
		turn(50);
	assert_null(take_now("job_exited"));
	restart();
	hello();
	m = take("job_exited", NULL, NULL, 10000);
	assert_int_equal(proto_int(m, "job_id"), 901);
	assert_string_equal(proto_str(m, "kind"), "exited");
	json_decref(m);
	json_decref(request(json_pack("{s:s,s:s,s:i,s:s}", "type", "pool_stop", "user", USER,
				      "pool_id", 3, "reason", "done")));
	json_decref(wait_pool("pool_ended", 3, 20000));
	snprintf(path, sizeof(path), "%s/pools/3", T.dir);
	assert_int_equal(access(path, F_OK), -1);

	/* cold: pool_start -> pool_ready, a fresh pool each time */
	long long cold[64];
	for (int i = 0; i < runs; i++) {
		json_array_clear(T.seen);
		long long s = clock_ms();
		pool_start(10 + i, 512LL << 20);
		json_decref(wait_pool("pool_ready", 10 + i, 30000));
		cold[i] = clock_ms() - s;
		json_decref(request(json_pack("{s:s,s:s,s:i,s:s}", "type", "pool_stop", "user", USER,
					      "pool_id", 10 + i, "reason", "measured")));
		json_decref(wait_pool("pool_ended", 10 + i, 20000));
	}
	qsort(cold, (size_t)runs, sizeof(cold[0]), cmp_ll);
	print_message("pools: pool_start->pool_ready median %lld ms, max %lld ms over %d pools\n",
		      cold[runs / 2], cold[runs - 1], runs);
}

/* A start of either purpose as the web process sends it; the reply's code ("" when ok). */
static const char *start_code(bool runtime, long long deadline, const char *kind, json_t *gpus,
			      char *code, size_t len)
{
	json_t *m = runtime ? json_pack("{s:s,s:s,s:i,s:i,s:s,s:s,s:I,s:o}", "type",
					"sandbox_start", "user", "ghost", "user_id", 4343,
					"runtime_id", 5, "kind", kind, "token",
					"abcdefghijklmnopqrstuvwxyz0123456789-_ABCDE", "deadline",
					(json_int_t)deadline, "gpus", gpus)
			    : json_pack("{s:s,s:s,s:i,s:i,s:I,s:o}", "type", "pool_start", "user",
					"ghost", "user_id", 4343, "pool_id", 5, "deadline",
					(json_int_t)deadline, "gpus", gpus);
	json_t *r = request(m);

	snprintf(code, len, "%s", proto_bool(r, "ok") ? "" : proto_str(r, "code"));
	json_decref(r);
	return code;
}

/* An entry of sandbox_list for (runtime_id, pool_id) of user, or NULL. */
static json_t *listed(const char *user, long long runtime_id, long long pool_id)
{
	json_t *r = request(json_pack("{s:s}", "type", "sandbox_list")), *e, *found = NULL;
	size_t i;

	json_array_foreach(json_object_get(r, "sandboxes"), i, e) {
		if (strcmp(proto_str(e, "user"), user) == 0 &&
		    proto_int(e, "runtime_id") == runtime_id && proto_int(e, "pool_id") == pool_id)
			found = json_incref(e);
	}
	json_decref(r);
	return found;
}

/* The one host with both purposes: a refusal's code comes from the one start
 * check whichever purpose asks; records of both purposes whose sandboxes are gone
 * (a runtime's as the previous release wrote it, a pool's as today's does) are
 * read back by a restarted host, the runtime's forgotten, the pool ended with its
 * GPU freed; and one list shows them. */
static void test_host_both_purposes(void **state)
{
	char code[32], path[100], written[128];
	long long now = time(NULL);
	struct stat st;
	json_t *e;

	(void)state;
	if (geteuid() != 0)
		skip();
	for (int runtime = 0; runtime <= 1; runtime++) {
		assert_string_equal(start_code(runtime, now - 5, "cpu", json_array(), code,
					       sizeof(code)),
				    "past_deadline");
		/* no GPU is configured here: every GPU named is refused as such */
		assert_string_equal(start_code(runtime, now + 600, "gpu", json_pack("[i]", 0), code,
					       sizeof(code)),
				    "gpu_not_configured");
	}

	snprintf(path, sizeof(path), "%s/boxes", T.dir);
	mkdir(path, 0700);
	unit_write(path, "ghost.json",
		   "{\"user\":\"ghost\",\"id\":\"ghost-000000000000\",\"kind\":\"gpu\","
		   "\"runtime_id\":5,\"uid\":204343,\"deadline\":4102444800,\"gpus\":[0]}",
		   written);
	snprintf(path, sizeof(path), "%s/pools/77", T.dir);
	mkdir(path, 0700);
	unit_write(path, "record.json",
		   "{\"user\":\"ghost\",\"user_id\":4343,\"pool_id\":77,"
		   "\"id\":\"ghost-111111111111\",\"uid\":204343,\"job_id\":0,"
		   "\"deadline\":4102444800,\"cpus_milli\":1000,\"ready\":true,\"gpus\":[1]}",
		   written);
	restart();
	hello();
	snprintf(path, sizeof(path), "%s/boxes/ghost.json", T.dir);
	assert_int_equal(stat(path, &st), -1); /* the runtime is gone: its record too */
	assert_null(listed("ghost", 5, 0));
	assert_false(host_gpu_held(T.host, 0));
	e = listed("ghost", 0, 77);
	assert_non_null(e);
	assert_string_equal(proto_str(e, "state"), "ended");
	assert_string_equal(proto_str(e, "cause"), "gone");
	assert_true(proto_bool(e, "failed"));
	json_decref(e);
	assert_false(host_gpu_held(T.host, 1));
	snprintf(path, sizeof(path), "%s/pools/77", T.dir);
	assert_int_equal(stat(path, &st), -1);
}

#define SCRATCH_USER "scratchtest"
#define SCRATCH_USER_ID 4243

/* A pool start as a host of a job on several nodes sends it (docs/slurm.md), with
 * extra fields (a JSON object's text without braces); the reply. */
static json_t *scratch_start(long long pool_id, const char *extra)
{
	char text[1024];

	snprintf(text, sizeof(text),
		 "{\"type\":\"pool_start\",\"user\":\"" SCRATCH_USER "\",\"user_id\":%d,"
		 "\"pool_id\":%lld,\"deadline\":%lld,\"gpus\":[],\"memory_bytes\":%lld,"
		 "\"network\":0%s%s}",
		 SCRATCH_USER_ID, pool_id, (long long)time(NULL) + 600, 256LL << 20,
		 extra[0] ? "," : "", extra);
	json_t *msg = json_loads(text, 0, NULL);
	assert_non_null(msg);
	return request(msg);
}

static json_t *scratch_job(long long pool_id, long long job_id, const char *script,
			   bool channels)
{
	json_t *spec = json_pack("{s:s,s:[s,s,s],s:s,s:s,s:s,s:i}", "name", "scratch", "argv",
				 "sh", "-c", script, "cwd", "work", "output_path", "out",
				 "checkpoint_path", "out/ckpt", "max_runtime_s", 60);
	if (channels)
		json_object_set_new(spec, "channels",
				    json_pack("[{s:s,s:s}]", "name", "train", "path", "data"));
	char *text = json_dumps(spec, JSON_COMPACT);
	json_t *r = request(json_pack("{s:s,s:s,s:I,s:I,s:s}", "type", "job_run", "user",
				      SCRATCH_USER, "pool_id", (json_int_t)pool_id, "job_id",
				      (json_int_t)job_id, "spec", text));
	free(text);
	json_decref(spec);
	return r;
}

/* A host of a job on several nodes other than the first: only a node takes a pool
 * start with a peer network or a scratch home, the peers checked strictly; the
 * scratch home is the user's own empty folder (its working dir made), a job writes
 * there and to /opt/ml/model, and no home image is ever made; a job with input
 * channels is refused naming inputs; a restarted supervisor adopts the pool as it
 * was; nothing is left once the pool ends. */
static void test_scratch_home_pool(void **state)
{
	char path[256], *text;
	struct stat st;
	json_t *r, *m;

	(void)state;
	if (geteuid() != 0)
		skip();
	r = scratch_start(60, "\"scratch_home\":true");
	assert_false(proto_bool(r, "ok"));
	assert_string_equal(proto_str(r, "code"), "bad_request");
	assert_non_null(strstr(proto_str(r, "message"), "only a node"));
	json_decref(r);

	T.cfg.node_mode = true;
	snprintf(T.cfg.node_data_listen, sizeof(T.cfg.node_data_listen), "127.0.0.1:7001");
	static const char *const bad[][2] = {
		{"\"peer_addr\":\"10.9.0.1\",\"peers\":\"10.9.0.1\"", "holds peer_addr"},
		{"\"peer_addr\":\"10.9.0.1\",\"peers\":\"10.9.0.2,10.9.0.2\"", "named twice"},
		{"\"peer_addr\":\"10.9.0.1\",\"peers\":\"10.9.0.2, 10.9.0.3\"", "10.9.0.3"},
		{"\"peer_addr\":\"10.9.0.1\",\"peers\":\"10.9.0.2,127.0.0.1\"", "127.0.0.1"},
		{"\"peer_addr\":\"10.9.0.300\",\"peers\":\"10.9.0.2\"", "peer_addr"},
		{"\"peers\":\"10.9.0.2\"", "both or neither"},
		{"\"peer_addr\":\"10.9.0.1\"", "both or neither"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r = scratch_start(60, bad[i][0]);
		assert_false(proto_bool(r, "ok"));
		if (!strstr(proto_str(r, "message"), bad[i][1]))
			fail_msg("%s: %s", bad[i][0], proto_str(r, "message"));
		json_decref(r);
	}

	/* good peers reach the sandbox's spec: here data_listen's address is loopback,
	 * no cluster network's, and the sandbox refuses it */
	r = scratch_start(62, "\"peer_addr\":\"10.9.0.1\",\"peers\":\"10.9.0.2\"");
	if (!proto_bool(r, "ok"))
		fail_msg("pool_start with peers: %s", proto_str(r, "message"));
	json_decref(r);
	m = wait_pool("pool_ended", 62, 30000);
	if (!strstr(proto_str(m, "reason"), "peer interface: the parent's address 127.0.0.1"))
		fail_msg("pool 62 ended: %s", proto_str(m, "reason"));
	json_decref(m);

	r = scratch_start(61, "\"scratch_home\":true");
	if (!proto_bool(r, "ok"))
		fail_msg("pool_start: %s", proto_str(r, "message"));
	json_decref(r);
	json_decref(wait_pool("pool_ready", 61, 30000));
	json_array_clear(T.seen);
	r = scratch_job(61, 601, "true", true);
	assert_false(proto_bool(r, "ok"));
	assert_string_equal(proto_str(r, "code"), "bad_spec");
	assert_non_null(strstr(proto_str(r, "message"), "inputs"));
	json_decref(r);

	r = scratch_job(61, 602,
			"pwd; stat -c 'home %u %a' $HOME; echo kept > $HOME/note.txt; "
			"cat $HOME/note.txt; echo model > /opt/ml/model/m.txt; "
			"df --output=fstype $HOME | tail -1",
			false);
	if (!proto_bool(r, "ok"))
		fail_msg("job_run: %s", proto_str(r, "message"));
	json_decref(r);
	m = take("job_exited", NULL, NULL, 30000);
	assert_string_equal(proto_str(m, "kind"), "exited");
	assert_int_equal(proto_int(m, "code"), 0);
	json_decref(m);
	snprintf(path, sizeof(path), "%s/joblogs/602.log", T.dir);
	text = slurp(path);
	assert_non_null(strstr(text, "/home/" SCRATCH_USER "/work\n"));
	assert_non_null(strstr(text, "home 1000 700\n"));
	assert_non_null(strstr(text, "kept\n"));
	assert_non_null(strstr(text, "tmpfs\n"));
	/* no home image, and nothing of the job in a home's mount */
	snprintf(path, sizeof(path), "%s/homes/%d.img", T.dir, SCRATCH_USER_ID);
	assert_int_equal(stat(path, &st), -1);
	snprintf(path, sizeof(path), "%s/homes/%d", T.dir, SCRATCH_USER_ID);
	assert_int_equal(stat(path, &st), -1);

	/* a restarted supervisor adopts the pool with its scratch home: still there, and
	 * still no inputs */
	restart();
	hello();
	json_array_clear(T.seen);
	r = scratch_job(61, 603, "true", true);
	assert_false(proto_bool(r, "ok"));
	assert_non_null(strstr(proto_str(r, "message"), "inputs"));
	json_decref(r);
	r = scratch_job(61, 604, "cat $HOME/note.txt", false);
	if (!proto_bool(r, "ok"))
		fail_msg("job_run after the restart: %s", proto_str(r, "message"));
	json_decref(r);
	m = take("job_exited", NULL, NULL, 30000);
	assert_int_equal(proto_int(m, "code"), 0);
	json_decref(m);
	snprintf(path, sizeof(path), "%s/joblogs/604.log", T.dir);
	assert_non_null(strstr(slurp(path), "kept\n"));

	json_decref(request(json_pack("{s:s,s:s,s:I,s:s}", "type", "pool_stop", "user",
				      SCRATCH_USER, "pool_id", (json_int_t)61, "reason", "done")));
	json_decref(wait_pool("pool_ended", 61, 20000));
	for (long long until = clock_ms() + 10000; host_live(T.host) && clock_ms() < until;)
		turn(50);
	snprintf(path, sizeof(path), "%s/scratch", T.dir);
	DIR *d = opendir(path);
	int left = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		left += e->d_name[0] != '.';
	if (d)
		closedir(d);
	assert_int_equal(left, 0);
	T.cfg.node_mode = false;
}

/* labd stopping with [runtime] keep_on_shutdown = false: a pool_start the ending
 * web process still sends after host_stop_all is built and then stopped at once,
 * like the pools that were starting (the supervisor would otherwise wait out its
 * give-up time and leave the pool running for the next one to adopt). Last: the
 * host stays stopping. */
static void test_a_start_while_stopping_all_is_stopped(void **state)
{
	json_t *e;

	(void)state;
	if (geteuid() != 0)
		skip();
	host_stop_all(T.host, "labd is shutting down");
	for (long long until = clock_ms() + 20000; host_live(T.host) && clock_ms() < until;)
		turn(50);
	assert_int_equal(host_live(T.host), 0);
	json_array_clear(T.seen);
	pool_start(90, 256LL << 20);
	e = wait_pool("pool_ended", 90, 20000);
	assert_string_equal(proto_str(e, "cause"), "requested");
	assert_string_equal(proto_str(e, "reason"), "labd is shutting down");
	json_decref(e);
	assert_int_equal(host_live(T.host), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host_both_purposes),
		cmocka_unit_test(test_pool_and_jobs),
		cmocka_unit_test(test_scratch_home_pool),
		cmocka_unit_test(test_a_start_while_stopping_all_is_stopped),
	};
	return cmocka_run_group_tests_name("pools_live", tests, setup, teardown);
}
