/* fuzz_users_csv.c - the user import's CSV (server/api/users_csv.c, over
 * libcsv). Input: the CSV. Promises: a parse either fails with a message
 * naming a row, or gives at most USERS_CSV_MAX_ROWS rows, in increasing row
 * order, whose fields are C strings of at most USERS_CSV_FIELD_MAX bytes. */
#include "api/users_csv.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct users_csv c;
	char err[256];

	if (users_csv_parse((const char *)data, size, &c, err, sizeof(err)) < 0) {
		FUZZ_ASSERT(strncmp(err, "row ", 4) == 0 || strstr(err, "larger than") ||
			    strcmp(err, "out of memory") == 0);
		return 0;
	}
	FUZZ_ASSERT(c.has[CSV_NAME] && c.n <= USERS_CSV_MAX_ROWS);
	for (size_t i = 0; i < c.n; i++) {
		FUZZ_ASSERT(c.rows[i].row >= 2 && (i == 0 || c.rows[i].row > c.rows[i - 1].row));
		for (int k = 0; k < CSV_COLUMNS; k++)
			FUZZ_ASSERT(strlen(c.rows[i].field[k]) <= USERS_CSV_FIELD_MAX &&
				    (c.has[k] || !c.rows[i].field[k][0]));
	}
	users_csv_free(&c);
	return 0;
}
