/* launch.c - building a runtime's sandbox off the supervisor's loop; see launch.h. */
#include "supervisor/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "labd/log.h"
#include "supervisor/homes.h"
#include "supervisor/worker.h"


struct start_job {
	const struct labd_config *cfg;
	const char *state_dir;
	const struct launch_request *rq;
	int log_rd, log_wr; /* the output pipe: the worker keeps the write end */
};

void launch_run_dir(const char *state_dir, const char *user, char *out, size_t len)
{
	snprintf(out, len, "%s/runtimes/%s/run", state_dir, user);
}

const char *launch_cgroup_parent(const struct labd_config *cfg)
{
	return cfg->node_cgroup_parent[0] ? cfg->node_cgroup_parent : "labd";
}

void launch_endpoint(const char *user, char *out, size_t len)
{
	snprintf(out, len, "unix:runtimes/%s/run/jupyter.sock", user);
}

bool launch_env_has(const char *env, const char *kind)
{
	char path[LAUNCH_PATH_MAX];

	if (!env || !env[0])
		return false;
	snprintf(path, sizeof(path), "%s/bin/jupyter-%s", env, kind);
	return access(path, X_OK) == 0;
}

const char *launch_env_for(const struct labd_config *cfg, const char *kind)
{
	/* An image brings its own Python: the env (made against the host's
	 * /usr/bin/python3) only serves the host's root. */
	if (!cfg->jupyter_env[0] || strcmp(cfg->image, "/") != 0)
		return NULL;
	return launch_env_has(cfg->jupyter_env, kind) ? cfg->jupyter_env : NULL;
}

const char *launch_image_env(const char *root, const char *kind)
{
	char env[CONFIG_PATH_MAX + sizeof(LAUNCH_IMAGE_ENV)]; /* root: an [images] folder */

	snprintf(env, sizeof(env), "%s" LAUNCH_IMAGE_ENV, root);
	return launch_env_has(env, kind) ? LAUNCH_IMAGE_ENV : NULL;
}

const char *launch_pick_jupyter(const char *setting, const char *image, const char *env)
{
	static const char *const kinds[] = {"lab", "notebook", "server"};
	static const char *const dirs[] = {"usr/bin", "usr/local/bin"};
	char path[LAUNCH_PATH_MAX];

	if (strcmp(setting, "auto") != 0)
		return setting;
	for (size_t k = 0; k < 3; k++)
		if (launch_env_has(env, kinds[k]))
			return kinds[k];
	for (size_t k = 0; k < 3; k++)
		for (size_t d = 0; d < 2; d++) {
			snprintf(path, sizeof(path), "%s/%s/jupyter-%s",
				 strcmp(image, "/") ? image : "", dirs[d], kinds[k]);
			if (access(path, X_OK) == 0)
				return kinds[k];
		}
	return NULL;
}

int launch_jupyter_argv(const char *kind, const char *user, const char *env, char *argv[16],
			char bufs[][256])
{
	/* Notebook 6 is configured through NotebookApp; lab and server through
	 * jupyter_server's ServerApp. The token comes from JUPYTER_TOKEN in the
	 * environment, never the command line (visible in /proc). */
	const char *app = strcmp(kind, "notebook") == 0 ? "NotebookApp" : "ServerApp";
	int n = 0;

#define ARG(...) (snprintf(bufs[n], 256, __VA_ARGS__), argv[n] = bufs[n], n++)
	/* labd's env by full path: its jupyter-<kind> runs with the env's Python
	 * whatever a user puts first on PATH (~/.local/bin) */
	if (env && env[0]) {
		ARG("%s/bin/jupyter-%s", env, kind);
	} else {
		ARG("jupyter");
		ARG("%s", kind);
	}
	ARG("--no-browser");
	ARG("--%s.sock=/run/labd/jupyter.sock", app);
	ARG("--%s.sock_mode=0666", app);
	ARG("--%s.base_url=/user/%s/", app, user);
	ARG("--%s.allow_remote_access=True", app);
	ARG("--%s.%s=/home/%s", app, strcmp(kind, "notebook") == 0 ? "notebook_dir" : "root_dir",
	    user);
	/* Terminals run bash, not a login shell: without a terminal on stdout
	 * jupyter_server_terminals adds -l, and /etc/profile then resets PATH,
	 * losing ~/.local/bin and labd's env. bash keeps its history in the home. */
	if (strcmp(kind, "notebook") != 0)
		ARG("--ServerApp.terminado_settings=shell_command=/bin/bash");
	/* Kernels use TCP on the sandbox's own loopback (a private network
	 * namespace). Notebook 6 leaves ipc-transport kernels "starting" forever. */
#undef ARG
	argv[n] = NULL;
	return n;
}

void launch_path_env(const char *user, const char *env, char *out, size_t len)
{
	/* pip install --user puts its scripts in ~/.local/bin: they come first so
	 * what a user installed is what they run; then labd's env */
	snprintf(out, len, "PATH=/home/%s/.local/bin:%s%s%s%s", user, env ? env : "",
		 env ? "/bin" : "", env ? ":" : "",
		 "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin");
}

gid_t launch_labd_gid(const struct labd_config *cfg)
{
	struct passwd *pw = getpwnam(cfg->user);
	return pw ? pw->pw_gid : 0;
}

void launch_log_path(const char *state_dir, const char *user, char *out, size_t len)
{
	snprintf(out, len, "%s/runtimes/%s/jupyter.log", state_dir, user);
}

/* [runtime] hidden_paths, split into the spec (config.c checked each item). */
static void fill_hidden(const struct labd_config *cfg, struct sandbox_spec *s, char *buf, size_t len)
{
	char *save = NULL;

	snprintf(buf, len, "%s", cfg->hidden_paths);
	s->n_hidden = 0;
	for (char *p = strtok_r(buf, ", ", &save); p && s->n_hidden < SANDBOX_MAX_HIDDEN;
	     p = strtok_r(NULL, ", ", &save))
		s->hidden[s->n_hidden++] = p;
}

static int make_dirs(const struct start_job *j, char *err, size_t errlen)
{
	char dir[LAUNCH_PATH_MAX];

	snprintf(dir, sizeof(dir), "%s/runtimes/%s", j->state_dir, j->rq->user);
	if ((mkdir(dir, 0710) < 0 && errno != EEXIST) || chown(dir, 0, launch_labd_gid(j->cfg)) < 0) {
		snprintf(err, errlen, "step runtime dir: runtimes/%s: %s", j->rq->user, strerror(errno));
		return -1;
	}
	return 0;
}

void launch_fill_limits(const struct labd_config *cfg, const char *state_dir,
			const struct launch_request *rq, struct sandbox_spec *s, char *home,
			char *hidden)
{
	sandbox_spec_init(s);
	s->user = rq->user;
	s->user_id = rq->user_id;
	s->uid_base = cfg->uid_base;
	homes_image_path(cfg, state_dir, rq->user_id, home, LAUNCH_PATH_MAX);
	s->home_mmp = cfg->home_mmp;
	s->home_image = home;
	s->home_size_bytes = rq->sizes.home_size_bytes;
	s->mem_bytes = rq->sizes.memory_bytes;
	s->cpu_milli = rq->sizes.cpus_milli;
	s->pids_max = cfg->pids;
	s->tmp_bytes = cfg->tmp_bytes;
	s->image = rq->root;
	s->state_dir = state_dir;
	s->cgroup_parent = launch_cgroup_parent(cfg);
	s->dev_prefix = cfg->dev_prefix;
	fill_hidden(cfg, s, hidden, CONFIG_PATH_MAX);
	/* hidden_paths are places of the host; an image is not the host, and its /opt
	 * holds the env */
	if (rq->from_image)
		s->n_hidden = 0;
	/* an image has its own CUDA runtime but never the host driver's libraries; on the
	 * host's root they may be reachable only through LD_LIBRARY_PATH (not in
	 * ld.so.cache), or lie under a hidden place: GPU runtimes and pools get them either way */
	if (rq->n_gpus && cfg->driver_lib_dir[0])
		s->driver_lib_dir = cfg->driver_lib_dir;
	/* A stand-in GPU ([gpu] stand_in, tests and demos) has no device node to
	 * bind: the supervisor still holds it exclusively (host.c). */
	for (unsigned i = 0; i < rq->n_gpus && !cfg->gpu_stand_in; i++) {
		s->gpu_uuids[s->n_gpus] = rq->gpu_uuids[i][0] ? rq->gpu_uuids[i] : NULL;
		s->gpus[s->n_gpus++] = rq->gpus[i];
	}
	s->caps_dir = cfg->gpu_caps_dir;
	s->caps_dev_dir = cfg->gpu_caps_dev_dir[0] ? cfg->gpu_caps_dev_dir : NULL;
	s->die_with_parent = false; /* sandboxes outlive a supervisor restart */
	s->net = rq->network ? SANDBOX_NET_EGRESS : SANDBOX_NET_NONE;
	s->net_deny = cfg->net_deny;
	s->net_dns = cfg->net_dns;
	s->egress_bytes_per_s = rq->egress_bytes_per_s;
	s->max_connections = cfg->net_max_connections;
	s->pasta_path = cfg->net_pasta;
	s->nft_path = cfg->net_nft;
	s->net_path = cfg->net_path == SANDBOX_NET_VETH ? SANDBOX_NET_VETH : SANDBOX_NET_PASTA;
	s->veth_range = cfg->net_veth_range;
	if (rq->peers[0]) {
		s->peer_addr = rq->peer_addr;
		s->peers = rq->peers;
		s->peer_via = rq->peer_via;
	}
	if (rq->scratch_home) { /* no home image: a tmpfs that ends with the sandbox */
		s->home_image = NULL;
		s->scratch_home = true;
	}
}

static void fill_spec(const struct start_job *j, struct sandbox_spec *s, char *home, char *run_dir,
		      char *argv[16], char bufs[][256], char *envp[4], char env[2][LAUNCH_ENV_MAX],
		      char *hidden)
{
	const struct labd_config *cfg = j->cfg;
	/* a runtime image carries its own env inside; the host's is for the host's root */
	const char *jenv = j->rq->from_image ? launch_image_env(j->rq->root, j->rq->jupyter)
					     : launch_env_for(cfg, j->rq->jupyter);

	launch_fill_limits(cfg, j->state_dir, j->rq, s, home, hidden);
	launch_run_dir(j->state_dir, j->rq->user, run_dir, LAUNCH_PATH_MAX);
	s->run_dir = run_dir;
	/* the env is bound at its own path even when /opt is hidden (sandbox.h) */
	if (jenv && !j->rq->from_image)
		s->ro_binds[s->n_ro_binds++] = jenv;
	launch_jupyter_argv(j->rq->jupyter, j->rq->user, jenv, argv, bufs);
	s->argv = argv;
	snprintf(env[0], LAUNCH_ENV_MAX, "JUPYTER_TOKEN=%s", j->rq->token);
	launch_path_env(j->rq->user, jenv, env[1], LAUNCH_ENV_MAX);
	envp[0] = env[0];
	envp[1] = env[1];
	/* A terminal's bash adds each command to ~/.bash_history as it runs it. Jupyter's
	 * shutdown gives its terminals about 0.3 s between SIGHUP and SIGKILL, too short for
	 * the history bash writes at its exit on a loaded machine: what a user typed is kept
	 * all the same. (A ~/.bashrc of the user's own may set it otherwise.) */
	envp[2] = "PROMPT_COMMAND=history -a";
	envp[3] = NULL;
	s->envp = envp;
}

void launch_fault_slow_start(const char *user)
{
	const char *f = getenv("LABD_FAULT_SLOW_START");
	const char *colon = f ? strchr(f, ':') : NULL;

	if (colon && (size_t)(colon - f) == strlen(user) && strncmp(f, user, strlen(user)) == 0) {
		long ms = strtol(colon + 1, NULL, 10);
		struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
	}
}

/* The start worker: builds the sandbox, with Jupyter's output going into the
 * pipe the supervisor reads (stdio is part of the spec; no host file is ever
 * handed to the sandbox), and reports the handle or the failing step. */
static int start_worker(void *arg, int fd)
{
	const struct start_job *j = arg;
	struct launch_report rep = {0};
	char home[LAUNCH_PATH_MAX], run_dir[LAUNCH_PATH_MAX], bufs[16][256], env[2][LAUNCH_ENV_MAX];
	char hidden[CONFIG_PATH_MAX];
	char *argv[16], *envp[4];
	struct sandbox_spec spec;
	struct sandbox_error err = {0};

	close(j->log_rd);
	launch_fault_slow_start(j->rq->user);
	if (homes_adopt_named(j->cfg, j->state_dir, j->rq->user, j->rq->user_id) < 0)
		snprintf(rep.error, sizeof(rep.error), "step home: the home named by user name could not move");
	if (rep.error[0] || make_dirs(j, rep.error, sizeof(rep.error)) < 0)
		return worker_send(fd, &rep, sizeof(rep), -1) < 0 ? 2 : 1;
	fill_spec(j, &spec, home, run_dir, argv, bufs, envp, env, hidden);
	spec.stdin_fd = SANDBOX_FD_NULL;
	spec.stdout_fd = spec.stderr_fd = j->log_wr;
	if (sandbox_start_err(&spec, &rep.h, &err) < 0) {
		snprintf(rep.error, sizeof(rep.error), "%.199s",
			 err.message[0] ? err.message : "the sandbox could not be built");
		return worker_send(fd, &rep, sizeof(rep), -1) < 0 ? 2 : 1;
	}
	/* labd-web (not the sandbox's uid) connects to Jupyter's socket in here:
	 * let it traverse; the socket's parents keep everyone else out. */
	chmod(run_dir, 0711);
	rep.ok = 1;
	return worker_send(fd, &rep, sizeof(rep), rep.h.status_fd) < 0 ? 2 : 0;
}

int launch_spawn(const struct labd_config *cfg, const char *state_dir,
		 const struct launch_request *rq, pid_t *pid, int *fd, int *log_fd)
{
	struct start_job j = {cfg, state_dir, rq, -1, -1};
	int p[2], rc;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	if (fcntl(p[0], F_SETFL, O_NONBLOCK) < 0) { /* the loop never waits on it */
		rc = -errno;
		close(p[0]);
		close(p[1]);
		return rc;
	}
	j.log_rd = p[0];
	j.log_wr = p[1];
	/* fork copies j and rq into the child: they only need to live until then */
	rc = worker_spawn(start_worker, &j, WORKER_HOME_LIMIT_MS, pid, fd);
	close(p[1]); /* the worker and the sandbox hold the write end: EOF when they end */
	if (rc < 0) {
		close(p[0]);
		return rc;
	}
	*log_fd = p[0];
	return 0;
}

int launch_result(int fd, struct sandbox_handle *h, char *err, size_t errlen)
{
	struct launch_report rep;
	int passed;
	ssize_t n = worker_recv(fd, &rep, sizeof(rep), &passed);

	if (n == -EAGAIN)
		return -EAGAIN;
	if (n != (ssize_t)sizeof(rep) || !rep.ok) {
		if (passed >= 0)
			close(passed);
		snprintf(err, errlen, "%s",
			 n == (ssize_t)sizeof(rep) ? rep.error : "the sandbox worker died");
		return -EIO;
	}
	*h = rep.h;
	h->is_child = false; /* the worker was its parent */
	h->status_fd = passed;
	return 0;
}

static int teardown_worker(void *arg, int fd)
{
	(void)fd;
	return sandbox_destroy(arg) < 0 ? 1 : 0;
}

int launch_teardown(struct sandbox_handle *h, pid_t *pid, int *fd)
{
	int rc = worker_spawn(teardown_worker, h, WORKER_HOME_LIMIT_MS, pid, fd);
	sandbox_handle_clear(h);
	return rc;
}

int launch_probe(const char *run_dir, uid_t owner)
{
	char path[LAUNCH_PATH_MAX], via[64];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int pfd, s, ok;

	snprintf(path, sizeof(path), "%s/jupyter.sock", run_dir);
	pfd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0)
		return 0;
	if (fstat(pfd, &st) < 0 || !S_ISSOCK(st.st_mode) || st.st_uid != owner) {
		close(pfd);
		return 0;
	}
	/* connect through the opened inode, not the name the user can swap */
	snprintf(via, sizeof(via), "/proc/self/fd/%d", pfd);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", via);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	ok = s >= 0 && connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (s >= 0)
		close(s);
	close(pfd);
	return ok;
}
