/* wsframe.c - see wsframe.h. */
#include "proxy/wsframe.h"

/* The header length once its first bytes are known (RFC 6455 section 5.2). */
static size_t head_len(const struct wsframe_pos *f)
{
	size_t n = 2;
	if (f->head_len < 2)
		return 2;
	if ((f->head[1] & 0x7f) == 126)
		n += 2;
	else if ((f->head[1] & 0x7f) == 127)
		n += 8;
	return n + ((f->head[1] & 0x80) ? 4 : 0);
}

void wsframe_advance(struct wsframe_pos *f, const unsigned char *p, size_t n)
{
	while (n > 0) {
		if (f->in_payload) {
			uint64_t take = f->left < n ? f->left : n;
			f->left -= take;
			p += take;
			n -= (size_t)take;
			if (f->left == 0)
				f->in_payload = false, f->head_len = 0;
			continue;
		}
		f->head[f->head_len++] = *p++;
		n--;
		if (f->head_len < 2 || f->head_len < head_len(f))
			continue;
		f->saw_close = f->saw_close || (f->head[0] & 0x0f) == 0x8;
		f->data_frames += (f->head[0] & 0x0f) <= 0x2; /* not close, ping or pong */
		unsigned len7 = f->head[1] & 0x7f;
		f->left = len7;
		if (len7 == 126)
			f->left = (uint64_t)f->head[2] << 8 | f->head[3];
		else if (len7 == 127)
			for (int i = 0; i < 8; i++)
				f->left = f->left << 8 | f->head[2 + i];
		f->in_payload = f->left > 0;
		if (!f->in_payload)
			f->head_len = 0;
	}
}

bool wsframe_at_boundary(const struct wsframe_pos *f)
{
	return !f->in_payload && f->head_len == 0;
}
