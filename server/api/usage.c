/* usage.c - the usage ledger over HTTP: a user's own entries and totals
 * (GET /api/v1/me/usage) and the admin's grouped totals (GET /api/v1/usage),
 * as JSON or CSV. Every number is an entry clipped to the window [from, to),
 * so the totals add up to the rows exactly. Times are unix seconds. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "http/http.h"
#include "labd/app.h"
#include "labd/buf.h"
#include "store/groups.h"
#include "store/ledger.h"
#include "store/ledger_window.h"

#define DEFAULT_WINDOW_S (7 * 86400)
#define MAX_DAYS_WINDOW_S (400 * 86400) /* a year and a bit, day by day */
#define MAX_ENTRIES 10000	   /* per answer; a wider window is refused */
#define MAX_TIME_S 253402300799LL  /* 9999-12-31T23:59:59Z */
#define CSV_MAX_BYTES (4 * 1024 * 1024)

struct window {
	int64_t from_s, to_s;
};

static int query_time(struct http_request *req, const char *name, int64_t *out)
{
	const char *text = http_query(req, name);
	char *end;
	long long v;

	if (!text)
		return 0;
	errno = 0;
	v = strtoll(text, &end, 10);
	if (errno || *end || text[0] == '\0' || v < 0 || v > MAX_TIME_S) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "query parameter \"%s\" must be unix seconds from 0 to %lld", name,
				 MAX_TIME_S);
		return -1;
	}
	*out = v;
	return 1;
}

/* from defaults to a week before to, to to now. max_s bounds the window's
 * length (0: only MAX_ENTRIES bounds the answer). */
static int parse_window(struct http_request *req, int64_t max_s, struct window *w)
{
	int has_from;

	w->to_s = time(NULL);
	if (query_time(req, "to", &w->to_s) < 0 || (has_from = query_time(req, "from", &w->from_s)) < 0)
		return -1;
	if (!has_from)
		w->from_s = w->to_s > DEFAULT_WINDOW_S ? w->to_s - DEFAULT_WINDOW_S : 0;
	if (w->from_s >= w->to_s) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "query parameter \"from\" must be before \"to\"");
		return -1;
	}
	if (max_s > 0 && w->to_s - w->from_s > max_s) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
				 "query parameter \"from\" must be at most %lld days before \"to\" "
				 "when grouping by day",
				 (long long)(max_s / 86400));
		return -1;
	}
	return 0;
}

static bool wants_csv(struct http_request *req)
{
	const char *accept = http_header(req, "Accept");
	return accept && strstr(accept, "text/csv") != NULL;
}

static void reply_csv(struct http_request *req, const struct buf *b)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(
		b->len, b->data ? b->data : (char *)"", MHD_RESPMEM_MUST_COPY);

	if (!resp) {
		http_reply_internal(req);
		return;
	}
	MHD_add_response_header(resp, "Content-Type", "text/csv; charset=utf-8");
	http_reply_response(req, MHD_HTTP_OK, resp);
}

static json_t *totals_json(int64_t cpu_s, int64_t gpu_s)
{
	return json_pack("{s:I,s:I,s:I}", "cpu_s", (json_int_t)cpu_s, "gpu_s", (json_int_t)gpu_s,
			 "total_s", (json_int_t)(cpu_s + gpu_s));
}

/* ---- GET /api/v1/me/usage ---- */

struct me_walk {
	struct window w;
	json_t *rows;
	int64_t cpu_s, gpu_s;
	int n;
};

static json_t *or_null(int64_t v)
{
	return v ? json_integer(v) : json_null();
}

static int add_me_row(const struct ledger_entry *e, void *ctx)
{
	struct me_walk *m = ctx;
	struct ledger_span span;
	int64_t in_window;

	if (++m->n > MAX_ENTRIES)
		return 1;
	ledger_entry_span(e, &span);
	in_window = ledger_clip_s(&span, m->w.from_s, m->w.to_s);
	*(e->kind == RUNTIME_GPU ? &m->gpu_s : &m->cpu_s) += in_window;
	json_array_append_new(
		m->rows,
		json_pack("{s:I,s:o,s:s,s:s,s:s,s:I,s:o,s:I,s:I,s:I,s:o}", "id", (json_int_t)e->id,
			  "runtime_id", or_null(e->runtime_id), "kind", runtimes_kind_name(e->kind),
			  "gpus", e->gpus, "plan", e->plan, "start_s", (json_int_t)e->start_at,
			  "end_s", or_null(e->end_at), "last_heartbeat_s",
			  (json_int_t)e->last_heartbeat, "billable_s", (json_int_t)e->billable_s,
			  "seconds_in_window", (json_int_t)in_window, "end_reason",
			  e->end_at ? json_string(e->end_reason) : json_null()));
	/* a training job's attempt or warm period (docs/jobs.md "Billing and quotas") */
	json_object_update_new(json_array_get(m->rows, json_array_size(m->rows) - 1),
			       json_pack("{s:s,s:o,s:o,s:s,s:f,s:I,s:I}", "source", e->source, "job_id",
					 or_null(e->job_id), "pool_id", or_null(e->pool_id),
					 "capacity", e->capacity, "rate", e->rate, "charged_s",
					 (json_int_t)(e->billable_s * e->rate + 0.5),
					 /* a GPU slice's share of its card (docs/gpu.md) */
					 "gpu_fraction_milli",
					 (json_int_t)(e->kind == RUNTIME_GPU ? e->fraction_milli : 1000)));
	return 0;
}

static int too_many(struct http_request *req)
{
	http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
			 "the window \"from\"..\"to\" holds more than %d entries: narrow it",
			 MAX_ENTRIES);
	return -1;
}

/* A JSON integer as CSV text into out; null is the empty field. */
static const char *csv_int(json_t *v, char out[24])
{
	if (json_is_null(v))
		out[0] = '\0';
	else
		snprintf(out, 24, "%lld", (long long)json_integer_value(v));
	return out;
}

/* The columns of one entry that a job's billing adds (docs/jobs.md "Billing and
 * quotas", "Preemptible capacity"): what it bills and at which rate. */
static int me_csv_billing(struct buf *b, json_t *r)
{
	char job[24], pool[24];

	/* sources and capacities are fixed words: nothing to quote */
	return buf_addf(b, ",%s,%s,%s,%s,%.6g,%lld\r\n",
			json_string_value(json_object_get(r, "source")),
			csv_int(json_object_get(r, "job_id"), job),
			csv_int(json_object_get(r, "pool_id"), pool),
			json_string_value(json_object_get(r, "capacity")),
			json_real_value(json_object_get(r, "rate")),
			(long long)json_integer_value(json_object_get(r, "charged_s")));
}

static void me_csv(struct http_request *req, json_t *rows)
{
	char rt[24], end[24];
	struct buf b;
	size_t i;
	json_t *r;
	int rc = 0;

	buf_init(&b, CSV_MAX_BYTES);
	rc = buf_addf(&b, "id,runtime_id,kind,gpus,plan,start_s,end_s,billable_s,"
			  "seconds_in_window,gpu_fraction_milli,source,job_id,pool_id,capacity,rate,"
			  "charged_s\r\n");
	json_array_foreach(rows, i, r) {
		if (rc < 0)
			break;
		/* gpus "0,1" is quoted; kinds and plan names carry no quotes. An
		 * open entry's end_s (and an unknown runtime_id) is an empty field. */
		rc = buf_addf(&b, "%lld,%s,%s,\"%s\",\"%s\",%lld,%s,%lld,%lld,%lld",
			      (long long)json_integer_value(json_object_get(r, "id")),
			      csv_int(json_object_get(r, "runtime_id"), rt),
			      json_string_value(json_object_get(r, "kind")),
			      json_string_value(json_object_get(r, "gpus")),
			      json_string_value(json_object_get(r, "plan")),
			      (long long)json_integer_value(json_object_get(r, "start_s")),
			      csv_int(json_object_get(r, "end_s"), end),
			      (long long)json_integer_value(json_object_get(r, "billable_s")),
			      (long long)json_integer_value(json_object_get(r, "seconds_in_window")),
			      (long long)json_integer_value(json_object_get(r, "gpu_fraction_milli")));
		if (rc >= 0)
			rc = me_csv_billing(&b, r);
	}
	if (rc < 0)
		http_reply_internal(req);
	else
		reply_csv(req, &b);
	buf_release(&b);
}

void api_usage_me(struct http_request *req)
{
	struct me_walk m = {.rows = json_array()};
	int rc;

	if (parse_window(req, 0, &m.w) < 0)
		goto out;
	rc = ledger_each(http_app(req)->db, http_identity(req)->user.id, m.w.from_s, m.w.to_s,
			 add_me_row, &m);
	if (rc < 0) {
		http_reply_internal(req);
	} else if (m.n > MAX_ENTRIES) {
		too_many(req);
	} else if (wants_csv(req)) {
		me_csv(req, m.rows);
	} else {
		http_reply_json(req, MHD_HTTP_OK,
				json_pack("{s:I,s:I,s:O,s:o}", "from", (json_int_t)m.w.from_s, "to",
					  (json_int_t)m.w.to_s, "entries", m.rows, "totals",
					  totals_json(m.cpu_s, m.gpu_s)));
	}
out:
	json_decref(m.rows);
}

/* ---- GET /api/v1/usage (admin) ---- */

enum group_by { GROUP_USER, GROUP_DAY, GROUP_KIND, GROUP_GROUP };

/* The key of usage by a user who is in no group (group names are user-name
 * shaped, so it never collides with one). */
#define NO_GROUP_KEY "(none)"

struct admin_walk {
	struct window w;
	enum group_by by;
	struct db *db;
	json_t *groups; /* key -> [cpu_s, gpu_s] */
	json_t *member_of; /* user id -> [group names], read once per user */
	int64_t cpu_s, gpu_s;
	int n;
	bool failed; /* a store error in the walk */
};

/* Adds seconds of kind to one key's row only. */
static void add_to_key(struct admin_walk *a, const char *key, enum runtime_kind kind,
		       int64_t seconds)
{
	json_t *g = json_object_get(a->groups, key);
	size_t slot = kind == RUNTIME_GPU ? 1 : 0;

	if (!g) {
		g = json_pack("[I,I]", (json_int_t)0, (json_int_t)0);
		json_object_set_new(a->groups, key, g);
	}
	json_array_set_new(g, slot, json_integer(json_integer_value(json_array_get(g, slot)) +
						 seconds));
}

/* Adds seconds of kind to key's row and to the totals. */
static void add_seconds(struct admin_walk *a, const char *key, enum runtime_kind kind,
			int64_t seconds)
{
	add_to_key(a, key, kind, seconds);
	*(kind == RUNTIME_GPU ? &a->gpu_s : &a->cpu_s) += seconds;
}

/* An entry split at UTC midnights, each piece clipped to the window. */
static void add_by_day(struct admin_walk *a, const struct ledger_span *s)
{
	int64_t from = s->start_s > a->w.from_s ? s->start_s : a->w.from_s;
	int64_t to = s->end_s < a->w.to_s ? s->end_s : a->w.to_s;
	char key[16];
	struct tm tm;

	for (int64_t day = from - from % 86400; day < to; day += 86400) {
		int64_t seconds = ledger_clip_s(s, day > from ? day : from, day + 86400 < to ? day + 86400 : to);
		time_t t = (time_t)day;
		gmtime_r(&t, &tm);
		strftime(key, sizeof(key), "%Y-%m-%d", &tm);
		if (seconds > 0)
			add_seconds(a, key, s->kind, seconds);
	}
}

static int append_group(const char *name, void *ctx)
{
	json_array_append_new(ctx, json_string(name));
	return 0;
}

/* The groups user_id is in now (a deleted user's: none); -1 on a store error. */
static json_t *groups_of(struct admin_walk *a, int64_t user_id)
{
	char key[24];
	json_t *names;

	snprintf(key, sizeof(key), "%lld", (long long)user_id);
	if ((names = json_object_get(a->member_of, key)))
		return names;
	names = json_array();
	if (groups_of_user_each(a->db, user_id, append_group, names) < 0) {
		json_decref(names);
		return NULL;
	}
	json_object_set_new(a->member_of, key, names);
	return names;
}

/* An entry counts in each group its user is in now, so groups may add up to
 * more than the totals; a user in none counts under NO_GROUP_KEY. */
static int add_by_group(struct admin_walk *a, const struct ledger_entry *e,
			const struct ledger_span *s)
{
	json_t *names = groups_of(a, e->user_id), *g;
	int64_t seconds = ledger_clip_s(s, a->w.from_s, a->w.to_s);
	size_t i;

	if (!names)
		return -1;
	if (json_array_size(names) == 0) {
		add_seconds(a, NO_GROUP_KEY, e->kind, seconds);
		return 0;
	}
	json_array_foreach(names, i, g)
		add_to_key(a, json_string_value(g), e->kind, seconds);
	*(e->kind == RUNTIME_GPU ? &a->gpu_s : &a->cpu_s) += seconds; /* the totals: once */
	return 0;
}

static int add_admin_row(const struct ledger_entry *e, void *ctx)
{
	struct admin_walk *a = ctx;
	struct ledger_span span;

	if (++a->n > MAX_ENTRIES)
		return 1;
	ledger_entry_span(e, &span);
	if (a->by == GROUP_DAY)
		add_by_day(a, &span);
	else if (a->by == GROUP_GROUP) {
		if (add_by_group(a, e, &span) < 0) {
			a->failed = true;
			return 1;
		}
	} else
		add_seconds(a, a->by == GROUP_USER ? e->user_name : runtimes_kind_name(e->kind),
			    e->kind, ledger_clip_s(&span, a->w.from_s, a->w.to_s));
	return 0;
}

static int key_order(const void *x, const void *y)
{
	return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* The groups as a list sorted by key (days sort by date). */
static json_t *group_list(json_t *groups)
{
	size_t n = json_object_size(groups), i = 0;
	const char **keys = calloc(n ? n : 1, sizeof(*keys));
	const char *key;
	json_t *v, *list = json_array();

	if (!keys)
		return list;
	json_object_foreach(groups, key, v)
		keys[i++] = key;
	qsort(keys, n, sizeof(*keys), key_order);
	for (i = 0; i < n; i++) {
		json_t *g = json_object_get(groups, keys[i]);
		json_t *row = totals_json(json_integer_value(json_array_get(g, 0)),
					  json_integer_value(json_array_get(g, 1)));
		json_object_set_new(row, "key", json_string(keys[i]));
		json_array_append_new(list, row);
	}
	free(keys);
	return list;
}

static int parse_group_by(struct http_request *req, enum group_by *out)
{
	static const char *const names[] = {"user", "day", "kind", "group"};
	const char *text = http_query(req, "group_by");

	*out = GROUP_USER;
	if (!text)
		return 0;
	for (int i = 0; i < 4; i++)
		if (strcmp(text, names[i]) == 0) {
			*out = (enum group_by)i;
			return 0;
		}
	http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
			 "query parameter \"group_by\" must be user, group, day or kind");
	return -1;
}

static void admin_csv(struct http_request *req, const char *column, json_t *list)
{
	struct buf b;
	size_t i;
	json_t *g;
	int rc;

	buf_init(&b, CSV_MAX_BYTES);
	/* keys are user or group names ([a-z0-9_-]), "(none)", dates or kinds:
	 * nothing to quote */
	rc = buf_addf(&b, "%s,cpu_s,gpu_s,total_s\r\n", column);
	json_array_foreach(list, i, g) {
		if (rc < 0)
			break;
		rc = buf_addf(&b, "%s,%lld,%lld,%lld\r\n", json_string_value(json_object_get(g, "key")),
			      (long long)json_integer_value(json_object_get(g, "cpu_s")),
			      (long long)json_integer_value(json_object_get(g, "gpu_s")),
			      (long long)json_integer_value(json_object_get(g, "total_s")));
	}
	if (rc < 0)
		http_reply_internal(req);
	else
		reply_csv(req, &b);
	buf_release(&b);
}

void api_usage_all(struct http_request *req)
{
	static const char *const columns[] = {"user", "day", "kind", "group"};
	struct admin_walk a = {.db = http_app(req)->db, .groups = json_object(),
			       .member_of = json_object()};
	json_t *list;
	int rc;

	if (parse_group_by(req, &a.by) < 0 ||
	    parse_window(req, a.by == GROUP_DAY ? MAX_DAYS_WINDOW_S : 0, &a.w) < 0)
		goto out;
	rc = ledger_each(http_app(req)->db, 0, a.w.from_s, a.w.to_s, add_admin_row, &a);
	if (rc < 0 || a.failed) {
		http_reply_internal(req);
		goto out;
	}
	if (a.n > MAX_ENTRIES) {
		too_many(req);
		goto out;
	}
	list = group_list(a.groups);
	if (wants_csv(req)) {
		admin_csv(req, columns[a.by], list);
		json_decref(list);
	} else {
		http_reply_json(req, MHD_HTTP_OK,
				json_pack("{s:I,s:I,s:s,s:o,s:o}", "from", (json_int_t)a.w.from_s,
					  "to", (json_int_t)a.w.to_s, "group_by", columns[a.by],
					  "groups", list, "totals", totals_json(a.cpu_s, a.gpu_s)));
	}
out:
	json_decref(a.groups);
	json_decref(a.member_of);
}
