/* host_homes.h - the runtime purpose's share of the host (host_runtime.h): home
 * usage and online growth requests (homesize.h) answered when their worker
 * reports, once root's record pairs the user name and id; a deleted user's
 * end (every sandbox of theirs, runtime and pools, then their home retired);
 * and the hourly sweep of archived homes past their retention (homes.h). */
#ifndef LABD_HOST_HOMES_H
#define LABD_HOST_HOMES_H

#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

struct host;
struct host_homes;

struct host_homes *host_homes_new(void);
void host_homes_free(struct host_homes *hh);

/* home_usage / home_resize handlers; a resize is answered later (NULL) when
 * its worker started. */
json_t *host_homes_usage(struct host *h, long long id, json_t *msg);
json_t *host_homes_resize(struct host *h, long long id, json_t *msg);

/* user_deleted {user, user_id}: retires the uid, stops every sandbox of the
 * user (runtime and pools, whatever their state), and retires the home once
 * the last is torn down (at once when none runs). */
json_t *host_homes_user_deleted(struct host *h, long long id, json_t *msg);

/* The loop's share: growth workers' fds, the sweep's timer. */
int host_homes_pollfds(struct host_homes *hh, struct pollfd *fds, int max);
bool host_homes_on_fd(struct host *h, struct host_homes *hh, int fd);
long long host_homes_tick(struct host *h, struct host_homes *hh, long long now, int64_t wall);

#endif
