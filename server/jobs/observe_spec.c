/* observe_spec.c - a job's "rules" object; see observe_spec.h. */
#include "jobs/observe_spec.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "jobs/submit.h"

static int fail(struct jobs_submit_error *err, const char *field, const char *fmt, ...)
{
	va_list ap;

	snprintf(err->field, sizeof(err->field), "%s", field);
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return -1;
}

/* Whether spec's metric_definitions name a metric called name. */
static bool defined(json_t *spec, const char *name)
{
	json_t *d;
	size_t i;

	json_array_foreach(json_object_get(spec, "metric_definitions"), i, d)
		if (strcmp(json_string_value(json_object_get(d, "name")), name) == 0)
			return true;
	return false;
}

static int check_step_metric(json_t *v, json_t *spec, struct jobs_submit_error *err)
{
	if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) ||
	    !defined(spec, json_string_value(v)))
		return fail(err, "rules.step_metric",
			    "field \"rules.step_metric\" must name a metric of metric_definitions");
	return 0;
}

int observe_spec_check(json_t *body, json_t *spec, struct jobs_submit_error *err)
{
	json_t *rules = json_object_get(body, "rules"), *v;
	const char *key;

	if (!rules)
		return 0;
	if (!json_is_object(rules))
		return fail(err, "rules",
			    "field \"rules\" must be an object with warmup_s and step_metric");
	json_object_foreach(rules, key, v) {
		if (strcmp(key, "warmup_s") == 0) {
			if (!json_is_integer(v) || json_integer_value(v) < 0 ||
			    json_integer_value(v) > OBSERVE_WARMUP_MAX_S)
				return fail(err, "rules.warmup_s",
					    "field \"rules.warmup_s\" must be an integer from 0 to %d",
					    OBSERVE_WARMUP_MAX_S);
		} else if (strcmp(key, "step_metric") == 0) {
			if (check_step_metric(v, spec, err) < 0)
				return -1;
		} else {
			char field[80];
			snprintf(field, sizeof(field), "rules.%.60s", key);
			return fail(err, field, "unknown field \"%s\" (rules has warmup_s and step_metric)",
				    field);
		}
	}
	json_object_set(spec, "rules", rules);
	return 0;
}

void observe_spec_read(const char *spec_text, struct observe_spec *out)
{
	json_t *spec = spec_text ? json_loads(spec_text, 0, NULL) : NULL;
	json_t *rules = json_object_get(spec, "rules");
	json_t *warmup = json_object_get(rules, "warmup_s");
	const char *step = json_string_value(json_object_get(rules, "step_metric"));

	out->warmup_s = json_is_integer(warmup) ? json_integer_value(warmup) : -1;
	snprintf(out->step_metric, sizeof(out->step_metric), "%s", step ? step : "");
	json_decref(spec);
}
