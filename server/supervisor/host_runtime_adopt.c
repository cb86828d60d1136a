/* host_runtime_adopt.c - a runtime's record (<state>/boxes/<user>.json), its
 * re-adoption by a restarted supervisor, how it is named and listed, and the
 * host's warnings; see host_runtime.h. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "labd/log.h"
#include "supervisor/host_runtime.h"
#include "supervisor/host_runtime_box.h"
#include "supervisor/runkeeper.h"

void host_runtime_describe(const struct host_box *b, char *out, size_t len)
{
	snprintf(out, len, "runtime of %s", b->user);
}

void host_runtime_identify(const struct host_box *b, json_t *obj)
{
	json_object_set_new(obj, "runtime_id",
			    json_integer(((const struct runtime_box *)b)->runtime_id));
}

void host_runtime_list_entry(const struct host_box *b, json_t *entry)
{
	host_runtime_identify(b, entry);
	json_object_set_new(entry, "pool_id", json_integer(0));
	json_object_set_new(entry, "job_id", json_integer(0));
}

void host_runtime_record_path(const struct host *h, const struct host_box *b, char *out,
			      size_t len)
{
	snprintf(out, len, "%s/boxes/%s.json", host_state_dir(h), b->user);
}

/* Beside the host's fields: what the runtime is, and a stop under way (a
 * restarted supervisor finishes it). */
void host_runtime_record_fields(const struct host_box *b, json_t *rec)
{
	const struct runtime_box *x = (const struct runtime_box *)b;

	json_object_set_new(rec, "kind", json_string(x->kind));
	json_object_set_new(rec, "runtime_id", json_integer(x->runtime_id));
	if (b->state == H_STOPPING)
		json_object_set_new(rec, "stopping", json_string(b->reason));
	if (x->keeper) /* informative: re-adoption asks the keeper's socket */
		json_object_set_new(rec, "keeper_pid", json_integer(x->keeper));
}

/* Re-adopts one record a previous supervisor left; false when it is gone. */
static bool adopt_one(struct host *h, json_t *j)
{
	struct runtime_box *x = (struct runtime_box *)host_claim(h, &host_runtime, NULL);
	const char *stopping = json_string_value(json_object_get(j, "stopping")), *id;

	if (!x || !(id = host_adopt_fields(&x->b, j)))
		return false;
	x->out_fd = -1;
	if (sandbox_adopt(host_state_dir(h), id, &x->b.h) < 0)
		return false;
	x->b.used = true;
	x->b.state = H_RUNNING;
	snprintf(x->kind, sizeof(x->kind), "%s",
		 json_string_value(json_object_get(j, "kind")) ?: "cpu");
	x->runtime_id = json_integer_value(json_object_get(j, "runtime_id"));
	x->b.pidfd = (int)syscall(SYS_pidfd_open, x->b.h.pid, 0);
	log_info("re-adopted the runtime of %s (sandbox %s)", x->b.user, id);
	/* no keeper (an earlier release's runtime, or it died): a new one, or loudly none */
	if (runkeeper_repair(host_cfg(h), host_state_dir(h), x->b.user, &x->b.h, &x->keeper) == 1)
		x->keeper = (pid_t)json_integer_value(json_object_get(j, "keeper_pid"));
	else if (x->keeper)
		host_save(h, &x->b);
	if (stopping)
		host_stop(h, &x->b, "requested", stopping);
	return true;
}

void host_runtime_adopt_all(struct host *h)
{
	char dir[LAUNCH_PATH_MAX], path[LAUNCH_PATH_MAX + 300];
	const char *state_dir = host_state_dir(h);
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/boxes", state_dir);
	d = opendir(dir);
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.' || !strstr(e->d_name, ".json"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		json_t *j = json_load_file(path, 0, NULL);
		if (!adopt_one(h, j)) {
			log_info("runtime record %s is no longer running", e->d_name);
			unlink(path);
			if (json_string_value(json_object_get(j, "id")))
				runkeeper_end(state_dir, json_string_value(json_object_get(j, "id")));
		}
		json_decref(j);
	}
	if (d)
		closedir(d);
	/* this supervisor holds the state dir's lock and the workers of the one before
	 * died with it (PDEATHSIG): no start is at work, however recent its state file */
	if (sandbox_gc_unstarted(state_dir) > 0)
		log_info("cleaned up sandboxes a crash left behind");
}

/* Gaps in the host's cgroups are said loudly at start-up, never skipped silently;
 * admins see the same sentences in /api/v1/health (host_runtime_warnings). */
static int host_warnings(const char **w)
{
	/* Failure injection for tests: LABD_FAULT_HOST_WARNING=<text> adds text, standing
	 * in for a host without memsw or pids (the detection is unit-tested on fake trees) */
	int n = sandbox_host_warnings(w, HOST_RUNTIME_MAX_WARNINGS - 1);
	const char *fault = getenv("LABD_FAULT_HOST_WARNING");

	if (fault && fault[0])
		w[n++] = fault;
	return n;
}

void host_runtime_log_warnings(void)
{
	const char *w[HOST_RUNTIME_MAX_WARNINGS];
	int n = host_warnings(w);

	for (int i = 0; i < n; i++)
		log_warn("%s", w[i]);
}

json_t *host_runtime_warnings(void)
{
	const char *w[HOST_RUNTIME_MAX_WARNINGS];
	int n = host_warnings(w);
	json_t *list = json_array();

	for (int i = 0; i < n; i++)
		json_array_append_new(list, json_string(w[i]));
	return list;
}
