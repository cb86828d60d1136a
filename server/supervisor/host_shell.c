/* host_shell.c - a shell into a running job; see host_shell.h. */
#include "supervisor/host_shell.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "labd/log.h"
#include "labd/sandbox_shell.h"
#include "proto/proto.h"
#include "supervisor/host_pool.h"
#include "supervisor/jobenv.h"
#include "supervisor/pool.h"
#include "supervisor/worker.h"

/* sandbox_shell waits at most 5 s for the terminal; the worker's limit is above */
#define SHELL_WORKER_LIMIT_MS 10000LL

struct host_shells {
	struct {
		int fd; /* the worker's result socket; -1: free */
		pid_t worker;
		long long reply_id;
		long long job_id;
	} start[HOST_SHELL_STARTS_MAX];
};

/* What the worker says; the master travels beside it. */
struct shell_result {
	int ok;
	char message[SANDBOX_MESSAGE_MAX];
};

/* What the worker needs (copied into it by fork). */
struct shell_work {
	struct sandbox_handle h;
	struct sandbox_shell s;
};

struct host_shells *host_shells_new(void)
{
	struct host_shells *hs = calloc(1, sizeof(*hs));

	for (int k = 0; hs && k < HOST_SHELL_STARTS_MAX; k++)
		hs->start[k].fd = -1;
	return hs;
}

void host_shells_free(struct host_shells *hs)
{
	if (!hs)
		return;
	for (int k = 0; k < HOST_SHELL_STARTS_MAX; k++)
		if (hs->start[k].fd >= 0) {
			worker_end(hs->start[k].worker);
			close(hs->start[k].fd);
		}
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

static int shell_worker(void *arg, int fd)
{
	struct shell_work *w = arg;
	struct shell_result r = {0};
	struct sandbox_error err = {0};
	int master;

	if (sandbox_shell_start(&w->h, &w->s, &master, &err) < 0) {
		snprintf(r.message, sizeof(r.message), "%s", err.message);
		return worker_send(fd, &r, sizeof(r), -1) < 0 ? 2 : 1;
	}
	r.ok = 1;
	return worker_send(fd, &r, sizeof(r), master) < 0 ? 2 : 0;
}

/* The job's own environment (jobenv.h) and a terminal's TERM; cwd its home. */
static int spawn(struct pool_box *p, long long cols, long long rows, pid_t *pid, int *fd)
{
	static char *const bash[] = {"bash", "-i", NULL}, *const sh[] = {"sh", "-i", NULL};
	struct shell_work w = {.h = p->b.h};
	struct sandbox_spec defaults;
	struct jobenv env;
	char home[LAUNCH_NAME_MAX + 16];
	int64_t ncpus = p->cpus_milli ? (p->cpus_milli + 999) / 1000 : 1;
	int rc;

	if (jobenv_build(&p->job.spec, p->job.job_id, p->b.user, ncpus, &env) < 0)
		return -ENOMEM;
	if (env.n + 2 < JOBENV_MAX && !(env.entries[env.n++] = strdup("TERM=xterm-256color"))) {
		jobenv_free(&env);
		return -ENOMEM;
	}
	env.entries[env.n] = NULL;
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
	rc = spawn(p, proto_int(msg, "cols"), proto_int(msg, "rows"), &hs->start[k].worker,
		   &hs->start[k].fd);
	if (rc < 0)
		return proto_error(id, "busy", "the shell's worker could not start");
	hs->start[k].reply_id = id;
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

bool host_shells_on_fd(struct host *h, struct host_shells *hs, int fd)
{
	for (int k = 0; hs && k < HOST_SHELL_STARTS_MAX; k++) {
		struct shell_result r = {0};
		int master = -1;
		if (hs->start[k].fd < 0 || hs->start[k].fd != fd)
			continue;
		ssize_t n = worker_recv(fd, &r, sizeof(r), &master);
		if (n == -EAGAIN)
			return true;
		close(hs->start[k].fd);
		hs->start[k].fd = -1;
		if (n == (ssize_t)sizeof(r) && r.ok && master >= 0) {
			log_info("job %lld: shell started", hs->start[k].job_id);
			host_emit_fd(h, proto_ok(hs->start[k].reply_id), master);
		} else {
			r.message[sizeof(r.message) - 1] = '\0';
			log_warn("job %lld: no shell: %s", hs->start[k].job_id,
				 n == -ETIMEDOUT ? "its worker ran past its time limit"
				 : r.message[0] ? r.message : "its worker died");
			host_emit(h, proto_error(hs->start[k].reply_id, "shell_failed",
						 r.message[0] ? r.message : "the shell did not start"));
		}
		if (master >= 0)
			close(master); /* the web process holds its own copy now (or nobody) */
		return true;
	}
	return false;
}
