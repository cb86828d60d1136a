/* preempt.h - preemptible capacity (docs/jobs.md "Preemptible capacity"): a
 * job with capacity "preemptible" runs only on capacity nobody else asks
 * for. When a GPU runtime or an on-demand GPU job waits for GPUs that
 * preemptible jobs hold, or an on-demand job waits for the host's sandbox
 * cap or its user's pool or GPU caps that a preemptible job fills, the jobs
 * pass stops such a job the way a stop does (SIGTERM, the job's grace, then
 * the kill) and, when its end comes, puts it back in the queue (Pending,
 * the reason Preempted, no retry used); it resumes from its checkpoint
 * folder when capacity frees. Every step is a row (store/jobs.h), so a
 * restarted labd-web finishes a preemption it began. */
#ifndef LABD_JOBS_PREEMPT_H
#define LABD_JOBS_PREEMPT_H

#include <stdbool.h>

#include "jobs/live.h"
#include "store/jobs.h"

struct app;

/* A preemption's stop may take the job's grace; past it and this slack the
 * pool is killed outright (a stop lost to a crash of labd-web). */
#define PREEMPT_SLACK_S 20

/* The jobs pass's step, after dispatch: begins the preemptions what waits
 * needs, and kills the pools of preemptions overdue. */
void jobs_preempt(struct app *app, const struct jobs_live *live);
/* When a preempted job's run ends (any way: its exit, its stop, its pool
 * lost): back to Pending with the reason Preempted. True when j was being
 * preempted (the caller's end path stops there), false otherwise. */
bool jobs_preempt_requeue(struct app *app, const struct job *j);
/* Whether the waiting job j may take capacity now: an on-demand job always;
 * a preemptible one only while no on-demand job waits (else what it took
 * would be preempted again at once). */
bool jobs_preempt_may_start(struct app *app, const struct job *j);

#endif
