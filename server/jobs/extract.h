/* extract.h - a job's metric definitions compiled once, applied to each
 * line of its log (docs/jobs.md "Metrics").
 *
 * A definition is a name and a PCRE2 regex (the dialect of Python's re for
 * what training scripts print). The value of a line is the first capture
 * group when the regex has one, else the whole match, read as a number;
 * a line that does not match, or whose value is not a finite number, gives
 * no point. Only the first match in a line counts.
 *
 * The regexes are the user's: every match runs under a match limit and a
 * depth limit, so a catastrophic one (nested quantifiers on a long line)
 * gives up on that line after bounded work instead of holding the web
 * process; such a line gives no point and is counted. A definition that
 * hits a limit on EXTRACT_DROP_AFTER lines is dropped: it is not matched
 * again, so 40 hostile definitions cost their limits a few times, not on
 * every line of a 64 MiB log. */
#ifndef LABD_JOBS_EXTRACT_H
#define LABD_JOBS_EXTRACT_H

#include <stddef.h>
#include <stdint.h>

struct extract_set;

/* At most this many definitions (the submit rule of docs/jobs.md). */
#define EXTRACT_MAX_DEFS 40
#define EXTRACT_NAME_MAX 255
#define EXTRACT_REGEX_MAX 500
/* Backtracking steps and nesting depth one line may take per definition:
 * about 0.3 ms at the match limit; the metric regexes people write (a
 * literal and a number) take under 100 steps on a 16 KiB line. */
#define EXTRACT_MATCH_LIMIT 10000
#define EXTRACT_DEPTH_LIMIT 1000
/* Memory one match may take for backtracking, in KiB (PCRE2 counts KiB). */
#define EXTRACT_HEAP_LIMIT_KIB 1024

/* Compiles regex: 0, or -EINVAL with PCRE2's message and offset in err. */
int extract_check(const char *regex, char *err, size_t errlen);

/* An empty set (no definitions yet). NULL on allocation failure. */
struct extract_set *extract_new(void);
/* Frees the set; NULL is fine. */
void extract_free(struct extract_set *s);
/* Adds a definition (name copied): 0, -EINVAL (bad name or regex: err says
 * why), -E2BIG past EXTRACT_MAX_DEFS, -ENOMEM. */
int extract_add(struct extract_set *s, const char *name, const char *regex, char *err,
		size_t errlen);
/* Definitions held. */
size_t extract_count(const struct extract_set *s);
/* The name of definition i. */
const char *extract_name(const struct extract_set *s, size_t i);

/* Called for each point a line gives: definition index, its name, value. */
typedef void (*extract_fn)(void *ctx, size_t def, const char *name, double value);
/* Applies every definition to one line (len bytes, no newline). The number
 * of points given. Not thread-safe per set (one match context is reused). */
int extract_line(struct extract_set *s, const char *line, size_t len, extract_fn fn, void *ctx);
/* Lines on which a definition hit the match or depth limit so far. */
uint64_t extract_limited(const struct extract_set *s);
/* Limited lines after which a definition is dropped. */
#define EXTRACT_DROP_AFTER 8
/* The dropped definitions, bit i for definition i. */
uint64_t extract_dropped(const struct extract_set *s);
/* Drops definition i (one dropped before a restart). */
void extract_drop(struct extract_set *s, size_t i);
/* Definitions not dropped: 0 means no line needs matching. */
size_t extract_matching(const struct extract_set *s);

/* Pure: reads text[0..len) as a finite number (leading and trailing blanks
 * allowed, nothing else). 0 and *out, or -EINVAL. */
int extract_number(const char *text, size_t len, double *out);

#endif
