/* channel.h - the supervisor's end of the channel to labd-web: one table
 * (as OpenSSH's mon_table) names every message type the web process may
 * send, its fields with their kinds and bounds (proto.h), the channel states
 * that permit it and its handler. Anything unknown, unpermitted or out of
 * bounds ends the channel: it is logged as an attack and the caller restarts
 * the web process; the sandboxes keep running. */
#ifndef LABD_CHANNEL_H
#define LABD_CHANNEL_H

#include <jansson.h>

struct host;
struct channel;

/* Takes fd (closed by channel_free); the sandbox requests go to host (NULL:
 * refused). NULL on allocation failure. */
struct channel *channel_new(int fd, struct host *host);
void channel_free(struct channel *ch);
int channel_fd(const struct channel *ch);

/* Handles every message waiting on the channel. 0 to go on, 1 when the web
 * process closed it, -EPROTO when it broke the protocol. */
int channel_on_readable(struct channel *ch);
/* Pushes an event (borrowed) to the web process once it said hello. */
void channel_emit(struct channel *ch, json_t *event);
/* channel_emit with fd (borrowed, -1: none) passed beside the message. */
void channel_emit_fd(struct channel *ch, json_t *event, int fd);

#endif
