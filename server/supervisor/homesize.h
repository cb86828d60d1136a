/* homesize.h - a user's home image as the web process may ask about it: how
 * much is used (for the quota API) and growth to a raised storage quota.
 * Root checks the size against [runtime] home_size_max; images never shrink. */
#ifndef LABD_HOMESIZE_H
#define LABD_HOMESIZE_H

#include <jansson.h>

struct labd_config;

/* home_usage {user, user_id}: the reply carries exists, mounted, used_bytes
 * and size_bytes (statfs of the mounted home, else the image's superblock).
 * Fast: no helper runs. */
json_t *homesize_usage(const struct labd_config *cfg, const char *state_dir, long long id, const char *user, long long user_id);
/* home_resize {user, user_id, size_bytes}: an unmounted or missing home is
 * grown or made at its next start (reply "next_start"); a size at or below
 * the image's is "unchanged". A mounted one is grown online in a forked
 * worker (the loop never waits on resize2fs): then NULL is returned and
 * *worker_fd (caller closes) becomes readable with the worker's result, to
 * be answered with homesize_resized(). */
json_t *homesize_resize(const struct labd_config *cfg, const char *state_dir, long long id,
			const char *user, long long user_id, long long size_bytes,
			int *worker_fd);
/* The reply to request id once the worker on fd ended: "online" when it grew
 * the home, else "next_start" (the kernel may refuse online growth; the next
 * start grows the unmounted image). */
json_t *homesize_resized(long long id, int fd);

#endif
