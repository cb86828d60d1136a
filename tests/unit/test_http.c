/* Unit tests: cookies, login redirects, form fields, JSON bodies and error
 * shapes, static path safety and MIME types. */
#include "unit.h"

#include <jansson.h>

#include "api/api.h"
#include "labd/app.h"
#include "config/config.h"
#include "auth/auth.h"
#include "http/http.h"
#include "http/static.h"
#include "api/pages.h"

static void test_cookie_flags(void **state)
{
	struct labd_config cfg;
	struct app app = {.cfg = &cfg};
	char out[256];
	(void)state;
	config_defaults(&cfg, false);
	auth_cookie_header(&app, "SECRET", out, sizeof(out));
	assert_string_equal(out, "labd_session=SECRET; Path=/; HttpOnly; SameSite=Lax");
	assert_string_equal(auth_cookie_name(&app, "labd_rt"), "labd_rt");
	/* behind TLS: a __Host- cookie (Secure, Path=/, no Domain), so no other origin
	 * can set or shadow it */
	cfg.secure_cookies = true;
	auth_cookie_header(&app, "SECRET", out, sizeof(out));
	assert_string_equal(out,
			    "__Host-labd_session=SECRET; Path=/; HttpOnly; SameSite=Lax; Secure");
	auth_cookie_header(&app, NULL, out, sizeof(out));
	assert_non_null(strstr(out, "__Host-labd_session=;"));
	assert_non_null(strstr(out, "Max-Age=0"));
	assert_string_equal(auth_cookie_name(&app, "labd_rt"), "__Host-labd_rt");
}

static void test_next_is_local(void **state)
{
	(void)state;
	assert_true(auth_next_is_local("/dashboard"));
	assert_true(auth_next_is_local("/user/alice/tree?x=1"));
	assert_false(auth_next_is_local("//evil.example/"));
	assert_false(auth_next_is_local("/\\evil.example"));
	assert_false(auth_next_is_local("https://evil.example/"));
	assert_false(auth_next_is_local("evil"));
	assert_false(auth_next_is_local(""));
	assert_false(auth_next_is_local(NULL));
	assert_false(auth_next_is_local("/a\r\nSet-Cookie: x"));
	assert_false(auth_next_is_local("/a b"));
}

static void test_form_fields(void **state)
{
	char out[32];
	(void)state;
	const char *body = "username=alice&password=p%40ss+word%21&next=%2Fdashboard&empty=";
	assert_int_equal(http_form_field(body, "username", out, sizeof(out)), 0);
	assert_string_equal(out, "alice");
	assert_int_equal(http_form_field(body, "password", out, sizeof(out)), 0);
	assert_string_equal(out, "p@ss word!");
	assert_int_equal(http_form_field(body, "next", out, sizeof(out)), 0);
	assert_string_equal(out, "/dashboard");
	assert_int_equal(http_form_field(body, "empty", out, sizeof(out)), 0);
	assert_string_equal(out, "");
	assert_int_equal(http_form_field(body, "user", out, sizeof(out)), -1);
	assert_int_equal(http_form_field(body, "missing", out, sizeof(out)), -1);
	assert_int_equal(http_form_field(body, "password", out, 5), -1); /* too long */
}

static void test_json_bodies(void **state)
{
	static const char *const allowed[] = {"name", "role", NULL};
	const char *code;
	char msg[256];
	json_t *obj;
	(void)state;

	obj = api_parse_object("{\"name\":\"bob\"}", 14, allowed, &code, msg, sizeof(msg));
	assert_non_null(obj);
	json_decref(obj);
	assert_null(api_parse_object("{\"name\":", 8, allowed, &code, msg, sizeof(msg)));
	assert_string_equal(code, "bad_json");
	assert_null(api_parse_object("[1,2]", 5, allowed, &code, msg, sizeof(msg)));
	assert_string_equal(code, "bad_json");
	assert_null(api_parse_object("", 0, allowed, &code, msg, sizeof(msg)));
	assert_string_equal(code, "bad_json");
	assert_null(api_parse_object("{\"name\":1,\"name\":2}", 19, allowed, &code, msg,
				     sizeof(msg)));
	assert_string_equal(code, "bad_json");
	assert_null(api_parse_object("{\"admin\":true}", 14, allowed, &code, msg, sizeof(msg)));
	assert_string_equal(code, "bad_field");
	assert_non_null(strstr(msg, "\"admin\""));
	const char *deep = "{\"name\":[[[[[[[[[[1]]]]]]]]]]}";
	assert_null(api_parse_object(deep, strlen(deep), allowed, &code, msg, sizeof(msg)));
	assert_string_equal(code, "bad_json");
}

static void test_error_shape(void **state)
{
	json_t *e = http_error_json("not_found", "no such user");
	json_t *inner = json_object_get(e, "error");
	(void)state;
	assert_int_equal(json_object_size(e), 1);
	assert_int_equal(json_object_size(inner), 2);
	assert_string_equal(json_string_value(json_object_get(inner, "code")), "not_found");
	assert_string_equal(json_string_value(json_object_get(inner, "message")), "no such user");
	json_decref(e);
}

static void test_static_paths(void **state)
{
	(void)state;
	assert_true(static_path_safe("static/labd.css"));
	assert_true(static_path_safe("login.html"));
	assert_false(static_path_safe("static/../../etc/passwd"));
	assert_false(static_path_safe("../x"));
	assert_false(static_path_safe("static/./x"));
	assert_false(static_path_safe("static//x"));
	assert_false(static_path_safe("/etc/passwd"));
	assert_false(static_path_safe("static/.hidden"));
	assert_false(static_path_safe("static\\..\\x"));
	assert_false(static_path_safe("static/a\nb"));
	assert_false(static_path_safe(""));
	assert_string_equal(static_mime_type("a.css"), "text/css; charset=utf-8");
	assert_string_equal(static_mime_type("a/b.js"), "text/javascript; charset=utf-8");
	assert_string_equal(static_mime_type("x.html"), "text/html; charset=utf-8");
	assert_string_equal(static_mime_type("x.svg"), "image/svg+xml");
	assert_string_equal(static_mime_type("noext"), "application/octet-stream");
	assert_string_equal(static_mime_type("x.css.bak"), "application/octet-stream");
}

static void test_time_format(void **state)
{
	char out[21];
	(void)state;
	api_time(0, out);
	assert_string_equal(out, "1970-01-01T00:00:00Z");
	api_time(1796227200, out);
	assert_string_equal(out, "2026-12-02T16:00:00Z");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cookie_flags),   cmocka_unit_test(test_next_is_local),
		cmocka_unit_test(test_form_fields),    cmocka_unit_test(test_json_bodies),
		cmocka_unit_test(test_error_shape),    cmocka_unit_test(test_static_paths),
		cmocka_unit_test(test_time_format),
	};
	return cmocka_run_group_tests_name("http", tests, NULL, NULL);
}
