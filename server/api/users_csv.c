/* users_csv.c - the user import's CSV; see users_csv.h. */
#include "api/users_csv.h"

#include <csv.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const COLUMN_NAMES[CSV_COLUMNS] = {"name", "email", "groups", "plan",
						       "password"};

const char *users_csv_column_name(enum users_csv_column c)
{
	return COLUMN_NAMES[c];
}

/* The reader's state across libcsv's callbacks. */
struct reader {
	struct users_csv *out;
	size_t record;		     /* records seen, the header included */
	int map[CSV_COLUMNS * 2];    /* header position -> column */
	size_t n_header;	     /* fields in the header */
	size_t n_fields;	     /* fields of the record being read */
	char *fields[CSV_COLUMNS * 2]; /* its fields, by header position */
	char *err;
	size_t errlen;
	bool failed;
};

static void fail(struct reader *r, const char *fmt, ...)
{
	va_list ap;

	if (r->failed)
		return;
	r->failed = true;
	va_start(ap, fmt);
	vsnprintf(r->err, r->errlen, fmt, ap);
	va_end(ap);
}

static int keep_text(struct users_csv *c, char *text)
{
	if (c->n_texts == c->cap_texts) {
		size_t cap = c->cap_texts ? c->cap_texts * 2 : 64;
		char **t = realloc(c->texts, cap * sizeof(*t));
		if (!t)
			return -1;
		c->texts = t;
		c->cap_texts = cap;
	}
	c->texts[c->n_texts++] = text;
	return 0;
}

static void on_field(void *data, size_t len, void *arg)
{
	struct reader *r = arg;
	size_t row = r->record + 1;
	char *text;

	if (r->failed)
		return;
	if (r->n_fields == CSV_COLUMNS * 2 || (r->n_header && r->n_fields == r->n_header)) {
		fail(r, "row %zu: more fields than the header's %zu", row,
		     r->n_header ? r->n_header : (size_t)CSV_COLUMNS * 2);
		return;
	}
	if (len > USERS_CSV_FIELD_MAX || (len && memchr(data, '\0', len))) {
		fail(r, "row %zu, field %zu: longer than %d bytes or holding a NUL byte", row,
		     r->n_fields + 1, USERS_CSV_FIELD_MAX);
		return;
	}
	text = malloc(len + 1);
	if (!text || keep_text(r->out, text) < 0) {
		free(text);
		fail(r, "out of memory");
		return;
	}
	memcpy(text, len ? data : "", len);
	text[len] = '\0';
	r->fields[r->n_fields++] = text;
}

/* The header: known columns, each once, name among them. */
static void read_header(struct reader *r)
{
	for (size_t i = 0; i < r->n_fields && !r->failed; i++) {
		int c = -1;
		for (int k = 0; k < CSV_COLUMNS; k++)
			if (strcmp(r->fields[i], COLUMN_NAMES[k]) == 0)
				c = k;
		if (c < 0)
			fail(r, "row 1: unknown column \"%.64s\" (the columns are name, email, "
				"groups, plan, password)",
			     r->fields[i]);
		else if (r->out->has[c])
			fail(r, "row 1: column \"%s\" named twice", COLUMN_NAMES[c]);
		else
			r->out->has[c] = true;
		r->map[i] = c;
	}
	if (!r->failed && !r->out->has[CSV_NAME])
		fail(r, "row 1: the header names no \"name\" column (a header row is required)");
	r->n_header = r->n_fields;
}

static void on_record(int end, void *arg)
{
	struct reader *r = arg;
	struct users_csv *c = r->out;
	struct users_csv_row *row;

	(void)end;
	if (r->failed)
		return;
	r->record++;
	if (r->record == 1) {
		read_header(r);
		r->n_fields = 0;
		return;
	}
	if (r->n_fields != r->n_header) {
		fail(r, "row %zu: %zu fields, the header has %zu", r->record, r->n_fields,
		     r->n_header);
		return;
	}
	if (c->n == USERS_CSV_MAX_ROWS) {
		fail(r, "row %zu: more than %d users in one import", r->record, USERS_CSV_MAX_ROWS);
		return;
	}
	if (c->n == c->cap_rows) {
		size_t cap = c->cap_rows ? c->cap_rows * 2 : 64;
		struct users_csv_row *rows = realloc(c->rows, cap * sizeof(*rows));
		if (!rows) {
			fail(r, "out of memory");
			return;
		}
		c->rows = rows;
		c->cap_rows = cap;
	}
	row = &c->rows[c->n++];
	row->row = r->record;
	for (int k = 0; k < CSV_COLUMNS; k++)
		row->field[k] = "";
	for (size_t i = 0; i < r->n_fields; i++)
		row->field[r->map[i]] = r->fields[i];
	r->n_fields = 0;
}

int users_csv_parse(const char *text, size_t len, struct users_csv *out, char *err,
		    size_t errlen)
{
	struct reader r = {.out = out, .err = err, .errlen = errlen};
	struct csv_parser p;

	memset(out, 0, sizeof(*out));
	if (len > USERS_CSV_MAX_BYTES) {
		snprintf(err, errlen, "the CSV is larger than %u bytes", USERS_CSV_MAX_BYTES);
		return -1;
	}
	/* a spreadsheet's UTF-8 byte order mark */
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		text += 3, len -= 3;
	if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI) != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (csv_parse(&p, text, len, on_field, on_record, &r) != len ||
	    csv_fini(&p, on_field, on_record, &r) != 0) {
		if (!r.failed)
			fail(&r, "row %zu: %s", r.record + 1,
			     csv_error(&p) == CSV_EPARSE
				     ? "malformed quoting (a quote inside an unquoted field, or one "
				       "never closed)"
				     : "out of memory");
	}
	csv_free(&p);
	if (!r.failed && r.record == 0)
		fail(&r, "row 1: no header row (the columns are name, email, groups, plan, "
			 "password)");
	if (r.failed) {
		users_csv_free(out);
		return -1;
	}
	return 0;
}

void users_csv_free(struct users_csv *c)
{
	for (size_t i = 0; i < c->n_texts; i++)
		free(c->texts[i]);
	free(c->texts);
	free(c->rows);
	memset(c, 0, sizeof(*c));
}
