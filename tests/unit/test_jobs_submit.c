/* Unit tests: the POST /api/v1/jobs body checked and normalised
 * (jobs/submit.h): defaults filled in, each bad field named. */
#include "unit.h"

#include <string.h>

#include "jobs/jobtail.h"
#include "jobs/script.h"
#include "jobs/submit.h"
#include "proto/jobspec.h"

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

/* Checks text under lim; returns the field named ("" when it passed). */
static const char *check_under(const char *text, const struct jobs_limits *lim,
			       struct jobs_submit *out)
{
	static struct jobs_submit_error err;
	json_error_t jerr;
	json_t *body = json_loads(text, 0, &jerr);

	assert_non_null(body);
	int rc = jobs_submit_check(body, lim, out, &err);
	json_decref(body);
	if (rc == 0)
		return "";
	assert_true(err.message[0] != '\0');
	return err.field;
}

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

/* gpu_kind: a GPU job gets its plan's kind of device unless it asks for one
 * its plan allows (the same, or a smaller MIG profile; anything on a whole-card
 * plan); a CPU job asks none. */
static void test_gpu_kind(void **state)
{
	struct jobs_limits mig = limits, share = limits;
	struct jobs_submit s;
	(void)state;

	mig.gpu_kind = "3g.71gb";
	share.gpu_kind = "share";
	assert_string_equal(check("{\"name\":\"a\",\"command\":[\"sh\"],\"type\":\"gpu\"}", &s), "");
	assert_string_equal(s.gpu_kind, "whole"); /* no plan kind: a whole card */
	assert_string_equal(json_string_value(json_object_get(s.spec, "gpu_kind")), "whole");
	jobs_submit_release(&s);
	assert_string_equal(check("{\"name\":\"a\",\"command\":[\"sh\"],\"type\":\"gpu\","
				  "\"gpu_kind\":\"1g.18gb\"}", &s), "");
	assert_string_equal(s.gpu_kind, "1g.18gb");
	jobs_submit_release(&s);
	assert_string_equal(check_under("{\"name\":\"a\",\"command\":[\"sh\"],\"type\":\"gpu\"}",
					&mig, &s), "");
	assert_string_equal(s.gpu_kind, "3g.71gb"); /* the plan's */
	jobs_submit_release(&s);
	assert_string_equal(check_under("{\"name\":\"a\",\"command\":[\"sh\"],\"type\":\"gpu\","
					"\"gpu_kind\":\"2g.35gb\"}", &mig, &s), "");
	assert_string_equal(s.gpu_kind, "2g.35gb");
	jobs_submit_release(&s);
	/* more than the plan gives, another kind, not a kind, a CPU job asking */
	assert_string_equal(check_under("{\"name\":\"a\",\"command\":[\"sh\"],\"type\":\"gpu\","
					"\"gpu_kind\":\"7g.141gb\"}", &mig, &s), "gpu_kind");
	assert_string_equal(check_under("{\"name\":\"a\",\"command\":[\"sh\"],\"type\":\"gpu\","
					"\"gpu_kind\":\"whole\"}", &mig, &s), "gpu_kind");
	assert_string_equal(check_under("{\"name\":\"a\",\"command\":[\"sh\"],\"type\":\"gpu\","
					"\"gpu_kind\":\"1g.18gb\"}", &share, &s), "gpu_kind");
	assert_string_equal(check("{\"name\":\"a\",\"command\":[\"sh\"],\"type\":\"gpu\","
				  "\"gpu_kind\":\"big\"}", &s), "gpu_kind");
	assert_string_equal(check("{\"name\":\"a\",\"command\":[\"sh\"],\"type\":\"gpu\","
				  "\"gpu_kind\":7}", &s), "gpu_kind");
	assert_string_equal(check("{\"name\":\"a\",\"command\":[\"sh\"],\"gpu_kind\":\"share\"}",
				  &s), "gpu_kind");
	assert_string_equal(check("{\"name\":\"a\",\"command\":[\"sh\"]}", &s), "");
	assert_null(s.gpu_kind); /* a CPU job has none */
	assert_null(json_object_get(s.spec, "gpu_kind"));
	jobs_submit_release(&s);
}

/* capacity (docs/jobs.md "Preemptible capacity"): on-demand by default; a
 * preemptible job keeps no warm pool and waits (and runs) within a max_wait_s
 * of at least its max_runtime_s. */
static void test_capacity(void **state)
{
	struct jobs_submit s;
	(void)state;

	assert_string_equal(check("{\"name\":\"a\",\"command\":[\"sh\"]}", &s), "");
	assert_false(s.preemptible);
	assert_string_equal(json_string_value(json_object_get(s.spec, "capacity")), "on-demand");
	jobs_submit_release(&s);
	assert_string_equal(
		check("{\"name\":\"a\",\"command\":[\"sh\"],\"capacity\":\"preemptible\"}", &s), "");
	assert_true(s.preemptible);
	assert_int_equal(s.max_wait_s, 7200); /* raised to max_runtime_s */
	jobs_submit_release(&s);
	assert_string_equal(check("{\"name\":\"a\",\"command\":[\"sh\"],\"capacity\":\"spot\"}", &s),
			    "capacity");
	assert_string_equal(check("{\"name\":\"a\",\"command\":[\"sh\"],\"capacity\":1}", &s),
			    "capacity");
	assert_string_equal(check("{\"name\":\"a\",\"command\":[\"sh\"],\"capacity\":"
				  "\"preemptible\",\"keep_alive_s\":10}", &s),
			    "keep_alive_s");
	assert_string_equal(check("{\"name\":\"a\",\"command\":[\"sh\"],\"capacity\":"
				  "\"preemptible\",\"max_wait_s\":60}", &s),
			    "max_wait_s");
}

/* instance_count on Slurm: up to max_instances, and only with [slurm] job_addresses. */
static void test_instances(void **state)
{
	struct jobs_limits slurm = limits, no_addresses;
	struct jobs_submit s;
	static struct jobs_submit_error err;
	(void)state;

	slurm.instances_max = 4;
	assert_string_equal(check_under("{\"name\":\"a\",\"command\":[\"sh\"],"
					"\"instance_count\":3}", &slurm, &s), "");
	assert_int_equal(s.instance_count, 3);
	jobs_submit_release(&s);
	/* on CPUs only so far */
	assert_string_equal(check_under("{\"name\":\"a\",\"command\":[\"sh\"],\"type\":\"gpu\","
					"\"gpu_count\":1,\"instance_count\":2}", &slurm, &s),
			    "instance_count");
	no_addresses = slurm;
	no_addresses.instances_no_addresses = true;
	json_t *body = json_loads("{\"name\":\"a\",\"command\":[\"sh\"],\"instance_count\":2}",
				  0, NULL);
	assert_int_equal(jobs_submit_check(body, &no_addresses, &s, &err), -1);
	assert_string_equal(err.field, "instance_count");
	assert_non_null(strstr(err.message, "[slurm] job_addresses is not set"));
	json_decref(body);
	assert_string_equal(check_under("{\"name\":\"a\",\"command\":[\"sh\"],"
					"\"instance_count\":1}", &no_addresses, &s), "");
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

/* A body of n words of len bytes each after "true" as its command, and env_n
 * variables of env_len bytes each. Caller frees. */
static char *sized_body(int n, int len, int env_n, int env_len)
{
	json_t *argv = json_array(), *env = json_object(), *body;
	char *word = malloc((size_t)(len > env_len ? len : env_len) + 1), name[16];
	char *text;

	assert_non_null(word);
	json_array_append_new(argv, json_string("true"));
	memset(word, 'x', (size_t)len);
	word[len] = '\0';
	for (int i = 0; i < n; i++)
		json_array_append_new(argv, json_string(word));
	memset(word, 'y', (size_t)env_len);
	word[env_len] = '\0';
	for (int i = 0; i < env_n; i++) {
		snprintf(name, sizeof(name), "V%d", i);
		json_object_set_new(env, name, json_string(word));
	}
	body = json_pack("{s:s,s:o,s:o}", "name", "big", "command", argv, "environment", env);
	text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	free(word);
	return text;
}

/* The same requests fed to the API's check and, when it accepts one, to the
 * supervisor's reader of the spec dispatch makes from it (with this lab's
 * numbers): whatever the API accepts, root runs; what root would refuse, the
 * API refuses, naming the field. */
static void test_accepted_specs_run(void **state)
{
	static const struct {
		int n, len, env_n, env_len;
		const char *field; /* "" = accepted */
	} cases[] = {
		{1, 10, 0, 0, ""},
		{10, 4000, 0, 0, ""},	      /* 40 KB: under the 48 KiB of a spec */
		{20, 4000, 0, 0, "command"},  /* the review's probe: 80 KB */
		{63, 4000, 0, 0, "command"},  /* the most the API's own bounds allow */
		{2, 4000, 16, 4000, "environment"},
		{4, 4000, 4, 4000, ""},
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *text = sized_body(cases[i].n, cases[i].len, cases[i].env_n, cases[i].env_len);
		struct jobs_submit s;
		const char *field = check(text, &s);

		free(text);
		if (field[0]) {
			print_message("case %zu: refused, naming %s\n", i, field);
			assert_string_equal(field, cases[i].field);
			continue;
		}
		/* as jobs/spec.c makes it at dispatch: [jobs] grace 30 s, a 64 MiB log */
		json_t *spec = jobs_spec_json(s.name, s.spec, s.max_runtime_s, 30, 64LL << 20,
					      s.gpu_count, (s.cpus_milli + 999) / 1000);
		char *spec_text = json_dumps(spec, JSON_COMPACT), err[256] = "";
		struct jobspec js;
		int rc = jobspec_parse(spec_text, &js, err, sizeof(err));

		print_message("case %zu: accepted; the supervisor says %s\n", i, rc ? err : "ok");
		assert_int_equal(rc, 0);
		assert_string_equal(cases[i].field, "");
		jobspec_free(&js);
		free(spec_text);
		json_decref(spec);
		jobs_submit_release(&s);
	}
}

/* A script travels as pieces of at most JOBS_ARG_MAX_BYTES after the launcher, never cut
 * inside a UTF-8 sequence, and joined they are the script again. */
static void test_script_pieces(void **state)
{
	char script[JOBS_ARG_MAX_BYTES + 200];
	json_t *command = jobs_script_command(), *argv, *piece;
	size_t i, at = 0;
	(void)state;

	memset(script, 'x', sizeof(script) - 1);
	script[sizeof(script) - 1] = '\0';
	memcpy(script + JOBS_ARG_MAX_BYTES - 1, "\xc3\xa9", 2); /* é across the first bound */
	argv = jobs_script_argv(command, script);
	assert_non_null(argv);
	assert_int_equal(json_array_size(argv), json_array_size(command) + 2);
	json_array_foreach(argv, i, piece) {
		if (i < json_array_size(command))
			continue;
		assert_true(json_string_length(piece) <= JOBS_ARG_MAX_BYTES);
		assert_memory_equal(json_string_value(piece), script + at, json_string_length(piece));
		at += json_string_length(piece);
	}
	assert_int_equal(at, strlen(script));
	json_decref(argv);
	json_decref(command);
}

/* The failure tail: the last lines, a piece of a line at a cut start skipped, bad UTF-8 '?'. */
static void test_failure_tail(void **state)
{
	char bad[] = "a\xff b \xc3\xa9 \xed\xa0\x80";
	(void)state;

	assert_int_equal(jobtail_start("a\nb\nc\n", 6, 2, 0), 2);
	assert_int_equal(jobtail_start("a\nb\nc", 5, 2, 0), 2);
	assert_int_equal(jobtail_start("a\nb\nc\n", 6, 20, 0), 0);
	assert_int_equal(jobtail_start("ece\nb\nc\n", 8, 20, 1), 4);
	assert_int_equal(jobtail_start("no newline", 10, 20, 1), 10);
	jobtail_make_utf8(bad, strlen(bad));
	assert_string_equal(bad, "a? b \xc3\xa9 ???");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_capacity),
		cmocka_unit_test(test_gpu_kind),
		cmocka_unit_test(test_full_request),
		cmocka_unit_test(test_each_bad_field_named),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_accepted_specs_run),
		cmocka_unit_test(test_script_pieces),
		cmocka_unit_test(test_failure_tail),
		cmocka_unit_test(test_instances),
	};
	return cmocka_run_group_tests_name("jobs_submit", tests, NULL, NULL);
}
