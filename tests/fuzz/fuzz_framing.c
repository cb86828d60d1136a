/* fuzz_framing.c - request framing (http/framing.c): the Content-Length and
 * Transfer-Encoding headers two HTTP parsers could read differently. Input:
 * "Name: value" lines, one header each. */
#include <strings.h>

#include "fuzz.h"
#include "http/framing.h"

#define MAX_HEADERS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *lines[MAX_HEADERS], why[128];
	struct http_framing f = {0};
	size_t n = 0, lengths = 0, encodings = 0;

	while (size > 0 && n < MAX_HEADERS) {
		char *line = lines[n++] = fuzz_take_line(&data, &size);
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = '\0';
		const char *value = colon + 1 + strspn(colon + 1, " \t");
		lengths += !strcasecmp(line, "Content-Length");
		encodings += !strcasecmp(line, "Transfer-Encoding");
		http_framing_header(&f, line, value);
	}
	why[0] = '\0';
	if (http_framing_verdict(&f, why, sizeof(why)) == 0) {
		/* one reading only: a body length from one place, in one form */
		FUZZ_ASSERT(!(lengths && encodings) && encodings <= 1);
		FUZZ_ASSERT(!encodings || f.plain_chunked);
		FUZZ_ASSERT(!lengths || (f.length[0] && !f.length[strspn(f.length, "0123456789")]));
	} else {
		FUZZ_ASSERT(why[0]);
	}
	for (size_t i = 0; i < n; i++)
		free(lines[i]);
	return 0;
}
