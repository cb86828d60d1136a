/* host_pool_adopt.c - a pool's record (<state>/pools/<id>/record.json), its
 * take-over by a restarted supervisor, and how it is named and listed; see
 * host_pool.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "labd/log.h"
#include "supervisor/host_pool.h"
#include "supervisor/host_pool_box.h"
#include "supervisor/keeper.h"

void host_pool_box_init(struct pool_box *p)
{
	p->job.worker_fd = p->job.log.fd = -1;
	p->io = (struct pool_pipes){-1, -1, -1};
}

void host_pool_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void host_pool_close_io(struct pool_box *p)
{
	host_pool_close_fd(&p->io.cmd_fd);
	host_pool_close_fd(&p->io.status_fd);
	host_pool_close_fd(&p->io.out_fd);
}

void host_pool_describe(const struct host_box *b, char *out, size_t len)
{
	snprintf(out, len, "pool %lld of %s", ((const struct pool_box *)b)->pool_id, b->user);
}

void host_pool_identify(const struct host_box *b, json_t *obj)
{
	json_object_set_new(obj, "pool_id", json_integer(((const struct pool_box *)b)->pool_id));
}

void host_pool_list_entry(const struct host_box *b, json_t *entry)
{
	const struct pool_box *p = (const struct pool_box *)b;

	json_object_set_new(entry, "runtime_id", json_integer(0));
	host_pool_identify(b, entry);
	json_object_set_new(entry, "job_id",
			    json_integer(p->job.step != J_NONE ? p->job.job_id : 0));
}

void host_pool_record_path(const struct host *h, const struct host_box *b, char *out,
			   size_t len)
{
	poollaunch_record_path(host_state_dir(h), ((const struct pool_box *)b)->pool_id, out, len);
}

/* Beside the host's fields, what a restarted supervisor needs to take the pool
 * over (or end it): its sizes, whether it is ending, its job. */
void host_pool_record_fields(const struct host_box *b, json_t *j)
{
	const struct pool_box *p = (const struct pool_box *)b;

	json_object_set_new(j, "user_id", json_integer(p->user_id));
	json_object_set_new(j, "pool_id", json_integer(p->pool_id));
	json_object_set_new(j, "job_id", json_integer(p->job.job_id));
	json_object_set_new(j, "cpus_milli", json_integer(p->cpus_milli));
	if (p->scratch_home)
		json_object_set_new(j, "scratch_home", json_true());
	json_object_set_new(j, "ready", json_boolean(b->ready));
	if (b->cause[0]) /* killed: a new supervisor finishes the end */
		json_object_set_new(j, "ending",
				    json_pack("{s:s,s:s,s:b}", "cause", b->cause, "reason",
					      b->reason, "failed", b->failed));
	if (p->job.step != J_NONE)
		json_object_set_new(j, "job", jobrun_record((struct pool_box *)p));
}

/* Takes over a running pool: the agent's pipes from its keeper, the job in it. */
static int adopt_running(struct host *h, struct pool_box *p, json_t *j)
{
	int fds[KEEPER_HELD_MAX];
	unsigned n = 0;
	int rc = keeper_fetch(p->keeper_sock, fds, KEEPER_HELD_MAX, &n);

	/* a keeper of an earlier release holds the agent's pipes only */
	if (rc < 0 || n < 2 || n > 3) {
		for (unsigned i = 0; rc == 0 && i < n; i++)
			close(fds[i]);
		log_warn("pool %lld of %s: its keeper is gone (%s)", p->pool_id, p->b.user,
			 rc < 0 ? strerror(-rc) : "it holds no pipes");
		return rc < 0 ? rc : -EPROTO;
	}
	p->io.cmd_fd = fds[0];
	p->io.status_fd = fds[1];
	if (n == 3 && p->b.h.status_fd < 0)
		p->b.h.status_fd = fds[2];
	else if (n == 3)
		close(fds[2]);
	if (fcntl(p->io.cmd_fd, F_SETFL, O_NONBLOCK) < 0 ||
	    fcntl(p->io.status_fd, F_SETFL, O_NONBLOCK) < 0)
		return -errno;
	p->b.pidfd = (int)syscall(SYS_pidfd_open, p->b.h.pid, 0);
	if (p->b.pidfd < 0)
		return -errno;
	p->b.state = H_RUNNING;
	json_t *job = json_object_get(j, "job");
	if (job && (rc = jobrun_restore(h, p, job)) < 0)
		return rc;
	return 0;
}

/* A pool a previous supervisor left: taken over where that one left it (the
 * agent's status lines written meanwhile wait in its pipe), or ended. */
static void adopt_one(struct host *h, json_t *j)
{
	struct pool_box *p = (struct pool_box *)host_claim(h, &host_pool, NULL);
	json_t *ending = json_object_get(j, "ending");
	const char *id;
	bool adopted;

	if (!p || !(id = host_adopt_fields(&p->b, j)))
		return;
	host_pool_box_init(p);
	p->b.used = true;
	p->pool_id = json_integer_value(json_object_get(j, "pool_id"));
	p->user_id = (uint32_t)json_integer_value(json_object_get(j, "user_id"));
	p->cpus_milli = (uint32_t)json_integer_value(json_object_get(j, "cpus_milli"));
	p->scratch_home = json_is_true(json_object_get(j, "scratch_home"));
	p->b.ready = json_is_true(json_object_get(j, "ready"));
	keeper_sock_path(host_state_dir(h), id, p->keeper_sock, sizeof(p->keeper_sock));
	adopted = sandbox_adopt(host_state_dir(h), id, &p->b.h) == 0;
	if (ending) { /* it was being killed: that end is finished */
		host_set_end(&p->b, json_string_value(json_object_get(ending, "cause")) ?: "gone",
			     json_is_true(json_object_get(ending, "failed")),
			     json_string_value(json_object_get(ending, "reason")) ?: "it was ending");
		host_adopt_end(h, &p->b, adopted);
		return;
	}
	if (adopted && adopt_running(h, p, j) == 0) {
		log_info("re-adopted pool %lld of %s (sandbox %s)", p->pool_id, p->b.user, id);
		host_save(h, &p->b);
		return;
	}
	host_pool_close_fd(&p->b.pidfd);
	host_pool_close_io(p);
	jobrun_clear(p);
	host_set_end(&p->b, "gone", true,
		     json_integer_value(json_object_get(j, "job_id"))
			     ? "the supervisor restarted and the pool's sandbox or keeper is gone: the job is lost"
			     : "the supervisor restarted and the pool's sandbox or keeper is gone");
	host_adopt_end(h, &p->b, adopted);
}

void host_pool_adopt_all(struct host *h)
{
	char dir[LAUNCH_PATH_MAX], path[LAUNCH_PATH_MAX + 300];
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/pools", host_state_dir(h));
	d = opendir(dir);
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/record.json", dir, e->d_name);
		json_t *j = json_load_file(path, 0, NULL);
		if (j)
			adopt_one(h, j);
		else /* a build that never finished: nothing holds it */
			poollaunch_remove(host_state_dir(h), strtoll(e->d_name, NULL, 10));
		json_decref(j);
	}
	if (d)
		closedir(d);
}
