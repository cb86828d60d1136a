/* extract.c - metric extraction with PCRE2; see extract.h. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "jobs/extract.h"

#include <errno.h>
#include <math.h>
#include <pcre2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct extract_def {
	char name[EXTRACT_NAME_MAX + 1];
	pcre2_code *code;
	bool grouped; /* the value is capture group 1 */
	unsigned limited; /* lines on which it hit a limit */
};

_Static_assert(EXTRACT_MAX_DEFS <= 64, "the dropped mask has one bit per definition");

struct extract_set {
	struct extract_def defs[EXTRACT_MAX_DEFS];
	size_t n;
	pcre2_match_context *mctx;
	pcre2_match_data *md; /* big enough for group 1 of any definition */
	uint64_t limited;
	uint64_t dropped; /* bit i: defs[i] is not matched any more */
};

/* Logs are mostly UTF-8 but not checked to be: invalid sequences are
 * skipped over rather than failing the match. */
#define COMPILE_OPTIONS (PCRE2_UTF | PCRE2_MATCH_INVALID_UTF)

static pcre2_code *compile(const char *regex, char *err, size_t errlen)
{
	int code;
	PCRE2_SIZE at;
	pcre2_code *re = pcre2_compile((PCRE2_SPTR)regex, PCRE2_ZERO_TERMINATED, COMPILE_OPTIONS,
				       &code, &at, NULL);
	PCRE2_UCHAR msg[160];

	if (!re) {
		pcre2_get_error_message(code, msg, sizeof(msg));
		snprintf(err, errlen, "%s at offset %zu", (const char *)msg, (size_t)at);
	}
	return re;
}

int extract_check(const char *regex, char *err, size_t errlen)
{
	pcre2_code *re;

	if (strlen(regex) > EXTRACT_REGEX_MAX) {
		snprintf(err, errlen, "longer than %d characters", EXTRACT_REGEX_MAX);
		return -EINVAL;
	}
	if (!(re = compile(regex, err, errlen)))
		return -EINVAL;
	pcre2_code_free(re);
	return 0;
}

struct extract_set *extract_new(void)
{
	struct extract_set *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->mctx = pcre2_match_context_create(NULL);
	s->md = pcre2_match_data_create(2, NULL); /* whole match and group 1 */
	if (!s->mctx || !s->md) {
		extract_free(s);
		return NULL;
	}
	pcre2_set_match_limit(s->mctx, EXTRACT_MATCH_LIMIT);
	pcre2_set_depth_limit(s->mctx, EXTRACT_DEPTH_LIMIT);
	pcre2_set_heap_limit(s->mctx, EXTRACT_HEAP_LIMIT_KIB);
	return s;
}

void extract_free(struct extract_set *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		pcre2_code_free(s->defs[i].code);
	pcre2_match_data_free(s->md);
	pcre2_match_context_free(s->mctx);
	free(s);
}

int extract_add(struct extract_set *s, const char *name, const char *regex, char *err,
		size_t errlen)
{
	struct extract_def *d;
	uint32_t groups = 0;

	if (s->n >= EXTRACT_MAX_DEFS)
		return -E2BIG;
	if (!name[0] || strlen(name) > EXTRACT_NAME_MAX) {
		snprintf(err, errlen, "a name is 1 to %d characters", EXTRACT_NAME_MAX);
		return -EINVAL;
	}
	if (strlen(regex) > EXTRACT_REGEX_MAX) {
		snprintf(err, errlen, "longer than %d characters", EXTRACT_REGEX_MAX);
		return -EINVAL;
	}
	d = &s->defs[s->n];
	if (!(d->code = compile(regex, err, errlen)))
		return -EINVAL;
	pcre2_pattern_info(d->code, PCRE2_INFO_CAPTURECOUNT, &groups);
	d->grouped = groups > 0;
	snprintf(d->name, sizeof(d->name), "%s", name);
	s->n++;
	return 0;
}

size_t extract_count(const struct extract_set *s)
{
	return s->n;
}

const char *extract_name(const struct extract_set *s, size_t i)
{
	return i < s->n ? s->defs[i].name : NULL;
}

uint64_t extract_limited(const struct extract_set *s)
{
	return s->limited;
}

uint64_t extract_dropped(const struct extract_set *s)
{
	return s->dropped;
}

void extract_drop(struct extract_set *s, size_t i)
{
	if (i < s->n)
		s->dropped |= 1ULL << i;
}

size_t extract_matching(const struct extract_set *s)
{
	return s->n - (size_t)__builtin_popcountll(s->dropped);
}

int extract_number(const char *text, size_t len, double *out)
{
	char tmp[64], *end;
	double v;

	while (len > 0 && (*text == ' ' || *text == '\t'))
		text++, len--;
	while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\t'))
		len--;
	if (len == 0 || len >= sizeof(tmp))
		return -EINVAL;
	memcpy(tmp, text, len);
	tmp[len] = '\0';
	errno = 0;
	v = strtod(tmp, &end);
	/* strtod takes "nan", "inf" and hex floats: only finite values count */
	if (*end != '\0' || !isfinite(v) || errno == ERANGE)
		return -EINVAL;
	*out = v;
	return 0;
}

/* The value of def on line: 1 with *v, 0 none, -1 a limit was hit. */
static int match_one(struct extract_set *s, const struct extract_def *d, const char *line,
		     size_t len, double *v)
{
	int rc = pcre2_match(d->code, (PCRE2_SPTR)line, len, 0, 0, s->md, s->mctx);
	PCRE2_SIZE *ov;
	unsigned g;

	if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
	    rc == PCRE2_ERROR_HEAPLIMIT)
		return -1;
	if (rc < 0)
		return 0;
	ov = pcre2_get_ovector_pointer(s->md);
	g = d->grouped ? 1 : 0;
	/* group 1 unset (an alternative without it matched): no value */
	if ((unsigned)rc <= g || ov[2 * g] == PCRE2_UNSET)
		return 0;
	return extract_number(line + ov[2 * g], ov[2 * g + 1] - ov[2 * g], v) == 0;
}

int extract_line(struct extract_set *s, const char *line, size_t len, extract_fn fn, void *ctx)
{
	int points = 0;
	bool limited = false;

	for (size_t i = 0; i < s->n; i++) {
		double v;
		int rc;
		if (s->dropped & (1ULL << i))
			continue;
		rc = match_one(s, &s->defs[i], line, len, &v);
		if (rc < 0) {
			limited = true;
			if (++s->defs[i].limited >= EXTRACT_DROP_AFTER)
				extract_drop(s, i);
		}
		if (rc == 1) {
			fn(ctx, i, s->defs[i].name, v);
			points++;
		}
	}
	s->limited += limited;
	return points;
}
