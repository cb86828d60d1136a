/* boxes.c - see boxes.h. */
#include "supervisor/sandboxes.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "proto/ipc.h"
#include "labd/clock.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "labd/sandbox.h"

#define MAX_BOXES 256
#define ENDED_KEEP_SECONDS 3600 /* how long an ended runtime stays listed */
#define PATH_LEN 1024

enum box_state { BOX_RUNNING, BOX_STOPPING, BOX_ENDED };
static const char *const box_state_names[] = {"running", "stopping", "ended"};

struct box {
	bool used;
	char user[PARSE_USER_NAME_MAX + 1];
	char kind[8];
	struct sandbox_handle h;
	int pidfd;
	int64_t deadline, ended_at;
	enum box_state state;
	bool requested; /* the stop was asked for (user, idle, deadline) */
	bool failed;    /* ended on its own, not cleanly */
	char reason[160];
	long long kill_at_ms;
};

struct sandboxes {
	const struct labd_config *cfg;
	char state_dir[CONFIG_PATH_MAX];
	struct box box[MAX_BOXES];
};

/* The labd user's group: it may traverse runtimes/ to the Jupyter sockets. */
static gid_t cfg_gid(const struct labd_config *cfg)
{
	struct passwd *pw = getpwnam(cfg->user);
	return pw ? pw->pw_gid : 0;
}

static struct box *find(struct sandboxes *b, const char *user)
{
	for (int i = 0; i < MAX_BOXES; i++)
		if (b->box[i].used && strcmp(b->box[i].user, user) == 0)
			return &b->box[i];
	return NULL;
}

static struct box *free_slot(struct sandboxes *b)
{
	for (int i = 0; i < MAX_BOXES; i++)
		if (!b->box[i].used)
			return &b->box[i];
	return NULL;
}

static void box_file(const struct sandboxes *b, const char *user, char *out, size_t len)
{
	snprintf(out, len, "%s/boxes/%s.json", b->state_dir, user);
}

/* Records what re-adoption needs beside the sandbox's own state file. */
static int save_box(const struct sandboxes *b, const struct box *x)
{
	char path[PATH_LEN], tmp[PATH_LEN + 8];
	json_t *j = json_pack("{s:s,s:s,s:s,s:I,s:s?}", "user", x->user, "id", x->h.id, "kind",
			      x->kind, "deadline", (json_int_t)x->deadline, "stopping",
			      x->state == BOX_STOPPING ? x->reason : NULL);
	int rc;

	box_file(b, x->user, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	rc = json_dump_file(j, tmp, JSON_COMPACT);
	json_decref(j);
	if (rc < 0 || rename(tmp, path) < 0)
		return log_errno("save %s", path);
	return 0;
}

const char *sandboxes_pick_jupyter(const char *setting, const char *image)
{
	static const char *const kinds[] = {"lab", "notebook", "server"};
	static const char *const dirs[] = {"usr/bin", "usr/local/bin"};
	char path[PATH_LEN];

	if (strcmp(setting, "auto") != 0)
		return setting;
	for (size_t k = 0; k < 3; k++)
		for (size_t d = 0; d < 2; d++) {
			snprintf(path, sizeof(path), "%s/%s/jupyter-%s",
				 strcmp(image, "/") ? image : "", dirs[d], kinds[k]);
			if (access(path, X_OK) == 0)
				return kinds[k];
		}
	return NULL;
}

int sandboxes_jupyter_argv(const char *kind, const char *user, char *argv[16], char bufs[][256])
{
	/* Notebook 6 is configured through NotebookApp; lab and server through
	 * jupyter_server's ServerApp. The token comes from JUPYTER_TOKEN in the
	 * environment, never the command line (visible in /proc). */
	const char *app = strcmp(kind, "notebook") == 0 ? "NotebookApp" : "ServerApp";
	int n = 0;

#define ARG(...) (snprintf(bufs[n], 256, __VA_ARGS__), argv[n] = bufs[n], n++)
	ARG("jupyter");
	ARG("%s", kind);
	ARG("--no-browser");
	ARG("--%s.sock=/run/labd/jupyter.sock", app);
	ARG("--%s.sock_mode=0666", app);
	ARG("--%s.base_url=/user/%s/", app, user);
	ARG("--%s.allow_remote_access=True", app);
	ARG("--%s.%s=/home/%s", app, strcmp(kind, "notebook") == 0 ? "notebook_dir" : "root_dir",
	    user);
	/* Kernels use TCP on the sandbox's own loopback (a private network
	 * namespace). Notebook 6 leaves ipc-transport kernels "starting" forever. */
#undef ARG
	argv[n] = NULL;
	return n;
}

static bool gpu_configured(const struct labd_config *cfg, json_int_t g)
{
	for (unsigned i = 0; i < cfg->n_gpu_devices; i++)
		if ((json_int_t)cfg->gpu_devices[i] == g)
			return true;
	return false;
}

/* Field checks beyond the protocol's types; NULL when fine. */
static const char *check_start(struct sandboxes *b, json_t *msg)
{
	const char *user = json_string_value(json_object_get(msg, "user"));
	const char *kind = json_string_value(json_object_get(msg, "kind"));
	json_int_t uid = json_integer_value(json_object_get(msg, "user_id"));
	json_int_t deadline = json_integer_value(json_object_get(msg, "deadline"));
	json_t *gpus = json_object_get(msg, "gpus"), *g;
	size_t i;

	if (!parse_user_name_ok(user))
		return "bad user name";
	if (uid < 1 || uid > 1000000)
		return "user_id out of range";
	if (strcmp(kind, "cpu") && strcmp(kind, "gpu"))
		return "kind must be cpu or gpu";
	if (!parse_token_ok(json_string_value(json_object_get(msg, "token"))))
		return "bad token";
	if (deadline <= time(NULL))
		return "deadline is in the past";
	if (json_array_size(gpus) > SANDBOX_MAX_GPUS || (strcmp(kind, "gpu") == 0) != (json_array_size(gpus) > 0))
		return "gpus do not match the kind";
	json_array_foreach(gpus, i, g) {
		if (!json_is_integer(g) || !gpu_configured(b->cfg, json_integer_value(g)))
			return "gpu is not one of [gpu] devices";
	}
	return NULL;
}

static void fill_spec(struct sandboxes *b, json_t *msg, struct sandbox_spec *s, char *home,
		      char *run_dir, char *argv[16], char bufs[][256], char *envp[4],
		      char env_bufs[][160], const char *jupyter)
{
	const char *user = json_string_value(json_object_get(msg, "user"));
	json_t *gpus = json_object_get(msg, "gpus"), *g;
	size_t i;

	sandbox_spec_init(s);
	s->user = user;
	s->user_id = (uint32_t)json_integer_value(json_object_get(msg, "user_id"));
	s->uid_base = b->cfg->uid_base;
	snprintf(home, PATH_LEN, "%s/homes/%s.img", b->state_dir, user);
	s->home_image = home;
	s->home_size = b->cfg->home_size;
	s->mem_bytes = b->cfg->memory;
	s->cpu_milli = b->cfg->cpus_milli;
	s->pids_max = b->cfg->pids;
	s->tmp_bytes = b->cfg->tmp_size;
	s->image = b->cfg->image;
	snprintf(run_dir, PATH_LEN, "%s/runtimes/%s/run", b->state_dir, user);
	s->run_dir = run_dir;
	s->state_dir = b->state_dir;
	s->dev_prefix = b->cfg->dev_prefix;
	json_array_foreach(gpus, i, g)
		s->gpus[s->n_gpus++] = (unsigned)json_integer_value(g);
	sandboxes_jupyter_argv(jupyter, user, argv, bufs);
	s->argv = argv;
	snprintf(env_bufs[0], 160, "JUPYTER_TOKEN=%s",
		 json_string_value(json_object_get(msg, "token")));
	envp[0] = env_bufs[0];
	envp[1] = NULL;
	s->envp = envp;
	s->die_with_parent = false; /* runtimes outlive a supervisor restart */
}

/* Starts the sandbox with stdin from /dev/null and stdout/stderr appended to
 * runtimes/<user>/jupyter.log (readable by labd's group), not the supervisor's
 * terminal. The supervisor is single-threaded, so swapping fds 0-2 around the
 * fork is safe. */
static int start_with_log(struct sandboxes *b, const char *user, const struct sandbox_spec *spec,
			  struct sandbox_handle *h)
{
	char path[PATH_LEN];
	int saved[3], log_fd, null_fd, rc;

	snprintf(path, sizeof(path), "%s/runtimes/%s/jupyter.log", b->state_dir, user);
	log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
	null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (log_fd < 0 || null_fd < 0) {
		if (log_fd >= 0)
			close(log_fd);
		if (null_fd >= 0)
			close(null_fd);
		return log_errno("open %s", path);
	}
	if (fchown(log_fd, 0, cfg_gid(b->cfg)) < 0)
		log_warn("chown %s: %s", path, strerror(errno));
	fflush(stdout);
	fflush(stderr);
	for (int fd = 0; fd < 3; fd++)
		saved[fd] = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	dup2(null_fd, 0);
	dup2(log_fd, 1);
	dup2(log_fd, 2);
	rc = sandbox_start(spec, h);
	for (int fd = 0; fd < 3; fd++) {
		if (saved[fd] >= 0) {
			dup2(saved[fd], fd);
			close(saved[fd]);
		}
	}
	close(log_fd);
	close(null_fd);
	return rc;
}

json_t *sandboxes_start(struct sandboxes *b, long long id, json_t *msg)
{
	const char *why = check_start(b, msg);
	const char *user = json_string_value(json_object_get(msg, "user"));
	char home[PATH_LEN], run_dir[PATH_LEN], user_dir[PATH_LEN], bufs[16][256], env_bufs[2][160];
	char *argv[16], *envp[4];
	struct sandbox_spec spec;
	struct box *x;
	const char *jupyter;

	if (why)
		return ipc_error(id, "bad_request", why);
	x = find(b, user);
	if (x && x->state != BOX_ENDED)
		return ipc_error(id, "runtime_exists", "this user already has a runtime");
	if (!x && !(x = free_slot(b)))
		return ipc_error(id, "busy", "too many runtimes");
	jupyter = sandboxes_pick_jupyter(b->cfg->jupyter, b->cfg->image);
	if (!jupyter)
		return ipc_error(id, "no_jupyter", "no jupyter lab, notebook or server in the image");
	snprintf(user_dir, sizeof(user_dir), "%s/runtimes/%s", b->state_dir, user);
	if ((mkdir(user_dir, 0710) < 0 && errno != EEXIST) || chown(user_dir, 0, cfg_gid(b->cfg)) < 0)
		return ipc_error(id, "sandbox_failed", "cannot create the runtime dir");
	fill_spec(b, msg, &spec, home, run_dir, argv, bufs, envp, env_bufs, jupyter);
	memset(x, 0, sizeof(*x));
	if (start_with_log(b, user, &spec, &x->h) < 0)
		return ipc_error(id, "sandbox_failed", "the sandbox could not be built (see the log)");
	/* labd-web (not the sandbox's uid) connects to Jupyter's socket in here:
	 * let it traverse; the socket's parents keep everyone else out. */
	chmod(run_dir, 0711);
	x->used = true;
	x->state = BOX_RUNNING;
	x->pidfd = (int)syscall(SYS_pidfd_open, x->h.pid, 0);
	x->deadline = json_integer_value(json_object_get(msg, "deadline"));
	snprintf(x->user, sizeof(x->user), "%s", user);
	snprintf(x->kind, sizeof(x->kind), "%s", json_string_value(json_object_get(msg, "kind")));
	save_box(b, x);
	log_info("runtime of %s started: sandbox %s, pid %d, jupyter %s", user, x->h.id,
		 (int)x->h.pid, jupyter);
	json_t *r = ipc_reply(id, "ok");
	json_object_set_new(r, "pid", json_integer(x->h.pid));
	return r;
}

static void request_stop(struct sandboxes *b, struct box *x, const char *reason)
{
	if (x->state != BOX_RUNNING)
		return;
	snprintf(x->reason, sizeof(x->reason), "%s", reason);
	x->requested = true;
	x->state = BOX_STOPPING;
	x->kill_at_ms = clock_ms() + b->cfg->stop_grace * 1000;
	/* init forwards SIGTERM to Jupyter, which shuts its kernels down cleanly */
	sandbox_kill(&x->h, SIGTERM);
	save_box(b, x); /* a restarted supervisor finishes the stop */
	log_info("stopping the runtime of %s: %s", x->user, reason);
}

json_t *sandboxes_stop(struct sandboxes *b, long long id, json_t *msg)
{
	struct box *x = find(b, json_string_value(json_object_get(msg, "user")));
	const char *reason = json_string_value(json_object_get(msg, "reason"));

	if (!x || x->state == BOX_ENDED)
		return ipc_error(id, "not_found", "no runtime is running for this user");
	request_stop(b, x, reason[0] ? reason : "stopped");
	return ipc_reply(id, "ok");
}

json_t *sandboxes_list(struct sandboxes *b, long long id)
{
	json_t *list = json_array(), *r;

	for (int i = 0; i < MAX_BOXES; i++) {
		struct box *x = &b->box[i];
		if (!x->used)
			continue;
		json_array_append_new(list, json_pack("{s:s,s:s,s:s,s:b,s:I,s:I}", "user", x->user,
						      "state", box_state_names[x->state], "reason",
						      x->reason, "failed", x->failed, "deadline",
						      (json_int_t)x->deadline, "ended_at",
						      (json_int_t)x->ended_at));
	}
	r = ipc_reply(id, "runtimes");
	json_object_set_new(r, "runtimes", list);
	return r;
}

static void describe_end(struct box *x, const struct sandbox_result *res)
{
	if (res->kind == SANDBOX_OOM) {
		x->failed = true;
		snprintf(x->reason, sizeof(x->reason),
			 "out of memory: the runtime used more than its memory limit");
		return;
	}
	if (x->requested)
		return; /* the stop reason stays */
	x->failed = !(res->kind == SANDBOX_EXITED && res->code == 0);
	if (res->kind == SANDBOX_EXITED)
		snprintf(x->reason, sizeof(x->reason), "jupyter exited with status %d", res->code);
	else if (res->kind == SANDBOX_SIGNALED)
		snprintf(x->reason, sizeof(x->reason), "jupyter was killed by signal %d",
			 res->signal);
	else
		snprintf(x->reason, sizeof(x->reason), "the runtime ended");
}

/* The sandbox's init is gone: classify, tear down (home unmounted), forget. */
static void finish(struct sandboxes *b, struct box *x)
{
	struct sandbox_result res;
	char path[PATH_LEN];

	if (sandbox_wait(&x->h, &res) < 0)
		memset(&res, 0, sizeof(res)), res.kind = SANDBOX_UNKNOWN;
	describe_end(x, &res);
	if (sandbox_destroy(&x->h) < 0)
		log_warn("teardown of the runtime of %s was incomplete; gc will retry", x->user);
	if (x->pidfd >= 0)
		close(x->pidfd);
	x->pidfd = -1;
	x->state = BOX_ENDED;
	x->ended_at = time(NULL);
	box_file(b, x->user, path, sizeof(path));
	unlink(path);
	log_info("runtime of %s ended: %s", x->user, x->reason);
}

void sandboxes_stop_all(struct sandboxes *b, const char *reason)
{
	for (int i = 0; i < MAX_BOXES; i++)
		if (b->box[i].used && b->box[i].state == BOX_RUNNING)
			request_stop(b, &b->box[i], reason);
}

int sandboxes_live(struct sandboxes *b)
{
	int n = 0;
	for (int i = 0; i < MAX_BOXES; i++)
		n += b->box[i].used && b->box[i].state != BOX_ENDED;
	return n;
}

int sandboxes_pollfds(struct sandboxes *b, struct pollfd *fds, int max)
{
	int n = 0;
	for (int i = 0; i < MAX_BOXES && n < max; i++)
		if (b->box[i].used && b->box[i].state != BOX_ENDED && b->box[i].pidfd >= 0)
			fds[n++] = (struct pollfd){.fd = b->box[i].pidfd, .events = POLLIN};
	return n;
}

void sandboxes_on_events(struct sandboxes *b, const struct pollfd *fds, int n)
{
	for (int k = 0; k < n; k++) {
		if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		for (int i = 0; i < MAX_BOXES; i++)
			if (b->box[i].used && b->box[i].pidfd == fds[k].fd &&
			    b->box[i].state != BOX_ENDED)
				finish(b, &b->box[i]);
	}
}

int sandboxes_tick(struct sandboxes *b)
{
	long long now = clock_ms(), next = -1;
	int64_t wall = time(NULL);

	for (int i = 0; i < MAX_BOXES; i++) {
		struct box *x = &b->box[i];
		long long due = -1;
		if (!x->used)
			continue;
		if (x->state == BOX_ENDED && wall - x->ended_at > ENDED_KEEP_SECONDS) {
			x->used = false;
			continue;
		}
		if (x->state == BOX_RUNNING && x->deadline <= wall)
			request_stop(b, x, "time limit reached");
		if (x->state == BOX_RUNNING)
			due = now + (x->deadline - wall) * 1000;
		if (x->state == BOX_STOPPING && x->kill_at_ms <= now) {
			log_warn("runtime of %s did not stop within the grace period: killing it",
				 x->user);
			sandbox_kill(&x->h, SIGKILL);
			x->kill_at_ms = now + 1000; /* and again, until the pidfd says gone */
		}
		if (x->state == BOX_STOPPING)
			due = x->kill_at_ms;
		if (due >= 0 && (next < 0 || due < next))
			next = due;
	}
	return next < 0 ? -1 : (int)(next - now < 0 ? 0 : next - now > 60000 ? 60000 : next - now);
}

/* Re-adopts the runtimes a previous supervisor left running. */
static void adopt_all(struct sandboxes *b)
{
	char dir[PATH_LEN], path[PATH_LEN + 300];
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/boxes", b->state_dir);
	d = opendir(dir);
	while (d && (e = readdir(d))) {
		json_t *j;
		struct box *x;
		if (e->d_name[0] == '.' || !strstr(e->d_name, ".json"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		j = json_load_file(path, 0, NULL);
		x = free_slot(b);
		const char *user = json_string_value(json_object_get(j, "user"));
		const char *id = json_string_value(json_object_get(j, "id"));
		if (x && user && id && parse_user_name_ok(user) &&
		    sandbox_adopt(b->state_dir, id, &x->h) == 0) {
			x->used = true;
			x->state = BOX_RUNNING;
			snprintf(x->user, sizeof(x->user), "%s", user);
			snprintf(x->kind, sizeof(x->kind), "%s",
				 json_string_value(json_object_get(j, "kind")) ?: "cpu");
			x->deadline = json_integer_value(json_object_get(j, "deadline"));
			x->pidfd = (int)syscall(SYS_pidfd_open, x->h.pid, 0);
			log_info("re-adopted the runtime of %s (sandbox %s)", user, id);
			const char *stopping = json_string_value(json_object_get(j, "stopping"));
			if (stopping)
				request_stop(b, x, stopping);
		} else {
			log_info("runtime record %s is no longer running", e->d_name);
			unlink(path);
		}
		json_decref(j);
	}
	if (d)
		closedir(d);
}

struct sandboxes *sandboxes_open(const struct labd_config *cfg, const char *state_dir)
{
	/* runtimes/ is root:labd 0710: labd-web reaches the Jupyter sockets below
	 * it, other sandboxes' uids do not. */
	static const char *const dirs[][2] = {{"homes", "0700"}, {"runtimes", "0710"},
					      {"boxes", "0700"}};
	struct sandboxes *b = calloc(1, sizeof(*b));
	char path[PATH_LEN + 16];

	if (!b)
		return NULL;
	b->cfg = cfg;
	snprintf(b->state_dir, sizeof(b->state_dir), "%s", state_dir);
	for (size_t i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", state_dir, dirs[i][0]);
		mode_t mode = (mode_t)strtol(dirs[i][1], NULL, 8);
		if ((mkdir(path, mode) < 0 && errno != EEXIST) || chmod(path, mode) < 0 ||
		    chown(path, 0, cfg_gid(cfg)) < 0) {
			log_errno("mkdir %s", path);
			free(b);
			return NULL;
		}
	}
	adopt_all(b);
	if (sandbox_gc(state_dir, false) > 0)
		log_info("cleaned up sandboxes a crash left behind");
	return b;
}

void sandboxes_close(struct sandboxes *b)
{
	if (!b)
		return;
	for (int i = 0; i < MAX_BOXES; i++) {
		if (!b->box[i].used || b->box[i].state == BOX_ENDED)
			continue;
		if (b->box[i].pidfd >= 0)
			close(b->box[i].pidfd);
		sandbox_handle_clear(&b->box[i].h);
	}
	free(b);
}
