/* Unit tests: a training job's hosts (server/proto/jobhosts.c): the spec
 * field read strictly, the environment each host's sandbox gets, its
 * resourceconfig.json, and the job spec carrying the field through. */
#include "unit.h"

#include <errno.h>
#include <string.h>

#include "backend/slurmcli.h"
#include "backend/slurmhosts.h"
#include "jobs/submit.h"
#include "proto/jobhosts.h"
#include "proto/jobspec.h"
#include "supervisor/jobenv.h"

static json_t *load(const char *text)
{
	json_t *v = json_loads(text, 0, NULL);
	assert_non_null(v);
	return v;
}

static void test_one_host_as_before(void **state)
{
	char env[JOBHOSTS_ENV_MAX][JOBHOSTS_ENV_LEN], err[128] = "";
	struct jobhosts h;
	size_t n;
	json_t *rc;
	char *text;
	(void)state;

	assert_int_equal(jobhosts_parse(NULL, &h, err, sizeof(err)), 0);
	assert_int_equal(jobhosts_env(&h, env, &n), 0);
	assert_int_equal(n, 3);
	assert_string_equal(env[0], "SM_CURRENT_HOST=algo-1");
	assert_string_equal(env[1], "SM_HOSTS=[\"algo-1\"]");
	assert_string_equal(env[2], "SM_NETWORK_INTERFACE_NAME=eth0");
	rc = jobhosts_resourceconfig(&h);
	text = json_dumps(rc, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(text, "{\"current_host\":\"algo-1\",\"hosts\":[\"algo-1\"],"
				  "\"network_interface_name\":\"eth0\"}");
	free(text);
	json_decref(rc);
}

static void test_second_of_three(void **state)
{
	char env[JOBHOSTS_ENV_MAX][JOBHOSTS_ENV_LEN], err[128] = "";
	json_t *v = load("{\"current\":2,\"count\":3,\"master_addr\":\"198.18.0.2\","
			 "\"master_port\":29400}");
	struct jobhosts h;
	size_t n;
	json_t *rc;
	char *text;
	(void)state;

	assert_int_equal(jobhosts_parse(v, &h, err, sizeof(err)), 0);
	assert_int_equal(jobhosts_env(&h, env, &n), 0);
	assert_int_equal(n, 9);
	assert_string_equal(env[0], "SM_CURRENT_HOST=algo-2");
	assert_string_equal(env[1], "SM_HOSTS=[\"algo-1\",\"algo-2\",\"algo-3\"]");
	assert_string_equal(env[3], "MASTER_ADDR=198.18.0.2");
	assert_string_equal(env[4], "MASTER_PORT=29400");
	assert_string_equal(env[5], "NNODES=3");
	assert_string_equal(env[6], "NODE_RANK=1");
	/* gloo and NCCL take the hosts' interface */
	assert_string_equal(env[7], "GLOO_SOCKET_IFNAME=eth0");
	assert_string_equal(env[8], "NCCL_SOCKET_IFNAME=eth0");
	rc = jobhosts_resourceconfig(&h);
	text = json_dumps(rc, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(text, "{\"current_host\":\"algo-2\",\"hosts\":[\"algo-1\",\"algo-2\","
				  "\"algo-3\"],\"network_interface_name\":\"eth0\"}");
	free(text);
	json_decref(rc);
	json_decref(v);
}

/* What the head writes reads back the same; 64 hosts fit one SM_HOSTS. */
static void test_round_trip_and_most(void **state)
{
	char env[JOBHOSTS_ENV_MAX][JOBHOSTS_ENV_LEN], err[128] = "";
	struct jobhosts h = {.current = 64, .count = JOBHOSTS_MAX, .master_addr = "fd00::1",
			     .master_port = 1, .interface = "eth0"}, back;
	json_t *v = jobhosts_json(&h);
	size_t n;
	(void)state;

	assert_int_equal(jobhosts_parse(v, &back, err, sizeof(err)), 0);
	assert_memory_equal(&h, &back, sizeof(h));
	assert_int_equal(jobhosts_env(&back, env, &n), 0);
	assert_non_null(strstr(env[1], "\"algo-63\",\"algo-64\"]"));
	assert_string_equal(env[6], "NODE_RANK=63");
	json_decref(v);
}

static void test_each_member_refused(void **state)
{
	static const char *const cases[][2] = {
		{"[]", "hosts: must be an object"},
		{"{\"count\":2,\"current\":1,\"master_addr\":\"10.0.0.1\",\"master_port\":1,\"x\":1}",
		 "hosts: unknown member"},
		{"{\"count\":0,\"current\":1}", "hosts.count: an integer from 1 to 64"},
		{"{\"count\":65,\"current\":1}", "hosts.count: an integer from 1 to 64"},
		{"{\"count\":2,\"current\":3}", "hosts.current: an integer from 1 to count"},
		{"{\"count\":2,\"current\":0}", "hosts.current: an integer from 1 to count"},
		{"{\"count\":2,\"current\":1,\"master_port\":1}",
		 "hosts.master_addr: an IPv4 or IPv6 address"},
		{"{\"count\":2,\"current\":1,\"master_addr\":\"algo-1\",\"master_port\":1}",
		 "hosts.master_addr: an IPv4 or IPv6 address"},
		{"{\"count\":2,\"current\":1,\"master_addr\":\"10.0.0.1\",\"master_port\":70000}",
		 "hosts.master_port: an integer from 1 to 65535"},
		{"{\"count\":1,\"current\":1,\"master_addr\":\"10.0.0.1\"}",
		 "hosts.master_addr: only with several hosts"},
		{"{\"count\":1,\"current\":1,\"interface\":\"a/b\"}", "hosts.interface: an interface name"},
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[128] = "";
		struct jobhosts h;
		json_t *v = load(cases[i][0]);
		assert_int_equal(jobhosts_parse(v, &h, err, sizeof(err)), -EINVAL);
		assert_string_equal(err, cases[i][1]);
		assert_int_equal(h.count, 1); /* left as one host */
		json_decref(v);
	}
}

/* The supervisor's reader takes the field, and names it when bad. */
static void test_in_job_spec(void **state)
{
	struct jobspec s;
	char err[200] = "";
	(void)state;

	assert_int_equal(jobspec_parse("{\"name\":\"t\",\"argv\":[\"true\"],\"max_runtime_s\":9,\"output_path\":\"o\",\"checkpoint_path\":\"c\","
				       "\"hosts\":{\"current\":2,\"count\":2,\"master_addr\":"
				       "\"198.18.0.2\",\"master_port\":29400}}",
				       &s, err, sizeof(err)),
			 0);
	assert_int_equal(s.hosts.current, 2);
	assert_string_equal(s.hosts.master_addr, "198.18.0.2");
	jobspec_free(&s);
	assert_int_equal(jobspec_parse("{\"name\":\"t\",\"argv\":[\"true\"],\"max_runtime_s\":9,\"output_path\":\"o\",\"checkpoint_path\":\"c\"}",
				       &s, err, sizeof(err)),
			 0);
	assert_int_equal(s.hosts.count, 1);
	jobspec_free(&s);
	assert_int_equal(jobspec_parse("{\"name\":\"t\",\"argv\":[\"true\"],\"max_runtime_s\":9,\"output_path\":\"o\",\"checkpoint_path\":\"c\","
				       "\"hosts\":{\"current\":3,\"count\":2}}",
				       &s, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "hosts.current: an integer from 1 to count");
}

static bool has(const struct jobenv *e, const char *entry)
{
	for (size_t i = 0; i < e->n; i++)
		if (strcmp(e->entries[i], entry) == 0)
			return true;
	return false;
}

/* The sandbox's environment: labd's values win over the user's. */
static void test_job_environment(void **state)
{
	struct jobspec s;
	struct jobenv e;
	char err[200] = "";
	(void)state;

	assert_int_equal(jobspec_parse("{\"name\":\"t\",\"argv\":[\"true\"],\"max_runtime_s\":9,"
				       "\"output_path\":\"o\",\"checkpoint_path\":\"c\","
				       "\"env\":{\"MASTER_ADDR\":\"10.9.9.9\"},"
				       "\"hosts\":{\"current\":1,\"count\":2,\"master_addr\":"
				       "\"198.18.0.2\",\"master_port\":29400}}",
				       &s, err, sizeof(err)),
			 0);
	assert_int_equal(jobenv_build(&s, 7, "alice", 2, &e), 0);
	assert_true(has(&e, "SM_CURRENT_HOST=algo-1"));
	assert_true(has(&e, "SM_HOSTS=[\"algo-1\",\"algo-2\"]"));
	assert_true(has(&e, "MASTER_ADDR=198.18.0.2"));
	assert_false(has(&e, "MASTER_ADDR=10.9.9.9"));
	assert_true(has(&e, "NODE_RANK=0"));
	jobenv_free(&e);
	jobspec_free(&s);
}

/* instance_count at submit: 1 by default; above 1 only where the backend
 * has several machines, up to [slurm] max_instances; the field is named. */
static void test_submit_instance_count(void **state)
{
	struct jobs_limits lim = {.max_runtime_s = 600, .image = "", .keep_alive_max_s = 60};
	struct jobs_submit out;
	struct jobs_submit_error err;
	static const char *const bodies[] = {
		"{\"name\":\"a\",\"command\":[\"true\"]}",
		"{\"name\":\"a\",\"command\":[\"true\"],\"instance_count\":2}",
		"{\"name\":\"a\",\"command\":[\"true\"],\"instance_count\":9}",
		"{\"name\":\"a\",\"command\":[\"true\"],\"instance_count\":0}",
		"{\"name\":\"a\",\"command\":[\"true\"],\"instance_count\":\"2\"}",
	};
	json_t *b[5];
	(void)state;

	for (size_t i = 0; i < 5; i++)
		b[i] = load(bodies[i]);
	assert_int_equal(jobs_submit_check(b[0], &lim, &out, &err), 0);
	assert_int_equal(out.instance_count, 1);
	assert_int_equal(json_integer_value(json_object_get(out.spec, "instance_count")), 1);
	jobs_submit_release(&out);
	/* one machine (the local backend) */
	assert_int_equal(jobs_submit_check(b[1], &lim, &out, &err), -1);
	assert_string_equal(err.field, "instance_count");
	assert_non_null(strstr(err.message, "must be 1 here"));
	/* a Slurm cluster with [slurm] max_instances = 8 */
	lim.instances_max = 8;
	assert_int_equal(jobs_submit_check(b[1], &lim, &out, &err), 0);
	assert_int_equal(out.instance_count, 2);
	jobs_submit_release(&out);
	for (size_t i = 2; i < 5; i++) {
		assert_int_equal(jobs_submit_check(b[i], &lim, &out, &err), -1);
		assert_string_equal(err.field, "instance_count");
		assert_string_equal(err.message,
				    "field \"instance_count\" must be an integer from 1 to 8");
	}
	for (size_t i = 0; i < 5; i++)
		json_decref(b[i]);
}

static bool argv_has(const char *const *argv, const char *arg)
{
	for (; *argv; argv++)
		if (strcmp(*argv, arg) == 0)
			return true;
	return false;
}

/* A pool of a job on N hosts is one Slurm job over N nodes, one task each. */
static void test_submit_nodes(void **state)
{
	struct slurm_submit sub = {.pool = true, .id = 5, .user = "alice", .memory_mb = 512,
				   .cpus = 1, .seconds = 600, .nodes = 2};
	const char *argv[SLURMCLI_SUBMIT_ARGS];
	char store[SLURMCLI_SUBMIT_STORE];
	(void)state;

	slurmcli_submit_argv("/usr/bin/sbatch", &sub, argv, store);
	assert_true(argv_has(argv, "--nodes=2"));
	assert_true(argv_has(argv, "--ntasks-per-node=1"));
	assert_false(argv_has(argv, "--ntasks=1"));
	sub.nodes = 0;
	slurmcli_submit_argv("/usr/bin/sbatch", &sub, argv, store);
	assert_true(argv_has(argv, "--nodes=1"));
	assert_true(argv_has(argv, "--ntasks=1"));
	assert_false(argv_has(argv, "--ntasks-per-node=1"));
}

/* Slurm's host lists, in Slurm's order: the first is algo-1. */
static void test_host_lists(void **state)
{
	char names[8][LINK_NAME_MAX + 1];
	size_t n;
	(void)state;

	assert_int_equal(slurmhosts_expand("s1x0n[1-2]", names, 8, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(names[0], "s1x0n1");
	assert_string_equal(names[1], "s1x0n2");
	assert_int_equal(slurmhosts_expand("n[08-10,3],gpu05,r[1]a", names, 8, &n), 0);
	assert_int_equal(n, 6);
	assert_string_equal(names[0], "n08");
	assert_string_equal(names[2], "n10");
	assert_string_equal(names[3], "n3");
	assert_string_equal(names[4], "gpu05");
	assert_string_equal(names[5], "r1a");
	assert_int_equal(slurmhosts_expand("n[1-9]", names, 8, &n), -E2BIG);
	static const char *const bad[] = {"",	    "n[",     "n[]",   "n[2-1]", "n[1,]",
					  "n[1-]",  "n[a]",   "a,,b",  "n]1[",   "r[1]n[2]",
					  "n[1-2]]", "bad/name", "n[1-200000]"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(slurmhosts_expand(bad[i], names, 8, &n), -EINVAL);
}

/* Each node's job spec: the same but for "hosts", and its supervisor reads it. */
static void test_spec_per_host(void **state)
{
	const char *spec = "{\"name\":\"t\",\"argv\":[\"true\"],\"max_runtime_s\":9,"
			   "\"output_path\":\"o\",\"checkpoint_path\":\"c\"}";
	struct jobspec js;
	char err[200] = "", *out;
	(void)state;

	assert_int_equal(slurmhosts_spec(spec, 2, 2, "198.18.0.2", 29400, &out), 0);
	assert_int_equal(jobspec_parse(out, &js, err, sizeof(err)), 0);
	assert_int_equal(js.hosts.current, 2);
	assert_int_equal(js.hosts.count, 2);
	assert_string_equal(js.hosts.master_addr, "198.18.0.2");
	assert_int_equal(js.hosts.master_port, 29400);
	assert_string_equal(js.argv[0], "true");
	jobspec_free(&js);
	free(out);
	assert_int_equal(slurmhosts_spec(spec, 3, 2, "198.18.0.2", 29400, &out), -EINVAL);
	assert_null(out);
	/* the hosts' network is peer0; every host gets the input channels (algo-1 mounts
	 * them from the home, the others fetch them from algo-1) */
	const char *with_channels = "{\"name\":\"t\",\"argv\":[\"true\"],\"max_runtime_s\":9,"
				    "\"output_path\":\"o\",\"checkpoint_path\":\"c\","
				    "\"channels\":[{\"name\":\"train\",\"path\":\"data\"}]}";
	assert_int_equal(slurmhosts_spec(with_channels, 1, 2, "198.18.0.2", 29500, &out), 0);
	assert_int_equal(jobspec_parse(out, &js, err, sizeof(err)), 0);
	assert_string_equal(js.hosts.interface, "peer0");
	assert_int_equal(js.n_channels, 1);
	jobspec_free(&js);
	free(out);
	assert_int_equal(slurmhosts_spec(with_channels, 2, 2, "198.18.0.2", 29500, &out), 0);
	assert_int_equal(jobspec_parse(out, &js, err, sizeof(err)), 0);
	assert_int_equal(js.n_channels, 1);
	jobspec_free(&js);
	free(out);
	assert_int_equal(slurmhosts_spec(spec, 1, 2, "node-1", 29400, &out), -EINVAL);
	assert_int_equal(slurmhosts_spec("[1]", 1, 2, "198.18.0.2", 29400, &out), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_host_as_before),
		cmocka_unit_test(test_second_of_three),
		cmocka_unit_test(test_round_trip_and_most),
		cmocka_unit_test(test_each_member_refused),
		cmocka_unit_test(test_in_job_spec),
		cmocka_unit_test(test_job_environment),
		cmocka_unit_test(test_submit_instance_count),
		cmocka_unit_test(test_submit_nodes),
		cmocka_unit_test(test_host_lists),
		cmocka_unit_test(test_spec_per_host),
	};
	return cmocka_run_group_tests_name("jobhosts", tests, NULL, NULL);
}
