/* Unit tests: the proxy's pure helpers (token scrubbing across pieces,
 * hop-by-hop headers, cookie stripping), runtime paths and Jupyter's argv. */
#include "unit.h"

#include "supervisor/launch.h"
#include "proxy/proxy.h"
#include "proxy/gate.h"
#include "proxy/resphead.h"
#include "proxy/scrub.h"
#include "auth/origin.h"

static size_t scrub_whole(const char *needle, const char *text, size_t piece, char *out)
{
	struct scrub s;
	size_t len = strlen(text), o = 0;

	assert_int_equal(scrub_init(&s, needle), 0);
	for (size_t i = 0; i < len; i += piece) {
		size_t n = len - i < piece ? len - i : piece;
		o += scrub_feed(&s, text + i, n, out + o, false);
	}
	o += scrub_feed(&s, "", 0, out + o, true);
	out[o] = '\0';
	return o;
}

static void test_scrub_every_split(void **state)
{
	const char *tok = "SECRETTOKEN0123456789abcdefghijklmnopqrstu";
	char text[512], out[1024];
	(void)state;
	snprintf(text, sizeof(text), "a=\"%s\" href=\"tree?token=%s\" end %s", tok, tok, tok);
	/* Whatever the piece size, every occurrence goes and nothing else does. */
	for (size_t piece = 1; piece <= strlen(text); piece++) {
		scrub_whole(tok, text, piece, out);
		assert_string_equal(out, "a=\"\" href=\"tree?token=\" end ");
	}
	scrub_whole(tok, "no secret here", 3, out);
	assert_string_equal(out, "no secret here");
	scrub_whole(tok, "SECRETTOKEN partial only", 4, out);
	assert_string_equal(out, "SECRETTOKEN partial only");
}

static void test_scrub_string_and_init(void **state)
{
	struct scrub s;
	char hdr[] = "/user/a/tree?token=XYZXYZ&x=1";
	char big[100];
	(void)state;
	scrub_string("XYZXYZ", hdr);
	assert_string_equal(hdr, "/user/a/tree?token=&x=1");
	assert_int_equal(scrub_init(&s, ""), -1);
	memset(big, 'a', 99);
	big[99] = '\0';
	assert_int_equal(scrub_init(&s, big), -1);
}

static void test_hop_headers(void **state)
{
	(void)state;
	assert_true(proxy_is_hop_header("Connection"));
	assert_true(proxy_is_hop_header("keep-alive"));
	assert_true(proxy_is_hop_header("Transfer-Encoding"));
	assert_true(proxy_is_hop_header("TE"));
	assert_true(proxy_is_hop_header("Upgrade"));
	assert_true(proxy_is_hop_header("Proxy-Authorization"));
	assert_false(proxy_is_hop_header("Content-Type"));
	assert_false(proxy_is_hop_header("Cookie"));
	assert_false(proxy_is_hop_header("Sec-WebSocket-Key"));
}

static void test_strip_cookie(void **state)
{
	char out[256];
	(void)state;
	proxy_strip_cookie("labd_session=abc; _xsrf=2|x; theme=dark", "labd_session", out,
			   sizeof(out));
	assert_string_equal(out, "_xsrf=2|x; theme=dark");
	proxy_strip_cookie("_xsrf=1; labd_session=abc", "labd_session", out, sizeof(out));
	assert_string_equal(out, "_xsrf=1");
	proxy_strip_cookie("labd_session=abc", "labd_session", out, sizeof(out));
	assert_string_equal(out, "");
	proxy_strip_cookie("labd_sessionx=1;labd_session=2", "labd_session", out, sizeof(out));
	assert_string_equal(out, "labd_sessionx=1");
	/* blanks around the name: a Python server strips them and reads labd's cookie */
	proxy_strip_cookie("\tlabd_session=1; labd_session =2;a=b", "labd_session", out, sizeof(out));
	assert_string_equal(out, "a=b");
}

/* The response head as http_parser hands it over in pieces; a NUL or a
 * second head would put the pairs out of step (fuzz_resphead found both). */
static void test_response_head(void **state)
{
	static char buf[RESPHEAD_MAX];
	struct resphead h;
	const char *value;
	size_t off = 0;
	(void)state;

	resphead_init(&h, buf);
	assert_int_equal(resphead_field(&h, "Content-", 8), 0);
	assert_int_equal(resphead_field(&h, "Type", 4), 0);
	assert_int_equal(resphead_value(&h, "text/plain", 10), 0);
	assert_int_equal(resphead_field(&h, "X-A", 3), 0);
	assert_int_equal(resphead_value(&h, "", 0), 0);
	assert_int_equal(resphead_value(&h, "a\0Set-Cookie", 13), -1);
	resphead_end(&h);
	assert_int_equal(resphead_field(&h, "Set-Cookie", 10), -1);
	assert_string_equal(resphead_get(&h, "content-type"), "text/plain");
	assert_string_equal(resphead_next(&h, &off, &value), "Content-Type");
	assert_string_equal(resphead_next(&h, &off, &value), "X-A");
	assert_string_equal(value, "");
	assert_null(resphead_next(&h, &off, &value));
}

static void test_runtime_paths(void **state)
{
	char user[33], sock[128];
	(void)state;
	assert_int_equal(gate_user("/user/alice/tree", user, sizeof(user)), 0);
	assert_string_equal(user, "alice");
	assert_int_equal(gate_user("/user/alice", user, sizeof(user)), 0);
	assert_int_equal(gate_user("/user//x", user, sizeof(user)), -1);
	/* shorter than the prefix: nothing past the string is read (fuzz_route found it) */
	assert_int_equal(gate_user("", user, sizeof(user)), -1);
	assert_int_equal(gate_user("/us", user, sizeof(user)), -1);
	assert_int_equal(gate_user("/user/Alice/", user, sizeof(user)), -1);
	assert_int_equal(gate_user("/user/../etc/", user, sizeof(user)), -1);
	launch_endpoint("alice", sock, sizeof(sock));
	assert_string_equal(sock, "unix:runtimes/alice/run/jupyter.sock");
}

static void test_jupyter_argv(void **state)
{
	char *argv[16], bufs[16][256];
	int n;
	(void)state;
	n = launch_jupyter_argv("notebook", "bob", NULL, argv, bufs);
	assert_true(n > 5);
	assert_null(argv[n]);
	assert_string_equal(argv[0], "jupyter");
	assert_string_equal(argv[1], "notebook");
	bool sock = false, base = false, dir = false;
	for (int i = 0; i < n; i++) {
		sock = sock || !strcmp(argv[i], "--NotebookApp.sock=/run/labd/jupyter.sock");
		base = base || !strcmp(argv[i], "--NotebookApp.base_url=/user/bob/");
		dir = dir || !strcmp(argv[i], "--NotebookApp.notebook_dir=/home/bob");
		assert_null(strstr(argv[i], "token")); /* the token travels in the environment */
	}
	assert_true(sock && base && dir);
	n = launch_jupyter_argv("lab", "bob", NULL, argv, bufs);
	assert_string_equal(argv[1], "lab");
	bool server_app = false;
	for (int i = 0; i < n; i++)
		server_app = server_app || !strcmp(argv[i], "--ServerApp.base_url=/user/bob/");
	assert_true(server_app);
	assert_string_equal(launch_pick_jupyter("server", "/", NULL), "server");
	assert_null(launch_pick_jupyter("auto", "/nonexistent-image", NULL));
	assert_null(launch_pick_jupyter("auto", "/nonexistent-image", "/nonexistent-env"));
	/* labd's env runs by full path, no "jupyter" looked up in PATH */
	n = launch_jupyter_argv("lab", "bob", "/opt/labd/jupyter", argv, bufs);
	assert_string_equal(argv[0], "/opt/labd/jupyter/bin/jupyter-lab");
	assert_string_equal(argv[1], "--no-browser");
	server_app = false;
	bool bash = false;
	for (int i = 0; i < n; i++) {
		server_app = server_app || !strcmp(argv[i], "--ServerApp.base_url=/user/bob/");
		bash = bash || !strcmp(argv[i], "--ServerApp.terminado_settings=shell_command=/bin/bash");
	}
	assert_true(server_app && bash);
}

/* The runtime's PATH: the user's pip --user scripts, then labd's env, then the system. */
static void test_runtime_path_env(void **state)
{
	char path[512];
	(void)state;
	launch_path_env("bob", "/opt/labd/jupyter", path, sizeof(path));
	assert_string_equal(path, "PATH=/home/bob/.local/bin:/opt/labd/jupyter/bin:/usr/local/bin:"
				  "/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin");
	launch_path_env("bob", NULL, path, sizeof(path));
	assert_string_equal(path, "PATH=/home/bob/.local/bin:/usr/local/bin:/usr/bin:/bin:"
				  "/usr/local/sbin:/usr/sbin:/sbin");
	assert_false(launch_env_has(NULL, "lab"));
	assert_false(launch_env_has("", "lab"));
	assert_false(launch_env_has("/nonexistent-env", "lab"));
}

/* Upstream headers a runtime must not pass to the browser (docs/security.md §3). */
static void test_scrub_headers_dropped(void **state)
{
	(void)state;
	assert_true(scrub_header_dropped("Set-Cookie", "labd_session=x; Path=/"));
	assert_true(scrub_header_dropped("set-cookie", " LABD_RT = y; Domain=localhost"));
	assert_true(scrub_header_dropped("Set-Cookie", "labd_rt="));
	/* the names labd uses behind TLS too */
	assert_true(scrub_header_dropped("Set-Cookie", "__Host-labd_session=x; Path=/; Secure"));
	assert_true(scrub_header_dropped("Set-Cookie", "__host-labd_rt=x; Path=/; Secure"));
	assert_true(scrub_header_dropped("Service-Worker-Allowed", "/"));
	assert_true(scrub_header_dropped("clear-site-data", "\"*\""));
	/* Jupyter's own cookies and headers pass */
	assert_false(scrub_header_dropped("Set-Cookie", "_xsrf=2|abc; Path=/user/a/"));
	assert_false(scrub_header_dropped("Set-Cookie", "labd_session2=x"));
	assert_false(scrub_header_dropped("Set-Cookie", "xlabd_rt=x"));
	assert_false(scrub_header_dropped("Content-Type", "labd_session=x"));
}

/* The Host header decides the origin: <user>.<user_domain>[:port] only. */
static void test_origin_classify(void **state)
{
	char user[USER_NAME_MAX + 1];
	(void)state;
	assert_int_equal(origin_classify("alice.localhost:8080", "localhost", user), ORIGIN_USER);
	assert_string_equal(user, "alice");
	assert_int_equal(origin_classify("Bob.LocalHost.", "localhost", user), ORIGIN_USER);
	assert_string_equal(user, "bob");
	assert_int_equal(origin_classify("alice.lab.example.org", "lab.example.org", user),
			 ORIGIN_USER);
	/* labd's own origin: the domain itself, other names, addresses */
	assert_int_equal(origin_classify("localhost:8080", "localhost", user), ORIGIN_UI);
	assert_int_equal(origin_classify("127.0.0.1:8080", "localhost", user), ORIGIN_UI);
	assert_int_equal(origin_classify("[::1]:8080", "localhost", user), ORIGIN_UI);
	assert_int_equal(origin_classify("alicelocalhost", "localhost", user), ORIGIN_UI);
	assert_int_equal(origin_classify(NULL, "localhost", user), ORIGIN_UI);
	/* under the domain but no user: nothing is served */
	assert_int_equal(origin_classify("a.b.localhost", "localhost", user), ORIGIN_UNKNOWN);
	assert_int_equal(origin_classify("_x.localhost", "localhost", user), ORIGIN_UNKNOWN);
	assert_int_equal(origin_classify("john.doe.localhost", "localhost", user), ORIGIN_UNKNOWN);
	/* a student number is a name, and its own label */
	assert_int_equal(origin_classify("20231234.localhost", "localhost", user), ORIGIN_USER);
	assert_string_equal(user, "20231234");
	assert_int_equal(origin_classify("john-doe--c.localhost", "localhost", user), ORIGIN_USER);
	assert_string_equal(user, "john.doe");
	assert_int_equal(origin_classify(".localhost", "localhost", user), ORIGIN_UI);
	assert_int_equal(origin_classify("alice.localhost:80x", "localhost", user), ORIGIN_UI);
}

/* Origin labels: names of the old rule keep theirs; '.', '_' and "--" are
 * coded so that every label is a DNS label and no two names share one. */
static void test_origin_labels(void **state)
{
	static const struct {
		const char *name, *label;
	} cases[] = {
		{"alice", "alice"},	      {"alice-2", "alice-2"},	    {"20231234", "20231234"},
		{"john.doe", "john-doe--c"}, {"john_doe", "john-doe--b"}, {"a-", "a---a"},
		{"a--b", "a--b--a"},	      {"a_.-b", "a---b--h"},	    {"a.b.c.d", "a-b-c-d--0"},
	};
	static const char *const not_labels[] = {
		"john-doe--d", /* "john.doe" is john-doe--c, no other code is a name */
		"john-doe--",  "a-b--cc", "a--b--j" /* 2 symbols code 0..8 */, "Alice", "a_b", "-a", "a-b--c-", "",
	};
	static const char chars[] = "ab0._-";
	char label[ORIGIN_LABEL_MAX + 1], user[USER_NAME_MAX + 1], name[6];
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(origin_label(cases[i].name, label), 0);
		assert_string_equal(label, cases[i].label);
		assert_int_equal(origin_label_user(label, user), 0);
		assert_string_equal(user, cases[i].name);
	}
	for (size_t i = 0; i < sizeof(not_labels) / sizeof(not_labels[0]); i++)
		if (origin_label_user(not_labels[i], user) == 0)
			fail_msg("\"%s\" taken as the label of %s", not_labels[i], user);
	assert_int_equal(origin_label("xn__a", label), -1); /* an IDN prefix */
	assert_int_equal(origin_label("Alice", label), -1);
	/* every name of up to 5 characters of chars: a DNS label that leads back to it */
	for (unsigned long m = 0; m < 6ul * 6 * 6 * 6 * 6; m++) {
		for (unsigned long r = m, j = 0; j < 5; j++, r /= 6)
			name[j] = chars[r % 6];
		name[5] = '\0';
		for (size_t len = 1; len <= 5; len++) {
			char cut[6];
			memcpy(cut, name, len);
			cut[len] = '\0';
			if (origin_label(cut, label) < 0)
				continue;
			assert_true(strspn(label, "abcdefghijklmnopqrstuvwxyz0123456789-") ==
				    strlen(label));
			assert_true(label[0] != '-' && label[strlen(label) - 1] != '-');
			assert_true(strlen(label) <= ORIGIN_LABEL_MAX);
			assert_int_equal(origin_label_user(label, user), 0);
			assert_string_equal(user, cut);
		}
	}
	/* the longest label: 32 characters, 31 symbols */
	assert_int_equal(origin_label("a_______________________________", label), 0);
	assert_true(strlen(label) <= 45);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scrub_every_split), cmocka_unit_test(test_scrub_string_and_init),
		cmocka_unit_test(test_hop_headers),	  cmocka_unit_test(test_strip_cookie),
		cmocka_unit_test(test_response_head),
		cmocka_unit_test(test_runtime_paths),	  cmocka_unit_test(test_jupyter_argv),
		cmocka_unit_test(test_runtime_path_env),
		cmocka_unit_test(test_scrub_headers_dropped),
		cmocka_unit_test(test_origin_classify),
		cmocka_unit_test(test_origin_labels),
	};
	return cmocka_run_group_tests_name("proxy", tests, NULL, NULL);
}
