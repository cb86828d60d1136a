/* render.c - the Prometheus text exposition format (0.0.4): "# HELP" and
 * "# TYPE" per family, then "name{label="value",...} number" per sample.
 * Label values escape backslash, double quote and newline; HELP text escapes
 * backslash and newline (the format's only two escaping rules). */
#include "metrics/metrics.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HISTOGRAM_LABELS_MAX 7 /* the caller's labels, plus "le" */

static bool name_char_ok(char c, bool first, bool colon)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')
		return true;
	if (c == ':')
		return colon;
	return !first && c >= '0' && c <= '9';
}

static bool name_ok(const char *name, bool colon)
{
	if (!name || !name[0])
		return false;
	for (size_t i = 0; name[i]; i++)
		if (!name_char_ok(name[i], i == 0, colon))
			return false;
	return true;
}

bool metrics_name_ok(const char *name)
{
	return name_ok(name, true);
}

/* Appends text with the given characters escaped (HELP: no quote escape). */
static int add_escaped(struct buf *b, const char *text, bool quote)
{
	int rc = 0;
	const char *run = text;

	for (const char *p = text; *p && rc == 0; p++) {
		const char *esc = *p == '\\' ? "\\\\" : *p == '\n' ? "\\n" :
				  (quote && *p == '"') ? "\\\"" : NULL;
		if (!esc)
			continue;
		if ((rc = buf_add(b, run, (size_t)(p - run))) == 0)
			rc = buf_add(b, esc, 2);
		run = p + 1;
	}
	return rc < 0 ? rc : buf_add(b, run, strlen(run));
}

int metrics_render_family(struct buf *b, const char *name, const char *type, const char *help)
{
	int rc;

	if (!metrics_name_ok(name) ||
	    (strcmp(type, "counter") && strcmp(type, "gauge") && strcmp(type, "histogram")))
		return -EINVAL;
	if ((rc = buf_addf(b, "# HELP %s ", name)) < 0 || (rc = add_escaped(b, help, false)) < 0)
		return rc;
	return buf_addf(b, "\n# TYPE %s %s\n", name, type);
}

/* The shortest of %.15g and %.17g that reads back as the same double, so that
 * 0.005 is written "0.005" and no value loses precision; Go's (and so
 * Prometheus's) float parser spells infinities +Inf/-Inf and NaN as here. */
static int add_number(struct buf *b, double v)
{
	char text[32];

	if (isnan(v))
		return buf_add(b, "NaN", 3);
	if (isinf(v))
		return v > 0 ? buf_add(b, "+Inf", 4) : buf_add(b, "-Inf", 4);
	snprintf(text, sizeof(text), "%.15g", v);
	if (strtod(text, NULL) != v)
		snprintf(text, sizeof(text), "%.17g", v);
	return buf_add(b, text, strlen(text));
}

static int add_labels(struct buf *b, const struct metrics_label *labels, size_t n)
{
	int rc = 0;

	if (n == 0)
		return 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (!name_ok(labels[i].name, false) || strncmp(labels[i].name, "__", 2) == 0)
			return -EINVAL; /* "__" names are Prometheus's own */
		if ((rc = buf_addf(b, "%s%s=\"", i ? "," : "{", labels[i].name)) == 0 &&
		    (rc = add_escaped(b, labels[i].value, true)) == 0)
			rc = buf_add(b, "\"", 1);
	}
	return rc < 0 ? rc : buf_add(b, "}", 1);
}

int metrics_render_sample(struct buf *b, const char *name, const struct metrics_label *labels,
			  size_t n_labels, double value)
{
	int rc;

	if (!metrics_name_ok(name))
		return -EINVAL;
	if ((rc = buf_add(b, name, strlen(name))) < 0 || (rc = add_labels(b, labels, n_labels)) < 0 ||
	    (rc = buf_add(b, " ", 1)) < 0 || (rc = add_number(b, value)) < 0)
		return rc;
	return buf_add(b, "\n", 1);
}

/* One _bucket line: the caller's labels and le. */
static int add_bucket(struct buf *b, const char *bucket_name, const struct metrics_label *labels,
		      size_t n, double le, uint64_t cumulative)
{
	struct metrics_label all[HISTOGRAM_LABELS_MAX + 1];
	char le_text[32];
	struct buf le_buf;
	int rc;

	buf_init(&le_buf, sizeof(le_text) - 1);
	rc = add_number(&le_buf, le);
	snprintf(le_text, sizeof(le_text), "%s", buf_str(&le_buf));
	buf_release(&le_buf);
	if (rc < 0)
		return rc;
	if (n) /* labels may be NULL then, which memcpy may not be given */
		memcpy(all, labels, n * sizeof(*labels));
	all[n] = (struct metrics_label){"le", le_text};
	return metrics_render_sample(b, bucket_name, all, n + 1, (double)cumulative);
}

int metrics_render_histogram(struct buf *b, const char *name, const struct metrics_label *labels,
			     size_t n_labels, struct metrics_histogram *h)
{
	char series[128];
	uint64_t cumulative = 0;
	int rc = 0;

	if (n_labels > HISTOGRAM_LABELS_MAX || h->n_bounds > METRICS_BUCKETS_MAX ||
	    strlen(name) + sizeof("_bucket") > sizeof(series))
		return -EINVAL;
	snprintf(series, sizeof(series), "%s_bucket", name);
	/* _count is the +Inf bucket's cumulative value by definition, so it is
	 * summed from the same reads rather than kept as its own counter. */
	for (size_t i = 0; i <= h->n_bounds && rc == 0; i++) {
		cumulative += atomic_load_explicit(&h->buckets[i], memory_order_relaxed);
		double le = i < h->n_bounds ? (double)h->bounds[i] / h->divisor : INFINITY;
		rc = add_bucket(b, series, labels, n_labels, le, cumulative);
	}
	if (rc < 0)
		return rc;
	snprintf(series, sizeof(series), "%s_sum", name);
	rc = metrics_render_sample(b, series, labels, n_labels,
				   (double)atomic_load_explicit(&h->sum, memory_order_relaxed) / h->divisor);
	if (rc < 0)
		return rc;
	snprintf(series, sizeof(series), "%s_count", name);
	return metrics_render_sample(b, series, labels, n_labels, (double)cumulative);
}
