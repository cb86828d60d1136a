/* ledger.h - the per-second usage ledger: one entry per runtime (later per
 * job) from the moment it is running until it ends, kept current by a
 * heartbeat so a crash loses at most a few seconds. How entries open, close
 * and recover: docs/architecture.md, "The usage ledger".
 *
 * Every write reports failure (-EIO) to its caller: accounting must not be
 * lost silently. */
#ifndef LABD_LEDGER_H
#define LABD_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include "store/runtimes.h"

struct db;

#define LEDGER_HEARTBEAT_S 5 /* how often open entries are advanced */
/* An entry closes at the earlier of now and last_heartbeat + this: time no
 * heartbeat vouched for (the web process was down and the sandbox's fate is
 * unknown) is billed for at most this long. Larger than the heartbeat plus
 * a reconciler pass blocked on a slow backend call. */
#define LEDGER_CLOSE_SLACK_S 30
#define LEDGER_PLAN_MAX 64

struct ledger_entry {
	int64_t id, runtime_id, user_id;
	char user_name[33];
	enum runtime_kind kind;
	char gpus[RUNTIME_GPUS_MAX];
	char plan[LEDGER_PLAN_MAX];
	int64_t start_at, end_at; /* end_at 0 while open */
	int64_t billable_s, last_heartbeat;
	char end_reason[RUNTIME_REASON_MAX];
	/* schema 12: what the entry bills: "runtime", "job" (a job attempt) or
	 * "warm" (a job sandbox kept warm); its job and pool, 0 when none */
	char source[8];
	int64_t job_id, pool_id;
	/* schema 18: "on-demand" or "preemptible", and the fraction of each
	 * billable second it charges (1 unless preemptible) */
	char capacity[12];
	double rate;
	/* schema 20: the fraction of its card each GPU of the entry is, in
	 * thousandths (1000: a whole card; ledger_window.h) */
	unsigned fraction_milli;
	/* schema 21: how many sandboxes ran its seconds at once (a job's
	 * instance_count; 1 for the rest) */
	unsigned hosts;
};

/* The plan name stored on a new entry for user_id: their own plan, else their
 * first group's (by name), else "default". */
void ledger_plan_of(struct db *db, int64_t user_id, char out[LEDGER_PLAN_MAX]);

/* The fraction of a second a preemptible job's entry bills for user_id
 * (docs/jobs.md "Preemptible capacity"): the preemptible_rate of the plan
 * ledger_plan_of names, else LEDGER_PREEMPTIBLE_RATE_DEFAULT. */
#define LEDGER_PREEMPTIBLE_RATE_DEFAULT 0.3
double ledger_preemptible_rate_of(struct db *db, int64_t user_id);

/* Opens the entry of runtime_id (now running) at now. Caller holds db_lock,
 * inside the transaction that moves the runtime. 0, or -EIO. */
int ledger_open_runtime(struct db *db, int64_t runtime_id, int64_t now);
/* Closes runtime_id's open entry (none: a no-op) with the runtime's reason,
 * at min(now, last_heartbeat + LEDGER_CLOSE_SLACK_S). Caller holds db_lock
 * as above. 0, or -EIO. */
int ledger_close_runtime(struct db *db, int64_t runtime_id, int64_t now);
/* Closes every open entry of the user named name, reason "account deleted",
 * like ledger_close_runtime. Caller holds db_lock in the deleting transaction.
 * 0, or -EIO. */
int ledger_close_user(struct db *db, const char *name, int64_t now);
/* Advances the open entries of running or stopping runtimes to now. The
 * number advanced, or -EIO. */
int ledger_heartbeat(struct db *db, int64_t now);
/* Closes the open entry of a job (source "job", id a job id) or of a pool's
 * warm period (source "warm", id a pool id) with reason, at
 * min(now, last_heartbeat + LEDGER_CLOSE_SLACK_S) like a runtime's. Caller
 * holds db_lock in the transaction that moves the row. 0, or -EIO. */
int ledger_close_source(struct db *db, const char *source, int64_t id, int64_t now,
			const char *reason);
/* Opens the warm entry of pool_id at now (none open yet). Caller holds
 * db_lock as above. 0, or -EIO. */
int ledger_open_warm(struct db *db, int64_t pool_id, int64_t now);
/* Advances the open entries of live jobs and available pools to now (the
 * jobs' heartbeat, once their pools were reconciled). The number advanced,
 * or -EIO. */
int ledger_heartbeat_jobs(struct db *db, int64_t now);
/* Billable seconds of every entry so far, cpu into totals_s[0] and gpu into
 * totals_s[1] (open entries up to their last heartbeat). 0 or -EIO. */
int ledger_totals_s(struct db *db, int64_t totals_s[2]);
/* Start-up recovery: closes each open runtime entry whose runtime is not
 * live (running or stopping) at its last heartbeat; jobs will recover their
 * own. The number closed, or -EIO. */
int ledger_recover(struct db *db);
/* Calls fn for each entry of user_id (0: every user) that overlaps
 * [from_s, to_s), in start order, until fn returns non-zero. The number of
 * entries passed, or -EIO. */
int ledger_each(struct db *db, int64_t user_id, int64_t from_s, int64_t to_s,
		int (*fn)(const struct ledger_entry *e, void *ctx), void *ctx);
/* The interval an entry has billed so far (an open one up to its heartbeat),
 * with the GPUs it held (ledger_window.h). */
struct ledger_span;
void ledger_entry_span(const struct ledger_entry *e, struct ledger_span *out);

#endif
