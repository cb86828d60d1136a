/* Unit tests: a tuning job's search (tuning/search.c): its checks name the field, the
 * trials' parameters stay in their ranges on their scale, the grid is every point once,
 * the same seed draws the same trials, and hyperband's rule keeps the best 1/eta. */
#include "unit.h"

#include <math.h>

#include "tuning/search.h"

static json_t *request(const char *extra)
{
	char text[2048];
	json_error_t e;

	snprintf(text, sizeof(text),
		 "{\"name\": \"t\", \"job\": {}, \"objective\": {\"metric\": \"loss\", \"type\": "
		 "\"minimize\"}, \"max_trials\": 50, \"parameter_ranges\": ["
		 "{\"name\": \"lr\", \"type\": \"continuous\", \"min\": 0.001, \"max\": 1, \"scaling\": "
		 "\"log\"}, {\"name\": \"layers\", \"type\": \"integer\", \"min\": 1, \"max\": 4}, "
		 "{\"name\": \"opt\", \"type\": \"categorical\", \"values\": [\"sgd\", \"adam\"]}]%s}",
		 extra);
	json_t *r = json_loads(text, 0, &e);
	assert_non_null(r);
	return r;
}

/* The field named for req (with one change applied as JSON merged in), or "" when it passes. */
static const char *field_of(const char *extra, char out[96])
{
	struct jobs_submit_error err = {0};
	struct search s;
	json_t *req = request(extra), *norm = json_object();
	int rc = search_check(req, 1, norm, &s, &err);

	snprintf(out, 96, "%s", rc < 0 ? err.field : "");
	json_decref(req);
	json_decref(norm);
	return out;
}

static void test_bad_fields_are_named(void **state)
{
	char f[96];
	(void)state;

	assert_string_equal(field_of("", f), "");
	assert_string_equal(field_of(", \"strategy\": \"bayes\"", f), "strategy");
	assert_string_equal(field_of(", \"max_parallel\": 51", f), "max_parallel");
	assert_string_equal(field_of(", \"seed\": -1", f), "seed");
	assert_string_equal(field_of(", \"hyperband\": {}", f), "hyperband");
	assert_string_equal(field_of(", \"strategy\": \"hyperband\", \"hyperband\": {\"x\": 1}", f),
			    "hyperband.x");
	/* a continuous range on a grid needs its points */
	assert_string_equal(field_of(", \"strategy\": \"grid\"", f),
			    "parameter_ranges[0].grid_points");
}

static void test_a_trials_parameters_must_fit(void **state)
{
	struct jobs_submit_error err = {0};
	struct search s;
	json_t *req = request(""), *norm = json_object();
	json_t *ranges = json_object_get(req, "parameter_ranges");
	char name[16], value[300];
	(void)state;

	/* 20 categorical ranges whose longest values add up past 4000 bytes */
	memset(value, 'v', 250);
	value[250] = '\0';
	json_array_clear(ranges);
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "p%d", i);
		json_array_append_new(ranges, json_pack("{s:s,s:s,s:[s,s]}", "name", name, "type",
							 "categorical", "values", "a", value));
	}
	assert_int_equal(search_check(req, 1, norm, &s, &err), -1);
	assert_string_equal(err.field, "parameter_ranges");
	/* 10 of them fit */
	while (json_array_size(ranges) > 10)
		json_array_remove(ranges, json_array_size(ranges) - 1);
	json_decref(norm);
	norm = json_object();
	assert_int_equal(search_check(req, 1, norm, &s, &err), 0);
	json_decref(req);
	json_decref(norm);
}

static void check_point(const struct search *s, json_t *p)
{
	double lr = json_real_value(json_object_get(p, "lr"));
	json_int_t layers = json_integer_value(json_object_get(p, "layers"));
	const char *opt = json_string_value(json_object_get(p, "opt"));

	assert_true(lr >= 0.001 && lr <= 1.0);
	assert_true(json_is_integer(json_object_get(p, "layers")) && layers >= 1 && layers <= 4);
	assert_non_null(opt);
	assert_true(strcmp(opt, "sgd") == 0 || strcmp(opt, "adam") == 0);
	(void)s;
}

static void test_random_stays_in_range_on_its_scale_and_repeats(void **state)
{
	struct jobs_submit_error err;
	struct search s;
	json_t *req = request(", \"seed\": 42, \"max_trials\": 400"), *norm = json_object();
	int below = 0, each[5] = {0};
	(void)state;

	assert_int_equal(search_check(req, 1, norm, &s, &err), 0);
	assert_int_equal(s.seed, 42);
	for (int i = 0; i < 400; i++) {
		json_t *p = search_point(&s, i), *q = search_point(&s, i);
		check_point(&s, p);
		assert_true(json_equal(p, q)); /* the same trial from the same seed */
		below += json_real_value(json_object_get(p, "lr")) < sqrt(0.001);
		each[json_integer_value(json_object_get(p, "layers"))]++;
		json_decref(p);
		json_decref(q);
	}
	/* log scale: half the draws below the geometric middle (linear: 3 %) */
	assert_in_range(below, 150, 250);
	for (int k = 1; k <= 4; k++) /* every integer about as likely, the ends included */
		assert_in_range(each[k], 60, 140);
	json_decref(req);
	json_decref(norm);
}

static void test_grid_is_every_point_once(void **state)
{
	struct jobs_submit_error err;
	struct search s;
	json_t *req = request(", \"strategy\": \"grid\""), *norm = json_object();
	json_t *seen = json_array();
	(void)state;

	/* lr in 3 points on its log scale: 0.001, 0.0316..., 1 */
	json_object_set_new(json_array_get(json_object_get(req, "parameter_ranges"), 0),
			    "grid_points", json_integer(3));
	json_object_del(req, "max_trials");
	assert_int_equal(search_check(req, 1, norm, &s, &err), 0);
	assert_int_equal(search_grid_size(&s), 3 * 4 * 2);
	assert_int_equal(s.max_trials, 24);
	for (int i = 0; i < 24; i++) {
		json_t *p = search_point(&s, i);
		check_point(&s, p);
		for (size_t k = 0; k < json_array_size(seen); k++)
			assert_false(json_equal(json_array_get(seen, k), p));
		json_array_append_new(seen, p);
	}
	assert_true(fabs(json_real_value(json_object_get(json_array_get(seen, 8), "lr")) -
			 sqrt(0.001)) < 1e-9);
	json_decref(seen);
	json_decref(req);
	json_decref(norm);
}

static void test_hyperband_keeps_the_best_third(void **state)
{
	struct search s = {.min_points = 2, .reduction_factor = 3};
	double v[] = {0.5, 0.9, 0.1, 0.7, 0.3, 0.8};
	(void)state;

	assert_int_equal(search_rung_points(&s, 0), 2);
	assert_int_equal(search_rung_points(&s, 2), 18);
	assert_int_equal(search_rung_points(&s, SEARCH_RUNGS_MAX), 0);
	/* fewer than 3 at the rung: every one goes on */
	assert_false(search_rung_stops(&s, 0.9, v, 2));
	/* 6 at the rung, minimize: the best 2 (0.1, 0.3) go on */
	assert_false(search_rung_stops(&s, 0.1, v, 6));
	assert_false(search_rung_stops(&s, 0.3, v, 6));
	assert_true(search_rung_stops(&s, 0.5, v, 6));
	assert_true(search_rung_stops(&s, 0.9, v, 6));
	s.maximize = true; /* maximize: 0.9 and 0.8 */
	assert_false(search_rung_stops(&s, 0.9, v, 6));
	assert_true(search_rung_stops(&s, 0.1, v, 6));
}

static void test_hyperparameters_are_strings_over_the_base(void **state)
{
	json_t *base = json_pack("{s:s,s:s}", "epochs", "10", "lr", "9");
	json_t *point = json_pack("{s:f,s:I,s:s}", "lr", 0.25, "layers", (json_int_t)3, "opt", "adam");
	json_t *hp = search_hyperparameters(base, point);
	(void)state;

	assert_string_equal(json_string_value(json_object_get(hp, "epochs")), "10");
	assert_string_equal(json_string_value(json_object_get(hp, "lr")), "0.25");
	assert_string_equal(json_string_value(json_object_get(hp, "layers")), "3");
	assert_string_equal(json_string_value(json_object_get(hp, "opt")), "adam");
	assert_string_equal(json_string_value(json_object_get(base, "lr")), "9"); /* untouched */
	json_decref(hp);
	json_decref(base);
	json_decref(point);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_fields_are_named),
		cmocka_unit_test(test_a_trials_parameters_must_fit),
		cmocka_unit_test(test_random_stays_in_range_on_its_scale_and_repeats),
		cmocka_unit_test(test_grid_is_every_point_once),
		cmocka_unit_test(test_hyperband_keeps_the_best_third),
		cmocka_unit_test(test_hyperparameters_are_strings_over_the_base),
	};
	return cmocka_run_group_tests_name("tuning_search", tests, NULL, NULL);
}
