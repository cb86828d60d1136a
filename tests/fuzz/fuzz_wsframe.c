/* fuzz_wsframe.c - the WebSocket frame follower of the relay
 * (proxy/wsframe.c) over bytes from either side: fed whole or cut into
 * pieces, it must end in the same place. */
#include "fuzz.h"
#include "proxy/wsframe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wsframe_pos whole = {0}, cut = {0};
	size_t off = 0;

	wsframe_advance(&whole, data, size);
	while (off < size) {
		size_t n = (data[off] & 0x0f) + 1;
		n = n < size - off ? n : size - off;
		wsframe_advance(&cut, data + off, n);
		off += n;
		FUZZ_ASSERT(cut.head_len <= sizeof(cut.head));
	}
	FUZZ_ASSERT(memcmp(&whole, &cut, sizeof(whole)) == 0);
	FUZZ_ASSERT(wsframe_at_boundary(&whole) == (!whole.in_payload && whole.head_len == 0));
	FUZZ_ASSERT(whole.data_frames <= size / 2);
	return 0;
}
