/* host_shell.c - a shell into a running job; see host_shell.h. */
#include "supervisor/host_shell.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "labd/gpudev.h"
#include "labd/log.h"
#include "labd/sandbox_shell.h"
#include "proto/proto.h"
#include "supervisor/host_pool.h"
#include "supervisor/jobenv.h"
#include "supervisor/pool.h"
#include "supervisor/worker.h"

/* sandbox_shell waits at most 5 s for the terminal; the worker's limit is above */
#define SHELL_WORKER_LIMIT_MS 10000LL
/* how often live shells are matched against their jobs */
#define SHELL_CHECK_MS 200

struct host_shells {
	struct {
		int fd; /* the worker's result socket; -1: free */
		pid_t worker;
		long long reply_id;
		long long pool_id, job_id;
		int pidfd; /* the shell's, once the worker sent it; -1 */
	} start[HOST_SHELL_STARTS_MAX];
	struct {
		int pidfd; /* -1: free */
		long long pool_id, job_id;
		char user[LAUNCH_NAME_MAX + 1];
	} live[HOST_SHELLS_LIVE_MAX];
};

/* What the worker says: first the shell's pidfd (SHELL_PID), then how it went with
 * the master beside it (SHELL_DONE). */
enum shell_said { SHELL_PID = 1, SHELL_DONE };
struct shell_result {
	int said;
	int ok;
	char message[SANDBOX_MESSAGE_MAX];
};

/* What the worker needs (copied into it by fork). */
struct shell_work {
	struct sandbox_handle h;
	struct sandbox_shell s;
	char user[LAUNCH_NAME_MAX + 1];
};

struct host_shells *host_shells_new(void)
{
	struct host_shells *hs = calloc(1, sizeof(*hs));

	for (int k = 0; hs && k < HOST_SHELL_STARTS_MAX; k++)
		hs->start[k].fd = hs->start[k].pidfd = -1;
	for (int k = 0; hs && k < HOST_SHELLS_LIVE_MAX; k++)
		hs->live[k].pidfd = -1;
	return hs;
}

void host_shells_free(struct host_shells *hs)
{
	if (!hs)
		return;
	for (int k = 0; k < HOST_SHELL_STARTS_MAX; k++) {
		if (hs->start[k].fd >= 0) {
			worker_end(hs->start[k].worker);
			close(hs->start[k].fd);
		}
		if (hs->start[k].pidfd >= 0)
			close(hs->start[k].pidfd);
	}
	/* live shells run on: the agent still ends them with their job */
	for (int k = 0; k < HOST_SHELLS_LIVE_MAX; k++)
		if (hs->live[k].pidfd >= 0)
			close(hs->live[k].pidfd);
	free(hs);
}

static struct pool_box *find(struct host *h, const char *user, long long pool_id)
{
	struct host_box *b;

	for (int i = 0; (b = host_next(h, &host_pool, &i));) {
		struct pool_box *p = (struct pool_box *)b;
		if (p->pool_id == pool_id && strcmp(b->user, user) == 0)
			return p;
	}
	return NULL;
}

/* Failure injection for tests: LABD_FAULT_SLOW_SHELL=<user>:<ms> delays the start
 * of that user's shells, so that their job can end meanwhile. */
static void fault_slow_shell(const char *user)
{
	const char *f = getenv("LABD_FAULT_SLOW_SHELL");
	const char *colon = f ? strchr(f, ':') : NULL;

	if (colon && (size_t)(colon - f) == strlen(user) && strncmp(f, user, strlen(user)) == 0) {
		long ms = strtol(colon + 1, NULL, 10);
		struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
	}
}

static int shell_worker(void *arg, int fd)
{
	struct shell_work *w = arg;
	struct shell_result r = {.said = SHELL_DONE};
	struct shell_result p = {.said = SHELL_PID, .ok = 1};
	struct sandbox_error err = {0};
	int master, pidfd;

	fault_slow_shell(w->user);
	if (sandbox_shell_start(&w->h, &w->s, &master, &pidfd, &err) < 0) {
		snprintf(r.message, sizeof(r.message), "%s", err.message);
		return worker_send(fd, &r, sizeof(r), -1) < 0 ? 2 : 1;
	}
	r.ok = 1;
	if (worker_send(fd, &p, sizeof(p), pidfd) < 0)
		return 2;
	return worker_send(fd, &r, sizeof(r), master) < 0 ? 2 : 0;
}

/* Adds kv unless its name is there already (the job's own entries come first). */
static int env_put(struct jobenv *env, const char *kv)
{
	size_t name = strcspn(kv, "=");

	for (size_t i = 0; i < env->n; i++)
		if (env->entries[i] && strncmp(env->entries[i], kv, name + 1) == 0)
			return 0;
	if (env->n + 1 >= JOBENV_MAX)
		return 0; /* full: the job's own entries matter more */
	if (!(env->entries[env->n] = strdup(kv)))
		return -ENOMEM;
	env->entries[++env->n] = NULL;
	return 0;
}

/* What the sandbox gives its command besides the job's environment (sandbox/start.c,
 * step env; launch.c): the GPUs it binds, the driver's libraries, and a terminal. */
static int sandbox_env(const struct labd_config *cfg, const struct pool_box *p,
		       struct jobenv *env)
{
	static const char *const fixed[] = {"LANG=C.UTF-8", "LOGNAME=labd", "SHELL=/bin/sh",
					    "TERM=xterm-256color"};
	/* at most SANDBOX_MAX_GPUS device ids in their text form and their commas */
	char list[SANDBOX_MAX_GPUS * GPUDEV_TEXT_MAX + 1] = "", index[SANDBOX_MAX_GPUS * 3 + 1] = "";
	char kv[sizeof(list) + 32], text[GPUDEV_TEXT_MAX];
	size_t off = 0, ioff = 0;
	int rc = 0;

	/* stand-in GPUs bind no device, and the sandbox names none (launch.c); inside, CUDA
	 * numbers the devices it can open from 0 (sandbox/start.c) */
	for (unsigned i = 0; i < p->b.n_gpus && i < SANDBOX_MAX_GPUS && !cfg->gpu_stand_in; i++) {
		gpudev_format(p->b.gpus[i], text, sizeof(text));
		off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s", i ? "," : "", text);
		ioff += (size_t)snprintf(index + ioff, sizeof(index) - ioff, "%s%u", i ? "," : "", i);
	}
	if (off) {
		snprintf(kv, sizeof(kv), "CUDA_VISIBLE_DEVICES=%s", index);
		rc = env_put(env, kv);
		snprintf(kv, sizeof(kv), "NVIDIA_VISIBLE_DEVICES=%s", list);
		rc = rc ? rc : env_put(env, kv);
	}
	if (!rc && p->b.n_gpus && cfg->driver_lib_dir[0])
		rc = env_put(env, "LD_LIBRARY_PATH=" SANDBOX_DRIVER_LIB_INSIDE);
	for (size_t i = 0; !rc && i < sizeof(fixed) / sizeof(fixed[0]); i++)
		rc = env_put(env, fixed[i]);
	return rc;
}

/* The job's own environment (jobenv.h) and the sandbox's; cwd its home. */
static int spawn(struct host *h, struct pool_box *p, long long cols, long long rows, pid_t *pid,
		 int *fd)
{
	static char *const bash[] = {"bash", "-i", NULL}, *const sh[] = {"sh", "-i", NULL};
	struct shell_work w = {.h = p->b.h};
	struct sandbox_spec defaults;
	struct jobenv env;
	char home[LAUNCH_NAME_MAX + 16];
	int64_t ncpus = p->cpus_milli ? (p->cpus_milli + 999) / 1000 : 1;
	int rc;

	snprintf(w.user, sizeof(w.user), "%s", p->b.user);
	if (jobenv_build(&p->job.spec, p->job.job_id, p->b.user, ncpus, &env) < 0)
		return -ENOMEM;
	if (sandbox_env(host_cfg(h), p, &env) < 0) {
		jobenv_free(&env);
		return -ENOMEM;
	}
	sandbox_spec_init(&defaults); /* pools run with the library's inner uid and nofile */
	snprintf(home, sizeof(home), "/home/%s", p->b.user);
	w.s = (struct sandbox_shell){.inner_uid = defaults.inner_uid,
				     .nofile = defaults.nofile,
				     .argv = bash,
				     .argv2 = sh,
				     .envp = env.entries,
				     .cwd = home,
				     .cols = (unsigned short)cols,
				     .rows = (unsigned short)rows};
	rc = worker_spawn(shell_worker, &w, SHELL_WORKER_LIMIT_MS, pid, fd);
	jobenv_free(&env);
	return rc;
}

json_t *host_shell_open(struct host *h, long long id, json_t *msg)
{
	struct host_shells *hs = host_pool_shells(h);
	struct pool_box *p = find(h, proto_str(msg, "user"), proto_int(msg, "pool_id"));
	long long job_id = proto_int(msg, "job_id");
	int k = 0, rc;

	if (!p || p->b.state != H_RUNNING)
		return proto_error(id, "not_found", "no such pool");
	/* only while the command runs: before it, nothing of the job is there to see;
	 * after it, the agent is killing everything of the user's */
	if (p->job.step != J_TRAINING || p->job.job_id != job_id)
		return proto_error(id, "job_not_running", "that job is not training in this pool");
	while (hs && k < HOST_SHELL_STARTS_MAX && hs->start[k].fd >= 0)
		k++;
	if (!hs || k == HOST_SHELL_STARTS_MAX)
		return proto_error(id, "busy", "too many shells starting at once");
	rc = spawn(h, p, proto_int(msg, "cols"), proto_int(msg, "rows"), &hs->start[k].worker,
		   &hs->start[k].fd);
	if (rc < 0)
		return proto_error(id, "busy", "the shell's worker could not start");
	hs->start[k].reply_id = id;
	hs->start[k].pool_id = p->pool_id;
	hs->start[k].job_id = job_id;
	log_info("job %lld of %s: starting a shell (worker %d)", job_id, p->b.user,
		 (int)hs->start[k].worker);
	return NULL;
}

int host_shells_pollfds(struct host_shells *hs, struct pollfd *fds, int max)
{
	int n = 0;

	for (int k = 0; hs && k < HOST_SHELL_STARTS_MAX && n < max; k++)
		if (hs->start[k].fd >= 0)
			fds[n++] = (struct pollfd){.fd = hs->start[k].fd, .events = POLLIN};
	return n;
}

/* Whether the job a shell was opened into still trains in its pool. */
static bool still_training(struct host *h, const char *user, long long pool_id, long long job_id)
{
	struct pool_box *p = find(h, user, pool_id);

	return p && p->b.state == H_RUNNING && p->job.step == J_TRAINING &&
	       p->job.job_id == job_id;
}

/* Keeps a started shell's pidfd (consumed) to end it with its job; one the table
 * has no room for is ended now. */
static bool keep_live(struct host_shells *hs, int pidfd, long long pool_id, long long job_id,
		      const char *user)
{
	for (int k = 0; k < HOST_SHELLS_LIVE_MAX; k++) {
		if (hs->live[k].pidfd >= 0)
			continue;
		hs->live[k].pidfd = pidfd;
		hs->live[k].pool_id = pool_id;
		hs->live[k].job_id = job_id;
		snprintf(hs->live[k].user, sizeof(hs->live[k].user), "%s", user);
		return true;
	}
	syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	close(pidfd);
	return false;
}

/* The worker's last word in r (and the master): answer the web process. The job
 * must still train: one that ended while the shell started (the agent's kill of
 * everything the user runs came before the shell was the user's) takes it along. */
static void answer(struct host *h, struct host_shells *hs, int k, ssize_t n,
		   struct shell_result *r, int master)
{
	long long job_id = hs->start[k].job_id;
	const char *user = NULL;
	struct host_box *b;
	bool training, ok;

	for (int i = 0; (b = host_next(h, &host_pool, &i));)
		if (((struct pool_box *)b)->pool_id == hs->start[k].pool_id)
			user = b->user;
	training = user && still_training(h, user, hs->start[k].pool_id, job_id);
	ok = training && n == (ssize_t)sizeof(*r) && r->ok && master >= 0 && hs->start[k].pidfd >= 0;
	if (!training)
		snprintf(r->message, sizeof(r->message), "the job ended while its shell started");
	if (ok && keep_live(hs, hs->start[k].pidfd, hs->start[k].pool_id, job_id, user)) {
		hs->start[k].pidfd = -1;
		log_info("job %lld: shell started", job_id);
		host_emit_fd(h, proto_ok(hs->start[k].reply_id), master);
	} else {
		r->message[sizeof(r->message) - 1] = '\0';
		log_warn("job %lld: no shell: %s", job_id,
			 n == -ETIMEDOUT ? "its worker ran past its time limit"
			 : r->message[0] ? r->message : "its worker died");
		host_emit(h, proto_error(hs->start[k].reply_id,
					 training ? "shell_failed" : "job_not_running",
					 r->message[0] ? r->message : "the shell did not start"));
	}
	if (hs->start[k].pidfd >= 0) { /* not kept: it ends now */
		syscall(SYS_pidfd_send_signal, hs->start[k].pidfd, SIGKILL, NULL, 0);
		close(hs->start[k].pidfd);
		hs->start[k].pidfd = -1;
	}
	if (master >= 0)
		close(master); /* the web process holds its own copy now (or nobody) */
	close(hs->start[k].fd);
	hs->start[k].fd = -1;
}

bool host_shells_on_fd(struct host *h, struct host_shells *hs, int fd)
{
	for (int k = 0; hs && k < HOST_SHELL_STARTS_MAX; k++) {
		if (hs->start[k].fd < 0 || hs->start[k].fd != fd)
			continue;
		for (;;) {
			struct shell_result r = {0};
			int passed = -1;
			ssize_t n = worker_recv(fd, &r, sizeof(r), &passed);
			if (n == -EAGAIN)
				return true;
			if (n == (ssize_t)sizeof(r) && r.said == SHELL_PID && passed >= 0 &&
			    hs->start[k].pidfd < 0) {
				hs->start[k].pidfd = passed;
				continue;
			}
			if (n == (ssize_t)sizeof(r) && r.said != SHELL_DONE) {
				if (passed >= 0)
					close(passed);
				n = 0; /* out of turn: the worker broke */
			}
			answer(h, hs, k, n, &r, passed);
			return true;
		}
	}
	return false;
}

long long host_shells_tick(struct host *h, struct host_shells *hs, long long now)
{
	bool any = false;

	for (int k = 0; hs && k < HOST_SHELLS_LIVE_MAX; k++) {
		struct pollfd pf = {hs->live[k].pidfd, POLLIN, 0};
		if (pf.fd < 0)
			continue;
		/* a pidfd reads as ready once its process is gone */
		if (poll(&pf, 1, 0) == 0 && still_training(h, hs->live[k].user, hs->live[k].pool_id,
							   hs->live[k].job_id)) {
			any = true;
			continue;
		}
		if (!pf.revents) {
			log_info("job %lld: its shell ends with it", hs->live[k].job_id);
			syscall(SYS_pidfd_send_signal, pf.fd, SIGKILL, NULL, 0);
		}
		close(pf.fd);
		hs->live[k].pidfd = -1;
	}
	return any ? now + SHELL_CHECK_MS : -1;
}
