/* gpus.c - GET /api/v1/gpus: the GPU pool's devices (whole cards, MIG
 * instances, time-sliced shares) and its queue, for any logged-in user.
 * Admins see who holds each device and every queued start; a user sees only
 * free or busy (and "you" on a device of theirs, with its budget notice), and
 * of others' queued starts only their position and when they queued (their
 * own carries everything plus "you": true). POST /api/v1/gpus/rescan (admin)
 * reads which devices there are again. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "config/config.h"
#include "http/http.h"
#include "labd/app.h"
#include "labd/log.h"
#include "runtime/gpubudget.h"
#include "sched/gpus.h"
#include "store/runtimes.h"

/* An integer, or null when unknown (negative). */
static json_t *known(int64_t v)
{
	return v >= 0 ? json_integer(v) : json_null();
}

static const char *kind_name(enum gpudev_kind k)
{
	return k == GPUDEV_MIG ? "mig" : k == GPUDEV_SHARE ? "share" : "whole";
}

/* What labd knows of the device itself: id, kind, card, profile, uuid. */
static json_t *device_json(const struct gpu_info *g)
{
	char text[GPUDEV_TEXT_MAX];

	gpudev_format(g->id, text, sizeof(text));
	return json_pack("{s:s,s:s,s:I,s:s,s:o,s:f,s:o}", "device", text, "kind",
			 kind_name(g->kind), "card", (json_int_t)g->card, "profile", g->profile,
			 "uuid", g->uuid[0] ? json_string(g->uuid) : json_null(), "fraction",
			 g->fraction_milli / 1000.0, "budget_bytes", known(g->budget_bytes));
}

static json_t *gpu_json(struct app *app, const struct gpu_info *g, const struct gpu_hold *h,
			const struct auth_identity *who)
{
	bool admin = who->user.role == USER_ROLE_ADMIN;
	bool mine = h && gpus_hold_busy(h) && !strcmp(h->user, who->user.name);
	char notice[GPUBUDGET_TEXT_MAX] = "";
	json_t *j = json_pack("{s:I,s:o,s:o,s:o,s:o,s:o,s:s,s:s}", "id", (json_int_t)g->id, "name",
			      g->name[0] ? json_string(g->name) : json_null(), "memory_bytes",
			      known(g->memory_bytes), "memory_used_bytes",
			      known(g->memory_used_bytes), "utilization_percent",
			      known(g->utilization_percent), "temperature_c",
			      known(g->temperature_c), "source", gpus_source_name(g->source),
			      "state", h && gpus_hold_busy(h) ? "busy" : "free");

	if (j)
		json_object_update_new(j, device_json(g));
	if (j && mine)
		json_object_set_new(j, "you", json_true());
	if (j && (admin || mine) && gpubudget_notice(app->gpu_budget, g->id, notice, sizeof(notice)))
		json_object_set_new(j, "notice", json_string(notice));
	if (j && admin)
		json_object_set_new(j, "holder",
				    h && h->runtime_id
					    ? json_pack("{s:s,s:I}", "user", h->user, "runtime_id",
							(json_int_t)h->runtime_id)
				    : h && h->job_pool_id
					    ? json_pack("{s:s,s:I}", "user", h->user, "job_pool_id",
							(json_int_t)h->job_pool_id)
					    : json_null());
	return j;
}

struct queue_walk {
	json_t *entries;
	const struct auth_identity *who;
};

static int add_queued(const struct runtime *r, void *ctx)
{
	struct queue_walk *w = ctx;
	bool mine = r->user_id == w->who->user.id;
	char queued[21], estimate[21];
	json_t *e;

	if (r->state != RUNTIME_QUEUED)
		return 0;
	api_time(r->queued_at, queued);
	api_time(r->queue_estimate_at, estimate);
	/* positions count within a kind of device (docs/gpu.md "The queue per kind") */
	e = json_pack("{s:i,s:s,s:s}", "position", r->queue_position, "queued_at", queued,
		      "gpu_kind", r->gpu_kind);
	if (e && (mine || w->who->user.role == USER_ROLE_ADMIN)) {
		json_object_set_new(e, "runtime_id", json_integer(r->id));
		json_object_set_new(e, "user", json_string(r->user_name));
		json_object_set_new(e, "estimate_start_at", r->queue_estimate_at
								 ? json_string(estimate)
								 : json_null());
	}
	if (e && mine)
		json_object_set_new(e, "you", json_true());
	json_array_append_new(w->entries, e);
	return 0;
}

static int by_position(const void *a, const void *b)
{
	/* each kind of device has its own places: kind by kind */
	int kind = strcmp(json_string_value(json_object_get(*(json_t *const *)a, "gpu_kind")),
			  json_string_value(json_object_get(*(json_t *const *)b, "gpu_kind")));
	if (kind)
		return kind;
	json_int_t pa = json_integer_value(json_object_get(*(json_t *const *)a, "position"));
	json_int_t pb = json_integer_value(json_object_get(*(json_t *const *)b, "position"));
	return (pa > pb) - (pa < pb);
}

/* The queued starts in position order. NULL on a store failure. */
static json_t *queue_json(struct app *app, const struct auth_identity *who)
{
	struct queue_walk w = {json_array(), who};
	json_t *sorted = json_array(), *e;
	json_t **v = NULL;
	size_t n, i;

	if (!w.entries || !sorted || runtimes_each_live(app->db, add_queued, &w) < 0)
		goto fail;
	n = json_array_size(w.entries);
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v)
		goto fail;
	json_array_foreach(w.entries, i, e)
		v[i] = e;
	qsort(v, n, sizeof(*v), by_position);
	for (i = 0; i < n; i++)
		json_array_append(sorted, v[i]);
	free(v);
	json_decref(w.entries);
	return sorted;
fail:
	json_decref(w.entries);
	json_decref(sorted);
	return NULL;
}

void api_gpus(struct http_request *req)
{
	const struct auth_identity *who = http_identity(req);
	struct app *app = http_app(req);
	struct gpu_info *info = calloc(GPUS_DEVICES_MAX, sizeof(*info));
	struct gpu_hold *holds = calloc(GPUS_DEVICES_MAX, sizeof(*holds));
	size_t n = app->gpus && info ? gpus_snapshot(app->gpus, info, GPUS_DEVICES_MAX) : 0;
	int held = !holds ? -ENOMEM
		   : app->gpus ? gpus_device_holders(app->db, app->gpus, time(NULL), holds,
						     GPUS_DEVICES_MAX)
			       : 0;
	json_t *gpus = json_array(), *queue = queue_json(app, who);

	if (!info || held < 0 || !gpus || !queue) {
		json_decref(gpus);
		json_decref(queue);
		free(info);
		free(holds);
		http_reply_internal(req);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const struct gpu_hold *h = NULL;
		for (int k = 0; k < held && !h; k++)
			h = holds[k].id == info[i].id ? &holds[k] : NULL;
		json_array_append_new(gpus, gpu_json(app, &info[i], h, who));
	}
	free(info);
	free(holds);
	http_reply_json(req, MHD_HTTP_OK,
			json_pack("{s:o,s:I,s:o}", "gpus", gpus, "queue_length",
				  (json_int_t)json_array_size(queue), "queue", queue));
}

void api_gpus_rescan(struct http_request *req)
{
	struct app *app = http_app(req);
	int rc = app->gpus ? gpus_rescan(app->gpus) : -ENODEV;

	if (!app->gpus) {
		http_reply_error(req, MHD_HTTP_CONFLICT, "no_gpus", "this host has no GPU pool");
		return;
	}
	log_info("gpus: read again at the request of %s", http_identity(req)->user.name);
	/* without NVML the devices are those of the config, read again all the same */
	http_reply_json(req, MHD_HTTP_OK,
			json_pack("{s:b}", "nvml", rc == 0));
}

void api_gpu_notice_set(struct app *app, json_t *obj, int64_t runtime_id, int64_t job_id)
{
	char text[GPUBUDGET_TEXT_MAX];

	if (obj && json_is_object(obj))
		json_object_set_new(obj, "gpu_notice",
				    gpubudget_notice_of(app->gpu_budget, runtime_id, job_id, text,
							sizeof(text))
					    ? json_string(text)
					    : json_null());
}
