/* Unit tests: the pure parts of the profiler report and of a job's own
 * profiling settings - the step-time histogram (jobs/observe_report.c) and
 * the "rules" object of a submit (jobs/observe_spec.c: each bad field named,
 * nothing copied; what passes read back). */
#include "unit.h"

#include <jansson.h>

#include "jobs/observe_report.h"
#include "jobs/observe_spec.h"
#include "jobs/submit.h"

static json_int_t bar_count(json_t *h, size_t i)
{
	return json_integer_value(json_object_get(json_array_get(h, i), "count"));
}

static double bar_edge(json_t *h, size_t i, const char *which)
{
	return json_number_value(json_object_get(json_array_get(h, i), which));
}

static void test_histogram(void **state)
{
	double v[] = {0.05, 0.051, 0.052, 0.05, 0.9, 0.475};
	json_t *h;
	json_int_t sum = 0;
	(void)state;
	h = observe_histogram_json(v, 6, 20);
	assert_int_equal(json_array_size(h), 20);
	for (size_t i = 0; i < 20; i++)
		sum += bar_count(h, i);
	assert_int_equal(sum, 6);
	assert_int_equal(bar_count(h, 0), 4);
	/* the greatest value is in the last bar, which ends at it */
	assert_int_equal(bar_count(h, 19), 1);
	assert_true(bar_edge(h, 19, "to") == 0.9 && bar_edge(h, 0, "from") == 0.05);
	/* bars meet: each starts where the one before ended */
	for (size_t i = 1; i < 20; i++)
		assert_true(bar_edge(h, i, "from") == bar_edge(h, i - 1, "to"));
	json_decref(h);
	/* one value, or all equal: one bar */
	h = observe_histogram_json(v, 1, 20);
	assert_int_equal(json_array_size(h), 1);
	assert_int_equal(bar_count(h, 0), 1);
	json_decref(h);
	/* none: no bar */
	h = observe_histogram_json(v, 0, 20);
	assert_int_equal(json_array_size(h), 0);
	json_decref(h);
}

/* observe_spec_check on body against a spec defining the metric "iter". */
static int check(const char *body_text, struct jobs_submit_error *err, json_t **spec_out)
{
	json_t *body = json_loads(body_text, 0, NULL);
	json_t *spec = json_pack("{s:[{s:s, s:s}]}", "metric_definitions", "name", "iter", "regex",
				 "it=([0-9.]+)");
	int rc;

	assert_non_null(body);
	memset(err, 0, sizeof(*err));
	rc = observe_spec_check(body, spec, err);
	json_decref(body);
	if (spec_out)
		*spec_out = spec;
	else
		json_decref(spec);
	return rc;
}

static void test_rules_field(void **state)
{
	static const struct {
		const char *body, *field;
	} bad[] = {
		{"{\"rules\": 5}", "rules"},
		{"{\"rules\": {\"warmup_s\": -1}}", "rules.warmup_s"},
		{"{\"rules\": {\"warmup_s\": 86401}}", "rules.warmup_s"},
		{"{\"rules\": {\"warmup_s\": 2.5}}", "rules.warmup_s"},
		{"{\"rules\": {\"warmup_s\": null}}", "rules.warmup_s"},
		{"{\"rules\": {\"step_metric\": \"loss\"}}", "rules.step_metric"},
		{"{\"rules\": {\"step_metric\": [\"iter\"]}}", "rules.step_metric"},
		{"{\"rules\": {\"warmup_s\": 5, \"window\": 3}}", "rules.window"},
	};
	struct jobs_submit_error err;
	struct observe_spec got;
	json_t *spec;
	char *text;
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(check(bad[i].body, &err, &spec), -1);
		assert_string_equal(err.field, bad[i].field);
		assert_true(err.message[0] != '\0');
		/* nothing of a refused rules object is kept */
		assert_null(json_object_get(spec, "rules"));
		json_decref(spec);
	}
	/* absent: fine, nothing kept, the config's settings apply */
	assert_int_equal(check("{}", &err, &spec), 0);
	text = json_dumps(spec, JSON_COMPACT);
	observe_spec_read(text, &got);
	assert_true(got.warmup_s == -1 && got.step_metric[0] == '\0');
	free(text);
	json_decref(spec);
	/* both, at their bounds: kept and read back */
	assert_int_equal(check("{\"rules\": {\"warmup_s\": 0, \"step_metric\": \"iter\"}}", &err, &spec), 0);
	text = json_dumps(spec, JSON_COMPACT);
	observe_spec_read(text, &got);
	assert_true(got.warmup_s == 0);
	assert_string_equal(got.step_metric, "iter");
	free(text);
	json_decref(spec);
	assert_int_equal(check("{\"rules\": {\"warmup_s\": 86400}}", &err, NULL), 0);
	/* a spec that cannot be read asks nothing */
	observe_spec_read("{bad", &got);
	assert_true(got.warmup_s == -1);
	observe_spec_read(NULL, &got);
	assert_true(got.warmup_s == -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_histogram),
		cmocka_unit_test(test_rules_field),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
