/* search.c - a tuning job's search checked, its trials' parameters and the
 * early-stopping rule; see search.h. */
#include "tuning/search.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const search_fields[] = {
	"name",	      "job",	      "parameter_ranges", "objective", "strategy",
	"max_trials", "max_parallel", "hyperband",	  "seed",      NULL,
};

static int fail(struct jobs_submit_error *err, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct jobs_submit_error *err, const char *field, const char *fmt, ...)
{
	va_list ap;

	snprintf(err->field, sizeof(err->field), "%s", field);
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return -1;
}

/* An optional integer field of obj in [min, max]: 0 with *out (def when
 * absent), or -1 naming path. */
static int int_field(json_t *obj, const char *key, const char *path, int64_t min, int64_t max,
		     int64_t def, int64_t *out, struct jobs_submit_error *err)
{
	json_t *v = json_object_get(obj, key);

	if (!v) {
		*out = def;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return fail(err, path, "field \"%s\" must be an integer from %lld to %lld", path,
			    (long long)min, (long long)max);
	*out = json_integer_value(v);
	return 0;
}

static bool only_fields(json_t *obj, const char *const *allowed, const char **bad)
{
	const char *key;
	json_t *v;

	json_object_foreach(obj, key, v) {
		const char *const *a = allowed;
		while (*a && strcmp(*a, key) != 0)
			a++;
		if (!*a) {
			*bad = key;
			return false;
		}
	}
	return true;
}

/* A hyperparameter name: ^[A-Za-z0-9_.-]{1,64}$. */
static bool param_name_ok(json_t *v)
{
	const char *s = json_string_value(v);
	size_t n = s ? strlen(s) : 0;

	if (!s || n == 0 || n > SEARCH_NAME_MAX_CHARS || n != json_string_length(v))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(s[i] == '_' || s[i] == '.' || s[i] == '-' || (s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
			return false;
	return true;
}

static int check_values(json_t *r, const char *path, struct search_range *out,
			struct jobs_submit_error *err)
{
	char field[96];
	json_t *vals = json_object_get(r, "values"), *v;
	size_t i;

	snprintf(field, sizeof(field), "%s.values", path);
	if (!json_is_array(vals) || json_array_size(vals) < 1 ||
	    json_array_size(vals) > SEARCH_VALUES_MAX)
		return fail(err, field, "a categorical range has \"values\": 1 to %d strings",
			    SEARCH_VALUES_MAX);
	json_array_foreach(vals, i, v) {
		snprintf(field, sizeof(field), "%s.values[%zu]", path, i);
		if (!json_is_string(v) || json_string_length(v) > SEARCH_VALUE_MAX_CHARS ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return fail(err, field, "a value is a string of at most %d characters",
				    SEARCH_VALUE_MAX_CHARS);
		for (size_t k = 0; k < i; k++)
			if (json_equal(json_array_get(vals, k), v))
				return fail(err, field, "value \"%s\" is given twice",
					    json_string_value(v));
	}
	out->values = vals;
	return 0;
}

/* min and max of a continuous or integer range. */
static int check_bounds(json_t *r, const char *path, struct search_range *out,
			struct jobs_submit_error *err)
{
	char field[96];
	json_t *min = json_object_get(r, "min"), *max = json_object_get(r, "max");
	bool integer = out->kind == SEARCH_INTEGER;
	const char *what = integer ? "an integer" : "a number";

	snprintf(field, sizeof(field), "%s.min", path);
	if (integer ? !json_is_integer(min) : !json_is_number(min))
		return fail(err, field, "\"min\" must be %s", what);
	snprintf(field, sizeof(field), "%s.max", path);
	if (integer ? !json_is_integer(max) : !json_is_number(max))
		return fail(err, field, "\"max\" must be %s", what);
	out->min = json_number_value(min);
	out->max = json_number_value(max);
	if (!isfinite(out->min) || !isfinite(out->max) || fabs(out->min) > 1e15 ||
	    fabs(out->max) > 1e15 || out->max <= out->min)
		return fail(err, field, "\"max\" must be greater than \"min\" (both within 1e15)");
	snprintf(field, sizeof(field), "%s.min", path);
	if (out->log && out->min <= 0)
		return fail(err, field, "log scaling needs \"min\" greater than 0");
	return 0;
}

static int check_range(json_t *r, size_t i, enum search_strategy strategy, json_t *norm_ranges,
		       struct search_range *out, struct jobs_submit_error *err)
{
	static const char *const fields[] = {"name",	"type",	       "min",	 "max",
					     "scaling", "grid_points", "values", NULL};
	char path[40], field[96];
	const char *type, *scaling = "linear", *bad = NULL;
	json_t *v;
	int64_t points;

	snprintf(path, sizeof(path), "parameter_ranges[%zu]", i);
	if (!json_is_object(r))
		return fail(err, path, "%s must be an object", path);
	if (!only_fields(r, fields, &bad)) {
		snprintf(field, sizeof(field), "%s.%s", path, bad);
		return fail(err, field, "unknown field \"%s\" in a parameter range", bad);
	}
	snprintf(field, sizeof(field), "%s.name", path);
	if (!param_name_ok(v = json_object_get(r, "name")))
		return fail(err, field, "a range's name matches ^[A-Za-z0-9_.-]{1,64}$");
	out->name = json_string_value(v);
	for (size_t k = 0; k < i; k++)
		if (strcmp(json_string_value(json_object_get(json_array_get(norm_ranges, k), "name")),
			   out->name) == 0)
			return fail(err, field, "parameter \"%s\" has two ranges", out->name);
	snprintf(field, sizeof(field), "%s.type", path);
	type = json_string_value(json_object_get(r, "type"));
	if (type && strcmp(type, "continuous") == 0)
		out->kind = SEARCH_CONTINUOUS;
	else if (type && strcmp(type, "integer") == 0)
		out->kind = SEARCH_INTEGER;
	else if (type && strcmp(type, "categorical") == 0)
		out->kind = SEARCH_CATEGORICAL;
	else
		return fail(err, field, "\"type\" must be \"continuous\", \"integer\" or \"categorical\"");
	v = json_object_get(r, "scaling");
	snprintf(field, sizeof(field), "%s.scaling", path);
	if (v && (out->kind == SEARCH_CATEGORICAL || !json_is_string(v) ||
		  (strcmp(json_string_value(v), "linear") != 0 &&
		   strcmp(json_string_value(v), "log") != 0)))
		return fail(err, field,
			    "\"scaling\" is \"linear\" or \"log\", for a continuous or integer range");
	if (v)
		scaling = json_string_value(v);
	out->log = strcmp(scaling, "log") == 0;
	if (out->kind == SEARCH_CATEGORICAL) {
		if (json_object_get(r, "min") || json_object_get(r, "max") ||
		    json_object_get(r, "grid_points")) {
			snprintf(field, sizeof(field), "%s.%s", path,
				 json_object_get(r, "min") ? "min"
				 : json_object_get(r, "max") ? "max" : "grid_points");
			return fail(err, field, "a categorical range has only \"values\"");
		}
		if (check_values(r, path, out, err) < 0)
			return -1;
		json_array_append_new(norm_ranges, json_pack("{s:s,s:s,s:O}", "name", out->name,
							     "type", type, "values", out->values));
		return 0;
	}
	if (json_object_get(r, "values")) {
		snprintf(field, sizeof(field), "%s.values", path);
		return fail(err, field, "only a categorical range has \"values\"");
	}
	if (check_bounds(r, path, out, err) < 0)
		return -1;
	snprintf(field, sizeof(field), "%s.grid_points", path);
	if (int_field(r, "grid_points", field, 2, SEARCH_GRID_POINTS_MAX, 0, &points, err) < 0)
		return -1;
	if (points && strategy != SEARCH_GRID)
		return fail(err, field, "\"grid_points\" is for the grid strategy only");
	if (!points && strategy == SEARCH_GRID && out->kind == SEARCH_CONTINUOUS)
		return fail(err, field, "the grid strategy needs \"grid_points\" of a continuous range");
	if (!points && strategy == SEARCH_GRID) {
		if (out->max - out->min + 1 > SEARCH_GRID_POINTS_MAX)
			return fail(err, field,
				    "an integer range of more than %d values needs \"grid_points\"",
				    SEARCH_GRID_POINTS_MAX);
		points = (int64_t)(out->max - out->min + 1);
	}
	if (out->kind == SEARCH_INTEGER && points > out->max - out->min + 1)
		return fail(err, field, "an integer range from %.0f to %.0f has fewer values than that",
			    out->min, out->max);
	out->grid_points = (int)points;
	v = json_pack("{s:s,s:s,s:O,s:O,s:s}", "name", out->name, "type", type, "min",
		      json_object_get(r, "min"), "max", json_object_get(r, "max"), "scaling",
		      scaling);
	if (points)
		json_object_set_new(v, "grid_points", json_integer(points));
	json_array_append_new(norm_ranges, v);
	return 0;
}

/* The most bytes a trial's parameters take as compact JSON: each name and its
 * longest value (a number at most 24 characters, %.17g), quoted and escaped. */
static size_t point_bound(const struct search *s)
{
	size_t n = 2;

	for (int i = 0; i < s->n_ranges; i++) {
		const struct search_range *r = &s->ranges[i];
		json_t *name = json_string(r->name), *v;
		size_t longest = 26, k;
		char *text = name ? json_dumps(name, JSON_ENCODE_ANY) : NULL;

		n += (text ? strlen(text) : 1000) + 2;
		free(text);
		json_decref(name);
		json_array_foreach(r->values, k, v) {
			char *t = json_dumps(v, JSON_ENCODE_ANY);
			size_t len = t ? strlen(t) : 1000;
			free(t);
			if (len > longest)
				longest = len;
		}
		n += longest;
	}
	return n;
}

static int check_ranges(json_t *req, struct search *s, json_t *norm,
			struct jobs_submit_error *err)
{
	json_t *ranges = json_object_get(req, "parameter_ranges"), *r;
	json_t *out = json_array();
	size_t i;

	json_object_set_new(norm, "parameter_ranges", out);
	if (!json_is_array(ranges) || json_array_size(ranges) < 1 ||
	    json_array_size(ranges) > SEARCH_RANGES_MAX)
		return fail(err, "parameter_ranges",
			    "field \"parameter_ranges\" must be an array of 1 to %d ranges",
			    SEARCH_RANGES_MAX);
	json_array_foreach(ranges, i, r) {
		if (check_range(r, i, s->strategy, out, &s->ranges[i], err) < 0)
			return -1;
		s->n_ranges = (int)i + 1;
	}
	if (point_bound(s) > SEARCH_POINT_MAX_BYTES)
		return fail(err, "parameter_ranges",
			    "one trial's parameters must fit in %d bytes as JSON: fewer ranges, or "
			    "shorter names and values",
			    SEARCH_POINT_MAX_BYTES);
	/* borrow from norm (it outlives a request that is not kept) */
	for (i = 0; i < (size_t)s->n_ranges; i++) {
		json_t *n = json_array_get(out, i);
		s->ranges[i].name = json_string_value(json_object_get(n, "name"));
		if (s->ranges[i].values)
			s->ranges[i].values = json_object_get(n, "values");
	}
	return 0;
}

static int check_objective(json_t *req, struct search *s, json_t *norm,
			   struct jobs_submit_error *err)
{
	static const char *const fields[] = {"metric", "type", NULL};
	json_t *o = json_object_get(req, "objective"), *m;
	const char *type, *bad;

	if (!json_is_object(o))
		return fail(err, "objective",
			    "field \"objective\" must be an object {\"metric\", \"type\"}");
	if (!only_fields(o, fields, &bad)) {
		char field[80];
		snprintf(field, sizeof(field), "objective.%s", bad);
		return fail(err, field, "unknown field \"%s\" in the objective", bad);
	}
	m = json_object_get(o, "metric");
	if (!json_is_string(m) || json_string_length(m) < 1 || json_string_length(m) > 255)
		return fail(err, "objective.metric",
			    "\"metric\" must name one of the job's metric_definitions");
	type = json_string_value(json_object_get(o, "type"));
	if (!type || (strcmp(type, "minimize") != 0 && strcmp(type, "maximize") != 0))
		return fail(err, "objective.type", "\"type\" must be \"minimize\" or \"maximize\"");
	s->maximize = strcmp(type, "maximize") == 0;
	json_object_set_new(norm, "objective", json_pack("{s:O,s:s}", "metric", m, "type", type));
	s->metric = json_string_value(json_object_get(json_object_get(norm, "objective"), "metric"));
	return 0;
}

static int check_strategy(json_t *req, struct search *s, json_t *norm,
			  struct jobs_submit_error *err)
{
	json_t *v = json_object_get(req, "strategy");
	const char *name = v ? json_string_value(v) : "random";

	if (name && strcmp(name, "random") == 0)
		s->strategy = SEARCH_RANDOM;
	else if (name && strcmp(name, "grid") == 0)
		s->strategy = SEARCH_GRID;
	else if (name && strcmp(name, "hyperband") == 0)
		s->strategy = SEARCH_HYPERBAND;
	else
		return fail(err, "strategy",
			    "field \"strategy\" must be \"random\", \"grid\" or \"hyperband\"");
	json_object_set_new(norm, "strategy", json_string(name));
	return 0;
}

static int check_hyperband(json_t *req, struct search *s, json_t *norm,
			   struct jobs_submit_error *err)
{
	static const char *const fields[] = {"min_points", "reduction_factor", NULL};
	json_t *h = json_object_get(req, "hyperband");
	const char *bad;
	int64_t min_points, eta;

	if (h && s->strategy != SEARCH_HYPERBAND)
		return fail(err, "hyperband", "field \"hyperband\" is for the hyperband strategy only");
	if (s->strategy != SEARCH_HYPERBAND)
		return 0;
	if (h && !json_is_object(h))
		return fail(err, "hyperband",
			    "field \"hyperband\" must be an object {\"min_points\", "
			    "\"reduction_factor\"}");
	if (h && !only_fields(h, fields, &bad)) {
		char field[80];
		snprintf(field, sizeof(field), "hyperband.%s", bad);
		return fail(err, field, "unknown field \"%s\" in hyperband", bad);
	}
	if (int_field(h, "min_points", "hyperband.min_points", 1, 1000, 1, &min_points, err) < 0 ||
	    int_field(h, "reduction_factor", "hyperband.reduction_factor", 2, 10, 3, &eta, err) < 0)
		return -1;
	s->min_points = (int)min_points;
	s->reduction_factor = (int)eta;
	json_object_set_new(norm, "hyperband", json_pack("{s:I,s:I}", "min_points",
							 (json_int_t)min_points,
							 "reduction_factor", (json_int_t)eta));
	return 0;
}

static int check_bounds_of_search(json_t *req, uint64_t seed_default, struct search *s,
				  json_t *norm, struct jobs_submit_error *err)
{
	int64_t grid = s->strategy == SEARCH_GRID ? search_grid_size(s) : 0;
	int64_t trials, parallel, seed;

	if (grid > SEARCH_TRIALS_MAX)
		return fail(err, "parameter_ranges",
			    "the grid has more than %d points; give fewer grid_points or values",
			    SEARCH_TRIALS_MAX);
	if (s->strategy != SEARCH_GRID && !json_object_get(req, "max_trials"))
		return fail(err, "max_trials", "field \"max_trials\" is required (1 to %d)",
			    SEARCH_TRIALS_MAX);
	if (int_field(req, "max_trials", "max_trials", 1, SEARCH_TRIALS_MAX, grid, &trials, err) < 0)
		return -1;
	if (grid && trials < grid)
		return fail(err, "max_trials",
			    "the grid has %lld points: \"max_trials\" must be at least that (or "
			    "absent)",
			    (long long)grid);
	if (grid)
		trials = grid; /* every point once */
	if (int_field(req, "max_parallel", "max_parallel", 1,
		      trials < SEARCH_PARALLEL_MAX ? trials : SEARCH_PARALLEL_MAX, 1, &parallel,
		      err) < 0)
		return -1;
	if (int_field(req, "seed", "seed", 0, INT64_MAX, (int64_t)(seed_default & INT64_MAX),
		      &seed, err) < 0)
		return -1;
	s->max_trials = (int)trials;
	s->max_parallel = (int)parallel;
	s->seed = (uint64_t)seed;
	json_object_set_new(norm, "max_trials", json_integer(trials));
	json_object_set_new(norm, "max_parallel", json_integer(parallel));
	json_object_set_new(norm, "seed", json_integer(seed));
	return 0;
}

int search_check(json_t *req, uint64_t seed_default, json_t *norm, struct search *out,
		 struct jobs_submit_error *err)
{
	memset(out, 0, sizeof(*out));
	if (check_strategy(req, out, norm, err) < 0 || check_ranges(req, out, norm, err) < 0 ||
	    check_objective(req, out, norm, err) < 0 || check_hyperband(req, out, norm, err) < 0 ||
	    check_bounds_of_search(req, seed_default, out, norm, err) < 0)
		return -1;
	return 0;
}

/* ---- the trials' parameters ---- */

static int range_points(const struct search_range *r)
{
	return r->kind == SEARCH_CATEGORICAL ? (int)json_array_size(r->values) : r->grid_points;
}

int64_t search_grid_size(const struct search *s)
{
	int64_t n = 1;

	for (int i = 0; i < s->n_ranges; i++) {
		n *= range_points(&s->ranges[i]);
		if (n > SEARCH_TRIALS_MAX)
			return SEARCH_TRIALS_MAX + 1;
	}
	return n;
}

/* splitmix64: a small, well-mixed generator; the state is (seed, trial, range). */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* A uniform number in [0, 1) for range r of trial index. */
static double uniform(const struct search *s, int index, int r)
{
	uint64_t x = mix(mix(mix(s->seed) ^ (uint64_t)index) ^ (uint64_t)r);
	return (double)(x >> 11) * 0x1.0p-53;
}

/* The value at fraction u in [0, 1] of a numeric range, on its scaling. */
static double scaled(const struct search_range *r, double u)
{
	if (r->log)
		return exp(log(r->min) + u * (log(r->max) - log(r->min)));
	return r->min + u * (r->max - r->min);
}

static json_t *range_value(const struct search_range *r, double u, int grid_i)
{
	double v;

	if (r->kind == SEARCH_CATEGORICAL) {
		size_t n = json_array_size(r->values);
		size_t k = grid_i >= 0 ? (size_t)grid_i : (size_t)(u * (double)n);
		return json_incref(json_array_get(r->values, k < n ? k : n - 1));
	}
	if (grid_i >= 0)
		u = r->grid_points > 1 ? (double)grid_i / (r->grid_points - 1) : 0;
	if (r->kind == SEARCH_CONTINUOUS)
		return json_real(scaled(r, u));
	/* integers: each value equally likely on the scale (the upper edge widened by one) */
	if (grid_i < 0 && !r->log)
		v = floor(r->min + u * (r->max - r->min + 1));
	else if (grid_i < 0)
		v = floor(exp(log(r->min) + u * (log(r->max + 1) - log(r->min))));
	else
		v = round(scaled(r, u));
	v = v < r->min ? r->min : v > r->max ? r->max : v;
	return json_integer((json_int_t)v);
}

json_t *search_point(const struct search *s, int index)
{
	json_t *out = json_object();
	int rest = index;

	for (int i = s->n_ranges - 1; out && i >= 0 && s->strategy == SEARCH_GRID; i--) {
		const struct search_range *r = &s->ranges[i];
		int n = range_points(r);
		json_object_set_new(out, r->name, range_value(r, 0, rest % n));
		rest /= n;
	}
	for (int i = 0; out && i < s->n_ranges && s->strategy != SEARCH_GRID; i++)
		json_object_set_new(out, s->ranges[i].name,
				    range_value(&s->ranges[i], uniform(s, index, i), -1));
	return out;
}

json_t *search_hyperparameters(json_t *base, json_t *point)
{
	json_t *out = json_is_object(base) ? json_deep_copy(base) : json_object();
	const char *key;
	json_t *v;
	char text[64];

	json_object_foreach(point, key, v) {
		if (json_is_string(v)) {
			json_object_set(out, key, v);
			continue;
		}
		if (json_is_integer(v))
			snprintf(text, sizeof(text), "%lld", (long long)json_integer_value(v));
		else
			snprintf(text, sizeof(text), "%.17g", json_real_value(v));
		json_object_set_new(out, key, json_string(text));
	}
	return out;
}

/* ---- early stopping ---- */

bool search_better(const struct search *s, double a, double b)
{
	return s->maximize ? a > b : a < b;
}

int64_t search_rung_points(const struct search *s, int rung)
{
	int64_t n = s->min_points;

	if (rung < 0 || rung >= SEARCH_RUNGS_MAX)
		return 0;
	for (int i = 0; i < rung; i++) {
		n *= s->reduction_factor;
		if (n > INT32_MAX)
			return 0;
	}
	return n;
}

bool search_rung_stops(const struct search *s, double value, const double *values, int n)
{
	int better = 0, keep = n / s->reduction_factor;

	if (n < s->reduction_factor)
		return false;
	for (int i = 0; i < n; i++)
		if (search_better(s, values[i], value))
			better++;
	return better >= keep;
}
