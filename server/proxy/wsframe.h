/* wsframe.h - follows a WebSocket frame stream (RFC 6455 section 5.2) as the
 * relay sends it on, so labd only ever inserts its own close frame between
 * two frames, and can tell data frames (kernel messages) from pings. Pure: it
 * reads the bytes of the other side, which are not trusted, and never fails. */
#ifndef LABD_WSFRAME_H
#define LABD_WSFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where the bytes sent so far stand in the frame stream. Zeroed = before the
 * first frame. */
struct wsframe_pos {
	unsigned char head[14];
	size_t head_len;      /* header bytes seen of the current frame */
	uint64_t left;        /* payload bytes still to come */
	bool in_payload;
	bool saw_close;       /* a close frame went through: the closing is clean already */
	unsigned data_frames; /* text, binary or continuation frames begun (not pings) */
};

/* Moves f past the n bytes at p. */
void wsframe_advance(struct wsframe_pos *f, const unsigned char *p, size_t n);
/* True between two frames (no header or payload half sent). */
bool wsframe_at_boundary(const struct wsframe_pos *f);

#endif
