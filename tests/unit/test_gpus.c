/* Unit tests of the GPU inventory without a GPU (sched/gpus.c, nvml.c): NVML
 * absent or unusable is reported and leaves the numbers unknown; the pool's
 * snapshot names where each GPU came from. (NVML itself needs a driver:
 * this host has none.) */
#include "unit.h"

#include <errno.h>

#include "config/config.h"
#include "sched/gpus.h"
#include "sched/nvml.h"

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
	/* nothing loaded: nothing read, nothing changed */
	struct gpu_info g = {.id = 0, .source = GPU_SOURCE_CONFIG, .utilization_percent = -1};
	assert_int_equal(nvml_read(NULL, &g, 1), 0);
	assert_int_equal(g.source, GPU_SOURCE_CONFIG);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nvml_absent_or_not_nvml),
		cmocka_unit_test(test_snapshot_names_the_source),
	};
	return cmocka_run_group_tests_name("gpus", tests, NULL, NULL);
}
