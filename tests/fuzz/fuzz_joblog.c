/* fuzz_joblog.c - the job log cutter (jobs/joblog.c): a job's output, which
 * the user writes, cut into whole lines for log events and metric
 * extraction. Input: a byte whose low bit is final, two bytes of max_cost,
 * then the log. */
#include "fuzz.h"
#include "jobs/joblog.h"

/* What joblog_cut counts for data[0..n): each line's bytes plus 7 for each
 * line break the event stream will see (the LF, and each CR). */
static size_t cost_of(const char *data, size_t n, bool final)
{
	size_t cost = 0, off = 0, line_len;

	while (off < n) {
		size_t take = joblog_next_line(data + off, n - off, final, &line_len);
		if (take == 0)
			take = n - off; /* a line cut to fit */
		size_t breaks = 1;
		for (size_t i = 0; i < take; i++)
			breaks += data[off + i] == '\r';
		cost += take + 7 * breaks;
		off += take;
	}
	return cost;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3)
		return 0;
	bool final = data[0] & 1;
	size_t max_cost = (size_t)data[1] << 8 | data[2], len = size - 3, line_len;
	char *log = malloc(len ? len : 1);

	FUZZ_ASSERT(log);
	memcpy(log, data + 3, len);
	size_t cut = joblog_cut(log, len, final, max_cost);
	FUZZ_ASSERT(cut <= len);
	if (cut)
		FUZZ_ASSERT(cost_of(log, cut, final) <= max_cost);
	size_t take = joblog_next_line(log, len, final, &line_len);
	FUZZ_ASSERT(take <= len && line_len <= take && line_len <= JOBLOG_LINE_MAX_BYTES);
	if (final && len > 0)
		FUZZ_ASSERT(take > 0); /* a complete log always yields its last line */
	free(log);
	return 0;
}
