/* slurmcli.h - Slurm's command-line tools (sbatch, squeue, scontrol, scancel) for
 * the Slurm backend: running them with a time limit, and pure parsers of what they
 * print (unit-tested on real outputs, tests/unit/test_slurmcli.c).
 *
 * A client call blocks for ~20 s when slurmctld is away, so these run only on the
 * Slurm backend's own thread, never on a request path. Every answer is one of three:
 * answered, unknown (the controller did not answer: keep everything as it is) or gone
 * (Slurm no longer knows the job). */
#ifndef LABD_SLURMCLI_H
#define LABD_SLURMCLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SLURM_STATE_MAX 24
#define SLURM_REASON_MAX 64
#define SLURM_HOST_MAX 64
#define SLURM_USER_MAX 33
#define SLURM_NODELIST_MAX 256 /* an allocation's node list as Slurm prints it ("n[1-3]") */
#define SLURM_TEXT_MAX 160 /* a cause's reason or a pending text */
#define SLURM_JOB_GPUS_MAX 16
/* the squeue format the parser reads: id, name, state, reason, batch host, start
 * (expected start while pending), comment (the user's name, and for a job on several
 * nodes its hosts' peer addresses: "<user>:<first address>:<count>"), node list */
#define SLURM_SQUEUE_FORMAT "%i|%j|%T|%r|%B|%S|%k|%N"

/* Where the tools are and how long one call may take. */
struct slurm_tools {
	const char *sbatch, *squeue, *scontrol, *scancel;
	int timeout_ms;
};

/* What one tool call came to. */
enum slurm_verdict {
	SLURM_ANSWERED, /* exit 0 */
	SLURM_UNKNOWN,  /* timed out, or the controller could not be reached */
	SLURM_GONE,     /* "Invalid job id": Slurm no longer knows the job */
	SLURM_REFUSED,  /* another failure: the message says why */
};

/* One of labd's holder jobs as squeue shows it. */
struct slurm_job {
	int64_t job_id;
	bool pool;   /* labd-pool-<id> (else labd-rt-<id>) */
	int64_t id;  /* the runtime's or the pool's id */
	char user[SLURM_USER_MAX]; /* from the comment, "" when absent */
	char state[SLURM_STATE_MAX];
	char reason[SLURM_REASON_MAX];
	char host[SLURM_HOST_MAX]; /* the batch host, "" until it runs */
	char nodes[SLURM_NODELIST_MAX]; /* the allocation's node list, "" until it runs */
	uint32_t peer_first;       /* from the comment: the hosts' first peer address */
	unsigned peer_n;           /* (host order) and their count; 0 for one host */
	int64_t start_at;          /* epoch s: start, or Slurm's estimate while pending; 0 */
};

/* Where a job state leaves the holder. */
enum slurm_phase {
	SLURM_PHASE_PENDING, /* queued (or being configured): no node yet */
	SLURM_PHASE_RUNNING, /* it holds its node */
	SLURM_PHASE_ENDING,  /* COMPLETING: the final state comes next */
	SLURM_PHASE_ENDED,
};

/* How Slurm ending a holder reads as a labd end. */
struct slurm_end {
	const char *cause; /* one of proto.h's PROTO_CAUSES */
	bool failed;
	char reason[SLURM_TEXT_MAX];
};

/* ---- pure parsers ---- */

/* "labd-rt-<id>" / "labd-pool-<id>" (id >= 1, decimal, no sign or leading zero).
 * 0, or -EINVAL for any other name. */
int slurmcli_name_parse(const char *name, bool *pool, int64_t *id);
/* The name of the holder of a runtime or a pool. */
void slurmcli_name(bool pool, int64_t id, char *out, size_t outlen);
/* One line of squeue -o SLURM_SQUEUE_FORMAT. 0, 1 when the job is not labd's (its
 * name), -EINVAL for a malformed line. */
int slurmcli_parse_squeue_line(const char *line, struct slurm_job *out);
/* sbatch --parsable's output: "<id>" or "<id>;<cluster>", one line. 0 or -EINVAL. */
int slurmcli_parse_sbatch(const char *out, int64_t *job_id);
/* The node-local GPU indices of `scontrol show job -d -o` (its first " GRES=gpu...(IDX:
 * 0-1,3)"), ascending as printed. 0 (*n = 0 for a job without GPUs), or -EINVAL. */
int slurmcli_parse_gres_idx(const char *line, unsigned *idx, size_t max, size_t *n);
/* A time as Slurm prints it (local time, "2026-12-04T23:10:00"); "N/A", "Unknown",
 * "None" and "" are 0. 0 or -EINVAL. */
int slurmcli_parse_time(const char *text, int64_t *at);
/* A tool's exit status (-1 when it did not run), whether it timed out, and its error
 * text, as one verdict. */
enum slurm_verdict slurmcli_classify(int status, bool timed_out, const char *err);
enum slurm_phase slurmcli_phase(const char *state);
/* How a holder that Slurm ended in state (with reason, on host) ends in labd;
 * cancelled_by_labd: labd's own scancel ended it (a stop asked for). */
void slurmcli_end(const char *state, const char *reason, const char *host,
		  bool cancelled_by_labd, struct slurm_end *out);
/* What a pending reason means to the user ("waiting for free GPUs or CPUs in
 * Slurm", ...), into out. */
void slurmcli_pending_text(const char *reason, char *out, size_t outlen);

/* ---- the tools ---- */

/* A holder to submit. */
struct slurm_submit {
	bool pool;
	int64_t id;
	const char *user;
	int64_t memory_mb;   /* >= 1 */
	unsigned cpus;       /* >= 1 */
	unsigned gpus;       /* 0: none */
	int64_t seconds;     /* the job sleeps this long (to labd's deadline + grace) */
	const char *partition; /* "" or NULL: Slurm's default */
	unsigned nodes;        /* 0 or 1: one node; N: N nodes, one task on each */
	uint32_t peer_first;   /* N nodes: the hosts' peer addresses (host order), */
	unsigned peer_n;       /* named in the comment; 0: none */
};

/* The argv of the submission into argv (at least SLURMCLI_SUBMIT_ARGS slots; texts in
 * store, SLURMCLI_SUBMIT_STORE bytes). Pure: the unit test reads it. */
#define SLURMCLI_SUBMIT_ARGS 20
#define SLURMCLI_SUBMIT_STORE 768
void slurmcli_submit_argv(const char *sbatch, const struct slurm_submit *s, const char **argv,
			  char *store);

/* sbatch: 0 with *job_id; -ETIMEDOUT / -EAGAIN (unknown: it may have been taken, find
 * it by name), or -EINVAL with Slurm's message in err (refused). */
int slurmcli_submit(const struct slurm_tools *t, const struct slurm_submit *s, int64_t *job_id,
		    char *err, size_t errlen);
/* squeue for all of this user's jobs in every state; labd's holders into *jobs (the
 * caller frees), *n of them. 0, -EAGAIN (unknown), or another negative errno. */
int slurmcli_queue(const struct slurm_tools *t, struct slurm_job **jobs, size_t *n);
/* scontrol show job -d -o: the GPU indices the job holds on its node. 0, -EAGAIN
 * (unknown), -ENOENT (gone), -EINVAL. */
int slurmcli_job_gpus(const struct slurm_tools *t, int64_t job_id, unsigned *idx, size_t max,
		      size_t *n);
/* scancel: 0 (also when already gone), -EAGAIN (unknown), -EIO. */
int slurmcli_cancel(const struct slurm_tools *t, int64_t job_id);

/* Runs argv[0] (a path) with argv, at most timeout_ms; its stdout (up to outcap-1
 * bytes, NUL-terminated) into out, the start of its stderr into err. *status: the
 * exit status (-1 when killed or not run). Returns 0 when it ran to an end, -ETIMEDOUT
 * (killed), or a negative errno when it could not run. */
int slurmcli_run(const char *const *argv, int timeout_ms, char *out, size_t outcap, char *err,
		 size_t errlen, int *status);

#endif
