/* test_slurmlogs.c - the head's copy of a job's log on Slurm nodes (backend/slurmlogs.h):
 * the prefixing of several hosts' lines, partial lines, and pulls from stand-in data
 * ports (a thread each that checks the signed line and serves a log from the offset
 * asked) with the offsets kept across pulls and across a restart. */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "backend/slurmlogs.h"
#include "labd/clock.h"
#include "proto/link.h"

static struct link_secret key = {.len = 32};

/* ---- the pure step ---- */

static char *prefixed(int host, struct buf *held, const char *in, bool final)
{
	static char text[4096];
	struct buf out;

	buf_init(&out, sizeof(text) - 1);
	assert_int_equal(slurmlogs_prefix(host, held, in, strlen(in), final, &out), 0);
	snprintf(text, sizeof(text), "%s", buf_str(&out));
	buf_release(&out);
	return text;
}

static void test_prefix_lines(void **state)
{
	struct buf held;
	(void)state;

	slurmlogs_held_init(&held);
	assert_string_equal(prefixed(1, &held, "a\nb\n", false), "[algo-1] a\n[algo-1] b\n");
	assert_int_equal(held.len, 0);
	/* a partial line waits for its end, across calls */
	assert_string_equal(prefixed(2, &held, "x\nhal", false), "[algo-2] x\n");
	assert_int_equal(held.len, 3);
	assert_string_equal(prefixed(2, &held, "f", false), "");
	assert_string_equal(prefixed(2, &held, " done\nnext", false), "[algo-2] half done\n");
	/* final writes the rest as a line of its own */
	assert_string_equal(prefixed(2, &held, "", true), "[algo-2] next\n");
	assert_int_equal(held.len, 0);
	assert_string_equal(prefixed(2, &held, "", true), "");
	/* an empty line is a line too */
	assert_string_equal(prefixed(12, &held, "\n", false), "[algo-12] \n");
	buf_release(&held);
}

static void test_prefix_long_line(void **state)
{
	struct buf held, out;
	size_t len = SLURMLOGS_LINE_MAX + 10;
	char *in = malloc(len);
	(void)state;

	assert_non_null(in);
	slurmlogs_held_init(&held);
	buf_init(&out, 2 * len);
	memset(in, 'z', len);
	assert_int_equal(slurmlogs_prefix(1, &held, in, len, false, &out), 0);
	/* cut at the bound, the rest held */
	assert_int_equal(out.len, strlen("[algo-1] ") + SLURMLOGS_LINE_MAX + 1);
	assert_int_equal(held.len, 10);
	free(in);
	buf_release(&out);
	buf_release(&held);
}

/* ---- stand-in data ports ---- */

struct fake_node {
	int lfd;
	char addr[32];
	pthread_t t;
	pthread_mutex_t lock;
	char log[8192]; /* the node's joblogs/<job>.log */
	size_t len;
	int64_t job_id;
	int64_t last_offset;
	int served;
};

static void *fake_serve(void *arg)
{
	struct fake_node *n = arg;
	struct link_nonces *seen = link_nonces_new(64);
	int fd;

	while ((fd = accept(n->lfd, NULL, NULL)) >= 0) {
		char line[LINK_DATA_LINE_MAX + 1], path[256];
		int64_t id, off;
		size_t have = 0;
		while (have < sizeof(line) - 1 && recv(fd, line + have, 1, 0) == 1 &&
		       line[have++] != '\n')
			;
		line[have] = '\0';
		if (link_data_line_check(&key, seen, line, clock_wall_ms(), path, sizeof(path)) == 0 &&
		    link_data_joblog_ok(path, &id, &off)) {
			pthread_mutex_lock(&n->lock);
			n->served++;
			n->last_offset = off;
			if (id == n->job_id && (size_t)off < n->len)
				assert_int_equal(send(fd, n->log + off, n->len - (size_t)off, 0),
						 (ssize_t)(n->len - (size_t)off));
			pthread_mutex_unlock(&n->lock);
		}
		close(fd);
	}
	link_nonces_free(seen);
	return NULL;
}

/* What the fake node last served, read under its lock (its thread writes it). */
static int64_t seen_offset(struct fake_node *n)
{
	pthread_mutex_lock(&n->lock);
	int64_t v = n->last_offset;
	pthread_mutex_unlock(&n->lock);
	return v;
}

static int seen_served(struct fake_node *n)
{
	pthread_mutex_lock(&n->lock);
	int v = (int)n->served;
	pthread_mutex_unlock(&n->lock);
	return v;
}

static void fake_start(struct fake_node *n, int64_t job_id)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sin);

	memset(n, 0, sizeof(*n));
	n->job_id = job_id;
	pthread_mutex_init(&n->lock, NULL);
	n->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(n->lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(n->lfd, 8), 0);
	assert_int_equal(getsockname(n->lfd, (struct sockaddr *)&sin, &len), 0);
	snprintf(n->addr, sizeof(n->addr), "127.0.0.1:%u", ntohs(sin.sin_port));
	assert_int_equal(pthread_create(&n->t, NULL, fake_serve, n), 0);
}

static void fake_stop(struct fake_node *n)
{
	shutdown(n->lfd, SHUT_RDWR);
	pthread_join(n->t, NULL);
	close(n->lfd);
	pthread_mutex_destroy(&n->lock);
}

static void fake_write(struct fake_node *n, const char *text)
{
	pthread_mutex_lock(&n->lock);
	memcpy(n->log + n->len, text, strlen(text));
	n->len += strlen(text);
	pthread_mutex_unlock(&n->lock);
}

/* ---- the head's state dir ---- */

static char state[64];

static int make_state(void **st)
{
	char dir[96];
	(void)st;

	snprintf(state, sizeof(state), "/tmp/test_slurmlogs.XXXXXX");
	assert_non_null(mkdtemp(state));
	snprintf(dir, sizeof(dir), "%s/joblogs", state);
	assert_int_equal(mkdir(dir, 0770), 0);
	return 0;
}

static int remove_state(void **st)
{
	char cmd[128];
	(void)st;

	snprintf(cmd, sizeof(cmd), "rm -rf %s", state);
	return system(cmd) == 0 ? 0 : -1;
}

static const char *head_log(int64_t job_id, const char *suffix)
{
	static char text[8192];
	char path[128];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/joblogs/%lld.log%s", state, (long long)job_id, suffix);
	if (!(f = fopen(path, "r")))
		return NULL;
	n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	return text;
}

/* One host: the node's bytes unchanged, each pull takes only the new ones, and after a
 * restart the head's size is the offset (nothing twice). */
static void test_pull_one_host(void **st)
{
	struct fake_node n;
	struct slurmlogs *l = slurmlogs_new(state, &key);
	(void)st;

	fake_start(&n, 7);
	assert_int_equal(slurmlogs_pull(l, n.addr, 7, 1, 1, false), 0);
	assert_null(head_log(7, "")); /* nothing yet: nothing written */
	fake_write(&n, "epoch 1\npartial");
	assert_int_equal(slurmlogs_pull(l, n.addr, 7, 1, 1, false), 0);
	assert_string_equal(head_log(7, ""), "epoch 1\npartial");
	fake_write(&n, " line\nepoch 2\n");
	assert_int_equal(slurmlogs_pull(l, n.addr, 7, 1, 1, false), 0);
	assert_int_equal(seen_offset(&n), 15);
	assert_string_equal(head_log(7, ""), "epoch 1\npartial line\nepoch 2\n");
	slurmlogs_free(l);

	/* the web restarted */
	l = slurmlogs_new(state, &key);
	fake_write(&n, "ran\n");
	assert_int_equal(slurmlogs_pull(l, n.addr, 7, 1, 1, true), 0);
	assert_int_equal(seen_offset(&n), 29);
	assert_string_equal(head_log(7, ""), "epoch 1\npartial line\nepoch 2\nran\n");
	assert_non_null(head_log(7, ".hosts"));
	assert_string_equal(head_log(7, ".nodes"), n.addr); /* NULs after it */

	slurmlogs_forget(l, 7);
	assert_null(head_log(7, ""));
	slurmlogs_free(l);
	fake_stop(&n);
}

/* Two hosts into one log: prefixed whole lines, a partial line held until its end or
 * the final pull, and each host's offset kept across a restart. */
static void test_pull_two_hosts(void **st)
{
	struct fake_node a, b;
	struct slurmlogs *l = slurmlogs_new(state, &key);
	(void)st;

	fake_start(&a, 9);
	fake_start(&b, 9);
	fake_write(&a, "rank 0\nsum=");
	fake_write(&b, "rank 1\n");
	assert_int_equal(slurmlogs_pull(l, a.addr, 9, 1, 2, false), 0);
	assert_int_equal(slurmlogs_pull(l, b.addr, 9, 2, 2, false), 0);
	assert_string_equal(head_log(9, ""), "[algo-1] rank 0\n[algo-2] rank 1\n");
	fake_write(&a, "3\n");
	fake_write(&b, "bye");
	assert_int_equal(slurmlogs_pull(l, a.addr, 9, 1, 2, false), 0);
	assert_int_equal(seen_offset(&a), 11);
	assert_string_equal(head_log(9, ""),
			    "[algo-1] rank 0\n[algo-2] rank 1\n[algo-1] sum=3\n");
	slurmlogs_free(l);

	/* the web restarted while host 2's "bye" was held: it is read again */
	l = slurmlogs_new(state, &key);
	assert_int_equal(slurmlogs_pull(l, b.addr, 9, 2, 2, true), 0);
	assert_int_equal(seen_offset(&b), 7);
	assert_string_equal(head_log(9, ""),
			    "[algo-1] rank 0\n[algo-2] rank 1\n[algo-1] sum=3\n[algo-2] bye\n");
	assert_int_equal(slurmlogs_pull(l, a.addr, 9, 1, 2, true), 0);
	assert_int_equal(seen_offset(&a), 13);
	assert_non_null(head_log(9, ".hosts"));

	slurmlogs_forget(l, 9);
	assert_null(head_log(9, ""));
	assert_null(head_log(9, ".hosts"));
	slurmlogs_free(l);
	fake_stop(&a);
	fake_stop(&b);
}

/* A retry that Slurm placed on another node: that node's log is read from its start
 * (the offset taken on the first node would skip its first bytes), and goes on from its
 * own offset after a web restart; back on the first node, its log is read again from the
 * start (its earlier bytes twice rather than any lost). */
static void test_pull_retry_on_another_node(void **st)
{
	struct fake_node a, b;
	struct slurmlogs *l = slurmlogs_new(state, &key);
	(void)st;

	fake_start(&a, 11);
	fake_start(&b, 11);
	fake_write(&a, "attempt 1 on a\n");
	assert_int_equal(slurmlogs_pull(l, a.addr, 11, 1, 1, true), 0);
	fake_write(&b, "attempt 2 on b\n");
	assert_int_equal(slurmlogs_pull(l, b.addr, 11, 1, 1, false), 0);
	assert_int_equal(seen_offset(&b), 0);
	assert_string_equal(head_log(11, ""), "attempt 1 on a\nattempt 2 on b\n");
	slurmlogs_free(l);

	/* the web restarted: b's own offset, not the head's size */
	l = slurmlogs_new(state, &key);
	fake_write(&b, "epoch 2\n");
	assert_int_equal(slurmlogs_pull(l, b.addr, 11, 1, 1, true), 0);
	assert_int_equal(seen_offset(&b), 15);
	assert_string_equal(head_log(11, ""), "attempt 1 on a\nattempt 2 on b\nepoch 2\n");

	/* back on a: its log again from the start */
	fake_write(&a, "attempt 3 on a\n");
	assert_int_equal(slurmlogs_pull(l, a.addr, 11, 1, 1, true), 0);
	assert_int_equal(seen_offset(&a), 0);
	assert_string_equal(head_log(11, ""), "attempt 1 on a\nattempt 2 on b\nepoch 2\n"
					      "attempt 1 on a\nattempt 3 on a\n");

	slurmlogs_forget(l, 11);
	assert_null(head_log(11, ".nodes"));
	fake_stop(&a);
	fake_stop(&b);

	/* two hosts: host 2 moves, and its held partial line is written as it was */
	fake_start(&a, 12);
	fake_start(&b, 12);
	fake_write(&a, "rank 1 partial");
	assert_int_equal(slurmlogs_pull(l, a.addr, 12, 2, 2, false), 0);
	const char *held = head_log(12, "");
	assert_true(!held || !*held); /* the partial line is held */
	fake_write(&b, "rank 1 again\n");
	assert_int_equal(slurmlogs_pull(l, b.addr, 12, 2, 2, false), 0);
	assert_int_equal(seen_offset(&b), 0);
	assert_string_equal(head_log(12, ""), "[algo-2] rank 1 partial\n[algo-2] rank 1 again\n");
	slurmlogs_forget(l, 12);
	assert_null(head_log(12, ".nodes"));
	slurmlogs_free(l);
	fake_stop(&a);
	fake_stop(&b);
}

/* A one-host log of an older release (no sidecar): its size is the offset. */
static void test_pull_log_without_sidecar(void **st)
{
	struct fake_node n;
	struct slurmlogs *l;
	char path[128];
	FILE *f;
	(void)st;

	snprintf(path, sizeof(path), "%s/joblogs/13.log", state);
	assert_non_null(f = fopen(path, "w"));
	fputs("before\n", f);
	fclose(f);
	fake_start(&n, 13);
	fake_write(&n, "before\nafter\n");
	l = slurmlogs_new(state, &key);
	assert_int_equal(slurmlogs_pull(l, n.addr, 13, 1, 1, true), 0);
	assert_int_equal(seen_offset(&n), 7);
	assert_string_equal(head_log(13, ""), "before\nafter\n");
	slurmlogs_free(l);
	fake_stop(&n);
}

/* A node that does not answer: an error, nothing written, and the next pull catches
 * up; bad arguments change nothing. */
static void test_pull_unreachable(void **st)
{
	struct fake_node n;
	struct slurmlogs *l = slurmlogs_new(state, &key);
	char gone[32];
	(void)st;

	fake_start(&n, 5);
	fake_write(&n, "hello\n");
	snprintf(gone, sizeof(gone), "%s", n.addr);
	fake_stop(&n);
	assert_true(slurmlogs_pull(l, gone, 5, 1, 1, false) < 0);
	assert_null(head_log(5, ""));
	assert_int_equal(slurmlogs_pull(l, "node1:7001", 5, 1, 1, false), -EINVAL);
	assert_int_equal(slurmlogs_pull(l, "", 5, 1, 1, false), -EINVAL);
	assert_int_equal(slurmlogs_pull(l, gone, 0, 1, 1, false), -EINVAL);
	assert_int_equal(slurmlogs_pull(l, gone, 5, 2, 1, false), -EINVAL);
	assert_int_equal(slurmlogs_pull(l, gone, 5, 0, 1, false), -EINVAL);
	assert_int_equal(slurmlogs_pull(l, gone, 5, 1, SLURMLOGS_HOSTS_MAX + 1, false), -EINVAL);

	fake_start(&n, 5);
	fake_write(&n, "hello\n");
	assert_int_equal(slurmlogs_pull(l, n.addr, 5, 1, 1, false), 0);
	assert_string_equal(head_log(5, ""), "hello\n");
	assert_int_equal(seen_served(&n), 1);
	slurmlogs_free(l);
	fake_stop(&n);
}

/* A link planted where the head's log goes is not followed. */
static void test_pull_refuses_link(void **st)
{
	struct fake_node n;
	struct slurmlogs *l = slurmlogs_new(state, &key);
	char path[128], target[128];
	(void)st;

	snprintf(target, sizeof(target), "%s/elsewhere", state);
	snprintf(path, sizeof(path), "%s/joblogs/4.log", state);
	assert_int_equal(symlink(target, path), 0);
	fake_start(&n, 4);
	fake_write(&n, "x\n");
	assert_int_equal(slurmlogs_pull(l, n.addr, 4, 1, 1, false), -ELOOP);
	assert_int_equal(access(target, F_OK), -1);
	slurmlogs_free(l);
	fake_stop(&n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prefix_lines),
		cmocka_unit_test(test_prefix_long_line),
		cmocka_unit_test_setup_teardown(test_pull_one_host, make_state, remove_state),
		cmocka_unit_test_setup_teardown(test_pull_two_hosts, make_state, remove_state),
		cmocka_unit_test_setup_teardown(test_pull_retry_on_another_node, make_state,
						remove_state),
		cmocka_unit_test_setup_teardown(test_pull_log_without_sidecar, make_state,
						remove_state),
		cmocka_unit_test_setup_teardown(test_pull_unreachable, make_state, remove_state),
		cmocka_unit_test_setup_teardown(test_pull_refuses_link, make_state, remove_state),
	};

	memset(key.bytes, 0x5a, key.len);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
