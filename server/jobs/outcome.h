/* outcome.h - how a job ended, in plain words (pure; outcome.c). */
#ifndef LABD_JOBS_OUTCOME_H
#define LABD_JOBS_OUTCOME_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "store/jobs.h"

/* Status, secondary status, exit code and the failure reason in plain words
 * (reason, len bytes, also m->message and, for Failed, m->failure) from the
 * backend's exit and the job (a Stopping job ends Stopped whatever the
 * exit). memory_bytes: its sandbox's limit. */
void jobs_outcome(const struct job *j, const struct backend_job_exit *x, int64_t memory_bytes,
		  struct job_move *m, char *reason, size_t len);

#endif
