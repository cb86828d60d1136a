/* slurmint.h - what slurm.c (the backend's operations and the nodes' events) and
 * slurmpoll.c (the poll thread's pass) share. Internal to backend/.
 *
 * One holder per runtime or pool: the Slurm job that holds its allocation. Any thread
 * may add a holder or set its flags (under lock); only the poll thread removes one, so
 * the poll thread keeps pointers to holders across the calls it makes unlocked. No
 * lock is held across a Slurm tool or a node call: a node's events take the lock on
 * that node's reader thread, which also carries the call's reply. */
#ifndef LABD_SLURMINT_H
#define LABD_SLURMINT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/nodes.h"
#include "backend/slurmcli.h"
#include "backend/slurmlogs.h"
#include "config/config.h"

#define SLURM_TOKEN_MAX 128
#define SLURM_IMAGE_MAX 64
#define SLURM_NODES_MAX 256

enum holder_phase {
	H_SUBMIT,  /* to be submitted (or a submit whose answer was lost: found by name) */
	H_QUEUED,  /* submitted: pending, or running but not yet started on its node */
	H_ON_NODE, /* the node's supervisor took the start */
};

struct holder {
	struct holder *next;
	bool pool;
	int64_t id; /* runtime or pool id */
	char user[SLURM_USER_MAX];
	int64_t user_id;
	int64_t job_id; /* 0 until Slurm named it */
	enum holder_phase phase;
	bool submit_lost;  /* sbatch's answer was lost: look for the name first */
	bool have_request; /* false for a holder adopted from squeue after a restart */
	char kind[8];
	char token[SLURM_TOKEN_MAX];
	int64_t deadline_s;
	struct box_shape shape;
	int instances; /* a pool of a job on several hosts: its node count; else 1 */
	char image[SLURM_IMAGE_MAX];
	char node[LINK_NAME_MAX + 1];
	long long node_wait_ms; /* when it began to wait for its node's link, 0 */
	bool ready;
	bool stop_asked; /* labd asked for its end: CANCELLED reads as requested */
	char stop_reason[SLURM_TEXT_MAX];
	bool end_passed; /* its end went to the web process; only the scancel is left */
	bool node_lost;  /* its node's supervisor does not hold it (a stop found none) */
	bool slurm_ended; /* Slurm ended it (sstate final) or no longer knows it (gone) */
	bool gone;
	bool verified;    /* adopted: its node's list holds it */
	char sstate[SLURM_STATE_MAX], sreason[SLURM_REASON_MAX];
	int64_t start_at;
	int64_t placed_at; /* epoch s when its node took the start, 0 before */
	int64_t running_job; /* a pool's job that runs (its log is pulled), 0 when none */
};

/* A node as its last hello described it (kept after its link ends). */
struct known_node {
	struct node_info info;
	bool up;
};

struct slurm {
	struct backend base;
	const struct labd_config *cfg;
	struct backend_events ev;
	struct slurm_tools tools;
	struct nodes *nodes;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool poked, stopping;
	pthread_t poller;
	struct holder *holders;
	struct slurmlogs *logs; /* the jobs' logs pulled from their nodes */
	struct known_node known[SLURM_NODES_MAX];
	size_t n_known;
	/* jobs labd cancelled lately: squeue may show them running a moment longer,
	 * and they must not be adopted again (the poll thread's alone) */
	int64_t cancelled[64];
	unsigned n_cancelled;
	/* a squeue answer was applied since this process started: until then the
	 * holders of a previous process are not adopted yet and the list is not told */
	bool queue_seen;
};

/* Under s->lock: the holder of (pool, id), NULL when none. */
struct holder *slurm_find(struct slurm *s, bool pool, int64_t id);
/* Under s->lock: the node's last hello, NULL when never seen. */
struct known_node *slurm_known(struct slurm *s, const char *name);
/* Wakes the poll thread for a pass now. */
void slurm_poke(struct slurm *s);
/* Passes a holder's end to the web process (no lock held). */
void slurm_pass_end(struct slurm *s, const struct holder *h, const char *cause, bool failed,
		    const char *reason);

/* Pulls what is new of job_id's log from node (final: the whole rest, then forgets its
 * offset and the pool's running job); nothing when the node was never seen. No lock
 * held. */
void slurm_pull_log(struct slurm *s, const char *node, int64_t pool_id, int64_t job_id,
		    bool final);

/* The poll thread (slurmpoll.c). */
void *slurm_poll_loop(void *arg);

#endif
