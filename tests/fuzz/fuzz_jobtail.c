/* fuzz_jobtail.c - a failed job's log tail (jobs/jobtail.c): the last lines of what the
 * user's command wrote, cut and made valid UTF-8 for the API's failure_tail. Input: a
 * byte whose low bit says the read was cut (started mid-file), then the log. */
#include <jansson.h>

#include "fuzz.h"
#include "jobs/jobtail.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t len = size - 1;
	char *log = malloc(len ? len : 1);

	if (!log)
		return 0;
	memcpy(log, data + 1, len);
	size_t start = jobtail_start(log, len, JOBTAIL_MAX_LINES, data[0] & 1);
	FUZZ_ASSERT(start <= len);
	size_t lines = 0;
	for (size_t i = start; i + 1 < len; i++)
		lines += log[i] == '\n';
	FUZZ_ASSERT(lines < JOBTAIL_MAX_LINES);
	jobtail_make_utf8(log + start, len - start);
	/* what the API puts in JSON: jansson refuses anything but valid UTF-8 */
	json_t *s = json_stringn(log + start, len - start);
	FUZZ_ASSERT(s != NULL);
	json_decref(s);
	free(log);
	return 0;
}
