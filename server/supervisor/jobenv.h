/* jobenv.h - a training job's environment (docs/jobs.md, "Environment"): the
 * runtime's usual PATH, HOME and USER, the spec's env, and labd's LABD_* and
 * the managed-training SM_* names. labd's own names win: a spec variable of
 * the same name is left out. Pure: unit-tested. */
#ifndef LABD_JOBENV_H
#define LABD_JOBENV_H

#include <stddef.h>
#include <stdint.h>

#include "proto/jobspec.h"

#define JOBENV_MAX 256 /* entries, NULL included */

struct jobenv {
	char *entries[JOBENV_MAX]; /* "K=V", NULL-terminated, each malloc'ed */
	size_t n;
};

/* Fills e for job_id of user; ncpus for SM_NUM_CPUS (the spec's cpus, else
 * the pool's). 0 or -ENOMEM (e freed). */
int jobenv_build(const struct jobspec *s, long long job_id, const char *user, int64_t ncpus,
		 struct jobenv *e);
void jobenv_free(struct jobenv *e);
/* The agent's own instructions for a job on several hosts (sandbox/jobshare.h),
 * added to e for the agent's run only (a shell into the job has none): algo-1 sends
 * the working folder (unless it is the home itself) and the input channels, the
 * others fetch them into the same paths; "LABD_SHARE=none" otherwise. The agent
 * takes both names out before the command starts, and a job's own environment
 * cannot set them (jobenv_build leaves them out). 0 or -ENOMEM. */
int jobenv_add_share(const struct jobspec *s, const char *user, struct jobenv *e);
/* An env name for a channel or hyperparameter: upper-cased, every byte
 * outside [A-Z0-9_] made '_' (into out, at most len bytes). */
void jobenv_name(const char *in, char *out, size_t len);

#endif
