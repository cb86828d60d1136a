/* live.h - the live jobs as one pass of the jobs ticker read them: once per
 * pass (runner.c), shared by the expiry of waits, dispatch, job_run and the
 * observation of logs. Each reader re-reads the row it acts on (the set is
 * a snapshot: a row may have moved since). */
#ifndef LABD_JOBS_LIVE_H
#define LABD_JOBS_LIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/jobs.h"

/* Live jobs looked at per pass, at most (the oldest first); more wait. */
#define JOBS_LIVE_MAX 512

struct jobs_live_row {
	int64_t id, pool_id, created_at, max_wait_s;
	enum job_status status;
	enum job_secondary secondary;
	bool run_sent;
};

struct jobs_live {
	struct jobs_live_row row[JOBS_LIVE_MAX];
	size_t n;
};

#endif
