/* Unit tests for the pure quota resolver and the limits' text form. */
#include "unit.h"

#include <errno.h>

#include "store/quota.h"

static void defaults(struct quota_inputs *in)
{
	memset(in, 0, sizeof(*in));
	for (int i = 0; i < QL_COUNT; i++)
		in->defaults.v[i] = 1000 + i;
	in->defaults.v[QL_CPU_S_PER_24H] = QUOTA_UNLIMITED;
	quota_limits_clear(&in->plan_limits);
	quota_limits_clear(&in->overrides);
}

static void test_defaults_only(void **state)
{
	struct quota_inputs in;
	struct quota_effective e;

	(void)state;
	defaults(&in);
	quota_resolve(&in, &e);
	for (int i = 0; i < QL_COUNT; i++) {
		assert_int_equal(e.from[i].source, QUOTA_FROM_DEFAULT);
		assert_string_equal(e.from[i].plan, "");
		assert_string_equal(e.from[i].group, "");
	}
	assert_int_equal(e.v[QL_GPU_RUNTIME_MAX_S], 1000 + QL_GPU_RUNTIME_MAX_S);
	assert_int_equal(e.v[QL_CPU_S_PER_24H], QUOTA_UNLIMITED);
}

/* override > own plan > group plan > default, each per limit */
static void test_precedence(void **state)
{
	struct quota_group_plan g = {.group = "cs101", .plan = "course"};
	struct quota_inputs in;
	struct quota_effective e;

	(void)state;
	defaults(&in);
	quota_limits_clear(&g.limits);
	g.limits.v[QL_CPU_RUNTIME_MAX_S] = 7200;
	g.limits.v[QL_GPU_RUNTIME_MAX_S] = 3600;
	g.limits.v[QL_MEMORY_BYTES] = 1LL << 30;
	in.groups = &g;
	in.n_groups = 1;
	in.plan = "staff";
	in.plan_limits.v[QL_GPU_RUNTIME_MAX_S] = 4 * 3600;
	in.plan_limits.v[QL_MEMORY_BYTES] = 8LL << 30;
	in.overrides.v[QL_MEMORY_BYTES] = 2LL << 30;
	quota_resolve(&in, &e);

	assert_int_equal(e.v[QL_CPU_RUNTIME_MAX_S], 7200);
	assert_int_equal(e.from[QL_CPU_RUNTIME_MAX_S].source, QUOTA_FROM_GROUP);
	assert_string_equal(e.from[QL_CPU_RUNTIME_MAX_S].group, "cs101");
	assert_string_equal(e.from[QL_CPU_RUNTIME_MAX_S].plan, "course");
	assert_int_equal(e.v[QL_GPU_RUNTIME_MAX_S], 4 * 3600);
	assert_int_equal(e.from[QL_GPU_RUNTIME_MAX_S].source, QUOTA_FROM_PLAN);
	assert_string_equal(e.from[QL_GPU_RUNTIME_MAX_S].plan, "staff");
	assert_int_equal(e.v[QL_MEMORY_BYTES], 2LL << 30);
	assert_int_equal(e.from[QL_MEMORY_BYTES].source, QUOTA_FROM_OVERRIDE);
	assert_int_equal(e.v[QL_STORAGE_BYTES], 1000 + QL_STORAGE_BYTES);
	assert_int_equal(e.from[QL_STORAGE_BYTES].source, QUOTA_FROM_DEFAULT);
}

/* An override may lower a limit below the plan's, or lift it to unlimited. */
static void test_override_beats_plan_both_ways(void **state)
{
	struct quota_inputs in;
	struct quota_effective e;

	(void)state;
	defaults(&in);
	in.plan = "free";
	in.plan_limits.v[QL_GPU_S_PER_24H] = 3600;
	in.plan_limits.v[QL_CPU_S_PER_7D] = 86400;
	in.overrides.v[QL_GPU_S_PER_24H] = 0;
	in.overrides.v[QL_CPU_S_PER_7D] = QUOTA_UNLIMITED;
	quota_resolve(&in, &e);
	assert_int_equal(e.v[QL_GPU_S_PER_24H], 0);
	assert_int_equal(e.from[QL_GPU_S_PER_24H].source, QUOTA_FROM_OVERRIDE);
	assert_int_equal(e.v[QL_CPU_S_PER_7D], QUOTA_UNLIMITED);
	assert_int_equal(e.from[QL_CPU_S_PER_7D].source, QUOTA_FROM_OVERRIDE);
}

/* Several groups: the most generous value per limit, unlimited above all,
 * ties to the first group name whatever the input order. */
static void test_several_groups_most_generous(void **state)
{
	struct quota_group_plan g[3] = {
		{.group = "zeta", .plan = "big"},
		{.group = "alpha", .plan = "small"},
		{.group = "beta", .plan = "open"},
	};
	struct quota_inputs in;
	struct quota_effective e;

	(void)state;
	defaults(&in);
	for (int i = 0; i < 3; i++)
		quota_limits_clear(&g[i].limits);
	g[0].limits.v[QL_CPUS_MILLI] = 4000;
	g[1].limits.v[QL_CPUS_MILLI] = 1000;
	g[0].limits.v[QL_GPU_S_PER_7D] = 36000;
	g[2].limits.v[QL_GPU_S_PER_7D] = QUOTA_UNLIMITED;
	g[0].limits.v[QL_CONCURRENT_JOBS] = 3;
	g[1].limits.v[QL_CONCURRENT_JOBS] = 3;
	g[1].limits.v[QL_GPUS_PER_RUNTIME] = 0; /* a group may also forbid */
	in.groups = g;
	in.n_groups = 3;
	quota_resolve(&in, &e);
	assert_int_equal(e.v[QL_CPUS_MILLI], 4000);
	assert_string_equal(e.from[QL_CPUS_MILLI].group, "zeta");
	assert_int_equal(e.v[QL_GPU_S_PER_7D], QUOTA_UNLIMITED);
	assert_string_equal(e.from[QL_GPU_S_PER_7D].group, "beta");
	assert_int_equal(e.v[QL_CONCURRENT_JOBS], 3);
	assert_string_equal(e.from[QL_CONCURRENT_JOBS].group, "alpha");
	assert_int_equal(e.v[QL_GPUS_PER_RUNTIME], 0);
	assert_int_equal(e.from[QL_GPUS_PER_RUNTIME].source, QUOTA_FROM_GROUP);
	assert_int_equal(e.v[QL_MEMORY_BYTES], 1000 + QL_MEMORY_BYTES);
	assert_int_equal(e.from[QL_MEMORY_BYTES].source, QUOTA_FROM_DEFAULT);
}

/* The user's own plan wins over every group, even a more generous one. */
static void test_own_plan_beats_generous_group(void **state)
{
	struct quota_group_plan g = {.group = "staff", .plan = "big"};
	struct quota_inputs in;
	struct quota_effective e;

	(void)state;
	defaults(&in);
	quota_limits_clear(&g.limits);
	g.limits.v[QL_GPU_RUNTIME_MAX_S] = QUOTA_UNLIMITED;
	in.groups = &g;
	in.n_groups = 1;
	in.plan = "probation";
	in.plan_limits.v[QL_GPU_RUNTIME_MAX_S] = 600;
	quota_resolve(&in, &e);
	assert_int_equal(e.v[QL_GPU_RUNTIME_MAX_S], 600);
	assert_int_equal(e.from[QL_GPU_RUNTIME_MAX_S].source, QUOTA_FROM_PLAN);
}

static void test_text_round_trip(void **state)
{
	struct quota_limits l, back;
	char text[1024];

	(void)state;
	quota_limits_clear(&l);
	assert_int_equal(quota_limits_format(&l, text, sizeof(text)), 0);
	assert_string_equal(text, "");
	l.v[QL_GPU_S_PER_24H] = 7200;
	l.v[QL_CPU_S_PER_7D] = QUOTA_UNLIMITED;
	assert_int_equal(quota_limits_format(&l, text, sizeof(text)), 0);
	assert_string_equal(text, "cpu_s_per_7d=-1 gpu_s_per_24h=7200");
	assert_int_equal(quota_limits_parse(text, &back), 0);
	assert_memory_equal(&l, &back, sizeof(l));
	assert_int_equal(quota_limits_format(&l, text, 10), -ENOSPC);
	assert_int_equal(quota_limits_parse("nope=1", &back), -EINVAL);
	assert_int_equal(quota_limits_parse("cpus_milli=1", &back), -EINVAL); /* below 10 */
	assert_int_equal(quota_limits_parse("cpus_milli=", &back), -EINVAL);
	assert_int_equal(quota_limits_parse("cpus_milli=5x", &back), -EINVAL);
}

static void test_names_and_ranges(void **state)
{
	(void)state;
	for (int i = 0; i < QL_COUNT; i++)
		assert_int_equal(quota_limit_parse(quota_limit_name(i)), i);
	assert_int_equal(quota_limit_parse("gpu_hours"), -1);
	assert_true(quota_value_ok(QL_GPU_S_PER_24H, 0));
	assert_false(quota_value_ok(QL_GPU_S_PER_24H, -2));
	assert_false(quota_value_ok(QL_CPU_RUNTIME_MAX_S, 59));
	assert_true(quota_value_ok(QL_CPU_RUNTIME_MAX_S, QUOTA_UNLIMITED));
	/* network is none or egress, never unlimited */
	assert_true(quota_value_ok(QL_NETWORK, QUOTA_NETWORK_NONE));
	assert_true(quota_value_ok(QL_NETWORK, QUOTA_NETWORK_EGRESS));
	assert_false(quota_value_ok(QL_NETWORK, 2));
	assert_false(quota_value_ok(QL_NETWORK, QUOTA_UNLIMITED));
	assert_true(quota_value_ok(QL_EGRESS_BYTES_PER_S, QUOTA_UNLIMITED));
	assert_false(quota_value_ok(QL_EGRESS_BYTES_PER_S, 1023));
	assert_string_equal(quota_source_name(QUOTA_FROM_GROUP), "group");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults_only),
		cmocka_unit_test(test_precedence),
		cmocka_unit_test(test_override_beats_plan_both_ways),
		cmocka_unit_test(test_several_groups_most_generous),
		cmocka_unit_test(test_own_plan_beats_generous_group),
		cmocka_unit_test(test_text_round_trip),
		cmocka_unit_test(test_names_and_ranges),
	};
	return cmocka_run_group_tests_name("quota", tests, NULL, NULL);
}
