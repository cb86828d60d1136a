/* homesize.c - home usage and online growth for the web process; see homesize.h. */
#include "supervisor/homesize.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "labd/log.h"
#include "labd/sandbox.h"
#include "proto/proto.h"
#include "supervisor/sizecap.h"
#include "supervisor/homes.h"
#include "supervisor/launch.h"
#include "supervisor/worker.h"

json_t *homesize_usage(const struct labd_config *cfg, const char *state_dir, long long id, const char *user, long long user_id)
{
	char image[LAUNCH_PATH_MAX];
	uint64_t used;
	bool mounted;
	struct stat st;
	json_t *r;

	homes_image_path(cfg, state_dir, user_id, image, sizeof(image));
	r = proto_ok(id);
	if (lstat(image, &st) < 0 || !S_ISREG(st.st_mode)) {
		/* no home yet: made at the first start */
		json_object_set_new(r, "exists", json_false());
		return r;
	}
	int rc = sandbox_home_usage(state_dir, (uint32_t)user_id, user, image, &used, &mounted);
	if (rc < 0) {
		json_decref(r);
		return rc == -EBUSY ? proto_error(id, "home_busy", "the home is being unmounted")
				    : proto_error(id, "home_unreadable",
						  "the home's usage could not be read");
	}
	json_object_set_new(r, "exists", json_true());
	json_object_set_new(r, "mounted", json_boolean(mounted));
	json_object_set_new(r, "used_bytes", json_integer((json_int_t)used));
	json_object_set_new(r, "size_bytes", json_integer((json_int_t)st.st_size));
	return r;
}

struct grow_job {
	const char *state_dir, *user, *image;
	long long user_id;
	uint64_t size_bytes;
};

static int grow_worker(void *arg, int fd)
{
	const struct grow_job *j = arg;
	int ok = sandbox_home_grow(j->state_dir, (uint32_t)j->user_id, j->user, j->image,
				   j->size_bytes) == 0;

	if (ok)
		log_info("grew %s's home to %llu bytes online", j->user,
			 (unsigned long long)j->size_bytes);
	else
		log_error("online growth of %s's home to %llu bytes failed: it grows at the next "
			  "start", j->user, (unsigned long long)j->size_bytes);
	return worker_send(fd, &ok, sizeof(ok), -1) < 0 || !ok;
}

json_t *homesize_resized(long long id, int fd)
{
	int ok = 0, passed;
	ssize_t n = worker_recv(fd, &ok, sizeof(ok), &passed);
	json_t *r = proto_ok(id);

	if (n > 0 && passed >= 0)
		close(passed);
	json_object_set_new(r, "applied",
			    json_string(n == (ssize_t)sizeof(ok) && ok ? "online" : "next_start"));
	return r;
}

json_t *homesize_resize(const struct labd_config *cfg, const char *state_dir, long long id,
			const char *user, long long user_id, long long size_bytes,
			int *worker_fd)
{
	char image[LAUNCH_PATH_MAX];
	struct sizecap_sizes cap;
	struct grow_job j;
	struct stat st;
	uint64_t used;
	bool mounted = false;
	pid_t pid;
	int fd, rc;
	json_t *r;

	sizecap_machine(cfg, &cap);
	if ((uint64_t)size_bytes > cap.home_size_bytes)
		return proto_error(id, "above_machine_cap",
				   "size_bytes is above the machine cap ([runtime] home_size_max)");
	homes_image_path(cfg, state_dir, user_id, image, sizeof(image));
	r = proto_ok(id);
	if (lstat(image, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)size_bytes <= (uint64_t)st.st_size) {
		json_object_set_new(r, "applied", json_string("unchanged"));
		return r;
	}
	if (lstat(image, &st) < 0 || !S_ISREG(st.st_mode) ||
	    sandbox_home_usage(state_dir, (uint32_t)user_id, user, image, &used, &mounted) < 0 ||
	    !mounted) {
		json_object_set_new(r, "applied", json_string("next_start"));
		return r;
	}
	j = (struct grow_job){state_dir, user, image, user_id, (uint64_t)size_bytes};
	/* fork copies j: it only needs to live until then */
	if ((rc = worker_spawn(grow_worker, &j, WORKER_HOME_LIMIT_MS, &pid, &fd)) < 0) {
		json_decref(r);
		return proto_error(id, "grow_failed", strerror(-rc));
	}
	/* the worker is reaped with the others on SIGCHLD; its result answers */
	log_info("growing %s's home to %lld bytes online (worker %d)", user, size_bytes, (int)pid);
	json_decref(r);
	*worker_fd = fd;
	return NULL;
}
