/* Unit tests: the job spec of job_run, read strictly root-side
 * (server/proto/jobspec.c): a good spec, each bound, each field named. */
#include "unit.h"

#include <errno.h>

#include "proto/jobspec.h"

#define GOOD                                                                                   \
	"{\"name\":\"mnist-1\",\"argv\":[\"python3\",\"train.py\"],\"env\":{\"SEED\":\"1\"},"   \
	"\"cwd\":\"proj\",\"hyperparameters\":{\"lr\":0.1,\"epochs\":3},"                       \
	"\"channels\":[{\"name\":\"train\",\"path\":\"data/train\"}],"                          \
	"\"output_path\":\"jobs/mnist-1\",\"checkpoint_path\":\"jobs/mnist-1/checkpoints\","   \
	"\"max_runtime_s\":600,\"grace_s\":30,\"log_max_bytes\":1048576,\"gpus\":0,\"cpus\":2}"

static void test_good_spec(void **state)
{
	struct jobspec s;
	char err[200] = "";
	(void)state;
	assert_int_equal(jobspec_parse(GOOD, &s, err, sizeof(err)), 0);
	assert_string_equal(s.name, "mnist-1");
	assert_int_equal(s.argc, 2);
	assert_string_equal(s.argv[1], "train.py");
	assert_null(s.argv[2]);
	assert_int_equal(s.n_env, 1);
	assert_string_equal(s.env_keys[0], "SEED");
	assert_string_equal(s.cwd, "proj");
	assert_int_equal(s.n_channels, 1);
	assert_string_equal(s.channels[0].path, "data/train");
	assert_string_equal(s.checkpoint_path, "jobs/mnist-1/checkpoints");
	assert_int_equal(s.max_runtime_s, 600);
	assert_int_equal(s.cpus, 2);
	assert_true(json_is_object(s.hyperparameters));
	jobspec_free(&s);
}

/* The optional fields may be left out; the caller applies [jobs] defaults. */
static void test_minimal_spec(void **state)
{
	struct jobspec s;
	char err[200] = "";
	(void)state;
	assert_int_equal(jobspec_parse("{\"name\":\"a\",\"argv\":[\"true\"],\"output_path\":\"o\","
				       "\"checkpoint_path\":\"c\",\"max_runtime_s\":1}",
				       &s, err, sizeof(err)),
			 0);
	assert_string_equal(s.cwd, "");
	assert_int_equal(s.grace_s, -1);
	assert_int_equal(s.log_max_bytes, -1);
	assert_int_equal(s.n_channels, 0);
	jobspec_free(&s);
}

/* Replaces the first `from` in GOOD with `to`; expects a refusal naming field. */
static void refused(const char *from, const char *to, const char *field)
{
	char text[8192], err[200] = "";
	const char *at = strstr(GOOD, from);
	struct jobspec s;

	assert_non_null(at);
	snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - GOOD), GOOD, to, at + strlen(from));
	assert_int_equal(jobspec_parse(text, &s, err, sizeof(err)), -EINVAL);
	if (strncmp(err, field, strlen(field)) != 0)
		fail_msg("%s -> %s: error \"%s\" does not name %s", from, to, err, field);
	assert_null(s.root);
}

static void test_each_field_refused(void **state)
{
	(void)state;
	refused("\"name\":\"mnist-1\"", "\"name\":\"Mnist\"", "name");
	refused("\"name\":\"mnist-1\"", "\"name\":\"-x\"", "name");
	refused("[\"python3\",", "[\"\",", "argv[0]");
	refused("[\"python3\",\"train.py\"]", "[]", "argv");
	refused("\"train.py\"]", "7]", "argv[1]");
	refused("\"SEED\"", "\"1SEED\"", "env");
	refused("\"SEED\":\"1\"", "\"SEED\":1", "env.SEED");
	refused("\"cwd\":\"proj\"", "\"cwd\":\"/etc\"", "cwd");
	refused("\"cwd\":\"proj\"", "\"cwd\":\"a/../../b\"", "cwd");
	refused("\"cwd\":\"proj\"", "\"cwd\":\"..\"", "cwd");
	refused("{\"lr\":0.1,\"epochs\":3}", "[1]", "hyperparameters");
	refused("\"name\":\"train\"", "\"name\":\"tr ain\"", "channels[0]");
	refused("\"path\":\"data/train\"", "\"path\":\"../x\"", "channels[0]");
	refused("\"path\":\"data/train\"}]", "\"path\":\"d\"},{\"name\":\"train\",\"path\":\"e\"}]",
		"channels[1]");
	refused("\"output_path\":\"jobs/mnist-1\"", "\"output_path\":\"\"", "output_path");
	refused("\"checkpoint_path\":\"jobs/mnist-1/checkpoints\"", "\"checkpoint_path\":\"/tmp\"",
		"checkpoint_path");
	refused("\"max_runtime_s\":600", "\"max_runtime_s\":0", "max_runtime_s");
	refused("\"max_runtime_s\":600", "\"max_runtime_s\":\"600\"", "max_runtime_s");
	refused("\"grace_s\":30", "\"grace_s\":-1", "grace_s");
	refused("\"gpus\":0", "\"gpus\":17", "gpus");
	refused("\"cpus\":2}", "\"cpus\":2,\"privileged\":true}", "privileged");
	refused("\"env\":{\"SEED\":\"1\"}", "\"env\":{\"SEED\":\"a\\u0000b\"}", "spec");
}

static void test_sizes(void **state)
{
	static char text[70000], arg[4200];
	char err[200];
	struct jobspec s;
	(void)state;
	memset(arg, 'x', 4097);
	arg[4097] = '\0';
	snprintf(text, sizeof(text), "{\"name\":\"a\",\"argv\":[\"%s\"],\"output_path\":\"o\","
		 "\"checkpoint_path\":\"c\",\"max_runtime_s\":1}", arg);
	assert_int_equal(jobspec_parse(text, &s, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "argv[0]: is longer than 4096 bytes");
	arg[4096] = '\0'; /* exactly the bound */
	snprintf(text, sizeof(text), "{\"name\":\"a\",\"argv\":[\"%s\"],\"output_path\":\"o\","
		 "\"checkpoint_path\":\"c\",\"max_runtime_s\":1}", arg);
	assert_int_equal(jobspec_parse(text, &s, err, sizeof(err)), 0);
	jobspec_free(&s);
	memset(text, ' ', 50 * 1024);
	text[0] = '{';
	memcpy(text + 50 * 1024, "}", 2);
	assert_int_equal(jobspec_parse(text, &s, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "spec: is longer than 48 KiB");
}

static void test_path_rules(void **state)
{
	(void)state;
	assert_true(jobspec_rel_path_ok("a/b/c", false));
	assert_true(jobspec_rel_path_ok("a/..b/c..", false));
	assert_true(jobspec_rel_path_ok("", true));
	assert_false(jobspec_rel_path_ok("", false));
	assert_false(jobspec_rel_path_ok("/a", false));
	assert_false(jobspec_rel_path_ok("a/..", false));
	assert_false(jobspec_rel_path_ok("a//../b", false));
	assert_true(jobspec_env_key_ok("_A1"));
	assert_false(jobspec_env_key_ok("A-B"));
	assert_true(jobspec_channel_name_ok("train.v1-x_y"));
	assert_false(jobspec_channel_name_ok("a/b"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_spec),
		cmocka_unit_test(test_minimal_spec),
		cmocka_unit_test(test_each_field_refused),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_path_rules),
	};
	return cmocka_run_group_tests_name("jobspec", tests, NULL, NULL);
}
