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
#include "backend/slurmaddrs.h"
#include "backend/slurmcli.h"
#include "backend/slurmlogs.h"
#include "config/config.h"
#include "proto/jobhosts.h"

#define SLURM_TOKEN_MAX 128
#define SLURM_IMAGE_MAX 64
#define SLURM_NODES_MAX 256

/* The rendezvous port on algo-1's peer address (MASTER_PORT): each host's sandbox
 * has a network namespace and an address of its own, so one fixed port is free. */
#define SLURM_MASTER_PORT 29500

/* One host of a pool of a job on several nodes (docs/slurm.md "Jobs on several
 * nodes"): hosts[0] is algo-1. */
struct holder_host {
	char node[LINK_NAME_MAX + 1];
	char addr[SLURMADDRS_TEXT_MAX]; /* its peer address */
	bool ready;                     /* its node said pool_ready */
	bool ended;                     /* its sandbox ended (pool_ended) */
	bool exited;                    /* the running job's command ended there */
};

/* algo-1's job_exited, kept until every host's command ended with 0. */
struct holder_exit {
	char kind[16];
	int code, signal;
	int64_t at_ms;
	char reason[BACKEND_REASON_MAX];
	char failure[1100];
	bool home_full;
};

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
	/* a pool's job now (job_run), whose log the poll thread pulls; 0: none */
	int64_t run_job;
	/* ---- a pool of a job on several hosts (instances > 1) ---- */
	uint32_t peer_first; /* its hosts' peer addresses, a run of instances (host order); */
	unsigned peer_n;     /* 0 until taken */
	char nodelist[SLURM_NODELIST_MAX]; /* the allocation's NodeList */
	struct holder_host *hosts;         /* instances of them once started; else NULL */
	int64_t run_grace_s;               /* the running job's grace_s */
	bool exit_passed;                  /* the running job's job_exited went to the web */
	bool stop_others;                  /* its job is to be stopped where it still runs */
	/* a pool stop that waits for those hosts' jobs to end (their grace), until then */
	long long stop_wait_until_ms;
	struct holder_exit exit; /* algo-1's, once hosts[0].exited */
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
	struct known_node known[SLURM_NODES_MAX];
	size_t n_known;
	/* jobs labd cancelled lately: squeue may show them running a moment longer,
	 * and they must not be adopted again (the poll thread's alone) */
	int64_t cancelled[64];
	unsigned n_cancelled;
	/* a squeue answer was applied since this process started: until then the
	 * holders of a previous process are not adopted yet and the list is not told */
	bool queue_seen;
	struct slurmaddrs addrs; /* [slurm] job_addresses (under lock) */
	struct slurmlogs *logs;  /* the jobs' logs pulled to the head */
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

/* Under s->lock: the index of node among h's hosts, -1 when none. */
int slurm_host_of(const struct holder *h, const char *node);
/* Under s->lock: the nodes a started holder runs on, into names: its node, or each
 * host's whose sandbox did not end. How many. */
int slurm_holder_nodes(const struct holder *h, char names[][LINK_NAME_MAX + 1]);
/* Under s->lock: whether a host of h (a pool on several hosts) still runs the job's
 * command in its sandbox. */
bool slurm_hosts_running(const struct holder *h);
/* Stops the runtime or pool (user, id) on each of the n named nodes whose link is up
 * (no lock held). How many said they hold no such sandbox (-ENOENT). */
int slurm_stop_on(struct slurm *s, bool pool, const char *user, int64_t id,
		  char names[][LINK_NAME_MAX + 1], int n, const char *reason);
/* Under s->lock: the node's data port ("HOST:PORT") into out, "" when unknown or its
 * link is down. */
void slurm_node_data(struct slurm *s, const char *node, char *out, size_t outlen);

/* The poll thread (slurmpoll.c). */
void *slurm_poll_loop(void *arg);

#endif
