/* retention.h - what training jobs keep on the state file system and when
 * it goes (docs/jobs.md "Retention"): each job's stored bytes measured and
 * charged to its user (store/job_storage.h), an ended job deleted on
 * request or by the retention sweep ([jobs] retention, max_kept_per_user),
 * and the log files of jobs that are gone removed through the backend
 * (joblogs/ is root's).
 *
 * Rows go first, files after: a job's row is deleted (with its points,
 * samples and transitions), then its log is asked away. A log whose row is
 * gone is an orphan that every sweep looks for (a crash between the two,
 * a supervisor that was away, a user deleted with their rows), so no log
 * outlives its job for longer than a sweep, and no kept row ever points to
 * a removed log. Job ids are never reused (AUTOINCREMENT), so an orphan's
 * name never comes back to a new job. */
#ifndef LABD_JOBS_RETENTION_H
#define LABD_JOBS_RETENTION_H

#include <stdint.h>

struct app;

/* One sweep, when due ([jobs] retention_sweep): measures the jobs whose
 * bytes may still grow, deletes the ended jobs retention says, removes
 * orphaned logs. Called from a ticker's pass; returns the clock_ms() time
 * it is next due (sooner when a bounded pass left work). */
long long jobs_retention_pass(struct app *app);
/* A user was deleted and their job rows with them (ON DELETE CASCADE):
 * their logs are removed now, but for those of a job a pool still holds,
 * which a later sweep removes. */
void jobs_forget_account(struct app *app);
/* Measures user_id's jobs whose bytes may still grow, so that what
 * job_storage_of_user sums is current (before /me/quota shows it). */
void jobs_storage_measure(struct app *app, int64_t user_id);
/* Deletes an ended job: its rows, then its log. 0, -ENOENT (no such job),
 * -EBUSY (it has not ended), -EIO. The log's removal is best effort (a
 * sweep removes what is left). */
int jobs_delete(struct app *app, int64_t job_id);

#endif
