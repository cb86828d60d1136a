/* users_csv.h - the CSV of a user import (POST /api/v1/users/import), read
 * with libcsv (RFC 4180: quoted fields may hold commas, quotes doubled,
 * line breaks; spaces around an unquoted field are dropped). A header row
 * names the columns, in any order: name (required), email, groups, plan,
 * password. Blank lines are skipped; row numbers count the header as row 1. */
#ifndef LABD_USERS_CSV_H
#define LABD_USERS_CSV_H

#include <stdbool.h>
#include <stddef.h>

#define USERS_CSV_MAX_BYTES (1u << 20) /* 1 MiB */
#define USERS_CSV_MAX_ROWS 5000	       /* users, beside the header */
#define USERS_CSV_FIELD_MAX 1024       /* bytes in one field (a password's limit) */

enum users_csv_column { CSV_NAME, CSV_EMAIL, CSV_GROUPS, CSV_PLAN, CSV_PASSWORD, CSV_COLUMNS };

/* One user's row: its number in the file and each column's text ("" when the
 * header has no such column). */
struct users_csv_row {
	size_t row;
	const char *field[CSV_COLUMNS];
};

struct users_csv {
	struct users_csv_row *rows;
	size_t n;
	bool has[CSV_COLUMNS]; /* which columns the header names */
	/* owned storage */
	char **texts;
	size_t n_texts, cap_texts, cap_rows;
};

/* The column's name as the header writes it. */
const char *users_csv_column_name(enum users_csv_column c);
/* Parses text (len bytes) into *out: 0, or -1 with a message naming the row
 * (and column) in err; out is freed on failure. */
int users_csv_parse(const char *text, size_t len, struct users_csv *out, char *err,
		    size_t errlen);
void users_csv_free(struct users_csv *c);

#endif
