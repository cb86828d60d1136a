/* poollaunch.c - building a job pool's sandbox; see poollaunch.h. */
#include "supervisor/poollaunch.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "labd/log.h"
#include "supervisor/homes.h"
#include "supervisor/worker.h"

#define POOL_CMD_PIPE_BYTES (1 << 20)

struct pool_build {
	const struct labd_config *cfg;
	const char *state_dir;
	const struct launch_request *rq;
	long long pool_id;
	int child_fds[3]; /* the sandbox's stdin, stdout, stderr */
	int parent_fds[3];
};

void poollaunch_dir(const char *state_dir, long long pool_id, char *out, size_t len)
{
	snprintf(out, len, "%s/pools/%lld", state_dir, pool_id);
}

void poollaunch_record_path(const char *state_dir, long long pool_id, char *out, size_t len)
{
	snprintf(out, len, "%s/pools/%lld/record.json", state_dir, pool_id);
}

/* In the worker, once the sandbox runs: a record saying the pool is to be ended,
 * which the supervisor replaces when it takes the report. A supervisor that dies
 * before (the worker dies with it) leaves this, so the next one tears the
 * sandbox down instead of leaking it. */
static void record_started(const struct pool_build *j, const char *sandbox_id)
{
	char path[LAUNCH_PATH_MAX], tmp[LAUNCH_PATH_MAX + 8];
	json_t *gpus = json_array();

	for (unsigned i = 0; i < j->rq->n_gpus; i++)
		json_array_append_new(gpus, json_integer(j->rq->gpus[i]));
	json_t *r = json_pack("{s:s,s:I,s:I,s:s,s:o,s:{s:s,s:s,s:b}}", "user", j->rq->user,
			      "user_id", (json_int_t)j->rq->user_id, "pool_id",
			      (json_int_t)j->pool_id, "id", sandbox_id, "gpus", gpus, "ending",
			      "cause", "gone", "reason",
			      "the supervisor restarted while the pool started", "failed", 1);
	poollaunch_record_path(j->state_dir, j->pool_id, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (!r || json_dump_file(r, tmp, JSON_COMPACT) < 0 || rename(tmp, path) < 0)
		log_warn("could not save %s", path);
	json_decref(r);
}

void poollaunch_ml_dir(const char *state_dir, long long pool_id, char *out, size_t len)
{
	snprintf(out, len, "%s/pools/%lld/ml", state_dir, pool_id);
}

int poollaunch_libexec_dir(char *out, size_t len)
{
	char exe[LAUNCH_PATH_MAX], agent[LAUNCH_PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return -errno;
	exe[n] = '\0';
	const char *dir = dirname(exe); /* once: dirname may change exe */
	/* beside labd ($(BUILD)/libexec/labd), or one up: the test programs in $(BUILD)/tests,
	 * and $(PREFIX)/sbin/../libexec/labd installed. labd's own folder only: the
	 * whole $(PREFIX)/libexec may hold other software, none of it a job's to see. */
	for (int up = 0; up < 2; up++) {
		char real[PATH_MAX];
		snprintf(agent, sizeof(agent), "%s%s/libexec/labd/labd-jobagent", dir,
			 up ? "/.." : "");
		/* the sandbox binds canonical paths only */
		if (access(agent, X_OK) == 0 && realpath(agent, real)) {
			snprintf(out, len, "%s", dirname(real));
			return 0;
		}
	}
	return -ENOENT;
}

static int mkdir_root(const char *path, mode_t mode)
{
	struct stat st;

	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return -errno;
	if (lstat(path, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != 0)
		return -ENOTDIR;
	return chmod(path, mode) < 0 ? -errno : 0;
}

int poollaunch_make_ml(const char *state_dir, long long pool_id)
{
	static const char *const sub[] = {"",	     "/input",	"/input/config", "/input/data",
					  "/model", "/output", "/checkpoints"};
	char dir[LAUNCH_PATH_MAX], path[LAUNCH_PATH_MAX + 32];
	int rc;

	snprintf(dir, sizeof(dir), "%s/pools", state_dir);
	if ((rc = mkdir_root(dir, 0700)) < 0)
		return rc;
	poollaunch_dir(state_dir, pool_id, dir, sizeof(dir));
	if ((rc = mkdir_root(dir, 0700)) < 0)
		return rc;
	poollaunch_ml_dir(state_dir, pool_id, dir, sizeof(dir));
	for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", dir, sub[i]);
		if ((rc = mkdir_root(path, 0755)) < 0)
			return rc;
	}
	return 0;
}

void poollaunch_remove(const char *state_dir, long long pool_id)
{
	char dir[LAUNCH_PATH_MAX], cmd[LAUNCH_PATH_MAX + 32];

	poollaunch_dir(state_dir, pool_id, dir, sizeof(dir));
	/* root's own tree of plain dirs and files; nothing of the user's is inside */
	snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", dir);
	if (access(dir, F_OK) == 0 && system(cmd) != 0)
		log_warn("could not remove %s", dir);
}

static int start_worker(void *arg, int fd)
{
	const struct pool_build *j = arg;
	struct launch_report rep = {0};
	char home[LAUNCH_PATH_MAX], hidden[CONFIG_PATH_MAX], libexec[LAUNCH_PATH_MAX];
	char ml[LAUNCH_PATH_MAX];
	char *argv[] = {POOL_AGENT_INSIDE, NULL};
	struct sandbox_spec spec;
	struct sandbox_error err = {0};
	int rc;

	for (int i = 0; i < 3; i++)
		close(j->parent_fds[i]);
	launch_fault_slow_start(j->rq->user);
	if (!j->rq->scratch_home &&
	    homes_adopt_named(j->cfg, j->state_dir, j->rq->user, j->rq->user_id) < 0)
		snprintf(rep.error, sizeof(rep.error), "step home: the home named by user name could not move");
	else if ((rc = poollaunch_make_ml(j->state_dir, j->pool_id)) < 0)
		snprintf(rep.error, sizeof(rep.error), "step pool dir: %s", strerror(-rc));
	else if ((rc = poollaunch_libexec_dir(libexec, sizeof(libexec))) < 0)
		snprintf(rep.error, sizeof(rep.error), "step agent: %s", strerror(-rc));
	if (rep.error[0])
		return worker_send(fd, &rep, sizeof(rep), -1) < 0 ? 2 : 1;
	launch_fill_limits(j->cfg, j->state_dir, j->rq, &spec, home, hidden);
	poollaunch_ml_dir(j->state_dir, j->pool_id, ml, sizeof(ml));
	spec.binds[spec.n_binds++] = (struct sandbox_bind){libexec, POOL_LIBEXEC_INSIDE, true};
	spec.binds[spec.n_binds++] = (struct sandbox_bind){ml, POOL_ML_INSIDE, true};
	spec.argv = argv;
	spec.stdin_fd = j->child_fds[0];
	spec.stdout_fd = j->child_fds[1];
	spec.stderr_fd = j->child_fds[2];
	if (sandbox_start_err(&spec, &rep.h, &err) < 0) {
		snprintf(rep.error, sizeof(rep.error), "%.199s",
			 err.message[0] ? err.message : "the sandbox could not be built");
		return worker_send(fd, &rep, sizeof(rep), -1) < 0 ? 2 : 1;
	}
	record_started(j, rep.h.id);
	rep.ok = 1;
	return worker_send(fd, &rep, sizeof(rep), rep.h.status_fd) < 0 ? 2 : 0;
}

static void close_all(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

int poollaunch_spawn(const struct labd_config *cfg, const char *state_dir,
		     const struct launch_request *rq, long long pool_id, pid_t *pid, int *fd,
		     struct pool_pipes *pipes)
{
	struct pool_build j = {cfg, state_dir, rq, pool_id, {-1, -1, -1}, {-1, -1, -1}};
	int p[2], rc = 0;

	/* stdin: the child reads p[0]; stdout/stderr: the child writes p[1] */
	for (int i = 0; i < 3 && rc == 0; i++) {
		if (pipe2(p, O_CLOEXEC) < 0) {
			rc = -errno;
			break;
		}
		j.child_fds[i] = i == 0 ? p[0] : p[1];
		j.parent_fds[i] = i == 0 ? p[1] : p[0];
		if (fcntl(j.parent_fds[i], F_SETFL, O_NONBLOCK) < 0)
			rc = -errno;
		/* a run command (argv, env, hyperparameters) fits the pipe in one write */
		if (i == 0 && rc == 0 && fcntl(p[1], F_SETPIPE_SZ, POOL_CMD_PIPE_BYTES) < 0)
			log_warn("pool %lld: the agent's command pipe stays small: %s", pool_id,
				 strerror(errno));
	}
	if (rc == 0)
		rc = worker_spawn(start_worker, &j, WORKER_HOME_LIMIT_MS, pid, fd);
	close_all(j.child_fds, 3); /* the worker and the sandbox hold them now */
	if (rc < 0) {
		close_all(j.parent_fds, 3);
		return rc;
	}
	*pipes = (struct pool_pipes){j.parent_fds[0], j.parent_fds[1], j.parent_fds[2]};
	return 0;
}
