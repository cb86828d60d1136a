/* teardown.c - release what one sandbox holds on the host; see teardown.h. */
#include "sandbox/teardown.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "labd/fault.h"
#include "labd/log.h"
#include "sandbox/cgbox.h"
#include "sandbox/egress.h"
#include "sandbox/netveth.h"
#include "sandbox/home.h"
#include "sandbox/homescratch.h"
#include "sandbox/rundir.h"

/* Removes a directory tree without following any symlink: the run dir was writable
 * from inside, so it may hold links planted to make the host delete its own files. */
static int remove_tree_at(int at, const char *name, int depth)
{
	int fd;
	DIR *d;
	struct dirent *e;

	if (depth > 64)
		return -1;
	if (unlinkat(at, name, 0) == 0 || errno == ENOENT)
		return 0;
	fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		remove_tree_at(dirfd(d), e->d_name, depth + 1);
	}
	closedir(d);
	return unlinkat(at, name, AT_REMOVEDIR);
}

static int remove_tree(const char *path)
{
	char parent[SANDBOX_PATH_MAX];
	const char *base = strrchr(path, '/');
	int fd, rc;

	if (!base || !base[1])
		return -1;
	snprintf(parent, sizeof(parent), "%.*s", (int)(base - path), path);
	fd = open(parent[0] ? parent : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	rc = remove_tree_at(fd, base + 1, 0);
	close(fd);
	return rc < 0 && errno != ENOENT ? -1 : 0;
}

int teardown_sandbox(const char *state_dir, const struct sandbox_state *st)
{
	const struct cgbox_layout *lo = cgbox_host();
	char path[SANDBOX_PATH_MAX];
	int rc = 0;

	if (sandbox_state_alive(st))
		kill(st->pid, SIGKILL); /* init dies, and the kernel kills its pid namespace */
	if (lo) {
		char net[SANDBOX_ID_MAX + 8];
		if (cgbox_kill(lo, st->cgroup_parent, st->id) < 0)
			rc = -1;
		if (cgbox_remove(lo, st->cgroup_parent, st->id) < 0)
			rc = -1;
		/* pasta, when the sandbox had egress: it holds the namespace alive, and
		 * would outlive the sandbox */
		egress_cgroup_name(st->id, net, sizeof(net));
		if (cgbox_kill(lo, st->cgroup_parent, net) < 0 ||
		    cgbox_remove(lo, st->cgroup_parent, net) < 0)
			rc = -1;
	}
	FAULT_POINT("sandbox.teardown.cgroups"); /* the home is still mounted */
	egress_files_remove(state_dir, st->id);
	netveth_remove(state_dir, st->id); /* its veth went with the namespace; the host's table not */
	if (st->home_image[0] && home_unref(state_dir, st->home_key, st->id) < 0)
		rc = -1;
	if (st->scratch_home && homescratch_remove(state_dir, st->id) < 0)
		rc = -1;
	if (st->run_dir[0] && rundir_unmount(st->run_dir) < 0)
		rc = log_errno("unmount run dir %s", st->run_dir);
	if (st->run_dir[0] && remove_tree(st->run_dir) < 0)
		rc = log_errno("remove run dir %s", st->run_dir);
	if (sandbox_state_path(state_dir, st->id, path, sizeof(path)) == 0 && unlink(path) < 0 &&
	    errno != ENOENT)
		rc = log_errno("unlink %s", path);
	return rc;
}
