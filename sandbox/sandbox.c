/* sandbox.c - the supervisor side of a running sandbox: wait, kill, destroy, adopt, gc
 * (starting is start.c, the spec spec.c).  See include/labd/sandbox.h, docs/sandbox.md. */
#include "labd/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "labd/log.h"
#include "sandbox/cgbox.h"
#include "sandbox/fail.h"
#include "sandbox/home.h"
#include "sandbox/netveth.h"
#include "sandbox/state.h"
#include "sandbox/teardown.h"

static int state_dir_of(const char *state_path, char *buf, size_t size)
{
	const char *p = strstr(state_path, "/sandboxes/");
	if (!p || (size_t)(p - state_path) >= size)
		return -1;
	snprintf(buf, size, "%.*s", (int)(p - state_path), state_path);
	return 0;
}

int sandbox_wait(struct sandbox_handle *h, struct sandbox_result *res)
{
	const struct cgbox_layout *lo = cgbox_host();
	struct sandbox_state st;
	int status = 0, cmd_status;
	bool have_cmd = false;

	memset(res, 0, sizeof(*res));
	res->kind = SANDBOX_UNKNOWN;
	if (h->pid <= 0)
		return log_error("sandbox %s: no process", h->id);
	if (h->is_child) {
		while (waitpid(h->pid, &status, 0) < 0) {
			if (errno != EINTR)
				return log_errno("waitpid %d", (int)h->pid);
		}
		if (h->status_fd >= 0 && read(h->status_fd, &cmd_status, sizeof(cmd_status)) == sizeof(cmd_status))
			have_cmd = true;
		if (!have_cmd)
			cmd_status = status;
		if (WIFEXITED(cmd_status)) {
			res->kind = SANDBOX_EXITED;
			res->code = WEXITSTATUS(cmd_status);
		} else {
			res->kind = SANDBOX_SIGNALED;
			res->signal = WTERMSIG(cmd_status);
		}
	} else {
		int pfd = (int)syscall(SYS_pidfd_open, h->pid, 0);
		if (pfd >= 0 && sandbox_proc_start_ticks(h->pid) == h->start_time_ticks) {
			struct pollfd p = {pfd, POLLIN, 0};
			while (poll(&p, 1, -1) < 0 && errno == EINTR) {
			}
		}
		if (pfd >= 0)
			close(pfd);
		/* an adopted init's status pipe (passed along by the process that
		 * started it) still tells how the command ended */
		if (h->status_fd >= 0 &&
		    read(h->status_fd, &cmd_status, sizeof(cmd_status)) == sizeof(cmd_status)) {
			res->kind = WIFEXITED(cmd_status) ? SANDBOX_EXITED : SANDBOX_SIGNALED;
			res->code = WIFEXITED(cmd_status) ? WEXITSTATUS(cmd_status) : 0;
			res->signal = WIFEXITED(cmd_status) ? 0 : WTERMSIG(cmd_status);
		}
	}
	if (lo && sandbox_state_load(h->state_path, &st) == 0) {
		res->oom_kills = cgbox_oom_kills(lo, st.cgroup_parent, st.id);
		/* a SIGKILL with a fresh OOM kill in our memory cgroup is the OOM killer's */
		if (res->oom_kills > 0 && (res->kind == SANDBOX_UNKNOWN ||
					   (res->kind == SANDBOX_SIGNALED && res->signal == SIGKILL)))
			res->kind = SANDBOX_OOM;
	}
	return 0;
}

int sandbox_kill(struct sandbox_handle *h, int sig)
{
	struct sandbox_state st;
	const struct cgbox_layout *lo = cgbox_host();

	if (h->pid <= 0 || sandbox_proc_start_ticks(h->pid) != h->start_time_ticks)
		return 0; /* already gone (or the pid was reused: not ours) */
	if (sig != SIGKILL)
		return kill(h->pid, sig) < 0 ? log_errno("kill %d", (int)h->pid) : 0;
	if (!lo || sandbox_state_load(h->state_path, &st) < 0)
		return kill(h->pid, SIGKILL);
	kill(h->pid, SIGKILL);
	return cgbox_kill(lo, st.cgroup_parent, st.id);
}

void sandbox_handle_clear(struct sandbox_handle *h)
{
	if (h->status_fd >= 0)
		close(h->status_fd);
	memset(h, 0, sizeof(*h));
	h->status_fd = -1;
	h->pid = -1;
}

int sandbox_destroy(struct sandbox_handle *h)
{
	struct sandbox_state st;
	char state_dir[SANDBOX_PATH_MAX];
	int rc = 0;

	if (h->state_path[0] && sandbox_state_load(h->state_path, &st) == 0 &&
	    state_dir_of(h->state_path, state_dir, sizeof(state_dir)) == 0) {
		rc = teardown_sandbox(state_dir, &st);
	}
	if (h->is_child && h->pid > 0) {
		kill(h->pid, SIGKILL);
		waitpid(h->pid, NULL, WNOHANG);
	}
	sandbox_handle_clear(h);
	return rc;
}

int sandbox_adopt(const char *state_dir, const char *id, struct sandbox_handle *h)
{
	struct sandbox_state st;

	memset(h, 0, sizeof(*h));
	h->status_fd = -1;
	if (strchr(id, '/') || sandbox_state_path(state_dir, id, h->state_path, sizeof(h->state_path)) < 0)
		return log_error("bad sandbox id %s", id);
	if (sandbox_state_load(h->state_path, &st) < 0)
		return -1;
	if (!sandbox_state_alive(&st))
		return log_error("sandbox %s: no longer running", id);
	snprintf(h->id, sizeof(h->id), "%s", st.id);
	h->pid = st.pid;
	h->start_time_ticks = st.start_time_ticks;
	return 0;
}

struct gc_ctx {
	const char *state_dir;
};

static bool holder_live(const char *holder, void *arg)
{
	struct gc_ctx *g = arg;
	struct sandbox_state st;
	char path[SANDBOX_PATH_MAX];

	if (sandbox_state_path(g->state_dir, holder, path, sizeof(path)) < 0)
		return false;
	if (access(path, F_OK) < 0)
		return false;
	/* a state file of a sandbox still starting (pid 0) keeps its reference */
	return sandbox_state_load(path, &st) == 0 && (st.pid == 0 || sandbox_state_alive(&st));
}

int sandbox_host_warnings(const char **out, int max)
{
	struct cgbox_layout lo;
	char held[256];

	/* detect fills what it found even when it fails for a missing controller; its
	 * own complaint is held and dropped: the gaps say it better */
	fail_hold(held, sizeof(held));
	cgbox_detect(&lo);
	fail_release();
	return cgbox_gaps(&lo, out, max);
}

static int gc(const char *state_dir, bool all, bool no_starter)
{
	char dir[SANDBOX_PATH_MAX], path[SANDBOX_PATH_MAX * 2];
	struct gc_ctx g = {state_dir};
	struct dirent *e;
	int cleaned = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/sandboxes", state_dir);
	d = opendir(dir);
	if (!d && errno != ENOENT)
		return log_errno("opendir %s", dir);
	while (d && (e = readdir(d))) {
		struct sandbox_state st;
		size_t len = strlen(e->d_name);
		if (len < 7 || strcmp(e->d_name + len - 6, ".state") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (sandbox_state_load(path, &st) < 0) {
			log_warn("gc: removing unreadable state file %s", path);
			unlink(path);
			continue;
		}
		if (!all && sandbox_state_alive(&st))
			continue;
		if (!all && !no_starter && st.pid == 0) {
			/* starting, or its starter died before clone: gone if the file is old */
			struct stat sst;
			if (stat(path, &sst) == 0 && sst.st_mtime + 60 > time(NULL))
				continue;
		}
		log_info("gc: tearing down sandbox %s", st.id);
		teardown_sandbox(state_dir, &st);
		cleaned++;
	}
	if (d)
		closedir(d);
	if (home_gc(state_dir, holder_live, &g) < 0)
		return -1;
	if (netveth_sweep(state_dir, holder_live, &g) > 0)
		log_info("gc: removed veths and host tables of sandboxes no longer running");
	return cleaned;
}

int sandbox_gc(const char *state_dir, bool all)
{
	return gc(state_dir, all, false);
}

int sandbox_veth_leftovers(const char *state_dir)
{
	struct gc_ctx g = {state_dir};

	return netveth_leftovers(state_dir, holder_live, &g);
}

int sandbox_gc_unstarted(const char *state_dir)
{
	return gc(state_dir, false, true);
}
