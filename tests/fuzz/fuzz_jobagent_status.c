/* fuzz_jobagent_status.c - the job agent's status lines (sandbox/jobproto.c),
 * which the user's code can forge: each line parsed alone, and every text the
 * agent formats read back the same, as valid UTF-8. */
#include <jansson.h>

#include "fuzz.h"
#include "sandbox/jobagent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data;
	size_t left = size;
	char net[JOBAGENT_TEXT_MAX + 32], line[JOBAGENT_TEXT_MAX + 64];
	struct jobagent_status st;

	while (left > 0) {
		const uint8_t *nl = memchr(p, '\n', left);
		size_t n = nl ? (size_t)(nl - p) + 1 : left;
		char *copy = malloc(n ? n : 1);
		FUZZ_ASSERT(copy);
		memcpy(copy, p, n);
		if (jobagent_parse_status(copy, n, &st) == 0) {
			FUZZ_ASSERT(st.kind <= JOBAGENT_EXITED);
			FUZZ_ASSERT(memchr(st.text, '\0', sizeof(st.text)));
			FUZZ_ASSERT(st.kind != JOBAGENT_STARTED || st.pid >= 0);
		}
		free(copy);
		p += n;
		left -= n;
	}
	/* the agent's own formatting of any text parses back as that text */
	size_t w = jobagent_netstring_text(net, sizeof(net), (const char *)data, size);
	FUZZ_ASSERT(w < sizeof(net) && net[w] == '\0');
	int len = snprintf(line, sizeof(line), "error %s\n", net);
	FUZZ_ASSERT(len > 0 && (size_t)len < sizeof(line));
	if (!memchr(data, '\0', size < JOBAGENT_TEXT_MAX ? size : JOBAGENT_TEXT_MAX)) {
		FUZZ_ASSERT(jobagent_parse_status(line, (size_t)len, &st) == 0);
		FUZZ_ASSERT(st.kind == JOBAGENT_ERROR);
		FUZZ_ASSERT(strlen(st.text) == (size < JOBAGENT_TEXT_MAX ? size : JOBAGENT_TEXT_MAX));
		/* as UTF-8 that JSON takes (jansson is the judge, as for job_exited) */
		json_t *js = json_stringn(st.text, strlen(st.text));
		FUZZ_ASSERT(js != NULL);
		json_decref(js);
	}
	return 0;
}
