/* backend.h - the seam between labd-web and whatever runs sandboxes.
 *
 * Folder rule: backend/ includes proto/, config/ and common/ only; the
 * runtime layer (runtime/) is its one caller.
 *
 * The local backend (local.c) speaks the supervisor protocol; a later Slurm
 * backend submits the same sandboxes as jobs on compute nodes. So that it
 * can, everything here is asynchronous: a start returns once the backend took
 * the request, and what happens next arrives as events, possibly much later
 * (a queued Slurm job); the endpoint a runtime is reached at is known only
 * once it runs ("unix:PATH" relative to the state dir today, "tcp:HOST:PORT"
 * for remote backends) and is stored with the runtime row. */
#ifndef LABD_BACKEND_H
#define LABD_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "labd/boxshape.h"

#define BACKEND_ENDPOINT_MAX 200
#define BACKEND_REASON_MAX 200

struct backend;

/* How a job ended (job_exited). Strings borrowed for the call. */
struct backend_job_exit {
	/* "exited" (code), "signaled" (signal), "oom" (the memory cgroup killed it),
	 * "max_runtime" (its max_runtime_s passed: SIGTERM, grace, kill), "stopped"
	 * (job_stop: SIGTERM, grace, kill), "stage_failed" (inputs or outputs could
	 * not be staged: reason says which path and why) */
	const char *kind;
	int code, signal;
	int64_t at_ms;        /* when the command ended */
	const char *reason;   /* plain words, "" */
	const char *failure;  /* the first KiB of /opt/ml/output/failure, "" when none */
	bool home_full;       /* the home had no space left when it ended */
};

/* One sample of a training job's sandbox (cgroup counters). */
struct backend_job_sample {
	int64_t at_ms;
	int64_t cpu_usage_us;       /* cumulative since the pool started */
	int64_t memory_bytes;       /* now */
	int64_t memory_limit_bytes; /* 0 = none */
	int64_t io_wait_us;         /* cumulative I/O pressure ("some"), -1 unknown */
	int64_t log_bytes;          /* the job's log so far */
};

/* Called from the backend's own thread; they must not call back into the
 * backend (queue the work instead). Strings are borrowed for the call. */
struct backend_events {
	/* the channel is (re)established: reconcile with backend_list */
	void (*connected)(void *ctx);
	void (*ready)(void *ctx, const char *user, int64_t runtime_id, const char *endpoint);
	/* cause: one of proto.h's PROTO_CAUSES */
	void (*ended)(void *ctx, const char *user, int64_t runtime_id, const char *cause,
		      bool failed, const char *reason);
	void (*warning)(void *ctx, const char *user, int64_t runtime_id, int64_t seconds_left);
	/* ---- job sandboxes ("pools", docs/jobs.md); each may be NULL ---- */
	/* the pool's agent waits for a job (after the cold build) */
	void (*pool_ready)(void *ctx, const char *user, int64_t pool_id);
	/* the pool's sandbox is gone; cause as ended's; a job it ran was ended
	 * with job_exited before, or is lost with it (then: infrastructure) */
	void (*pool_ended)(void *ctx, const char *user, int64_t pool_id, const char *cause,
			   bool failed, const char *reason);
	/* phase: "downloading" (inputs being staged), "training" (the command
	 * runs), "uploading" (it ended; outputs being made durable); at_ms: the
	 * wall clock (ms since the epoch) when the phase began */
	void (*job_phase)(void *ctx, const char *user, int64_t pool_id, int64_t job_id,
			  const char *phase, int64_t at_ms);
	/* the job is over and its pool idle again (or ended: pool_ended follows) */
	void (*job_exited)(void *ctx, const char *user, int64_t pool_id, int64_t job_id,
			   const struct backend_job_exit *x);
	/* every [jobs] sample_interval_ms while a job trains */
	void (*job_sample)(void *ctx, const char *user, int64_t pool_id, int64_t job_id,
			   const struct backend_job_sample *s);
	void *ctx;
};

struct backend_start {
	const char *user;
	int64_t user_id, runtime_id;
	const char *kind; /* "cpu" or "gpu" */
	const char *token;
	int64_t deadline_s;
	/* from the user's plan: its GPUs, sizes (0 = the backend's configured
	 * default, capped root-side), network and image */
	struct box_shape shape;
	/* out: the image's content hash the backend started it on ("" for the host's
	 * root), BACKEND_IMAGE_HASH_MAX bytes; NULL when the caller does not want it */
	char *image_hash;
	/* parallel to shape.gpus: each device's uuid ("MIG-…"), sent only when every
	 * one has one (the sandbox's CUDA_VISIBLE_DEVICES names them); NULL: none */
	const char *gpu_uuids[BOX_GPUS_MAX];
};
#define BACKEND_IMAGE_HASH_MAX 80

/* One sandbox as the backend sees it. */
struct backend_sandbox {
	char user[33];
	int64_t runtime_id;
	char state[12]; /* starting, running, stopping, ended */
	bool ready, failed;
	char cause[16];
	char reason[BACKEND_REASON_MAX];
	int64_t pool_id; /* > 0: a job sandbox (then runtime_id is 0) */
	int64_t job_id;  /* the job a pool runs now, 0 when idle */
};

/* A job sandbox to build: the sizes and limits a job asks for (its pool is
 * reused only by a job asking for the same). */
struct backend_pool_start {
	const char *user;
	int64_t user_id, pool_id;
	int64_t deadline_s; /* epoch s: the supervisor ends the pool then, whatever runs */
	struct box_shape shape; /* as backend_start's */
	char *image_hash;       /* out, BACKEND_IMAGE_HASH_MAX bytes, may be NULL */
	const char *gpu_uuids[BOX_GPUS_MAX]; /* as backend_start's */
	/* hosts of one job across nodes (its instance_count; docs/jobs.md "Several
	 * hosts"): 0 or 1 = one sandbox; more only on a backend of several machines */
	int instances;
	/* one host of such a job on a node (docs/slurm.md "Jobs on several nodes"): its
	 * address on the cluster network ("peer0" in the sandbox), the other hosts'
	 * addresses (comma-separated), and no home of the user's (hosts 2..N); NULL,
	 * NULL, false for any other pool */
	const char *peer_addr, *peers;
	bool scratch_home;
};

/* A user's home as the backend sees it (storage quota). */
struct backend_home {
	bool exists;  /* false: made at the first start */
	bool mounted; /* a runtime holds it now */
	int64_t used_bytes, size_bytes;
};

/* How a new home size was applied. */
enum backend_home_applied {
	BACKEND_HOME_ONLINE,     /* growing now, while mounted */
	BACKEND_HOME_NEXT_START, /* grown (or made) at the next start */
	BACKEND_HOME_UNCHANGED,  /* at or below the image's size: images never shrink */
};

struct backend_shell;

struct backend_ops {
	int (*start)(struct backend *b, const struct backend_start *s, char *endpoint,
		     char *err, size_t errlen);
	int (*stop)(struct backend *b, const char *user, int64_t runtime_id, const char *reason);
	int (*list)(struct backend *b, struct backend_sandbox **out, size_t *n);
	int (*ping)(struct backend *b);
	void (*free)(struct backend *b);
	int (*user_deleted)(struct backend *b, const char *user, int64_t user_id);
	const char *(*warnings)(struct backend *b); /* may be NULL */
	int (*home_usage)(struct backend *b, const char *user, int64_t user_id,
			  struct backend_home *out);
	int (*home_resize)(struct backend *b, const char *user, int64_t user_id, int64_t size_bytes,
			   enum backend_home_applied *applied);
	/* job sandboxes; NULL in a backend without jobs (-ENOSYS) */
	int (*pool_start)(struct backend *b, const struct backend_pool_start *s, char *err,
			  size_t errlen);
	int (*pool_stop)(struct backend *b, const char *user, int64_t pool_id, const char *reason);
	int (*job_run)(struct backend *b, const char *user, int64_t pool_id, int64_t job_id,
		       const char *spec_json, char *err, size_t errlen);
	int (*job_stop)(struct backend *b, const char *user, int64_t pool_id, int64_t job_id,
			int64_t grace_s);
	int (*job_logs_remove)(struct backend *b, const int64_t *job_ids, size_t n);
	int (*job_shell)(struct backend *b, const struct backend_shell *s, int *fd, char *err,
			 size_t errlen);
	/* NULL in a backend without GPU shares (-ENOSYS) */
	int (*gpu_processes_end)(struct backend *b, const char *user, int64_t runtime_id,
				 int64_t pool_id, const unsigned *pids, size_t n);
	/* NULL where job_shell's fd is the pty itself (resized with TIOCSWINSZ) */
	int (*job_shell_resize)(struct backend *b, int fd, int cols, int rows);
};

struct backend {
	const struct backend_ops *ops;
};

/* Asks for a sandbox. 0 when the backend took it (endpoint[BACKEND_ENDPOINT_MAX]
 * filled when already known); -EEXIST when the user still has one; -EBUSY when a
 * GPU asked for is still held (a teardown not finished); -ETIMEDOUT
 * when the backend did not answer (the start may still happen: reconcile);
 * another negative errno with a message in err. */
int backend_start(struct backend *b, const struct backend_start *s, char *endpoint, char *err,
		  size_t errlen);
/* Asks the sandbox of runtime_id (0: whichever the user has) to stop; its end
 * arrives as an event. 0, -ENOENT when there is none, -ETIMEDOUT. */
int backend_stop(struct backend *b, const char *user, int64_t runtime_id, const char *reason);
/* Every sandbox the backend holds; *out is freed by the caller (free()). */
int backend_list(struct backend *b, struct backend_sandbox **out, size_t *n);
/* 0 when the backend answers. */
int backend_ping(struct backend *b);
/* The user is deleted: the backend stops their sandbox, retires their uid and
 * archives or removes their home. 0, or a negative errno. */
int backend_user_deleted(struct backend *b, const char *user, int64_t user_id);
/* The user's home: used and image size. 0, -ENOSYS (a backend without
 * homes), or a negative errno. */
int backend_home_usage(struct backend *b, const char *user, int64_t user_id,
		       struct backend_home *out);
/* Grows the user's home to size_bytes (capped root-side) now or at its next
 * start; *applied says which. 0, -ENOSYS, or a negative errno. */
int backend_home_resize(struct backend *b, const char *user, int64_t user_id, int64_t size_bytes,
			enum backend_home_applied *applied);
/* ---- job sandboxes (docs/jobs.md) ---- */
/* Builds a pool: 0 when taken (pool_ready or pool_ended follows), -EBUSY when
 * a GPU asked for is still held, -ETIMEDOUT, -ENOSYS, or another negative
 * errno with a message in err (e.g. "image_missing: ..."). A user may hold
 * several pools beside their runtime. */
int backend_pool_start(struct backend *b, const struct backend_pool_start *s, char *err,
		       size_t errlen);
/* Ends a pool (and any job in it at once, no grace); pool_ended follows. 0,
 * -ENOENT when there is none, -ETIMEDOUT. */
int backend_pool_stop(struct backend *b, const char *user, int64_t pool_id, const char *reason);
/* Runs job_id in the idle, ready pool: spec_json is the job spec of
 * docs/jobs.md ("The job spec"), checked root-side. 0 when taken (job_phase
 * and job_exited follow), -EBUSY when the pool is not idle and ready,
 * -ENOENT, -EINVAL (err says which field), -ETIMEDOUT, -ENOSYS. */
int backend_job_run(struct backend *b, const char *user, int64_t pool_id, int64_t job_id,
		    const char *spec_json, char *err, size_t errlen);
/* SIGTERM to the job, SIGKILL after grace_s; job_exited (kind "stopped")
 * follows. 0, -ENOENT when that job does not run there, -ETIMEDOUT. */
int backend_job_stop(struct backend *b, const char *user, int64_t pool_id, int64_t job_id,
		     int64_t grace_s);
/* Removes the log files of these jobs, whose rows are gone (retention,
 * deletion): at most BACKEND_JOB_LOGS_MAX ids. A missing file counts as
 * removed; a job that still runs in one of the backend's pools keeps its
 * log (asked again later). 0, -ETIMEDOUT, -ENOSYS, another negative errno. */
#define BACKEND_JOB_LOGS_MAX 256
int backend_job_logs_remove(struct backend *b, const int64_t *job_ids, size_t n);

/* A shell into the job that trains in a pool (docs/jobs.md, "A shell into a
 * running job"): its terminal's first size. */
struct backend_shell {
	const char *user;
	int64_t pool_id, job_id;
	int cols, rows; /* 1..1000 */
	int host;	/* which of a job's hosts, algo-<host>: 1.. its hosts (0 is 1 too) */
};
/* Starts a shell beside the job's command, as the user, in its sandbox (host
 * s->host's, for a job on several hosts); *fd is the pty's master (the caller's).
 * 0, -ENOENT when that job does not train there (any more, or on no such host), -EBUSY (too many starting), -ETIMEDOUT, -ENOSYS, another
 * negative errno with a message in err. */
int backend_job_shell(struct backend *b, const struct backend_shell *s, int *fd, char *err,
		      size_t errlen);
/* Resizes the terminal behind fd, a job_shell fd that is not the pty itself (ENOTTY:
 * a shell on a Slurm node, whose fd is a connection to the node's data port). 0,
 * -ENOENT (fd is none of the backend's shells), -ENOSYS, another negative errno. */
int backend_job_shell_resize(struct backend *b, int fd, int cols, int rows);

/* Ends (SIGKILL) those of pids that run in the sandbox of runtime_id or
 * pool_id (one of them > 0): a share over its GPU memory budget past the
 * grace (runtime/gpubudget.h). Root checks each pid's cgroup; others are left
 * alone. The number ended, -ENOENT when there is no such sandbox, -ETIMEDOUT,
 * -ENOSYS, another negative errno. */
#define BACKEND_GPU_PIDS_MAX 64
int backend_gpu_processes_end(struct backend *b, const char *user, int64_t runtime_id,
			      int64_t pool_id, const unsigned *pids, size_t n);

#define BACKEND_WARNINGS_MAX 1024
/* What the backend's host lacks for its limits (cgroup controllers), one sentence a
 * line, "" when nothing; borrowed, valid as long as b. */
const char *backend_warnings(struct backend *b);
void backend_free(struct backend *b);

/* Failure injection for tests: sends text to the supervisor as it is, as a
 * compromised web process could. 0 or a negative errno. */
int backend_local_send_raw(struct backend *b, const char *text);

/* job_shell to a supervisor behind a node's link (backend/nodes.h), which keeps the
 * terminal: 0 with the link's one-time token (link.h's link_shells) in token
 * (LINK_SHELL_TOKEN_HEX + 1 bytes), or as backend_job_shell fails. */
int backend_local_job_shell_token(struct backend *b, const struct backend_shell *s, char *token,
				  size_t toklen, char *err, size_t errlen);

/* The local backend: takes fd (the supervisor socketpair), says hello and
 * delivers events to ev (copied) from its reader thread. NULL on failure. */
struct backend *backend_local_new(int fd, const struct backend_events *ev);

#endif
