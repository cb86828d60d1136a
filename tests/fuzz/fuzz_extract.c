/* fuzz_extract.c - metric extraction (jobs/extract.c): the user's regex and
 * name against the user's log lines, under the match limits. Input: the regex
 * on the first line, the metric's name on the second, log lines after. */
#include <math.h>
#include <stdbool.h>

#include "fuzz.h"
#include "jobs/extract.h"

static void on_point(void *ctx, size_t def, const char *name, double value)
{
	(void)name;
	FUZZ_ASSERT(def == 0 && isfinite(value));
	++*(int *)ctx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *regex = fuzz_take_line(&data, &size), *name = fuzz_take_line(&data, &size), err[256];
	struct extract_set *s = extract_new();
	double v;

	if (strlen(regex) <= EXTRACT_REGEX_MAX && extract_add(s, name, regex, err, sizeof(err)) == 0) {
		FUZZ_ASSERT(extract_count(s) == 1 && strcmp(extract_name(s, 0), name) == 0);
		for (int lines = 0; size > 0 && lines < 16; lines++) {
			const uint8_t *nl = memchr(data, '\n', size);
			size_t n = nl ? (size_t)(nl - data) : size;
			int points = 0;
			char *line = malloc(n ? n : 1);
			FUZZ_ASSERT(line);
			memcpy(line, data, n);
			bool dropped = extract_matching(s) == 0;
			int rc = extract_line(s, line, n, on_point, &points);
			FUZZ_ASSERT(rc == points && rc <= 1 && !(dropped && rc));
			free(line);
			data += nl ? n + 1 : n;
			size -= nl ? n + 1 : n;
		}
		/* a definition that keeps hitting the limits is dropped, not retried */
		FUZZ_ASSERT(extract_limited(s) <= EXTRACT_DROP_AFTER);
	}
	(void)extract_check(regex, err, sizeof(err));
	if (extract_number(name, strlen(name), &v) == 0)
		FUZZ_ASSERT(isfinite(v));
	extract_free(s);
	free(regex);
	free(name);
	return 0;
}
