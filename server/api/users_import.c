/* users_import.c - POST /api/v1/users/import: many users from a CSV
 * (api/users_csv.h), a dry run first. Every row is checked, in the file and
 * against the store (names taken, groups and plans that do not exist), and
 * every bad row is named with its column; the users are created only when
 * no row is bad, all in one transaction. Groups and plans must exist: a typo
 * must not make a new course. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "api/users_csv.h"
#include "auth/password.h"
#include "config/config.h"
#include "http/http.h"
#include "labd/app.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "store/audit.h"
#include "store/users_import.h"

#define EMAIL_MAX 254
/* Each password is hashed at the [auth] scrypt_* cost (about 0.1 s on an idle
 * core at the defaults, 0.6 s measured on a loaded 2-core host) while a
 * worker thread waits: an import holds at most this many. */
#define PASSWORDS_MAX 100

/* One row as checked and, when good, as stored. */
struct import_work {
	const struct users_csv_row *csv;
	struct users_import_row in;
	char groups[USERS_CSV_FIELD_MAX + 1]; /* the groups field, cut at ';' */
	char hash[PASSWORD_HASH_MAX];
	const char *column; /* NULL = good */
	char error[160];
};

static void row_bad(struct import_work *w, enum users_csv_column c, const char *fmt, const char *arg)
{
	if (w->column)
		return; /* the first fault of a row is the one named */
	w->column = users_csv_column_name(c);
	snprintf(w->error, sizeof(w->error), fmt, arg);
}

/* Printable ASCII, one '@' with text on both sides: what a mail address
 * needs to be told apart from a typo; delivery is not labd's to check. */
static bool email_ok(const char *e)
{
	const char *at = strchr(e, '@');

	if (!at || at == e || !at[1] || strchr(at + 1, '@') || strlen(e) > EMAIL_MAX)
		return false;
	for (; *e; e++)
		if (*e <= ' ' || *e > '~' || *e == ',' || *e == ';')
			return false;
	return true;
}

/* Splits the groups field at ';' (spaces around each dropped). */
static void read_groups(struct import_work *w)
{
	char *save = NULL, *g;

	snprintf(w->groups, sizeof(w->groups), "%s", w->csv->field[CSV_GROUPS]);
	for (g = strtok_r(w->groups, ";", &save); g; g = strtok_r(NULL, ";", &save)) {
		char *end;

		g += strspn(g, " \t");
		end = g + strlen(g);
		while (end > g && (end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		if (!*g)
			continue;
		if (!parse_user_name_ok(g))
			return row_bad(w, CSV_GROUPS, "\"%.40s\" is not a group name", g);
		if (w->in.n_groups == USERS_IMPORT_GROUPS)
			return row_bad(w, CSV_GROUPS, "more than %s groups", "16");
		w->in.groups[w->in.n_groups++] = g;
	}
}

/* The checks that need no store. */
static void check_row(struct http_request *req, struct import_work *w)
{
	const char *const *f = w->csv->field, *why;

	w->in.name = f[CSV_NAME];
	w->in.email = f[CSV_EMAIL];
	w->in.plan = f[CSV_PLAN];
	w->in.hash = "";
	if (!parse_user_name_ok(f[CSV_NAME]))
		row_bad(w, CSV_NAME, "%s", f[CSV_NAME][0] ? "must match " PARSE_USER_NAME_RULE
							  : "is empty");
	if (f[CSV_EMAIL][0] && !email_ok(f[CSV_EMAIL]))
		row_bad(w, CSV_EMAIL, "\"%.60s\" is not an e-mail address", f[CSV_EMAIL]);
	read_groups(w);
	if (f[CSV_PLAN][0] && !parse_user_name_ok(f[CSV_PLAN]))
		row_bad(w, CSV_PLAN, "\"%.40s\" is not a plan name", f[CSV_PLAN]);
	/* empty: no local password (single sign-on only) */
	if (f[CSV_PASSWORD][0] &&
	    (why = password_policy_error(f[CSV_PASSWORD], http_app(req)->cfg->min_password_length)))
		row_bad(w, CSV_PASSWORD, "%s", why);
}

static int by_name(const void *a, const void *b)
{
	const struct import_work *x = *(struct import_work *const *)a, *y = *(struct import_work *const *)b;
	int c = strcmp(x->in.name, y->in.name);
	return c ? c : (x->csv->row > y->csv->row) - (x->csv->row < y->csv->row);
}

/* A name on two rows: the later one is bad. */
static int check_twice(struct import_work *w, size_t n)
{
	struct import_work **order = malloc((n ? n : 1) * sizeof(*order));
	char row[24];

	if (!order)
		return -1;
	for (size_t i = 0; i < n; i++)
		order[i] = &w[i];
	qsort(order, n, sizeof(*order), by_name);
	for (size_t i = 1; i < n; i++)
		if (strcmp(order[i]->in.name, order[i - 1]->in.name) == 0) {
			snprintf(row, sizeof(row), "%zu", order[i - 1]->csv->row);
			row_bad(order[i], CSV_NAME, "is also on row %s", row);
		}
	free(order);
	return 0;
}

/* The store's view (names taken, groups and plans missing) of the rows good
 * so far; with commit and every row good, they are created. Returns the
 * store's answer (bad rows, or -1). */
static int check_store(struct http_request *req, struct import_work *w, size_t n, bool commit)
{
	struct users_import_row *rows = malloc((n ? n : 1) * sizeof(*rows));
	struct users_import_result *res = malloc((n ? n : 1) * sizeof(*res));
	size_t *at = malloc((n ? n : 1) * sizeof(*at)), k = 0;
	int rc = -1;

	if (!rows || !res || !at)
		goto out;
	for (size_t i = 0; i < n; i++)
		if (!w[i].column) {
			at[k] = i;
			rows[k++] = w[i].in;
		}
	rc = users_import(http_app(req)->db, rows, k, commit, time(NULL), res);
	for (size_t j = 0; rc > 0 && j < k; j++) {
		struct import_work *one = &w[at[j]];
		if (res[j].check == USERS_IMPORT_NAME_TAKEN)
			row_bad(one, CSV_NAME, "user \"%s\" already exists", one->in.name);
		else if (res[j].check == USERS_IMPORT_NO_GROUP)
			row_bad(one, CSV_GROUPS, "no group named \"%s\"", one->in.groups[res[j].which]);
		else if (res[j].check == USERS_IMPORT_NO_PLAN)
			row_bad(one, CSV_PLAN, "no plan named \"%s\"", one->in.plan);
	}
out:
	free(rows);
	free(res);
	free(at);
	return rc;
}

/* Hashes the passwords given: 0, or -1. */
static int hash_passwords(struct http_request *req, struct import_work *w, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!w[i].csv->field[CSV_PASSWORD][0])
			continue;
		if (password_hash(w[i].csv->field[CSV_PASSWORD], http_app(req)->password,
				  w[i].hash) < 0)
			return -1;
		w[i].in.hash = w[i].hash;
	}
	return 0;
}

static json_t *rows_json(const struct import_work *w, size_t n, size_t *bad)
{
	json_t *rows = json_array();

	*bad = 0;
	for (size_t i = 0; i < n; i++) {
		json_t *one = json_pack("{s:I,s:s,s:b}", "row", (json_int_t)w[i].csv->row, "name",
					w[i].in.name, "ok", !w[i].column);
		if (w[i].column) {
			(*bad)++;
			json_object_set_new(one, "column", json_string(w[i].column));
			json_object_set_new(one, "error", json_string(w[i].error));
		}
		json_array_append_new(rows, one);
	}
	return rows;
}

/* The CSV and dry_run from a text/csv body (?dry_run=true) or a JSON one
 * ({"csv": "...", "dry_run": true}): 0, or -1 with the reply set. *json
 * holds the JSON body the text lives in. */
static int read_request(struct http_request *req, const char **text, size_t *len, bool *dry_run,
			json_t **json)
{
	static const char *const fields[] = {"csv", "dry_run", NULL};
	const char *q;

	*json = NULL;
	if (http_content_type_is(req, "text/csv")) {
		q = http_query(req, "dry_run");
		*dry_run = q && (strcmp(q, "true") == 0 || strcmp(q, "1") == 0);
		*text = http_body(req, len);
		return 0;
	}
	if (!http_content_type_is(req, "application/json")) {
		http_reply_error(req, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type",
				 "send the CSV as Content-Type: text/csv, or as {\"csv\": ...} in "
				 "application/json");
		return -1;
	}
	if (!(*json = api_body(req, fields)))
		return -1;
	*dry_run = false;
	if (api_string(req, *json, "csv", text) != 1 || api_bool(req, *json, "dry_run", dry_run) < 0) {
		if (!http_has_reply(req))
			http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_field",
					 "field \"csv\" is required: the CSV's text");
		return -1;
	}
	*len = strlen(*text);
	return 0;
}

static void reply(struct http_request *req, struct import_work *w, size_t n, bool dry_run, bool created)
{
	size_t bad;
	json_t *rows = rows_json(w, n, &bad), *out;

	out = json_pack("{s:b,s:I,s:I,s:o}", "dry_run", dry_run, "created",
			(json_int_t)(created ? n : 0), "bad", (json_int_t)bad, "rows", rows);
	if (!dry_run && !created)
		json_object_set_new(out, "error",
				    json_pack("{s:s,s:s}", "code", "bad_rows", "message",
					      "some rows are bad: nothing was created"));
	http_reply_json(req, dry_run ? MHD_HTTP_OK : created ? MHD_HTTP_CREATED : 422, out);
}

void api_users_import(struct http_request *req)
{
	struct users_csv csv = {0};
	struct import_work *w = NULL;
	const char *text = NULL;
	char err[256], detail[64];
	size_t len = 0, n, bad;
	bool dry_run = false;
	json_t *json = NULL;
	int rc = 0;

	if (read_request(req, &text, &len, &dry_run, &json) < 0)
		goto out;
	if (users_csv_parse(text ? text : "", len, &csv, err, sizeof(err)) < 0) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_csv", "%s", err);
		goto out;
	}
	n = csv.n;
	if (n == 0) {
		http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_csv",
				 "row 2: the CSV has a header and no users");
		goto out;
	}
	if (!(w = calloc(n, sizeof(*w)))) {
		http_reply_internal(req);
		goto out;
	}
	for (size_t i = 0, with_password = 0; i < n; i++) {
		w[i].csv = &csv.rows[i];
		check_row(req, &w[i]);
		if (csv.rows[i].field[CSV_PASSWORD][0] && ++with_password > PASSWORDS_MAX)
			row_bad(&w[i], CSV_PASSWORD,
				"more than %s passwords in one import (each takes a hash): import "
				"the rest separately, or leave it empty for single sign-on",
				"100");
	}
	if (check_twice(w, n) < 0 || check_store(req, w, n, false) < 0) {
		http_reply_internal(req);
		goto out;
	}
	bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += w[i].column != NULL;
	if (dry_run || bad) {
		reply(req, w, n, dry_run, false);
		goto out;
	}
	/* every row good: hash what was given, then create them all at once */
	if (hash_passwords(req, w, n) < 0 || (rc = check_store(req, w, n, true)) != 0) {
		if (rc > 0) /* the store changed between the checks */
			reply(req, w, n, false, false);
		else
			http_reply_internal(req);
		goto out;
	}
	snprintf(detail, sizeof(detail), "%zu users", n);
	if (audit_add(http_app(req)->db, time(NULL), http_identity(req)->user.name, "user.import",
		      NULL, http_address(req), detail) < 0)
		log_error("audit: an import of %zu users not recorded", n);
	reply(req, w, n, false, true);
out:
	free(w);
	users_csv_free(&csv);
	json_decref(json);
}
