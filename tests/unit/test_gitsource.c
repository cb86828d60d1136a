/* Unit tests: what "Open in labd" accepts from a link (runtime/gitsource.h). */
#include "unit.h"

#include "runtime/gitsource.h"

static void test_urls_accepted(void **state)
{
	(void)state;
	assert_null(gitsource_check_url("https://github.com/org/repo.git"));
	assert_null(gitsource_check_url("http://198.18.1.2/proj.git"));
	assert_null(gitsource_check_url("HTTPS://host:8443/a/b/repo"));
	assert_null(gitsource_check_url("https://[2001:db8::1]/r.git"));
}

static void test_urls_refused(void **state)
{
	static const char *const bad[] = {
		"",
		"file:///etc",
		"file://localhost/etc/repo",
		"/home/alice/repo",
		"repo",
		"ext::sh -c touch% /tmp/x",
		"ext::sh",
		"ssh://host/repo.git",
		"git@host:repo.git",
		"git://host/repo.git",
		"http::https://host/repo.git", /* git's transport::address form */
		"https://user:pw@host/repo.git",
		"https://user@host/repo.git",
		"https:///repo.git",
		"https://host",
		"https://host/re po.git",
		"https://host/repo.git?x=1",
		"https://host/repo.git#frag",
		"https://host/%2e%2e/repo.git",
		"https://host/repo\n.git",
		"https://host/repo\\x.git",
		"https://host/\"repo\".git",
	};
	(void)state;
	assert_non_null(gitsource_check_url(NULL));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (!gitsource_check_url(bad[i]))
			fail_msg("accepted %s", bad[i]);
	char longurl[GITSOURCE_URL_MAX + 16] = "https://h/";
	memset(longurl + 10, 'a', GITSOURCE_URL_MAX);
	longurl[GITSOURCE_URL_MAX + 10] = '\0';
	assert_non_null(gitsource_check_url(longurl));
}

static void test_paths(void **state)
{
	static const char *const bad[] = {"", "/etc/passwd", "../x.ipynb", "a/../../x", "a/./b",
					  "a//b", "a/", ".", "..", "a\\b", "a\nb", "a\x7f"};
	(void)state;
	assert_null(gitsource_check_path("demo.ipynb"));
	assert_null(gitsource_check_path("nb/sub dir/demo (1).ipynb"));
	assert_null(gitsource_check_path(".hidden/x.ipynb"));
	assert_null(gitsource_check_path("a..b/c.ipynb"));
	assert_non_null(gitsource_check_path(NULL));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (!gitsource_check_path(bad[i]))
			fail_msg("accepted path %s", bad[i]);
}

static void test_folder_names(void **state)
{
	char out[GITSOURCE_FOLDER_MAX];
	(void)state;
	assert_int_equal(gitsource_folder("https://h/org/repo.git", out, sizeof(out)), 0);
	assert_string_equal(out, "repo");
	assert_int_equal(gitsource_folder("https://h/org/repo.git/", out, sizeof(out)), 0);
	assert_string_equal(out, "repo");
	assert_int_equal(gitsource_folder("https://h/org/repo/", out, sizeof(out)), 0);
	assert_string_equal(out, "repo");
	assert_int_equal(gitsource_folder("https://h/org/.dots.git", out, sizeof(out)), 0);
	assert_string_equal(out, "dots");
	assert_int_equal(gitsource_folder("https://h/a/we!rd(1)", out, sizeof(out)), 0);
	assert_string_equal(out, "we-rd-1-");
	assert_int_equal(gitsource_folder("https://h/.git", out, sizeof(out)), -1);
	assert_int_equal(gitsource_folder("https://h/", out, sizeof(out)), -1);
	assert_int_equal(gitsource_folder("https://h/" "aaaaaaaaaaaaaaaaaaaa", out, 8), 0);
	assert_string_equal(out, "aaaaaaa");
}

static void test_same_repo(void **state)
{
	(void)state;
	assert_true(gitsource_same_repo("https://h/r.git", "https://h/r.git"));
	assert_true(gitsource_same_repo("https://h/r", "https://h/r.git"));
	assert_true(gitsource_same_repo("https://h/r.git/", "https://h/r"));
	assert_false(gitsource_same_repo("https://h/r2.git", "https://h/r.git"));
	assert_false(gitsource_same_repo("https://other/r.git", "https://h/r.git"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_urls_accepted), cmocka_unit_test(test_urls_refused),
		cmocka_unit_test(test_paths),	      cmocka_unit_test(test_folder_names),
		cmocka_unit_test(test_same_repo),
	};
	return cmocka_run_group_tests_name("gitsource", tests, NULL, NULL);
}
