/* hosts.h - how many hosts a training job runs on (docs/jobs.md "Several
 * hosts"): its instance_count, kept in the job's normalised request. */
#ifndef LABD_JOBS_HOSTS_H
#define LABD_JOBS_HOSTS_H

#include "store/jobs.h"

/* The job's instance_count: 1 when the request has none (jobs submitted
 * before the field existed) or cannot be read. */
int jobs_instance_count(const struct job *j);

#endif
