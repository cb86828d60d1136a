/* child.h - what the sandbox child (pid 1 of the new namespaces) is given.
 * Internal to sandbox/: the parent fills it before clone, the child only reads it. */
#ifndef LABD_SANDBOX_CHILD_H
#define LABD_SANDBOX_CHILD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "labd/sandbox.h"
#include "sandbox/timing.h"

#define CHILD_MAX_DEVS 64 /* 6 standard, 3 control, 3 per MIG instance */
#define CHILD_MAX_ENV 64
#define CHILD_MAX_BINDS (SANDBOX_MAX_RO_BINDS + SANDBOX_MAX_BINDS)

struct child_dev {
	char src[SANDBOX_PATH_MAX]; /* host node, checked to be a char device */
	char name[64];              /* under /dev inside */
};

struct child_args {
	int sync_fd;   /* read: one byte when maps and cgroup are in place */
	int err_fd;    /* write, O_CLOEXEC: "<step>\0<what failed>" (child_report), EOF on exec */
	int status_fd; /* write: the command's wait status (int) */
	int filter_fd; /* memfd: the seccomp program, complete once wait-go returns */
	int stdio[3];  /* the caller's fds for 0, 1, 2, or SANDBOX_FD_NULL */
	uid_t inner_uid;
	const char *user;
	char home_src[SANDBOX_PATH_MAX]; /* host mount of the home, "" for none */
	char home_dst[SANDBOX_PATH_MAX]; /* "/home/<user>" */
	const char *image;
	/* image's tree, cloned recursively by the starter in the host's namespace */
	int root_fd;
	const char *run_dir;
	const char *driver_lib_dir;
	char resolv_conf[SANDBOX_PATH_MAX]; /* host file bound at /etc/resolv.conf, "" = none */
	const char *masks[SANDBOX_MAX_MASKS + SANDBOX_MAX_HIDDEN + 8];
	unsigned n_masks;
	/* the spec's ro_binds (src = dst, ro) then its binds */
	struct sandbox_bind binds[CHILD_MAX_BINDS];
	unsigned n_binds;
	struct child_dev devs[CHILD_MAX_DEVS];
	unsigned n_devs;
	bool gpu;
	/* a MIG instance's capability files (its GPU and compute instance), relative to
	 * caps_dir: copied into the driver's /proc copy inside, where CUDA looks for them */
	const char *caps_dir;
	char caps_files[SANDBOX_MAX_GPUS * 2][48];
	unsigned n_caps_files;
	uint64_t tmp_bytes, shm_bytes, nofile;
	char *const *argv;
	char *envp[CHILD_MAX_ENV + 1];
	const char *cwd;
	bool die_with_parent;
	pid_t parent;
	struct timing_child *times; /* shared with the parent: each step's end, or NULL */
};

/* Runs in the clone()d child: its steps (child.c) wait for the parent, build the
 * filesystem, drop privileges, and fork the command; then it stays as init.  A failing
 * step writes its report to err_fd and exits 127.  Never returns. */
_Noreturn void child_main(const struct child_args *a);
/* The name of the child's step i (in order), NULL past the last: timing.h's table. */
const char *child_step_name(size_t i);
/* The parent's side: parses a report read from err_fd (len bytes) into the step's name
 * and its message.  Pure. */
void child_report_parse(const char *buf, size_t len, char *step, size_t step_size, char *msg,
			size_t msg_size);
struct mount_fds {
	int root, home, run, driver, resolv; /* detached mount trees (open_tree), or -1 */
	int binds[CHILD_MAX_BINDS];
	int devs[CHILD_MAX_DEVS];
};

/* Clones every host tree the sandbox needs while the child still has the host root's
 * file access (mounts.c).  0, or -1 with a message in msg. */
int mounts_prepare(const struct child_args *a, struct mount_fds *fds, char *msg, size_t msglen);
/* Builds the new root from fds (consumed) as the inner uid and pivots into it.
 * 0, or -1 with a message in msg. */
int mounts_build(const struct child_args *a, struct mount_fds *fds, char *msg, size_t msglen);

#endif
