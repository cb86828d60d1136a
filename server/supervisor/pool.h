/* pool.h - one job pool as the supervisor holds it (a "pool box", beside the
 * store's pool row), shared by host_pool.c (the pool purpose of the host) and
 * jobrun.c (the job in it). Internal to supervisor/. */
#ifndef LABD_POOL_H
#define LABD_POOL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "labd/sandbox.h"
#include "proto/jobspec.h"
#include "proto/proto.h"
#include "supervisor/agentio.h"
#include "supervisor/host.h"
#include "supervisor/joblog.h"
#include "supervisor/launch.h"
#include "supervisor/poollaunch.h"

struct labd_config;
struct host;

/* Where the job in a pool is. */
enum job_step {
	J_NONE,      /* the pool is idle */
	J_STAGING,   /* downloading: a worker mounts its folders and writes its config */
	J_STARTING,  /* run was sent; waiting for the agent's started */
	J_TRAINING,  /* the command runs */
	J_STOPPING,  /* term was sent; SIGKILL of the pool at kill_at_ms */
	J_UPLOADING, /* it ended; a worker syncs the home, copies the log, ejects */
	J_ENDED,     /* uploaded; its job_exited waits for a web process to listen */
};

#define POOL_MOUNTS_MAX (JOBSPEC_CHANNELS_MAX + 3)

struct pool_job {
	long long job_id;
	enum job_step step;
	struct jobspec spec;
	char *spec_text; /* as job_run sent it: the record carries it to a new supervisor */
	struct joblog log; /* the keeper writes it; this fd tells its size */
	pid_t worker;
	int worker_fd;
	long long runtime_end_ms, kill_at_ms, sample_at_ms;
	int64_t oom_kills_before;
	bool downloading_unsaid; /* job_phase downloading goes out after job_run's reply */
	const char *stop_kind; /* "stopped" or "max_runtime" once asked to stop */
	int64_t grace_s;
	/* how it ended (job_exited) */
	char kind[16];
	int code, signal;
	int64_t exit_at_ms;
	char reason[200];
	char failure[PROTO_FAILURE_MAX + 1];
	bool home_full;
};

struct pool_box {
	struct host_box b;
	uint32_t user_id;
	long long pool_id;
	uint32_t cpus_milli; /* the pool's CPU limit (SM_NUM_CPUS when the spec names none) */
	bool scratch_home; /* a host of a job on several nodes with a scratch home: its
			    * channels' folders start empty, and its agent fetches them
			    * from algo-1 (sandbox/jobshare.h) */
	struct pool_pipes io; /* out_fd is the keeper's once it runs */
	char keeper_sock[LAUNCH_PATH_MAX];
	char status_buf[AGENTIO_LINE_MAX + AGENTIO_FAILURE_MAX + 64];
	size_t status_len;
	struct pool_job job;
};

/* jobrun.c, for host_pool.c (jobrun.c calls only the host, host.h) */
json_t *jobrun_run(struct host *ps, struct pool_box *p, long long id, json_t *msg);
json_t *jobrun_stop(struct host *ps, struct pool_box *p, long long id, json_t *msg);
/* The agent said started or exited. */
void jobrun_on_agent(struct host *ps, struct pool_box *p, const struct agent_status *st);
/* A job worker (staging or uploading) reported. */
void jobrun_on_worker(struct host *ps, struct pool_box *p);
/* The job in p for its record (a restarted supervisor takes it over), and
 * back: timers are kept as wall-clock epoch ms, since monotonic clocks do not
 * survive a restart. jobrun_restore redoes a staging or an upload whose worker
 * died with the previous supervisor; 0, or -EINVAL (the pool is then ended). */
json_t *jobrun_record(struct pool_box *p);
int jobrun_restore(struct host *ps, struct pool_box *p, json_t *rec);
/* Says a job's end held while no web process listened (J_ENDED). */
void jobrun_say_held(struct host *ps, struct pool_box *p);
/* Timers: max runtime, grace, samples; returns when next due (-1 none). */
long long jobrun_tick(struct host *ps, struct pool_box *p, long long now_ms);
/* The pool died with the job in it: says job_exited when its end is known
 * (a stop, an OOM); else the job is lost with the pool. res may be NULL. */
void jobrun_pool_died(struct host *ps, struct pool_box *p, const struct sandbox_result *res);
/* Forgets the job (files closed, spec freed). */
void jobrun_clear(struct pool_box *p);

#endif
