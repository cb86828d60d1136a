/* Unit tests of the GPU inventory without a GPU (sched/gpus.c, nvml.c): NVML
 * absent or unusable is reported and leaves the numbers unknown; the pool's
 * snapshot names where each GPU came from. With the stand-in NVML of
 * tests/standin/ (built beside this binary): a card with MIG on gives its
 * instances, a shared card its shares, a rescan reads a changed layout, and
 * the free devices of a kind come from the live rows of a real SQLite file. */
#include "unit.h"

#include <errno.h>
#include <libgen.h>

#include "config/config.h"
#include "runtime/gpubudget.h"
#include "sched/gpus.h"
#include "sched/nvml.h"
#include "store/db.h"
#include "store/pools.h"
#include "store/runtimes.h"
#include "store/users.h"

static void test_nvml_absent_or_not_nvml(void **state)
{
	struct nvml *n = NULL;
	char why[300] = "";
	(void)state;
	assert_int_equal(nvml_open("/nonexistent/libnvidia-ml.so.1", &n, why, sizeof(why)), -ENOENT);
	assert_null(n);
	assert_non_null(strstr(why, "/nonexistent/libnvidia-ml.so.1 cannot be loaded"));
	/* a library that loads but is not NVML: the first missing symbol is named */
	assert_int_equal(nvml_open("libc.so.6", &n, why, sizeof(why)), -ENODEV);
	assert_null(n);
	assert_string_equal(why, "libc.so.6 has no nvmlInit_v2");
	/* nothing loaded: nothing read */
	struct nvml_card c;
	assert_int_equal(nvml_read_cards(NULL, &c, 1), 0);
	nvml_close(NULL);
}

static void snapshot_of(const struct labd_config *cfg, struct gpu_info *out, size_t *n)
{
	struct gpus *g = NULL;
	assert_int_equal(gpus_new(cfg, &g), 0);
	*n = gpus_snapshot(g, out, CONFIG_MAX_GPUS);
	gpus_free(g);
}

static void test_snapshot_names_the_source(void **state)
{
	struct labd_config cfg;
	struct gpu_info info[CONFIG_MAX_GPUS];
	size_t n;
	(void)state;

	config_defaults(&cfg, false);
	snprintf(cfg.nvml_library, sizeof(cfg.nvml_library), "/nonexistent/libnvidia-ml.so.1");
	cfg.gpu_devices[0] = 2;
	cfg.gpu_devices[1] = 5;
	cfg.n_gpu_devices = 2;
	snapshot_of(&cfg, info, &n);
	assert_int_equal(n, 2);
	assert_int_equal(info[1].id, 5);
	assert_int_equal(info[1].kind, GPUDEV_WHOLE);
	assert_int_equal(info[1].card, 5);
	assert_string_equal(info[1].profile, "whole");
	assert_int_equal(info[1].fraction_milli, 1000);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(info[i].source, GPU_SOURCE_CONFIG);
		assert_string_equal(info[i].name, "");
		assert_int_equal(info[i].memory_bytes, -1);
		assert_int_equal(info[i].memory_used_bytes, -1);
		assert_int_equal(info[i].utilization_percent, -1);
		assert_int_equal(info[i].temperature_c, -1);
	}
	assert_string_equal(gpus_source_name(info[0].source), "config");

	cfg.gpu_devices_auto = true;
	snapshot_of(&cfg, info, &n);
	assert_string_equal(gpus_source_name(info[0].source), "device");

	cfg.gpu_devices_auto = false;
	cfg.gpu_stand_in = 1;
	cfg.gpu_devices[0] = 0;
	cfg.n_gpu_devices = 1;
	snapshot_of(&cfg, info, &n);
	assert_int_equal(n, 1);
	assert_string_equal(gpus_source_name(info[0].source), "stand-in");

	cfg.gpu_stand_in = 0;
	cfg.n_gpu_devices = 0;
	snapshot_of(&cfg, info, &n);
	assert_int_equal(n, 0);
	assert_string_equal(gpus_source_name(GPU_SOURCE_NVML), "nvml");
}

#define GIB (1024LL * 1024 * 1024)

/* Card 0: MIG on, 7 x 1g.18gb (gi 7..13: the driver's numbers need not start at 1),
 * a process on gi 9; card 1: MIG off, two processes. */
static const char *const SEVEN = "{\"cards\": ["
	"{\"minor\": 0, \"name\": \"NVIDIA H200\", \"memory_total\": 150754820096,"
	" \"memory_used\": 1, \"utilization\": 40, \"temperature\": 33, \"mig\": true,"
	" \"mig_devices\": ["
	"{\"gi\": 13, \"ci\": 0, \"profile\": \"1g.18gb\", \"memory_total\": 19327352832,"
	" \"utilization\": 5, \"uuid\": \"MIG-aaaa-13\"},"
	"{\"gi\": 7, \"ci\": 0, \"profile\": \"1g.18gb\", \"memory_total\": 19327352832,"
	" \"uuid\": \"MIG-aaaa-7\"},"
	"{\"gi\": 8, \"ci\": 0, \"profile\": \"1g.18gb\", \"memory_total\": 19327352832},"
	"{\"gi\": 9, \"ci\": 0, \"profile\": \"1g.18gb\", \"memory_total\": 19327352832,"
	" \"memory_used\": 2147483648, \"processes\": [{\"pid\": 4242, \"bytes\": 2147483648}]},"
	"{\"gi\": 10, \"ci\": 0, \"profile\": \"1g.18gb\", \"memory_total\": 19327352832},"
	"{\"gi\": 11, \"ci\": 0, \"profile\": \"1g.18gb\", \"memory_total\": 19327352832},"
	"{\"gi\": 12, \"ci\": 0, \"profile\": \"1g.18gb\", \"memory_total\": 19327352832}]},"
	"{\"minor\": 1, \"name\": \"NVIDIA H200\", \"memory_total\": 150754820096,"
	" \"memory_used\": 3000, \"utilization\": 77, \"temperature\": 41,"
	" \"processes\": [{\"pid\": 10, \"bytes\": 1000}, {\"pid\": 11, \"bytes\": 2000}]}]}";

/* Card 0 made again by its admin: 3 x 2g.35gb. */
static const char *const THREE = "{\"cards\": ["
	"{\"minor\": 0, \"name\": \"NVIDIA H200\", \"memory_total\": 150754820096, \"mig\": true,"
	" \"mig_devices\": ["
	"{\"gi\": 3, \"ci\": 0, \"profile\": \"2g.35gb\", \"memory_total\": 37580963840},"
	"{\"gi\": 4, \"ci\": 0, \"profile\": \"2g.35gb\", \"memory_total\": 37580963840},"
	"{\"gi\": 5, \"ci\": 0, \"profile\": \"2g.35gb\", \"memory_total\": 37580963840}]},"
	"{\"minor\": 1, \"name\": \"NVIDIA H200\", \"memory_total\": 150754820096}]}";

struct standin {
	char dir[64], cards[128], db_path[128];
	struct labd_config cfg;
	struct gpus *g;
	struct db *db;
};

/* The stand-in library beside this test binary (build/tests/standin/). */
static void standin_path(char *out, size_t len)
{
	char exe[512];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	assert_true(n > 0);
	exe[n] = '\0';
	snprintf(out, len, "%s/standin/libnvml-standin.so", dirname(exe));
}

static int standin_up(void **state)
{
	struct standin *s = calloc(1, sizeof(*s));

	unit_tempdir(s->dir);
	unit_write(s->dir, "cards.json", SEVEN, s->cards);
	setenv("LABD_NVML_STANDIN", s->cards, 1);
	config_defaults(&s->cfg, false);
	standin_path(s->cfg.nvml_library, sizeof(s->cfg.nvml_library));
	s->cfg.gpu_devices[0] = 0;
	s->cfg.gpu_devices[1] = 1;
	s->cfg.n_gpu_devices = 2;
	s->cfg.gpu_shares[0] = (struct config_gpu_share){.minor = 1, .count = 4,
							  .memory_bytes = 20 * GIB};
	s->cfg.n_gpu_shares = 1;
	s->cfg.gpu_refresh_s = 3600; /* the test refreshes by rescan only */
	assert_int_equal(gpus_new(&s->cfg, &s->g), 0);
	snprintf(s->db_path, sizeof(s->db_path), "%s/labd.db", s->dir);
	assert_int_equal(db_open(s->db_path, &s->db), 0);
	*state = s;
	return 0;
}

static int standin_down(void **state)
{
	struct standin *s = *state;

	gpus_free(s->g);
	db_close(s->db);
	unit_rmdir(s->dir);
	unsetenv("LABD_NVML_STANDIN");
	free(s);
	return 0;
}

static unsigned mig_id(unsigned minor, unsigned gi, unsigned ci)
{
	struct gpudev d = {.kind = GPUDEV_MIG, .minor = minor, .gi = gi, .ci = ci};
	unsigned id;

	assert_true(gpudev_encode(&d, &id));
	return id;
}

static unsigned share_id(unsigned minor, unsigned share)
{
	struct gpudev d = {.kind = GPUDEV_SHARE, .minor = minor, .share = share};
	unsigned id;

	assert_true(gpudev_encode(&d, &id));
	return id;
}

static void test_a_mig_card_gives_its_instances_a_shared_card_its_shares(void **state)
{
	struct standin *s = *state;
	struct gpu_info d[GPUS_DEVICES_MAX];
	int n = gpus_devices(s->g, d, GPUS_DEVICES_MAX);

	assert_int_equal(n, 11);
	for (int i = 0; i < 7; i++) { /* card 0's instances, by id: gi 7..13 */
		assert_int_equal(d[i].id, mig_id(0, 7 + (unsigned)i, 0));
		assert_int_equal(d[i].kind, GPUDEV_MIG);
		assert_int_equal(d[i].card, 0);
		assert_string_equal(d[i].profile, "1g.18gb");
		assert_int_equal(d[i].memory_bytes, 19327352832LL);
		assert_int_equal(d[i].fraction_milli, 128); /* 18 GiB of 140.4 GiB */
		assert_int_equal(d[i].source, GPU_SOURCE_NVML);
		assert_string_equal(d[i].name, "NVIDIA H200");
	}
	assert_string_equal(d[0].uuid, "MIG-aaaa-7");
	assert_string_equal(d[6].uuid, "MIG-aaaa-13");
	assert_int_equal(d[6].utilization_percent, 5);
	assert_int_equal(d[1].utilization_percent, -1); /* NVML gave none for this instance */
	assert_int_equal(d[2].memory_used_bytes, 2147483648LL);
	for (int i = 7; i < 11; i++) {
		assert_int_equal(d[i].id, share_id(1, (unsigned)i - 7));
		assert_int_equal(d[i].kind, GPUDEV_SHARE);
		assert_string_equal(d[i].profile, "share");
		assert_int_equal(d[i].fraction_milli, 250);
		assert_int_equal(d[i].budget_bytes, 20 * GIB);
		assert_int_equal(d[i].memory_bytes, 20 * GIB);
		assert_int_equal(d[i].utilization_percent, 77); /* the card's: time-sliced */
	}
	/* processes: the MIG one on its instance, the others on card 1 */
	struct gpu_process p[16];
	size_t np = gpus_processes(s->g, p, 16);
	assert_int_equal(np, 3);
	assert_int_equal(p[0].pid, 4242);
	assert_int_equal(p[0].device, mig_id(0, 9, 0));
	assert_int_equal(p[0].bytes, 2147483648LL);
	assert_int_equal(p[1].card, 1);
	assert_int_equal(p[1].device, 1);
	assert_int_equal(p[2].bytes, 2000);
	assert_true(gpus_find(s->g, share_id(1, 3), NULL));
	assert_false(gpus_find(s->g, 1, NULL)); /* card 1 is never handed out whole */
}

static void test_a_rescan_reads_the_new_layout(void **state)
{
	struct standin *s = *state;
	struct gpu_info d[GPUS_DEVICES_MAX];
	char path[128];

	unit_write(s->dir, "cards.json", THREE, path);
	assert_int_equal(gpus_devices(s->g, d, GPUS_DEVICES_MAX), 11); /* not yet read */
	assert_int_equal(gpus_rescan(s->g), 0);
	assert_int_equal(gpus_devices(s->g, d, GPUS_DEVICES_MAX), 3 + 4);
	assert_int_equal(d[0].id, mig_id(0, 3, 0));
	assert_string_equal(d[2].profile, "2g.35gb");
	assert_int_equal(d[2].fraction_milli, 249);
	assert_int_equal(d[3].kind, GPUDEV_SHARE);
	/* MIG turned off on card 0: the card whole again */
	unit_write(s->dir, "cards.json", "{\"cards\": [{\"minor\": 0}, {\"minor\": 1}]}", path);
	assert_int_equal(gpus_rescan(s->g), 0);
	assert_int_equal(gpus_devices(s->g, d, GPUS_DEVICES_MAX), 1 + 4);
	assert_int_equal(d[0].id, 0);
	assert_int_equal(d[0].kind, GPUDEV_WHOLE);
	assert_string_equal(d[0].profile, "whole");
	unit_write(s->dir, "cards.json", SEVEN, path);
	assert_int_equal(gpus_rescan(s->g), 0);
}

static void test_free_devices_of_a_kind(void **state)
{
	struct standin *s = *state;
	struct user u;
	struct runtime r;
	struct pool p;
	unsigned ids[16];
	char text[16];

	assert_int_equal(users_create(s->db, "ann", USER_ROLE_USER, "h", 1, &u), 0);
	assert_int_equal(gpus_pick_free_kind(s->db, s->g, &s->cfg, "1g.18gb", 8, ids), 7);
	assert_int_equal(gpus_pick_free_kind(s->db, s->g, &s->cfg, "2g.35gb", 1, ids), 0);
	assert_int_equal(gpus_pick_free_kind(s->db, s->g, &s->cfg, "whole", 1, ids), 0);
	assert_int_equal(gpus_pick_free_kind(s->db, s->g, &s->cfg, "share", 2, ids), 2);
	assert_int_equal(ids[0], share_id(1, 0));
	assert_int_equal(ids[1], share_id(1, 1));
	/* a runtime on gi 7 and a job sandbox on share 0: the next free ones */
	snprintf(text, sizeof(text), "%u", mig_id(0, 7, 0));
	assert_int_equal(runtimes_create(s->db, u.id, RUNTIME_GPU, "t", text, 1, 99, &r), 0);
	struct pool_shape shape = {.user_id = u.id, .gpu = true, .gpu_count = 1};
	snprintf(text, sizeof(text), "%u", share_id(1, 0));
	assert_int_equal(pools_create(s->db, &shape, text, 0, 1, 99, &p), 0);
	assert_int_equal(gpus_pick_free_kind(s->db, s->g, &s->cfg, "1g.18gb", 1, ids), 1);
	assert_int_equal(ids[0], mig_id(0, 8, 0));
	assert_int_equal(gpus_pick_free_kind(s->db, s->g, &s->cfg, "1g.18gb", 8, ids), 6);
	assert_int_equal(gpus_pick_free_kind(s->db, s->g, &s->cfg, "share", 4, ids), 3);
	assert_int_equal(ids[0], share_id(1, 1));
	/* who holds what, per device */
	struct gpu_hold h[GPUS_DEVICES_MAX];
	assert_int_equal(gpus_device_holders(s->db, s->g, 5, h, GPUS_DEVICES_MAX), 11);
	assert_int_equal(h[0].runtime_id, r.id);
	assert_string_equal(h[0].user, "ann");
	assert_int_equal(h[0].free_at, 99);
	assert_false(gpus_hold_busy(&h[1]));
	assert_int_equal(h[7].job_pool_id, p.id);
	/* the whole-card view: both cards are busy (something on each is held) */
	assert_int_equal(gpus_holders(s->db, &s->cfg, 5, h), 2);
	assert_true(gpus_hold_busy(&h[0]) && gpus_hold_busy(&h[1]));
	assert_int_equal(gpus_pick_free_n(s->db, &s->cfg, 2, text, sizeof(text)), 0);
	/* a row holding card 0 whole (from before MIG was turned on) holds every instance */
	assert_int_equal(runtimes_set_state(s->db, r.id, RUNTIME_STOPPED, "done", 2), 1);
	struct user v;
	assert_int_equal(users_create(s->db, "bob", USER_ROLE_USER, "h", 1, &v), 0);
	assert_int_equal(runtimes_create(s->db, v.id, RUNTIME_GPU, "t", "0", 1, 99, &r), 0);
	assert_int_equal(gpus_pick_free_kind(s->db, s->g, &s->cfg, "1g.18gb", 8, ids), 0);
	assert_int_equal(runtimes_set_state(s->db, r.id, RUNTIME_STOPPED, "done", 2), 1);
	assert_int_equal(pools_end(s->db, p.id, "done", 3), 1);
}

/* Without NVML a card in [gpu] shares is its shares, any other card whole. */
static void test_without_nvml_cards_are_whole_or_shared(void **state)
{
	struct labd_config cfg;
	struct gpu_info info[GPUS_DEVICES_MAX];
	size_t n;
	(void)state;

	config_defaults(&cfg, false);
	snprintf(cfg.nvml_library, sizeof(cfg.nvml_library), "/nonexistent/libnvidia-ml.so.1");
	cfg.gpu_devices[0] = 0;
	cfg.gpu_devices[1] = 1;
	cfg.n_gpu_devices = 2;
	cfg.gpu_shares[0] = (struct config_gpu_share){.minor = 1, .count = 2, .memory_bytes = GIB};
	cfg.n_gpu_shares = 1;
	struct gpus *g = NULL;
	assert_int_equal(gpus_new(&cfg, &g), 0);
	n = gpus_snapshot(g, info, GPUS_DEVICES_MAX);
	assert_int_equal(gpus_rescan(g), -ENODEV);
	gpus_free(g);
	assert_int_equal(n, 3);
	assert_int_equal(info[0].id, 0);
	assert_int_equal(info[0].kind, GPUDEV_WHOLE);
	assert_int_equal(info[1].id, share_id(1, 0));
	assert_int_equal(info[2].fraction_milli, 500);
	assert_int_equal(info[2].source, GPU_SOURCE_CONFIG);
	assert_int_equal(info[2].memory_used_bytes, -1);
}

static void test_the_sandbox_a_cgroup_names(void **state)
{
	char user[33];
	(void)state;

	assert_int_equal(gpubudget_user_of_cgroup("0::/labd/ann-0a1b2c3d4e5f\n", user, sizeof(user)),
			 0);
	assert_string_equal(user, "ann");
	/* a nested leaf, a delegated root, v1 lines, a dash in the name */
	assert_int_equal(gpubudget_user_of_cgroup("12:pids:/x/labd/mary-jo-ffffffffffff/init\n"
						  "0::/system.slice/labd.service\n",
						  user, sizeof(user)),
			 0);
	assert_string_equal(user, "mary-jo");
	assert_int_equal(gpubudget_user_of_cgroup("0::/user.slice/session-3.scope\n", user,
						  sizeof(user)),
			 -ENOENT);
	assert_int_equal(gpubudget_user_of_cgroup("0::/labd/ann-0a1b2c3d4e5\n", user, sizeof(user)),
			 -ENOENT); /* 11 hex digits: no sandbox of libsandbox's */
	assert_int_equal(gpubudget_user_of_cgroup("0::/labd/ann-0a1b2c3d4e5g\n", user, sizeof(user)),
			 -ENOENT);
	assert_int_equal(gpubudget_user_of_cgroup("0::/labd/-0a1b2c3d4e5f\n", user, sizeof(user)),
			 -ENOENT);
}

static void test_profile_of_a_mig_name(void **state)
{
	char p[GPU_PROFILE_MAX];
	(void)state;

	nvml_profile_of("NVIDIA H200 MIG 1g.18gb", p, sizeof(p));
	assert_string_equal(p, "1g.18gb");
	nvml_profile_of("NVIDIA A100-SXM4-80GB MIG 1c.3g.40gb", p, sizeof(p));
	assert_string_equal(p, "1c.3g.40gb");
	nvml_profile_of("NVIDIA H200", p, sizeof(p));
	assert_string_equal(p, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nvml_absent_or_not_nvml),
		cmocka_unit_test(test_snapshot_names_the_source),
		cmocka_unit_test(test_without_nvml_cards_are_whole_or_shared),
		cmocka_unit_test(test_the_sandbox_a_cgroup_names),
		cmocka_unit_test(test_profile_of_a_mig_name),
		cmocka_unit_test_setup_teardown(test_a_mig_card_gives_its_instances_a_shared_card_its_shares,
						standin_up, standin_down),
		cmocka_unit_test_setup_teardown(test_a_rescan_reads_the_new_layout, standin_up,
						standin_down),
		cmocka_unit_test_setup_teardown(test_free_devices_of_a_kind, standin_up, standin_down),
	};
	return cmocka_run_group_tests_name("gpus", tests, NULL, NULL);
}
