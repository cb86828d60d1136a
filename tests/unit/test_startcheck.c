/* Unit tests of the one start check (supervisor/startcheck.c): the refusal table
 * run against both purposes, a runtime's sandbox_start and a job pool's pool_start,
 * each message built as the protocol sends it and passed through proto_check first;
 * the code of each refusal comes from the check (the message text is never read
 * back). Also the shape read from a message, and the network fallback decided once. */
#include "unit.h"

#include <errno.h>
#include <sys/stat.h>
#include <time.h>

#include "config/capacity.h"
#include "config/config.h"
#include "config/images.h"
#include "labd/gpucaps.h"
#include "proto/proto.h"
#include "supervisor/startcheck.h"

#define TOKEN "abcdefghijklmnopqrstuvwxyz0123456789-_ABCDE"
#define HELD_GPU 2u

enum purpose { RUNTIME, POOL };

static struct {
	struct labd_config cfg;
	char dir[64];
	unsigned held_asked; /* how many GPUs the check asked about */
	int live;            /* the host's live sandboxes the caller says */
} T;

static bool held(const void *ctx, unsigned gpu)
{
	assert_ptr_equal(ctx, &T);
	T.held_asked++;
	return gpu == HELD_GPU;
}

/* An image folder under T.dir: with labd-image.json when meta, chmod mode. */
static void make_image(const char *name, bool meta, mode_t mode)
{
	char folder[96], path[128];

	snprintf(folder, sizeof(folder), "%.63s/%.31s", T.dir, name);
	assert_int_equal(mkdir(folder, 0755), 0);
	if (meta)
		unit_write(folder, "labd-image.json", "{\"hash\":\"sha256:0123abcd\"}", path);
	assert_int_equal(chmod(folder, mode), 0);
	assert_null(images_add(&T.cfg, name, folder));
}

/* The driver's capability files of card 3 under T.dir/caps ([gpu] caps_dir): GPU
 * instance 1 with compute instance 0, GPU instance 2 without a compute instance. */
static void make_caps(void)
{
	static const char *const dirs[] = {"caps", "caps/gpu3", "caps/gpu3/mig", "caps/gpu3/mig/gi1",
					   "caps/gpu3/mig/gi1/ci0", "caps/gpu3/mig/gi2"};
	char path[160], dir[64], file[128];

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%.63s/%s", T.dir, dirs[i]);
		assert_int_equal(mkdir(path, 0755), 0);
	}
	snprintf(dir, sizeof(dir), "%.32s/caps/gpu3/mig/gi1", T.dir);
	unit_write(dir, "access", "DeviceFileMinor: 21\nDeviceFileMode: 292\n", file);
	snprintf(dir, sizeof(dir), "%.32s/caps/gpu3/mig/gi1/ci0", T.dir);
	unit_write(dir, "access", "DeviceFileMinor: 22\n", file);
	snprintf(dir, sizeof(dir), "%.32s/caps/gpu3/mig/gi2", T.dir);
	unit_write(dir, "access", "DeviceFileMinor: 30\n", file);
	snprintf(T.cfg.gpu_caps_dir, sizeof(T.cfg.gpu_caps_dir), "%.63s/caps", T.dir);
}

static int setup(void **state)
{
	(void)state;
	memset(&T, 0, sizeof(T));
	config_defaults(&T.cfg, false);
	T.cfg.n_gpu_devices = 5; /* GPUs 0, 1 and 2 (2 is held); 3 with MIG on; 4 shared */
	for (unsigned i = 0; i < 5; i++)
		T.cfg.gpu_devices[i] = i;
	T.cfg.gpu_shares[T.cfg.n_gpu_shares++] = (struct config_gpu_share){4, 2, 1LL << 30};
	T.cfg.memory_max_bytes = 8ULL << 30;
	T.cfg.cpus_max_milli = 4000;
	T.cfg.home_size_max_bytes = 100ULL << 30;
	T.cfg.quota_network = 1;
	T.cfg.quota_egress_bytes_per_s = 1000000;
	/* egress tools that every host has: the start check only asks that they run */
	snprintf(T.cfg.net_nft, sizeof(T.cfg.net_nft), "/bin/sh");
	snprintf(T.cfg.net_pasta, sizeof(T.cfg.net_pasta), "/bin/sh");
	unit_tempdir(T.dir);
	make_caps();
	make_image("good", true, 0755);
	make_image("nometa", false, 0755);
	make_image("open", true, 0777);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unit_rmdir(T.dir);
	return 0;
}

/* A start of purpose as the protocol sends it: the purpose's own fields, then the
 * shape's (shape: a JSON object text of BOX_SHAPE_FIELDS, "gpus" among them); checked
 * against the purpose's field list, as the supervisor's channel does before the check. */
static json_t *start_msg(enum purpose p, long long deadline, const char *kind, const char *shape)
{
	json_t *m = proto_msg(p == RUNTIME ? "sandbox_start" : "pool_start", 7);
	json_t *fields = json_loads(shape, 0, NULL);
	char err[128];

	assert_non_null(fields);
	if (p == RUNTIME)
		json_object_update_new(m, json_pack("{s:s,s:i,s:i,s:s,s:s,s:I}", "user", "alice",
						    "user_id", 3, "runtime_id", 9, "kind", kind,
						    "token", TOKEN, "deadline",
						    (json_int_t)deadline));
	else
		json_object_update_new(m, json_pack("{s:s,s:i,s:i,s:I}", "user", "alice",
						    "user_id", 3, "pool_id", 12, "deadline",
						    (json_int_t)deadline));
	json_object_update_new(m, fields);
	assert_int_equal(proto_check(m, p == RUNTIME ? proto_sandbox_start : proto_pool_start,
				     true, err, sizeof(err)),
			 0);
	return m;
}

/* The code startcheck gives a start of purpose; why gets its sentence. */
static enum startcheck_code run(enum purpose p, long long deadline, const char *kind,
				const char *shape, char *why, size_t len,
				struct launch_request *rq, char hash[IMAGE_HASH_MAX])
{
	json_t *m = start_msg(p, deadline, kind, shape);
	struct startcheck_start st;
	enum startcheck_code c;

	startcheck_read(&T.cfg, m, &st);
	st.live = T.live;
	memset(rq, 0, sizeof(*rq));
	c = startcheck_check(&T.cfg, &st, held, &T, rq, hash, why, len);
	json_decref(m);
	return c;
}

static const struct {
	const char *what;
	bool past;
	const char *kind; /* a runtime's; the pool has none */
	const char *shape;
	enum startcheck_code want;
	const char *code;
	const char *says; /* a word of the sentence */
	const char *nft;  /* [network] nft for this row; NULL: one that is there */
} table[] = {
	{"past deadline", true, "cpu", "{\"gpus\":[]}", STARTCHECK_PAST_DEADLINE,
	 "past_deadline", "deadline", NULL},
	{"GPU not configured", false, "gpu", "{\"gpus\":[7]}", STARTCHECK_GPU_NOT_CONFIGURED,
	 "gpu_not_configured", "gpu 7", NULL},
	{"GPU named twice", false, "gpu", "{\"gpus\":[1,1]}", STARTCHECK_GPU_NAMED_TWICE,
	 "gpu_named_twice", "twice", NULL},
	{"GPU held", false, "gpu", "{\"gpus\":[0,2]}", STARTCHECK_GPU_BUSY, "gpu_busy", "gpu 2", NULL},
	{"above the machine cap", false, "cpu", "{\"gpus\":[],\"memory_bytes\":9663676416}",
	 STARTCHECK_ABOVE_MACHINE_CAP, "above_machine_cap", "memory_max", NULL},
	{"cpus above the machine cap", false, "cpu", "{\"gpus\":[],\"cpus_milli\":4001}",
	 STARTCHECK_ABOVE_MACHINE_CAP, "above_machine_cap", "cpus_max", NULL},
	{"image not configured", false, "cpu", "{\"gpus\":[],\"image\":\"nosuch\"}",
	 STARTCHECK_IMAGE_MISSING, "image_missing", "image_missing:", NULL},
	{"image without labd-image.json", false, "cpu", "{\"gpus\":[],\"image\":\"nometa\"}",
	 STARTCHECK_IMAGE_MISSING, "image_missing", "labd-image.json", NULL},
	{"image writable by others", false, "cpu", "{\"gpus\":[],\"image\":\"open\"}",
	 STARTCHECK_IMAGE_UNSAFE, "image_unsafe", "image_unsafe:", NULL},
	/* egress (the [quota] default here) on a host without nft: the tool and the remedy */
	{"egress without nft", false, "cpu", "{\"gpus\":[]}", STARTCHECK_EGRESS_TOOLS_MISSING,
	 "egress_tools_missing", "/nonexistent/nft is not on this host: install nftables", "/nonexistent/nft"},
	{"egress without nft, plan's egress", false, "cpu", "{\"gpus\":[],\"network\":1}",
	 STARTCHECK_EGRESS_TOOLS_MISSING, "egress_tools_missing", "[quota] network = none",
	 "/nonexistent/nft"},
	/* the first refusal in the table's order wins: held before the cap */
	{"GPU held and above the cap", false, "gpu",
	 "{\"gpus\":[2],\"memory_bytes\":9663676416}", STARTCHECK_GPU_BUSY, "gpu_busy", "held", NULL},
};

static void test_refusal_table_both_purposes(void **state)
{
	struct launch_request rq;
	char why[200], hash[IMAGE_HASH_MAX];
	(void)state;

	for (enum purpose p = RUNTIME; p <= POOL; p++)
		for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
			long long deadline = table[i].past ? time(NULL) - 1 : time(NULL) + 3600;
			enum startcheck_code c;

			snprintf(T.cfg.net_nft, sizeof(T.cfg.net_nft), "%s",
				 table[i].nft ? table[i].nft : "/bin/sh");
			c = run(p, deadline, table[i].kind, table[i].shape,
						     why, sizeof(why), &rq, hash);
			if (c != table[i].want)
				fail_msg("%s, %s: code %s (%s), want %s",
					 p == RUNTIME ? "sandbox_start" : "pool_start",
					 table[i].what, startcheck_code_name(c), why,
					 table[i].code);
			assert_string_equal(startcheck_code_name(c), table[i].code);
			if (!strstr(why, table[i].says))
				fail_msg("%s: \"%s\" does not say %s", table[i].what, why,
					 table[i].says);
		}
}

static void test_accepted_start_fills_the_request(void **state)
{
	struct launch_request rq;
	char why[200], hash[IMAGE_HASH_MAX];
	(void)state;

	for (enum purpose p = RUNTIME; p <= POOL; p++) {
		T.held_asked = 0;
		assert_int_equal(run(p, time(NULL) + 60, "gpu",
				     "{\"gpus\":[0,1],\"memory_bytes\":1073741824,\"cpus_milli\":2000,"
				     "\"image\":\"good\"}",
				     why, sizeof(why), &rq, hash),
				 STARTCHECK_OK);
		assert_int_equal(T.held_asked, 2); /* every GPU asked about */
		assert_true(rq.sizes.memory_bytes == 1ULL << 30 && rq.sizes.cpus_milli == 2000);
		/* an absent size is the configured default */
		assert_true(rq.sizes.home_size_bytes == T.cfg.home_size_bytes);
		assert_true(rq.from_image);
		assert_non_null(strstr(rq.root, "/good"));
		assert_string_equal(hash, "sha256:0123abcd");
		/* no image: [runtime] image, no hash */
		assert_int_equal(run(p, time(NULL) + 60, "cpu", "{\"gpus\":[]}", why, sizeof(why),
				     &rq, hash),
				 STARTCHECK_OK);
		assert_false(rq.from_image);
		assert_string_equal(rq.root, T.cfg.image);
		assert_string_equal(hash, "");
	}
}

/* GPU device ids against root's own records: a MIG instance must be in caps_dir (its GPU
 * and its compute instance), a whole card with MIG instances or listed in [gpu] shares
 * is refused, a share must be below its card's count; two devices of one card are
 * asked for at once unless one is the card; uuids name each device by its kind. */
static void test_device_ids(void **state)
{
	static const struct {
		const char *shape;
		enum startcheck_code want;
		const char *says;
	} rows[] = {
		{"{\"gpus\":[66312]}", STARTCHECK_OK, NULL},                   /* 3/gi1/ci0 */
		{"{\"gpus\":[66312],\"gpu_uuids\":[\"MIG-1a2b-3c4d\"]}", STARTCHECK_OK, NULL},
		{"{\"gpus\":[66321]}", STARTCHECK_GPU_NOT_CONFIGURED, "no MIG instance 3/gi2/ci1"},
		{"{\"gpus\":[66320]}", STARTCHECK_GPU_NOT_CONFIGURED, "no MIG instance 3/gi2/ci0"},
		{"{\"gpus\":[65792]}", STARTCHECK_GPU_NOT_CONFIGURED, "no MIG instance 1/gi0/ci0"},
		{"{\"gpus\":[3]}", STARTCHECK_GPU_NOT_CONFIGURED, "gpu 3 has MIG on"},
		{"{\"gpus\":[4]}", STARTCHECK_GPU_NOT_CONFIGURED, "gpu 4 is shared"},
		{"{\"gpus\":[132097]}", STARTCHECK_OK, NULL},                 /* 4/share1 */
		{"{\"gpus\":[132098]}", STARTCHECK_GPU_NOT_CONFIGURED, "no share 4/share2"},
		{"{\"gpus\":[131329]}", STARTCHECK_GPU_NOT_CONFIGURED, "no share 1/share1"},
		{"{\"gpus\":[132096,132096]}", STARTCHECK_GPU_NAMED_TWICE, "4/share0"},
		{"{\"gpus\":[132096,132097]}", STARTCHECK_OK, NULL},
		{"{\"gpus\":[327680]}", STARTCHECK_GPU_NOT_CONFIGURED, "gpu ?"}, /* no kind */
		{"{\"gpus\":[66312],\"gpu_uuids\":[\"GPU-1a2b\"]}", STARTCHECK_BAD_REQUEST,
		 "of another kind"},
		{"{\"gpus\":[0],\"gpu_uuids\":[\"MIG-1a2b\"]}", STARTCHECK_BAD_REQUEST, "another kind"},
		{"{\"gpus\":[0,1],\"gpu_uuids\":[\"GPU-1a2b\"]}", STARTCHECK_BAD_REQUEST,
		 "each of gpus"},
	};
	struct launch_request rq;
	char why[200], hash[IMAGE_HASH_MAX];
	(void)state;

	for (enum purpose p = RUNTIME; p <= POOL; p++)
		for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
			enum startcheck_code c =
				run(p, time(NULL) + 60, "gpu", rows[i].shape, why, sizeof(why), &rq, hash);
			if (c != rows[i].want || (rows[i].says && !strstr(why, rows[i].says)))
				fail_msg("%s: code %d (%s), want %d (%s)", rows[i].shape, c, why,
					 rows[i].want, rows[i].says ? rows[i].says : "");
		}
	/* the capability files as the driver writes them: the DeviceFileMinor line, not the
	 * first number; a file without one is no grant */
	unsigned cap = 0;
	char dir[64], file[128];
	assert_int_equal(gpucaps_minor(T.cfg.gpu_caps_dir, 3, 1, GPUCAPS_CI_NONE, &cap), 0);
	assert_int_equal(cap, 21);
	assert_int_equal(gpucaps_minor(T.cfg.gpu_caps_dir, 3, 1, 0, &cap), 0);
	assert_int_equal(cap, 22);
	assert_int_equal(gpucaps_minor(T.cfg.gpu_caps_dir, 3, 2, 0, &cap), -ENOENT);
	assert_int_equal(gpucaps_minor(T.cfg.gpu_caps_dir, 0, 1, 0, &cap), -ENOENT);
	snprintf(dir, sizeof(dir), "%.32s/caps/gpu3/mig/gi1", T.dir);
	unit_write(dir, "access", "DeviceFileMode: 292\nDeviceFileMinor:x\n", file);
	assert_int_equal(gpucaps_minor(T.cfg.gpu_caps_dir, 3, 1, GPUCAPS_CI_NONE, &cap), -EINVAL);
	assert_int_equal(run(POOL, time(NULL) + 60, NULL, "{\"gpus\":[66312]}", why, sizeof(why), &rq,
			     hash),
			 STARTCHECK_GPU_NOT_CONFIGURED);
	unit_write(dir, "access", "DeviceFileMinor: 21\nDeviceFileMode: 292\n", file);
	assert_true(gpucaps_mig_used(T.cfg.gpu_caps_dir, 3));
	assert_false(gpucaps_mig_used(T.cfg.gpu_caps_dir, 0));
	assert_true(gpucaps_uuid_ok("GPU-4f1c-AB") && !gpucaps_uuid_ok("GPU-") &&
		    !gpucaps_uuid_ok("NVD-12") && !gpucaps_uuid_ok(NULL));
	/* the uuids reach the request, one per device */
	json_t *m = start_msg(POOL, time(NULL) + 60, NULL,
			      "{\"gpus\":[66312,132097],\"gpu_uuids\":[\"MIG-aa-bb\",\"GPU-cc\"]}");
	struct startcheck_start st;
	startcheck_read(&T.cfg, m, &st);
	memset(&rq, 0, sizeof(rq));
	startcheck_fill(&st, &rq);
	assert_string_equal(rq.gpu_uuids[0], "MIG-aa-bb");
	assert_string_equal(rq.gpu_uuids[1], "GPU-cc");
	json_decref(m);
	/* the protocol takes only uuids there */
	static const char *const bad[] = {"[\"MIG-zz\"]", "[\"mig-aa\"]", "[\"MIG-\"]", "[1]", "[]",
					  "\"MIG-aa\""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char err[128], text[96];
		snprintf(text, sizeof(text), "{\"gpus\":[66312],\"gpu_uuids\":%s}", bad[i]);
		json_t *fields = json_loads(text, 0, NULL);
		m = proto_msg("pool_start", 7);
		json_object_update_new(m, json_pack("{s:s,s:i,s:i,s:i}", "user", "alice", "user_id", 3,
						    "pool_id", 12, "deadline", 2000000000));
		json_object_update_new(m, fields);
		assert_int_equal(proto_check(m, proto_pool_start, true, err, sizeof(err)), -EPROTO);
		assert_non_null(strstr(err, "gpu_uuids"));
		json_decref(m);
	}
}

/* Only a runtime has a kind, and its GPUs must match it. */
/* The host-wide cap: a start while the host runs [runtime] max_sandboxes is refused,
 * one below it passes; 0 derives the cap from memory. */
/* A start without a network runs on a host without the egress tools. */
static void test_no_network_needs_no_egress_tools(void **state)
{
	struct launch_request rq;
	char why[200], hash[IMAGE_HASH_MAX];
	(void)state;

	snprintf(T.cfg.net_nft, sizeof(T.cfg.net_nft), "/nonexistent/nft");
	snprintf(T.cfg.net_pasta, sizeof(T.cfg.net_pasta), "/nonexistent/pasta");
	for (enum purpose p = RUNTIME; p <= POOL; p++)
		assert_int_equal(run(p, time(NULL) + 3600, "cpu", "{\"gpus\":[],\"network\":0}",
				     why, sizeof(why), &rq, hash),
				 STARTCHECK_OK);
	snprintf(T.cfg.net_nft, sizeof(T.cfg.net_nft), "/bin/sh");
	assert_int_equal(run(RUNTIME, time(NULL) + 3600, "cpu", "{\"gpus\":[],\"network\":1}", why,
			     sizeof(why), &rq, hash),
			 STARTCHECK_EGRESS_TOOLS_MISSING);
	assert_non_null(strstr(why, "/nonexistent/pasta is not on this host: install passt"));
	snprintf(T.cfg.net_pasta, sizeof(T.cfg.net_pasta), "/bin/sh");
}

static void test_host_full(void **state)
{
	struct launch_request rq;
	char why[200], hash[IMAGE_HASH_MAX];
	(void)state;

	T.cfg.max_sandboxes = 3;
	for (enum purpose p = RUNTIME; p <= POOL; p++) {
		T.live = 3;
		assert_int_equal(run(p, time(NULL) + 60, "cpu", "{\"gpus\":[]}", why, sizeof(why),
				     &rq, hash),
				 STARTCHECK_HOST_FULL);
		assert_string_equal(startcheck_code_name(STARTCHECK_HOST_FULL), "host_full");
		assert_non_null(strstr(why, "max_sandboxes"));
		T.live = 2;
		assert_int_equal(run(p, time(NULL) + 60, "cpu", "{\"gpus\":[]}", why, sizeof(why),
				     &rq, hash),
				 STARTCHECK_OK);
	}
	T.live = 0;
	T.cfg.max_sandboxes = 0;
	assert_int_equal(capacity_max_sandboxes(&T.cfg) >= CAPACITY_SANDBOXES_MIN, 1);
	assert_int_equal(capacity_derive(0), CAPACITY_SANDBOXES_MIN);
	assert_int_equal(capacity_derive(8ULL << 30), 32);
	assert_int_equal(capacity_derive(1ULL << 40), CAPACITY_SANDBOXES_MAX);
}

static void test_runtime_kind(void **state)
{
	struct launch_request rq;
	char why[200], hash[IMAGE_HASH_MAX];
	(void)state;

	assert_int_equal(run(RUNTIME, time(NULL) + 60, "gpu", "{\"gpus\":[]}", why, sizeof(why),
			     &rq, hash),
			 STARTCHECK_BAD_REQUEST);
	assert_int_equal(run(RUNTIME, time(NULL) + 60, "cpu", "{\"gpus\":[1]}", why, sizeof(why),
			     &rq, hash),
			 STARTCHECK_BAD_REQUEST);
	assert_int_equal(run(RUNTIME, time(NULL) + 60, "tpu", "{\"gpus\":[]}", why, sizeof(why),
			     &rq, hash),
			 STARTCHECK_BAD_REQUEST);
	assert_string_equal(startcheck_code_name(STARTCHECK_BAD_REQUEST), "bad_request");
	/* a pool asks for GPUs without a kind */
	assert_int_equal(run(POOL, time(NULL) + 60, NULL, "{\"gpus\":[1]}", why, sizeof(why), &rq,
			     hash),
			 STARTCHECK_OK);
}

/* The shape read back, and the network fallback: the same for both purposes. */
static void test_shape_and_network_fallback(void **state)
{
	static const struct {
		const char *shape;
		bool network;
		int64_t egress;
	} cases[] = {
		/* no network: [quota] network and egress_rate together (an older sender) */
		{"{\"gpus\":[]}", true, 1000000},
		/* the plan's network without a rate: no limit, whatever [quota] says */
		{"{\"gpus\":[],\"network\":1}", true, 0},
		{"{\"gpus\":[],\"network\":0}", false, 0},
		{"{\"gpus\":[],\"network\":1,\"egress_bytes_per_s\":500}", true, 500},
	};
	struct startcheck_start st;
	struct launch_request rq;
	(void)state;

	for (enum purpose p = RUNTIME; p <= POOL; p++) {
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			json_t *m = start_msg(p, 2000000000, "cpu", cases[i].shape);
			startcheck_read(&T.cfg, m, &st);
			json_decref(m);
			if (st.shape.network != cases[i].network ||
			    st.shape.egress_bytes_per_s != cases[i].egress)
				fail_msg("%s %s: network %d egress %lld",
					 p == RUNTIME ? "sandbox_start" : "pool_start",
					 cases[i].shape, st.shape.network,
					 (long long)st.shape.egress_bytes_per_s);
		}
		json_t *m = start_msg(p, 2000000000, "gpu",
				      "{\"gpus\":[1,0],\"home_size_bytes\":5,\"image\":\"good\"}");
		startcheck_read(&T.cfg, m, &st);
		assert_int_equal(st.deadline_s, 2000000000);
		assert_int_equal(st.shape.n_gpus, 2);
		assert_true(st.shape.gpus[0] == 1 && st.shape.gpus[1] == 0);
		assert_int_equal(st.shape.home_size_bytes, 5);
		assert_int_equal(st.shape.memory_bytes, 0);
		assert_string_equal(st.shape.image, "good");
		if (p == RUNTIME)
			assert_string_equal(st.kind, "gpu");
		else
			assert_null(st.kind);
		memset(&rq, 0, sizeof(rq));
		startcheck_fill(&st, &rq);
		assert_true(rq.n_gpus == 2 && rq.gpus[0] == 1 && rq.gpus[1] == 0);
		assert_true(rq.network && rq.egress_bytes_per_s == 1000000);
		json_decref(m);
	}
}

int main(void)
{
	/* one configuration and image folder for all: no test changes them */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refusal_table_both_purposes),
		cmocka_unit_test(test_accepted_start_fills_the_request),
		cmocka_unit_test(test_runtime_kind),
		cmocka_unit_test(test_device_ids),
		cmocka_unit_test(test_host_full),
		cmocka_unit_test(test_no_network_needs_no_egress_tools),
		cmocka_unit_test(test_shape_and_network_fallback),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
