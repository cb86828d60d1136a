/* launch.h - how the supervisor builds a runtime's sandbox: the Jupyter
 * command, the sandbox spec from [runtime]/[sandbox] settings, the start and
 * the teardown in forked workers (worker.h), and the readiness probe. */
#ifndef LABD_LAUNCH_H
#define LABD_LAUNCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config/config.h"
#include "labd/gpucaps.h"
#include "labd/sandbox.h"
#include "supervisor/sizecap.h"

struct labd_config;

#define LAUNCH_NAME_MAX 32
#define LAUNCH_PATH_MAX 1024
#define LAUNCH_ENV_MAX 512 /* one K=V of a runtime's environment */

struct launch_request {
	char user[LAUNCH_NAME_MAX + 1];
	uint32_t user_id;
	char token[65];
	unsigned gpus[SANDBOX_MAX_GPUS]; /* device ids (labd/gpudev.h) */
	unsigned n_gpus;
	/* each device's uuid when the start named them (CUDA_VISIBLE_DEVICES), else "" */
	char gpu_uuids[SANDBOX_MAX_GPUS][GPUCAPS_UUID_MAX + 1];
	const char *jupyter; /* "lab", "notebook" or "server" */
	bool network;        /* egress ([network]); else loopback only */
	uint64_t egress_bytes_per_s; /* each way, 0 = no limit */
	struct sizecap_sizes sizes; /* checked against the machine caps (sizecap.h) */
	/* the sandbox's root: an [images] folder the supervisor chose from the plan's
	 * image name (from_image), else [runtime] image */
	char root[CONFIG_PATH_MAX];
	bool from_image;
	/* a pool's host of a job on several nodes (docs/slurm.md): the peer interface
	 * (peer_addr, peers, and peer_via the node's own address on the cluster network,
	 * the host part of [node] data_listen; all "" for none) and a scratch home */
	char peer_addr[16];
	char peers[1024];
	char peer_via[64];
	bool scratch_home;
};

/* What a start worker reports (launch_result reads it): the handle, or why it
 * failed; sent with the handle's status fd. */
struct launch_report {
	int ok;
	char error[200];
	struct sandbox_handle h;
};

/* Where a runtime image holds its JupyterLab env (deploy/image/build). */
#define LAUNCH_IMAGE_ENV "/opt/labd/jupyter"

/* The limits every sandbox of rq gets, runtime or job pool alike: home, memory,
 * CPUs, pids, /tmp, image, hidden places, GPUs, network and egress (home and
 * hidden: LAUNCH_PATH_MAX / CONFIG_PATH_MAX buffers the spec points into). The
 * caller adds the command, its environment and its binds. */
void launch_fill_limits(const struct labd_config *cfg, const char *state_dir,
			const struct launch_request *rq, struct sandbox_spec *s, char *home,
			char *hidden);
/* Failure injection for tests: LABD_FAULT_SLOW_START=<user>:<ms> delays that
 * user's sandbox build (a runtime's or a pool's), standing in for a slow mkfs or
 * image step. */
void launch_fault_slow_start(const char *user);

/* Forks a worker that builds and starts the sandbox; read its result with
 * launch_result once *fd is readable. *log_fd (owned by the caller,
 * non-blocking) reads Jupyter's stdout and stderr (handed to its keeper: runkeeper.h). 0 or a negative
 * errno. */
int launch_spawn(const struct labd_config *cfg, const char *state_dir,
		 const struct launch_request *rq, pid_t *pid, int *fd, int *log_fd);
/* The worker's result: 0 with *h filled (the init is no child of ours; its
 * status pipe comes along), -EAGAIN when not there yet, or -EIO with the
 * failing step's message in err. */
int launch_result(int fd, struct sandbox_handle *h, char *err, size_t errlen);
/* Forks a worker that tears the sandbox down (kills what is left, unmounts the
 * home, removes cgroups); *fd reads EOF when it is done. h is cleared. */
int launch_teardown(struct sandbox_handle *h, pid_t *pid, int *fd);

/* 1 when Jupyter's socket in run_dir accepts a connection, else 0. The socket
 * lives where the user can write, so it is opened without following links
 * and must be a socket owned by the sandbox's uid. */
int launch_probe(const char *run_dir, uid_t owner);

/* The cgroup (under each hierarchy) sandboxes go in: "labd", or on a node its
 * [node] cgroup_parent (node_prepare fills labd-<name>), so two nodes on one machine
 * never touch each other's. */
const char *launch_cgroup_parent(const struct labd_config *cfg);

/* The runtime dirs of user: runtimes/<user> and the run dir bound at /run/labd. */
void launch_run_dir(const char *state_dir, const char *user, char *out, size_t len);
/* The labd user's group, which owns runtimes/ and the Jupyter logs: labd-web
 * traverses to the sockets and reads the logs through it. 0 when unknown. */
gid_t launch_labd_gid(const struct labd_config *cfg);
/* runtimes/<user>/jupyter.log: where the supervisor writes Jupyter's output. */
void launch_log_path(const char *state_dir, const char *user, char *out, size_t len);
/* The endpoint labd-web reaches the runtime at, relative to the state dir. */
void launch_endpoint(const char *user, char *out, size_t len);

/* The Jupyter argv for a user (pure; exposed for tests). kind is "lab",
 * "notebook" or "server"; env is labd's Jupyter environment that holds
 * bin/jupyter-<kind> (run by full path), or NULL for `jupyter <kind>` from the
 * image's PATH. The strings live in bufs[n][256]; argv is NULL-terminated.
 * Returns argc. */
int launch_jupyter_argv(const char *kind, const char *user, const char *env, char *argv[16],
			char bufs[][256]);
/* The runtime's "PATH=..." entry: ~/.local/bin (pip install --user), then
 * <env>/bin when env is not NULL, then the usual system dirs. */
void launch_path_env(const char *user, const char *env, char *out, size_t len);
/* Whether env (may be NULL or "") holds an executable bin/jupyter-<kind>. */
bool launch_env_has(const char *env, const char *kind);
/* [runtime] jupyter_env when it serves this start: set, the image is the
 * host's root, and it holds jupyter-<kind>; else NULL (the image's jupyter). */
const char *launch_env_for(const struct labd_config *cfg, const char *kind);
/* LAUNCH_IMAGE_ENV when the image at root holds bin/jupyter-<kind> there, else NULL. */
const char *launch_image_env(const char *root, const char *kind);
/* Chooses "lab", "notebook" or "server" for [runtime] jupyter = auto: the
 * first that env (NULL: none) holds, else the first found in the image; NULL
 * when none is installed. Another setting is returned as it is. */
const char *launch_pick_jupyter(const char *setting, const char *image, const char *env);

#endif
