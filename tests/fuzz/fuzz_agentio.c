/* fuzz_agentio.c - the supervisor reading the job agent's status lines
 * (supervisor/agentio.c): the agent runs beside the user's code, so its
 * stdout is the user's to write; its texts come out as UTF-8 JSON takes. */
#include <jansson.h>

#include "fuzz.h"
#include "supervisor/agentio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	size_t off = 0;

	while (off < size) {
		struct agent_status st;
		memset(&st, 0x5a, sizeof(st));
		int n = agentio_parse(buf + off, size - off, &st);
		if (n <= 0) {
			FUZZ_ASSERT(n == 0 || st.said == AGENT_BAD);
			FUZZ_ASSERT(n == 0 || n == -1);
			break;
		}
		FUZZ_ASSERT((size_t)n <= size - off && (size_t)n <= AGENTIO_LINE_MAX + 1);
		FUZZ_ASSERT(st.said != AGENT_BAD && st.said != AGENT_NONE);
		if (st.said == AGENT_ERROR || st.said == AGENT_EXITED) {
			FUZZ_ASSERT(st.failure_len <= AGENTIO_FAILURE_MAX &&
				    st.failure[st.failure_len] == '\0');
			/* whatever the agent sent, a JSON string (job_exited's failure) */
			json_t *js = json_stringn(st.failure, st.failure_len);
			FUZZ_ASSERT(js != NULL);
			json_decref(js);
		}
		off += (size_t)n;
	}
	return 0;
}
