/* Unit tests: a training job's environment (server/supervisor/jobenv.c): the
 * LABD_* and SM_* names of docs/jobs.md, channel and hyperparameter names made
 * env names, and labd's names winning over the spec's. */
#include "unit.h"

#include "proto/jobspec.h"
#include "supervisor/jobenv.h"

static const char *get(const struct jobenv *e, const char *key)
{
	size_t n = strlen(key);
	for (size_t i = 0; i < e->n; i++)
		if (strncmp(e->entries[i], key, n) == 0 && e->entries[i][n] == '=')
			return e->entries[i] + n + 1;
	return ""; /* not NULL: strstr and the asserts take it and fail */
}

static void test_names(void **state)
{
	const char *text =
		"{\"name\":\"mnist\",\"argv\":[\"python3\"],\"env\":{\"SEED\":\"7\","
		"\"SM_MODEL_DIR\":\"/tmp/evil\",\"HOME\":\"/root\"},\"hyperparameters\":{\"lr\":0.1,"
		"\"opt\":\"adam\",\"layers\":[1,2],\"batch-size\":32},\"channels\":[{\"name\":"
		"\"train.v1\",\"path\":\"d\"}],\"output_path\":\"o\",\"checkpoint_path\":\"c\","
		"\"max_runtime_s\":5,\"gpus\":1}";
	struct jobspec s;
	struct jobenv e;
	char err[200];
	(void)state;
	assert_int_equal(jobspec_parse(text, &s, err, sizeof(err)), 0);
	assert_int_equal(jobenv_build(&s, 42, "alice", 3, &e), 0);
	assert_string_equal(get(&e, "HOME"), "/home/alice");
	assert_string_equal(get(&e, "USER"), "alice");
	assert_non_null(strstr(get(&e, "PATH"), "/home/alice/.local/bin"));
	assert_string_equal(get(&e, "SEED"), "7");
	assert_string_equal(get(&e, "SM_MODEL_DIR"), "/opt/ml/model"); /* labd's wins */
	assert_string_equal(get(&e, "LABD_JOB_ID"), "42");
	assert_string_equal(get(&e, "LABD_JOB_NAME"), "mnist");
	assert_string_equal(get(&e, "TRAINING_JOB_NAME"), "mnist");
	assert_string_equal(get(&e, "LABD_HYPERPARAMETERS"),
			    "/opt/ml/input/config/hyperparameters.json");
	assert_string_equal(get(&e, "LABD_CHANNEL_TRAIN_V1"), "/opt/ml/input/data/train.v1");
	assert_string_equal(get(&e, "SM_CHANNEL_TRAIN_V1"), "/opt/ml/input/data/train.v1");
	assert_string_equal(get(&e, "SM_CHANNELS"), "[\"train.v1\"]");
	assert_string_equal(get(&e, "SM_HP_LR"), "0.1");
	assert_string_equal(get(&e, "SM_HP_OPT"), "adam");
	assert_string_equal(get(&e, "SM_HP_LAYERS"), "[1,2]");
	assert_string_equal(get(&e, "SM_HP_BATCH_SIZE"), "32");
	assert_non_null(strstr(get(&e, "SM_HPS"), "\"opt\":\"adam\""));
	assert_string_equal(get(&e, "SM_OUTPUT_DATA_DIR"), "/opt/ml/output/data");
	assert_string_equal(get(&e, "SM_CURRENT_HOST"), "algo-1");
	assert_string_equal(get(&e, "SM_HOSTS"), "[\"algo-1\"]");
	assert_string_equal(get(&e, "SM_NUM_GPUS"), "1");
	assert_string_equal(get(&e, "SM_NUM_CPUS"), "3");
	/* each name once: getenv() finds labd's value, whatever the spec said */
	size_t homes = 0;
	for (size_t i = 0; i < e.n; i++)
		homes += strncmp(e.entries[i], "HOME=", 5) == 0;
	assert_int_equal(homes, 1);
	assert_null(e.entries[e.n]);
	jobenv_free(&e);
	jobspec_free(&s);
}

/* A job on several hosts: the agent's copy instructions (sandbox/jobshare.h), which a
 * job's own environment cannot set; one host gets "none". */
static void test_share(void **state)
{
	const char *base = "{\"name\":\"ddp\",\"argv\":[\"python3\"],\"cwd\":\"proj/ddp\","
			   "\"env\":{\"LABD_SHARE\":\"serve 9 1.2.3.4 1\"},"
			   "\"channels\":[{\"name\":\"train\",\"path\":\"d/t\"},{\"name\":"
			   "\"val\",\"path\":\"d/v\"}],\"max_runtime_s\":5,\"output_path\":\"o\",\"checkpoint_path\":\"c\"%s}";
	const char *hosts[] = {"", ",\"hosts\":{\"current\":1,\"count\":3,\"master_addr\":"
				   "\"198.18.5.1\",\"master_port\":29500,\"interface\":\"peer0\"}",
			       ",\"hosts\":{\"current\":3,\"count\":3,\"master_addr\":"
			       "\"198.18.5.1\",\"master_port\":29500,\"interface\":\"peer0\"}"};
	const char *want[] = {"none", "serve 2 198.18.5.1 29400", "fetch 198.18.5.1 29400"};
	char text[1024], err[200];
	struct jobspec s;
	struct jobenv e;
	(void)state;
	for (size_t i = 0; i < 3; i++) {
		snprintf(text, sizeof(text), base, hosts[i]);
		if (jobspec_parse(text, &s, err, sizeof(err)) < 0)
			fail_msg("%s", err);
		assert_int_equal(jobenv_build(&s, 42, "alice", 3, &e), 0);
		assert_string_equal(get(&e, "LABD_SHARE"), ""); /* the job's own is left out */
		assert_int_equal(jobenv_add_share(&s, "alice", &e), 0);
		assert_string_equal(get(&e, "LABD_SHARE"), want[i]);
		assert_string_equal(get(&e, "LABD_SHARE_DIRS"),
				    i == 0 ? "" : "/home/alice/proj/ddp\n/opt/ml/input/data/train\n"
						 "/opt/ml/input/data/val\n");
		jobenv_free(&e);
		jobspec_free(&s);
	}
	/* the home itself is not sent (it is what a scratch home replaces) */
	snprintf(text, sizeof(text), "{\"name\":\"ddp\",\"argv\":[\"true\"],\"max_runtime_s\":5,\"output_path\":\"o\",\"checkpoint_path\":\"c\"%s}",
		 hosts[1]);
	assert_int_equal(jobspec_parse(text, &s, err, sizeof(err)), 0);
	assert_int_equal(jobenv_build(&s, 42, "alice", 3, &e), 0);
	assert_int_equal(jobenv_add_share(&s, "alice", &e), 0);
	assert_string_equal(get(&e, "LABD_SHARE"), "none");
	jobenv_free(&e);
	jobspec_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_share),
	};
	return cmocka_run_group_tests_name("jobenv", tests, NULL, NULL);
}
