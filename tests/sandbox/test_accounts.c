/* test_accounts.c - the text of the sandbox's /etc/passwd and /etc/group (pure). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "sandbox/accounts.h"

static char pw[ACCOUNTS_TEXT_MAX], gr[ACCOUNTS_TEXT_MAX];

static void test_entries(void **st)
{
	(void)st;
	assert_int_equal(accounts_text("alice", 1000, "/home/alice", pw, sizeof(pw), gr, sizeof(gr)), 0);
	assert_string_equal(pw, "root:x:0:0:root:/root:/usr/sbin/nologin\n"
				"alice:x:1000:1000:alice:/home/alice:/bin/sh\n"
				"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
	assert_string_equal(gr, "root:x:0:\nalice:x:1000:\nnogroup:x:65534:\n");
}

/* a ':' or a line break in a field would add an entry (say a second uid 0) */
static void test_refused(void **st)
{
	(void)st;
	snprintf(pw, sizeof(pw), "unchanged");
	assert_int_equal(accounts_text("a:x:0:0::/:/bin/sh", 1000, "/home/a", pw, sizeof(pw), gr, sizeof(gr)), -1);
	assert_int_equal(accounts_text("a\nroot2", 1000, "/home/a", pw, sizeof(pw), gr, sizeof(gr)), -1);
	assert_int_equal(accounts_text("a\r", 1000, "/home/a", pw, sizeof(pw), gr, sizeof(gr)), -1);
	assert_int_equal(accounts_text("a", 1000, "/home/a:0", pw, sizeof(pw), gr, sizeof(gr)), -1);
	assert_int_equal(accounts_text("a", 1000, "/home/a\n", pw, sizeof(pw), gr, sizeof(gr)), -1);
	assert_int_equal(accounts_text("a", 1000, "home", pw, sizeof(pw), gr, sizeof(gr)), -1);
	assert_int_equal(accounts_text("", 1000, "/home/a", pw, sizeof(pw), gr, sizeof(gr)), -1);
	assert_int_equal(accounts_text(NULL, 1000, "/home/a", pw, sizeof(pw), gr, sizeof(gr)), -1);
	assert_int_equal(accounts_text("a", 0, "/home/a", pw, sizeof(pw), gr, sizeof(gr)), -1);
	assert_int_equal(accounts_text("a", 65534, "/home/a", pw, sizeof(pw), gr, sizeof(gr)), -1);
	assert_string_equal(pw, "unchanged");
	/* too small a buffer is an error, not a cut file */
	assert_int_equal(accounts_text("alice", 1000, "/home/alice", pw, 40, gr, sizeof(gr)), -1);
	assert_int_equal(accounts_text("alice", 1000, "/home/alice", pw, sizeof(pw), gr, 20), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_entries),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
