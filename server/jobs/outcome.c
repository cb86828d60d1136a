/* outcome.c - how a job ended, in the API's words (pure); see jobs.h. */
#include <stdio.h>
#include <string.h>

#include "jobs/outcome.h"

/* How the job ended, in the API's words. */
void jobs_outcome(const struct job *j, const struct backend_job_exit *x, int64_t memory_bytes,
		  struct job_move *m, char *reason, size_t len)
{
	const char *failure = x->failure && x->failure[0] ? x->failure : NULL;

	m->status = JOB_FAILED, m->secondary = JOB_S_FAILED;
	m->set_exit = true, m->exit_code = -1;
	if (j->status == JOB_STOPPING || strcmp(x->kind, "stopped") == 0) {
		m->status = JOB_STOPPED, m->secondary = JOB_S_STOPPED;
		snprintf(reason, len, "stopped");
	} else if (strcmp(x->kind, "max_runtime") == 0) {
		m->status = JOB_STOPPED, m->secondary = JOB_MAX_RUNTIME_EXCEEDED;
		snprintf(reason, len, "ran past its max_runtime_s of %lld s",
			 (long long)j->max_runtime_s);
	} else if (strcmp(x->kind, "oom") == 0) {
		snprintf(reason, len, "out of memory (the memory limit is %lld MiB)",
			 (long long)(memory_bytes >> 20));
	} else if (strcmp(x->kind, "exited") == 0 && x->code == 0 && !failure) {
		m->status = JOB_COMPLETED, m->secondary = JOB_S_COMPLETED, m->exit_code = 0;
		snprintf(reason, len, "completed");
	} else if (strcmp(x->kind, "exited") == 0) {
		m->exit_code = x->code;
		snprintf(reason, len, "%s%s%.400s (exit code %d)",
			 x->home_full ? "no space left in the home" : "",
			 x->home_full && failure ? ": " : "", failure ? failure : "", x->code);
		if (!x->home_full && !failure)
			snprintf(reason, len, "exit code %d", x->code);
	} else if (strcmp(x->kind, "signaled") == 0) {
		/* the supervisor's words when it knows more (the job killed its agent) */
		if (x->reason && x->reason[0])
			snprintf(reason, len, "%.400s%s", x->reason,
				 x->home_full ? " (no space left in the home)" : "");
		else
			snprintf(reason, len, "killed by signal %d%s", x->signal,
				 x->home_full ? " (no space left in the home)" : "");
	} else if (strcmp(x->kind, "stage_failed") == 0) {
		snprintf(reason, len, "%.400s", x->reason && x->reason[0] ? x->reason
									 : "inputs could not be staged");
	} else {
		snprintf(reason, len, "%.400s", x->reason && x->reason[0] ? x->reason : x->kind);
	}
	if (m->status != JOB_COMPLETED)
		m->failure = m->status == JOB_FAILED ? reason : NULL;
	m->message = reason;
}
