/* watch.c - the runtime-change registry: how it reads a user's runtime and
 * what of it a subscriber hears change; see watch.h. */
#include "runtime/watch.h"

#include "labd/watch.h"
#include "store/runtimes.h"

static int read_latest(void *db, int64_t user_id, void *row)
{
	return runtimes_latest(db, user_id, row);
}

/* What a reader sees move: the runtime (or none), its state, and while it
 * queues its place. */
static void digest(const void *row, struct watch_digest *d)
{
	const struct runtime *r = row;

	if (!r)
		return;
	d->word[0] = 1;
	d->word[1] = (uint64_t)r->id;
	d->word[2] = (uint64_t)r->state;
	d->word[3] = (uint64_t)r->queue_position;
	d->word[4] = (uint64_t)r->queue_estimate_at;
}

static const struct watch_source runtime_source = {
	.name = "runtime",
	.row_size = sizeof(struct runtime),
	.read = read_latest,
	.digest = digest,
};

struct watch *runtime_watch_new(struct db *db, unsigned max_per_user, unsigned max_total)
{
	return watch_new(&runtime_source, db, max_per_user, max_total);
}

void runtime_watch_notify(struct watch *w, int64_t user_id)
{
	watch_notify(w, user_id);
}
