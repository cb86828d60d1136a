/* jobagent.c - labd-jobagent, the command of a job pool's sandbox (docs/sandbox.md,
 * "The job agent"; protocol in jobagent.h).  Linked static: it runs in any image.
 *
 * It runs one job at a time as the sandbox's user: the command in its own session,
 * its stdout and stderr into a pipe the agent relays to its own stderr (the
 * supervisor's log pipe).  The agent is a child subreaper, so everything the job
 * starts, daemons included, stays its descendant: when the command ends, kill(-1,
 * SIGKILL) (every process it may signal: all of the sandbox but init and itself) is
 * repeated until nothing is left to reap, so nothing of job N lives into job N+1.
 * It trusts nothing the job does: the job may kill it, which ends the pool.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/jobagent.h"
#include "sandbox/jobshare.h"

extern char **environ;

struct agent {
	char *in;             /* commands read, not yet parsed */
	size_t in_len, in_cap;
	bool in_eof;
	int sig_fd;           /* SIGCHLD and the termination signals */
	pid_t job;            /* the running command, 0 when none */
	int out_fd;           /* the job's output pipe, -1 when none */
	struct timespec started; /* coarse wall clock at start: what files the job wrote */
};

static void write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(fd == STDOUT_FILENO ? 3 : 0); /* the supervisor is gone */
		buf += n;
		len -= (size_t)n;
	}
}

static void say(const char *line)
{
	write_all(STDOUT_FILENO, line, strlen(line));
}

/* "<word> <netstring>\n" with the text made one line */
static void say_text(const char *head, const char *text, size_t len)
{
	char buf[JOBAGENT_TEXT_MAX + 64];
	size_t n = (size_t)snprintf(buf, sizeof(buf), "%s ", head);

	n += jobagent_netstring_text(buf + n, sizeof(buf) - n - 1, text, len);
	buf[n++] = '\n';
	write_all(STDOUT_FILENO, buf, n);
}

/* The job's output, as it comes, to our stderr; false at EOF. */
static bool relay(struct agent *a)
{
	char buf[65536];
	ssize_t n = read(a->out_fd, buf, sizeof(buf));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	if (n <= 0) {
		close(a->out_fd);
		a->out_fd = -1;
		return false;
	}
	write_all(STDERR_FILENO, buf, (size_t)n);
	return true;
}

/* The agent's environment with the run's entries added or replacing theirs. */
static char **merge_env(char **add)
{
	size_t n = 0, m = 0;
	char **env;

	while (environ[n])
		n++;
	while (add[m])
		m++;
	if (!(env = calloc(n + m + 1, sizeof(char *))))
		return NULL;
	memcpy(env, environ, n * sizeof(char *));
	for (size_t i = 0; i < m; i++) {
		size_t k = (size_t)(strchr(add[i], '=') - add[i]) + 1, j;
		for (j = 0; j < n && strncmp(env[j], add[i], k) != 0; j++) {
		}
		env[j] = add[i];
		n += j == n;
	}
	return env;
}

/* The value of name in env (NULL when absent); its entry is taken out of env, so the
 * command never sees the agent's own instructions. */
static char *take_env(char **env, const char *name)
{
	size_t k = strlen(name), i;
	char *v = NULL;

	for (i = 0; env[i]; i++)
		if (strncmp(env[i], name, k) == 0 && env[i][k] == '=') {
			v = env[i] + k + 1;
			break;
		}
	for (; v && env[i]; i++)
		env[i] = env[i + 1];
	return v;
}

/* The failure of the folders' copy, as the job's failure (its message is the
 * job's failure reason) and in its log; the command does not run. */
static _Noreturn void share_failed(const char *what, const char *why)
{
	char msg[JOBAGENT_TEXT_MAX];
	int fd, n = snprintf(msg, sizeof(msg), "%s: %s", what, why);

	if ((fd = open(JOBAGENT_FAILURE_PATH, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
		       0644)) >= 0) {
		if (write(fd, msg, (size_t)n) < 0) {
		}
		close(fd);
	}
	fprintf(stderr, "labd: %s\n", msg);
	_exit(1);
}

/* A job on several hosts (LABD_SHARE, jobshare.h): algo-1 sends its working folder
 * and input channels to the others before its command starts; each other host
 * fetches them first. "serve <peers> <addr> <port>" or "fetch <addr> <port>"; the
 * folders one per line in LABD_SHARE_DIRS. */
static void share_folders(char **env, int *report)
{
	char *how = take_env(env, "LABD_SHARE"), *list = take_env(env, "LABD_SHARE_DIRS");
	char *roots[JOBSHARE_MAX_ROOTS], addr[64], err[512], *save = NULL;
	struct jobshare_count n;
	size_t n_roots = 0;
	int peers = 0, port = 0, rc;

	if (!how || !list || !list[0])
		return;
	/* the copy may take minutes: the agent is told "started" now (EOF on the report
	 * pipe) and stays free for a stop meanwhile */
	close(*report);
	*report = -1;
	for (char *r = strtok_r(list, "\n", &save); r && n_roots < JOBSHARE_MAX_ROOTS;
	     r = strtok_r(NULL, "\n", &save))
		roots[n_roots++] = r;
	if (sscanf(how, "serve %d %63s %d", &peers, addr, &port) == 3) {
		fprintf(stderr, "labd: sending the job's folders to %d other host%s\n", peers,
			peers == 1 ? "" : "s");
		rc = jobshare_serve(addr, port, peers, roots, n_roots, JOBSHARE_WAIT_S, &n, err,
				    sizeof(err));
		if (rc < 0)
			share_failed("the job's folders were not sent to every host", err);
		fprintf(stderr, "labd: sent %llu files (%llu bytes) to each\n",
			(unsigned long long)n.files, (unsigned long long)n.bytes);
	} else if (sscanf(how, "fetch %63s %d", addr, &port) == 2) {
		rc = jobshare_fetch(addr, port, roots, n_roots, JOBSHARE_WAIT_S, &n, err, sizeof(err));
		if (rc < 0)
			share_failed("the job's folders could not be fetched from algo-1", err);
		fprintf(stderr, "labd: fetched %llu files (%llu bytes) from algo-1\n",
			(unsigned long long)n.files, (unsigned long long)n.bytes);
	} else {
		share_failed("LABD_SHARE", "malformed");
	}
}

/* The child's side: own session, output into the pipe, exec; a failure goes back on
 * report (close-on-exec: EOF there means the exec worked). */
static _Noreturn void exec_job(const struct jobagent_cmd *c, char **env, int out, int report)
{
	char msg[JOBAGENT_TEXT_MAX];
	sigset_t none;
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	setsid();
	if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 ||
	    dup2(out, STDERR_FILENO) < 0) {
		snprintf(msg, sizeof(msg), "stdio: %s", strerror(errno));
	} else {
		share_folders(env, &report);
		if (c->cwd[0] && chdir(c->cwd) < 0) {
			snprintf(msg, sizeof(msg), "working directory %s: %s", c->cwd,
				 strerror(errno));
		} else {
			environ = env;
			execvp(c->argv[0], c->argv);
			snprintf(msg, sizeof(msg), "exec %s: %s", c->argv[0], strerror(errno));
		}
	}
	if (report < 0) /* said "started" already (a copy came first): the log says why */
		fprintf(stderr, "labd: %s\n", msg);
	else if (write(report, msg, strlen(msg)) < 0)
		_exit(127);
	_exit(127);
}

/* Forks and execs the command; "started" or "error" (nothing runs then). */
static void start_job(struct agent *a, const struct jobagent_cmd *c)
{
	char msg[JOBAGENT_TEXT_MAX], line[64];
	int out[2] = {-1, -1}, rep[2] = {-1, -1};
	ssize_t n = -1;
	char **env = NULL;
	pid_t pid = -1;

	if (a->job) {
		say_text("error", "a job is running", 16);
		return;
	}
	if ((env = merge_env(c->envp)) && pipe2(out, O_CLOEXEC) == 0 && pipe2(rep, O_CLOEXEC) == 0) {
		clock_gettime(CLOCK_REALTIME_COARSE, &a->started);
		if ((pid = fork()) == 0)
			exec_job(c, env, out[1], rep[1]);
		close(out[1]);
		close(rep[1]);
		/* EOF (0) once exec worked: the pipe is close-on-exec */
		while (pid > 0 && (n = read(rep[0], msg, sizeof(msg))) < 0 && errno == EINTR) {
		}
		close(rep[0]);
	}
	free(env);
	if (n != 0) {
		if (out[0] >= 0)
			close(out[0]);
		if (pid > 0)
			waitpid(pid, NULL, 0);
		if (n > 0)
			say_text("error", msg, (size_t)n);
		else
			say_text("error", "out of resources (fork, pipe or memory)", 39);
		return;
	}
	a->job = pid;
	a->out_fd = out[0];
	snprintf(line, sizeof(line), "started %d\n", (int)pid);
	say(line);
}

/* Kills and reaps everything but init and us, until nothing is left. */
static void kill_all(void)
{
	for (;;) {
		kill(-1, SIGKILL);
		if (waitpid(-1, NULL, 0) < 0 && errno == ECHILD)
			return;
	}
}

/* The first KiB of the failure file, when the job wrote it (modified since it
 * started: a file left by an earlier attempt in the same folder is not this one's). */
static size_t read_failure(const struct agent *a, char *buf, size_t size)
{
	int fd = open(JOBAGENT_FAILURE_PATH, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	ssize_t n = 0;

	if (fd < 0)
		return 0;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    (st.st_mtim.tv_sec > a->started.tv_sec ||
	     (st.st_mtim.tv_sec == a->started.tv_sec && st.st_mtim.tv_nsec >= a->started.tv_nsec)))
		n = read(fd, buf, size);
	close(fd);
	return n > 0 ? (size_t)n : 0;
}

static void finish_job(struct agent *a, int status)
{
	char failure[JOBAGENT_FAILURE_MAX], head[32];
	size_t n;

	kill_all();
	while (a->out_fd >= 0 && relay(a)) {
	}
	n = read_failure(a, failure, sizeof(failure));
	snprintf(head, sizeof(head), "exited %d", status);
	say_text(head, failure, n);
	a->job = 0;
}

static void on_signals(struct agent *a)
{
	struct signalfd_siginfo si;
	int status;
	pid_t p;

	while (read(a->sig_fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo != SIGCHLD && a->job)
			kill(-1, SIGTERM); /* a stop sent to us is meant for the job */
	}
	while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
		if (p == a->job)
			finish_job(a, status);
	}
}

static void on_input(struct agent *a)
{
	struct jobagent_cmd c;
	long used;
	ssize_t n;

	if (a->in_cap - a->in_len < 65536) {
		char *bigger = realloc(a->in, a->in_cap + 65536 + a->in_cap / 2);
		if (!bigger)
			_exit(2);
		a->in = bigger;
		a->in_cap += 65536 + a->in_cap / 2;
	}
	n = read(STDIN_FILENO, a->in + a->in_len, a->in_cap - a->in_len);
	if (n < 0 && errno == EINTR)
		return;
	if (n <= 0) {
		a->in_eof = true;
		return;
	}
	a->in_len += (size_t)n;
	while (a->in_len && (used = jobagent_parse_command(a->in, a->in_len, &c)) != 0) {
		if (used < 0) {
			say_text("error", "malformed command", 17);
			_exit(2);
		}
		if (c.kind == JOBAGENT_TERM && a->job)
			kill(-1, SIGTERM);
		else if (c.kind == JOBAGENT_RUN)
			start_job(a, &c);
		jobagent_cmd_free(&c);
		memmove(a->in, a->in + used, a->in_len - (size_t)used);
		a->in_len -= (size_t)used;
	}
}

static int setup(struct agent *a)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	signal(SIGPIPE, SIG_IGN);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0 ||
	    (a->sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) < 0)
		return -1;
	/* orphans of the job come to us, not to init: we can reap (and count) them all */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		return -1;
	/* the job runs as our uid: no ptrace of us, no /proc/<us>/mem */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	a->out_fd = -1;
	return 0;
}

int main(void)
{
	struct agent a = {0};

	if (setup(&a) < 0) {
		say_text("error", "agent set-up failed", 19);
		return 2;
	}
	say("ready\n");
	while (!a.in_eof) {
		struct pollfd p[3] = {{STDIN_FILENO, POLLIN, 0}, {a.sig_fd, POLLIN, 0}, {a.out_fd, POLLIN, 0}};
		if (poll(p, a.out_fd >= 0 ? 3 : 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 2;
		}
		if (p[2].revents && a.out_fd >= 0)
			relay(&a);
		if (p[1].revents)
			on_signals(&a);
		if (p[0].revents)
			on_input(&a);
	}
	kill_all();
	return 0;
}
