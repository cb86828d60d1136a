/* host_homes.c - home usage, growth and sweep beside the runtimes; see host_homes.h. */
#include "supervisor/host_homes.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "config/config.h"
#include "labd/log.h"
#include "proto/proto.h"
#include "supervisor/homes.h"
#include "supervisor/homesize.h"
#include "supervisor/host.h"
#include "supervisor/host_runtime.h"
#include "supervisor/uidmap.h"

/* Online home growths in flight: answered when their worker reports. */
#define MAX_GROWS 8
#define SWEEP_EVERY_MS (3600 * 1000LL) /* archived homes past their retention */
/* Deleted users whose sandboxes are still being torn down, and how often
 * their teardown is looked at. */
#define MAX_RETIRING 64
#define RETIRE_CHECK_MS 100

struct host_homes {
	struct {
		int fd; /* -1: free */
		long long reply_id;
	} grow[MAX_GROWS];
	long long sweep_at_ms; /* next sweep of archived homes */
	struct {
		long long user_id; /* 0: free */
		char user[64];
	} retiring[MAX_RETIRING];
};

struct host_homes *host_homes_new(void)
{
	struct host_homes *hh = calloc(1, sizeof(*hh));

	for (int k = 0; hh && k < MAX_GROWS; k++)
		hh->grow[k].fd = -1;
	return hh;
}

void host_homes_free(struct host_homes *hh)
{
	if (!hh)
		return;
	for (int k = 0; k < MAX_GROWS; k++)
		if (hh->grow[k].fd >= 0)
			close(hh->grow[k].fd);
	free(hh);
}

/* The home named by (user, user_id) only when root's record pairs them. */
static const char *home_pair_refused(struct host *h, json_t *msg, char *why, size_t len)
{
	uid_t uid;

	if (uidmap_claim(host_uids(h), proto_str(msg, "user"), proto_int(msg, "user_id"), &uid,
			 why, len) < 0)
		return why;
	return NULL;
}

json_t *host_homes_usage(struct host *h, long long id, json_t *msg)
{
	char why[200];

	if (home_pair_refused(h, msg, why, sizeof(why)))
		return proto_error(id, "bad_uid", why);
	return homesize_usage(host_cfg(h), host_state_dir(h), id, proto_str(msg, "user"),
			      proto_int(msg, "user_id"));
}

json_t *host_homes_resize(struct host *h, long long id, json_t *msg)
{
	struct host_homes *hh = host_own(h, &host_runtime);
	char why[200];

	if (home_pair_refused(h, msg, why, sizeof(why))) {
		log_error("refused home_resize for %s: %s", proto_str(msg, "user"), why);
		return proto_error(id, "bad_uid", why);
	}
	int k = 0, fd = -1;
	while (k < MAX_GROWS && hh->grow[k].fd >= 0)
		k++;
	if (k == MAX_GROWS) /* busy: the next start grows it */
		return proto_error(id, "busy", "too many home growths at once");
	json_t *r = homesize_resize(host_cfg(h), host_state_dir(h), id, proto_str(msg, "user"),
				    proto_int(msg, "user_id"), proto_int(msg, "size_bytes"), &fd);
	if (!r) {
		hh->grow[k].fd = fd;
		hh->grow[k].reply_id = id;
	}
	return r; /* NULL: answered by host_homes_on_fd */
}

int host_homes_pollfds(struct host_homes *hh, struct pollfd *fds, int max)
{
	int n = 0;
	for (int k = 0; k < MAX_GROWS && n < max; k++)
		if (hh->grow[k].fd >= 0)
			fds[n++] = (struct pollfd){.fd = hh->grow[k].fd, .events = POLLIN};
	return n;
}

/* A growth worker reported (or died): answer its request. */
bool host_homes_on_fd(struct host *h, struct host_homes *hh, int fd)
{
	for (int k = 0; k < MAX_GROWS; k++) {
		if (hh->grow[k].fd < 0 || hh->grow[k].fd != fd)
			continue;
		/* a reply to the web process's request, sent as it is */
		host_emit(h, homesize_resized(hh->grow[k].reply_id, hh->grow[k].fd));
		close(hh->grow[k].fd);
		hh->grow[k].fd = -1;
		return true;
	}
	return false;
}

/* Sandboxes of the deleted user user_id not torn down yet (every purpose):
 * told apart from a new user of the same name by the host uid, which is the
 * id's and never reused. */
static int live_boxes(struct host *h, long long user_id)
{
	uid_t uid = (uid_t)(host_cfg(h)->uid_base + (uint64_t)user_id);
	struct host_box *b;
	int n = 0;

	for (int i = 0; (b = host_next(h, NULL, &i));)
		n += b->host_uid == uid && b->state != H_ENDED;
	return n;
}

json_t *host_homes_user_deleted(struct host *h, long long id, json_t *msg)
{
	struct host_homes *hh = host_own(h, &host_runtime);
	const char *user = proto_str(msg, "user");
	long long user_id = proto_int(msg, "user_id");
	uid_t uid = (uid_t)(host_cfg(h)->uid_base + (uint64_t)user_id);
	struct host_box *b;
	char why[200];
	int k = 0;

	if (uidmap_retire(host_uids(h), user, user_id, why, sizeof(why)) < 0) {
		log_error("refused user_deleted for %s: %s", user, why);
		return proto_error(id, "bad_uid", why);
	}
	/* every sandbox of theirs ends now, pools too (warm ones hold the home
	 * mounted, and a running job writes into it) */
	for (int i = 0; (b = host_next(h, NULL, &i));)
		if (b->host_uid == uid && b->state != H_ENDED)
			host_stop(h, b, "requested", "account deleted");
	while (k < MAX_RETIRING && hh->retiring[k].user_id)
		k++;
	if (live_boxes(h, user_id) == 0 || k == MAX_RETIRING) {
		/* none holds the home (or too many deletions at once: an image
		 * renamed under its mount is still safe, its key is the old id) */
		homes_retire(host_cfg(h), host_state_dir(h), user, user_id);
		return proto_ok(id);
	}
	/* the home is still mounted: it goes when their teardowns are done */
	hh->retiring[k].user_id = user_id;
	snprintf(hh->retiring[k].user, sizeof(hh->retiring[k].user), "%s", user);
	log_info("deleted user %s (id %lld): their sandboxes end, then the home is retired",
		 user, user_id);
	return proto_ok(id);
}

/* Retires the homes of deleted users whose last sandbox is torn down; next
 * due, or -1 when nobody waits. */
static long long retire_ended(struct host *h, struct host_homes *hh, long long now)
{
	long long next = -1;

	for (int k = 0; k < MAX_RETIRING; k++) {
		if (!hh->retiring[k].user_id)
			continue;
		if (live_boxes(h, hh->retiring[k].user_id) > 0) {
			next = now + RETIRE_CHECK_MS;
			continue;
		}
		homes_retire(host_cfg(h), host_state_dir(h), hh->retiring[k].user,
			     hh->retiring[k].user_id);
		hh->retiring[k].user_id = 0;
	}
	return next;
}

long long host_homes_tick(struct host *h, struct host_homes *hh, long long now, int64_t wall)
{
	long long retire_at = retire_ended(h, hh, now);

	if (now >= hh->sweep_at_ms) {
		homes_sweep(host_cfg(h), host_state_dir(h), host_cfg(h)->archive_retention_s, wall);
		hh->sweep_at_ms = now + SWEEP_EVERY_MS;
	}
	return retire_at >= 0 && retire_at < hh->sweep_at_ms ? retire_at : hh->sweep_at_ms;
}
