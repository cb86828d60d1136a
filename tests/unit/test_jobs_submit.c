/* Unit tests: the POST /api/v1/jobs body checked and normalised
 * (jobs/submit.h): defaults filled in, each bad field named. */
#include "unit.h"

#include <string.h>

#include "jobs/submit.h"

static bool image_known(const char *name, void *ctx)
{
	(void)ctx;
	return strcmp(name, "ml") == 0;
}

static const struct jobs_limits limits = {
	.gpus_max = 2,
	.max_runtime_s = 7200,
	.memory_bytes = 4LL << 30,
	.cpus_milli = 2000,
	.image = "",
	.keep_alive_max_s = 3600,
	.max_wait_default_s = 600,
	.image_ok = image_known,
};

/* Checks text; returns the field named ("" when it passed). */
static const char *check(const char *text, struct jobs_submit *out)
{
	static struct jobs_submit_error err;
	json_error_t jerr;
	json_t *body = json_loads(text, 0, &jerr);

	assert_non_null(body);
	int rc = jobs_submit_check(body, &limits, out, &err);
	json_decref(body);
	if (rc == 0)
		return "";
	assert_true(err.message[0] != '\0');
	return err.field;
}

static void test_defaults(void **state)
{
	struct jobs_submit s;
	(void)state;

	assert_string_equal(check("{\"name\":\"run-1\",\"command\":[\"python3\",\"train.py\"]}", &s),
			    "");
	assert_string_equal(s.name, "run-1");
	assert_false(s.gpu);
	assert_int_equal(s.gpu_count, 0);
	assert_int_equal(s.max_runtime_s, 7200);
	assert_int_equal(s.max_wait_s, 600);
	assert_int_equal(s.keep_alive_s, 0);
	assert_int_equal(s.memory_bytes, 4LL << 30);
	assert_int_equal(s.cpus_milli, 2000);
	assert_string_equal(json_string_value(json_object_get(s.spec, "output_path")), "jobs/run-1");
	assert_string_equal(json_string_value(json_object_get(s.spec, "checkpoint_path")),
			    "jobs/run-1/checkpoints");
	assert_string_equal(json_string_value(json_object_get(s.spec, "working_dir")), "");
	assert_true(json_is_object(json_object_get(s.spec, "environment")));
	assert_true(json_is_array(json_object_get(s.spec, "metric_definitions")));
	jobs_submit_release(&s);
}

static void test_full_request(void **state)
{
	struct jobs_submit s;
	(void)state;

	assert_string_equal(
		check("{\"name\":\"a\",\"command\":[\"sh\"],\"type\":\"gpu\",\"gpu_count\":2,"
		      "\"image\":\"ml\",\"environment\":{\"A_1\":\"x\"},\"hyperparameters\":{\"lr\":0.1},"
		      "\"input_channels\":[{\"name\":\"train\",\"path\":\"data/train\"}],"
		      "\"output_path\":\"out\",\"keep_alive_s\":3600,\"max_retries\":30,"
		      "\"metric_definitions\":[{\"name\":\"loss\",\"regex\":\"loss=([0-9.]+)\"}],"
		      "\"memory_bytes\":1073741824,\"cpus_milli\":500,\"max_wait_s\":0}",
		      &s),
		"");
	assert_true(s.gpu);
	assert_int_equal(s.gpu_count, 2);
	assert_string_equal(s.image, "ml");
	assert_int_equal(s.max_retries, 30);
	assert_string_equal(json_string_value(json_object_get(s.spec, "checkpoint_path")),
			    "out/checkpoints");
	jobs_submit_release(&s);
}

static void test_each_bad_field_named(void **state)
{
	static const struct {
		const char *body, *field;
	} cases[] = {
		{"{\"command\":[\"sh\"]}", "name"},
		{"{\"name\":\"Bad\",\"command\":[\"sh\"]}", "name"},
		{"{\"name\":\"-a\",\"command\":[\"sh\"]}", "name"},
		{"{\"name\":\"a\"}", "command"},
		{"{\"name\":\"a\",\"command\":[]}", "command"},
		{"{\"name\":\"a\",\"command\":\"sh\"}", "command"},
		{"{\"name\":\"a\",\"command\":[\"\"]}", "command[0]"},
		{"{\"name\":\"a\",\"command\":[\"sh\",1]}", "command[1]"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"working_dir\":\"/etc\"}", "working_dir"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"output_path\":\"a/../../x\"}", "output_path"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"output_path\":\"\"}", "output_path"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"checkpoint_path\":\"..\"}", "checkpoint_path"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"environment\":{\"1X\":\"v\"}}", "environment.1X"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"environment\":{\"X\":1}}", "environment.X"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"hyperparameters\":[1]}", "hyperparameters"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"input_channels\":[{\"name\":\"t\"}]}",
		 "input_channels[0]"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"input_channels\":[{\"name\":\"t t\","
		 "\"path\":\"d\"}]}",
		 "input_channels[0].name"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"input_channels\":[{\"name\":\"t\","
		 "\"path\":\"/d\"}]}",
		 "input_channels[0].path"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"input_channels\":[{\"name\":\"t\","
		 "\"path\":\"d\"},{\"name\":\"t\",\"path\":\"e\"}]}",
		 "input_channels[1].name"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"type\":\"tpu\"}", "type"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"gpu_count\":1}", "gpu_count"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"type\":\"gpu\",\"gpu_count\":3}", "gpu_count"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"image\":\"nope\"}", "image"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"max_runtime_s\":7201}", "max_runtime_s"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"max_runtime_s\":0}", "max_runtime_s"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"max_wait_s\":-1}", "max_wait_s"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"keep_alive_s\":3601}", "keep_alive_s"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"max_retries\":31}", "max_retries"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"memory_bytes\":8589934592}", "memory_bytes"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"cpus_milli\":2001}", "cpus_milli"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"metric_definitions\":[{\"name\":\"l\","
		 "\"regex\":\"(\"}]}",
		 "metric_definitions[0].regex"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"metric_definitions\":[{\"name\":\"l l\","
		 "\"regex\":\"x\"}]}",
		 "metric_definitions[0].name"},
		{"{\"name\":\"a\",\"command\":[\"sh\"],\"metric_definitions\":[{\"name\":\"l\"}]}",
		 "metric_definitions[0]"},
	};
	struct jobs_submit s;
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *field = check(cases[i].body, &s);
		if (strcmp(field, cases[i].field) != 0)
			fail_msg("case %zu (%s): named \"%s\", not \"%s\"", i, cases[i].body, field,
				 cases[i].field);
	}
}

static void test_bounds(void **state)
{
	char big[JOBS_REGEX_MAX_CHARS + 80], body[2048];
	struct jobs_submit s;
	(void)state;

	memset(big, 'a', JOBS_REGEX_MAX_CHARS + 1);
	big[JOBS_REGEX_MAX_CHARS + 1] = '\0';
	snprintf(body, sizeof(body),
		 "{\"name\":\"a\",\"command\":[\"sh\"],\"metric_definitions\":[{\"name\":\"l\","
		 "\"regex\":\"%s\"}]}",
		 big);
	assert_string_equal(check(body, &s), "metric_definitions[0].regex");
	big[JOBS_REGEX_MAX_CHARS] = '\0'; /* exactly the maximum passes */
	snprintf(body, sizeof(body),
		 "{\"name\":\"a\",\"command\":[\"sh\"],\"metric_definitions\":[{\"name\":\"l\","
		 "\"regex\":\"%s\"}]}",
		 big);
	assert_string_equal(check(body, &s), "");
	jobs_submit_release(&s);
	assert_true(jobs_path_ok("a/b..c/d", 8));
	assert_false(jobs_path_ok("a/../d", 6));
	assert_false(jobs_path_ok("..", 2));
	assert_true(jobs_name_ok("a-1"));
	assert_false(jobs_name_ok("a_1"));
	assert_false(jobs_name_ok(""));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_full_request),
		cmocka_unit_test(test_each_bad_field_named),
		cmocka_unit_test(test_bounds),
	};
	return cmocka_run_group_tests_name("jobs_submit", tests, NULL, NULL);
}
