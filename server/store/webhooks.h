/* webhooks.h - a user's webhooks, the deliveries of events to them and the
 * log of each delivery's attempts (docs/jobs.md "Notifications").
 *
 * A delivery is one event for one webhook: its JSON body fixed when the
 * event happened, its state (pending, delivered, failed), the attempts made
 * and when the next is due. Rows persist, so a restart of labd loses no
 * pending delivery. An event is queued at most once per webhook (its key, e.g.
 * "job.ended:42"), so a hook called twice for the same change sends once. */
#ifndef LABD_STORE_WEBHOOKS_H
#define LABD_STORE_WEBHOOKS_H

#include <stdbool.h>
#include <stdint.h>

struct db;

#define WEBHOOK_URL_MAX 2048
#define WEBHOOK_SECRET_MAX 128
#define WEBHOOK_EVENT_MAX 32
#define WEBHOOK_ERROR_MAX 256
/* pending deliveries one webhook holds at most; later events are dropped
 * (and logged) until the receiver catches up */
#define WEBHOOK_PENDING_MAX 100
/* ended deliveries kept per webhook (the log); older ones are deleted */
#define WEBHOOK_KEPT_MAX 200

struct webhook {
	int64_t id, user_id;
	char url[WEBHOOK_URL_MAX + 1];
	unsigned events; /* bit i: notify_event_names[i] (notify/notify.h) */
	char secret[WEBHOOK_SECRET_MAX + 1];
	int64_t created_at;
};

enum delivery_state { DELIVERY_PENDING, DELIVERY_DELIVERED, DELIVERY_FAILED };

struct delivery {
	int64_t id, webhook_id, user_id;
	char event[WEBHOOK_EVENT_MAX];
	char *body; /* malloc'ed; webhooks_delivery_release frees it */
	enum delivery_state state;
	int attempts;
	int64_t created_at_ms, next_at_ms;
	int last_status; /* the last attempt's HTTP status, 0 = none */
	char last_error[WEBHOOK_ERROR_MAX];
};

/* One logged attempt of a delivery. */
struct delivery_attempt {
	int64_t delivery_id;
	int attempt;
	int64_t at_ms, duration_ms;
	int status; /* HTTP status, 0 = no answer */
	char error[WEBHOOK_ERROR_MAX];
};

const char *webhooks_state_name(enum delivery_state s);

/* Inserts a webhook of user_id unless the user holds max already: 1 with
 * out->id set, 0 at the limit, -1 on error. */
int webhooks_create(struct db *db, struct webhook *w, unsigned max);
/* user_id's webhooks, oldest first: fn per row (secret left empty). */
int webhooks_each(struct db *db, int64_t user_id,
		  int (*fn)(const struct webhook *w, void *ctx), void *ctx);
/* Webhook id of user_id (with its secret): 1 found, 0 none, -1 error. */
int webhooks_find(struct db *db, int64_t user_id, int64_t id, struct webhook *out);
/* Deletes webhook id of user_id and its deliveries: 1, 0 none, -1. */
int webhooks_delete(struct db *db, int64_t user_id, int64_t id);
/* The union of the event bits of user_id's webhooks (0: none), or -1. */
int webhooks_user_events(struct db *db, int64_t user_id, unsigned *events);

/* Queues event (bit event_bit) with body for each webhook of user_id that
 * takes it, once per key, due at now_ms. Returns how many were queued
 * (a key queued before, or a webhook at WEBHOOK_PENDING_MAX, adds none), -1. */
int webhooks_enqueue(struct db *db, int64_t user_id, unsigned event_bit, const char *event,
		     const char *key, const char *body, int64_t now_ms);
/* Up to max pending deliveries due at now_ms, earliest first, into out[]
 * (release each). Returns how many, or -1. *next_ms: the earliest due time
 * of the rest (0: none). */
int webhooks_due(struct db *db, int64_t now_ms, struct delivery *out, int max, int64_t *next_ms);
void webhooks_delivery_release(struct delivery *d);
/* Records attempt a of delivery d (its number d->attempts + 1) and moves it:
 * delivered, failed, or pending again until next_at_ms. Trims the webhook's
 * ended deliveries to WEBHOOK_KEPT_MAX. 0 or -1. */
int webhooks_record(struct db *db, const struct delivery *d, const struct delivery_attempt *a,
		    enum delivery_state state, int64_t next_at_ms);
/* Webhook id's deliveries, newest first, at most limit: fn per row (body
 * not read). */
int webhooks_deliveries_each(struct db *db, int64_t webhook_id, int limit,
			     int (*fn)(const struct delivery *d, void *ctx), void *ctx);
/* Delivery id's attempts, oldest first. */
int webhooks_attempts_each(struct db *db, int64_t delivery_id,
			   int (*fn)(const struct delivery_attempt *a, void *ctx), void *ctx);

/* Up to max users holding a webhook that takes event_bit and an open ledger
 * entry (a runtime or job billed now) into ids[]: how many, or -1. */
int webhooks_billed_users(struct db *db, unsigned event_bit, int64_t *ids, int max);

/* An ended job as its events tell it (the row's API names). */
struct webhook_job_end {
	int64_t id, user_id;
	char user_name[33];
	char name[130];
	char status[16], secondary[32];
	char failure_reason[1100];
	bool has_exit_code;
	int exit_code;
	int64_t created_at, started_at, ended_at, training_ms, attempt;
};

/* Job id when it has ended (Completed, Failed, Stopped) and its user holds
 * a webhook: 1 with *out, 0 otherwise, -1 on error. One read by key, so the
 * hook every job change calls stays cheap. */
int webhooks_job_end(struct db *db, int64_t job_id, struct webhook_job_end *out);

#endif
