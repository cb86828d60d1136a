/* slurmcli.c - running Slurm's tools with a time limit (fork + exec, its own process
 * group so a timeout kills what it started too) and the four calls the backend makes;
 * see slurmcli.h. */
#include "backend/slurmcli.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/slurmaddrs.h"
#include "labd/clock.h"
#include "labd/log.h"

#define QUEUE_OUT_MAX (4u << 20) /* squeue's answer: ~100 bytes a job */
#define SMALL_OUT_MAX 8192
#define ERR_MAX 512

/* In the child: stdin from /dev/null, stdout and stderr to the pipes, nothing else
 * open, default signals, then exec. Only async-signal-safe calls (the parent has
 * threads). */
static _Noreturn void child(const char *const *argv, int out, int err)
{
	sigset_t none;
	int null = open("/dev/null", O_RDONLY);

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	setpgid(0, 0);
	if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		_exit(127);
	close_range(3, ~0U, 0);
	execv(argv[0], (char *const *)argv);
	_exit(127);
}

/* Appends what fd has to buf (cap, keeps a NUL); 1 at EOF. Bytes past cap are read
 * and dropped so the child never blocks on a full pipe. */
static int drain(int fd, char *buf, size_t cap, size_t *len)
{
	char chunk[4096];
	ssize_t n = read(fd, chunk, sizeof(chunk));

	if (n <= 0)
		return n == 0 || (errno != EINTR && errno != EAGAIN) ? 1 : 0;
	if (*len + 1 < cap) {
		size_t take = (size_t)n < cap - 1 - *len ? (size_t)n : cap - 1 - *len;
		memcpy(buf + *len, chunk, take);
		*len += take;
		buf[*len] = '\0';
	}
	return 0;
}

/* Reads both pipes until both end or deadline (clock_ms). 0, or -ETIMEDOUT. */
static int collect(int out, int err, long long deadline, char *obuf, size_t ocap, char *ebuf,
		   size_t ecap)
{
	struct pollfd p[2] = {{.fd = out, .events = POLLIN}, {.fd = err, .events = POLLIN}};
	size_t olen = 0, elen = 0;

	while (p[0].fd >= 0 || p[1].fd >= 0) {
		long long left = deadline - clock_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(p, 2, (int)left) < 0 && errno != EINTR)
			return -errno;
		if (p[0].fd >= 0 && p[0].revents && drain(out, obuf, ocap, &olen))
			p[0].fd = -1;
		if (p[1].fd >= 0 && p[1].revents && drain(err, ebuf, ecap, &elen))
			p[1].fd = -1;
	}
	return 0;
}

int slurmcli_run(const char *const *argv, int timeout_ms, char *out, size_t outcap, char *err,
		 size_t errlen, int *status)
{
	int po[2], pe[2], rc, ws = 0;
	pid_t pid;

	*status = -1;
	out[0] = err[0] = '\0';
	if (pipe2(po, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(pe, O_CLOEXEC) < 0) {
		rc = -errno;
		close(po[0]);
		close(po[1]);
		return rc;
	}
	pid = fork();
	if (pid == 0)
		child(argv, po[1], pe[1]);
	rc = pid < 0 ? -errno : 0;
	close(po[1]);
	close(pe[1]);
	if (rc == 0) {
		setpgid(pid, pid); /* both sides: no window where a kill misses the group */
		rc = collect(po[0], pe[0], clock_ms() + timeout_ms, out, outcap, err, errlen);
		if (rc < 0)
			kill(-pid, SIGKILL);
		while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
			;
		if (rc == 0 && WIFEXITED(ws))
			*status = WEXITSTATUS(ws);
	}
	close(po[0]);
	close(pe[0]);
	return rc;
}

/* Runs argv and reads the verdict; stdout into out. */
static enum slurm_verdict run_verdict(const struct slurm_tools *t, const char *const *argv,
				      char *out, size_t outcap, char *err, size_t errlen)
{
	int status;
	int rc = slurmcli_run(argv, t->timeout_ms, out, outcap, err, errlen, &status);

	if (rc < 0 && rc != -ETIMEDOUT) {
		snprintf(err, errlen, "cannot run %s: %s", argv[0], strerror(-rc));
		return SLURM_REFUSED;
	}
	if (status == 127 && rc == 0 && !err[0])
		snprintf(err, errlen, "cannot run %s", argv[0]);
	err[strcspn(err, "\n")] = '\0'; /* the first line says it */
	return slurmcli_classify(status, rc == -ETIMEDOUT, err);
}

/* "<option><text>" / "<option><number><unit>" appended to store (at *used); returns
 * where it went ("" when it did not fit). */
static const char *keep(char *store, size_t *used, const char *option, const char *text)
{
	char *at = store + *used;
	int n = snprintf(at, SLURMCLI_SUBMIT_STORE - *used, "%s%s", option, text);

	if (n < 0 || (size_t)n >= SLURMCLI_SUBMIT_STORE - *used)
		n = 0, *at = '\0';
	*used += (size_t)n + 1;
	return at;
}

static const char *keep_num(char *store, size_t *used, const char *option, long long v,
			    const char *unit)
{
	char text[40];

	snprintf(text, sizeof(text), "%lld%s", v, unit);
	return keep(store, used, option, text);
}

void slurmcli_submit_argv(const char *sbatch, const struct slurm_submit *s, const char **argv,
			  char *store)
{
	size_t used = 0, a = 0;
	char name[40], comment[SLURM_USER_MAX + 24], first[SLURMADDRS_TEXT_MAX];
	/* Slurm's --time is in whole minutes; the sleep ends the job on labd's clock */
	long long minutes = (s->seconds + 59) / 60;

	slurmcli_name(s->pool, s->id, name, sizeof(name));
	/* the user's name, and the hosts' peer addresses that a restarted head takes back */
	if (s->peer_n) {
		slurmaddrs_text(s->peer_first, first);
		snprintf(comment, sizeof(comment), "%s:%s:%u", s->user, first, s->peer_n);
	} else
		snprintf(comment, sizeof(comment), "%s", s->user);
	argv[a++] = sbatch;
	argv[a++] = "--parsable";
	argv[a++] = keep(store, &used, "--job-name=", name);
	argv[a++] = keep(store, &used, "--comment=", comment);
	argv[a++] = keep_num(store, &used, "--mem=", s->memory_mb, "M");
	argv[a++] = keep_num(store, &used, "--cpus-per-task=", s->cpus, "");
	if (s->gpus)
		argv[a++] = keep_num(store, &used, "--gres=gpu:", s->gpus, "");
	argv[a++] = keep_num(store, &used, "--time=", minutes < 1 ? 1 : minutes, "");
	if (s->nodes > 1) { /* a job on several hosts: one sandbox per node */
		argv[a++] = keep_num(store, &used, "--nodes=", s->nodes, "");
		argv[a++] = "--ntasks-per-node=1";
	} else {
		argv[a++] = "--nodes=1";
		argv[a++] = "--ntasks=1";
	}
	argv[a++] = "--no-requeue";
	argv[a++] = "--output=/dev/null";
	argv[a++] = "--chdir=/";
	if (s->partition && s->partition[0])
		argv[a++] = keep(store, &used, "--partition=", s->partition);
	argv[a++] = "--wrap";
	argv[a++] = keep_num(store, &used, "exec sleep ", s->seconds > 0 ? s->seconds : 1, "");
	argv[a] = NULL;
}

int slurmcli_submit(const struct slurm_tools *t, const struct slurm_submit *s, int64_t *job_id,
		    char *err, size_t errlen)
{
	const char *argv[SLURMCLI_SUBMIT_ARGS];
	char store[SLURMCLI_SUBMIT_STORE], out[SMALL_OUT_MAX], e[ERR_MAX];

	slurmcli_submit_argv(t->sbatch, s, argv, store);
	switch (run_verdict(t, argv, out, sizeof(out), e, sizeof(e))) {
	case SLURM_ANSWERED:
		if (slurmcli_parse_sbatch(out, job_id) == 0)
			return 0;
		snprintf(err, errlen, "sbatch printed no job id");
		return -EAGAIN; /* it may have been taken all the same: find it by name */
	case SLURM_UNKNOWN:
		snprintf(err, errlen, "%s", e[0] ? e : "sbatch did not answer in time");
		return -EAGAIN;
	default:
		/* "sbatch: error: Batch job submission failed: <why>": keep the why */
		snprintf(err, errlen, "%s", strstr(e, "failed: ") ? strstr(e, "failed: ") + 8 : e);
		return -EINVAL;
	}
}

/* Each labd line of squeue's text into a new array. */
static int parse_queue(char *text, struct slurm_job **jobs, size_t *n)
{
	size_t cap = 0;

	for (char *line = text, *next; line && *line; line = next) {
		struct slurm_job j;
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		int rc = slurmcli_parse_squeue_line(line, &j);
		if (rc < 0)
			log_warn("squeue: a line not understood: %.120s", line);
		/* a job of labd's that was not read must not read as gone */
		if (rc < 0 && strstr(line, "|labd-"))
			return -EAGAIN;
		if (rc != 0)
			continue;
		if (*n == cap) {
			struct slurm_job *more = realloc(*jobs, (cap ? cap * 2 : 16) * sizeof(*more));
			if (!more)
				return -ENOMEM;
			*jobs = more;
			cap = cap ? cap * 2 : 16;
		}
		(*jobs)[(*n)++] = j;
	}
	return 0;
}

int slurmcli_queue(const struct slurm_tools *t, struct slurm_job **jobs, size_t *n)
{
	char user[24], e[ERR_MAX], *out = malloc(QUEUE_OUT_MAX);
	const char *argv[] = {t->squeue, "--noheader", "--states=all", user,
			      "--format=" SLURM_SQUEUE_FORMAT, NULL};
	int rc;

	*jobs = NULL;
	*n = 0;
	if (!out)
		return -ENOMEM;
	/* only the jobs this process's user submitted: nobody else can name one labd-rt-1 */
	snprintf(user, sizeof(user), "--user=%u", (unsigned)getuid());
	switch (run_verdict(t, argv, out, QUEUE_OUT_MAX, e, sizeof(e))) {
	case SLURM_ANSWERED:
		rc = parse_queue(out, jobs, n); /* -EAGAIN: a line of labd's not understood */
		break;
	case SLURM_REFUSED:
		log_warn("squeue failed: %.200s", e);
		rc = -EIO;
		break;
	default:
		rc = -EAGAIN;
		break;
	}
	free(out);
	if (rc < 0) {
		free(*jobs);
		*jobs = NULL;
		*n = 0;
	}
	return rc;
}

int slurmcli_job_gpus(const struct slurm_tools *t, int64_t job_id, unsigned *idx, size_t max,
		      size_t *n)
{
	char id[24], out[SMALL_OUT_MAX], e[ERR_MAX];
	const char *argv[] = {t->scontrol, "show", "job", "-d", "-o", id, NULL};

	*n = 0;
	snprintf(id, sizeof(id), "%lld", (long long)job_id);
	switch (run_verdict(t, argv, out, sizeof(out), e, sizeof(e))) {
	case SLURM_ANSWERED:
		return slurmcli_parse_gres_idx(out, idx, max, n);
	case SLURM_GONE:
		return -ENOENT;
	case SLURM_UNKNOWN:
		return -EAGAIN;
	default:
		log_warn("scontrol show job %s failed: %.200s", id, e);
		return -EINVAL;
	}
}

int slurmcli_cancel(const struct slurm_tools *t, int64_t job_id)
{
	char id[24], out[SMALL_OUT_MAX], e[ERR_MAX];
	const char *argv[] = {t->scancel, id, NULL};

	snprintf(id, sizeof(id), "%lld", (long long)job_id);
	switch (run_verdict(t, argv, out, sizeof(out), e, sizeof(e))) {
	case SLURM_ANSWERED:
	case SLURM_GONE:
		return 0;
	case SLURM_UNKNOWN:
		return -EAGAIN;
	default:
		/* "Job/step already completing or completed" is done too */
		if (strstr(e, "already completing or completed"))
			return 0;
		log_warn("scancel %s failed: %.200s", id, e);
		return -EIO;
	}
}
