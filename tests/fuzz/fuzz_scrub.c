/* fuzz_scrub.c - the token scrubber (proxy/scrub.c) over a response body that
 * arrives in pieces: input is the needle (1..64 bytes) on the first line, then
 * the body, cut into pieces at the lengths its own bytes name. */
#include "fuzz.h"
#include "proxy/scrub.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *needle = fuzz_take_line(&data, &size);
	struct scrub s;
	size_t in_total = size, out_total = 0, off = 0;
	char *all = malloc(size + 1);

	FUZZ_ASSERT(all);
	if (scrub_init(&s, needle) < 0) {
		FUZZ_ASSERT(strlen(needle) == 0 || strlen(needle) > SCRUB_NEEDLE_MAX);
		goto out;
	}
	while (off < size || out_total == 0) {
		size_t n = size - off;
		if (n > 1 && data[off] < 64) /* a piece as long as its first byte says */
			n = data[off] + 1u < n ? data[off] + 1u : n;
		bool final = off + n == size;
		/* exactly what the caller must provide, so ASan sees any overrun */
		char *out = malloc(n + SCRUB_NEEDLE_MAX);
		FUZZ_ASSERT(out);
		size_t w = scrub_feed(&s, (const char *)data + off, n, out, final);
		FUZZ_ASSERT(w <= n + SCRUB_NEEDLE_MAX && s.ncarry < s.nlen);
		FUZZ_ASSERT(out_total + w <= size);
		memcpy(all + out_total, out, w);
		out_total += w;
		free(out);
		off += n;
		if (final)
			break;
	}
	FUZZ_ASSERT(s.ncarry == 0 && out_total <= in_total);
	/* a body without the needle passes byte for byte, however it was cut */
	if (!memmem(data, size, s.needle, s.nlen))
		FUZZ_ASSERT(out_total == size && memcmp(all, data, size) == 0);
	all[out_total] = '\0';
	scrub_string(s.needle, all);
out:
	free(all);
	free(needle);
	return 0;
}
