/* agentio.c - the job agent's line protocol; see agentio.h. */
#include "supervisor/agentio.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct out {
	char *buf;
	size_t len, cap;
	bool failed;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (o->failed)
		return;
	if (o->len + n + 1 > o->cap) {
		size_t cap = (o->len + n + 1) * 2;
		char *b = realloc(o->buf, cap);
		if (!b) {
			o->failed = true;
			return;
		}
		o->buf = b;
		o->cap = cap;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
	o->buf[o->len] = '\0';
}

static void put_str(struct out *o, const char *s)
{
	char head[32];
	int n = snprintf(head, sizeof(head), " %zu:", strlen(s));

	put(o, head, (size_t)n);
	put(o, s, strlen(s));
}

static void put_list(struct out *o, char *const list[])
{
	char head[24];
	size_t n = 0;

	while (list && list[n])
		n++;
	snprintf(head, sizeof(head), " %zu", n);
	put(o, head, strlen(head));
	for (size_t i = 0; i < n; i++)
		put_str(o, list[i]);
}

int agentio_format_run(char *const argv[], char *const envp[], const char *cwd, char **out,
		       size_t *len)
{
	struct out o = {0};

	put(&o, "run", 3);
	put_list(&o, argv);
	put_list(&o, envp);
	put_str(&o, cwd);
	put(&o, "\n", 1);
	if (o.failed) {
		free(o.buf);
		return -ENOMEM;
	}
	*out = o.buf;
	*len = o.len;
	return 0;
}

/* A decimal number of at most 10 digits ending at a byte in `ends`; -1 when
 * malformed, -2 when buf ended first. */
static long long number(const char *buf, size_t len, size_t *at, const char *ends)
{
	long long v = 0;
	size_t start = *at;

	while (*at < len && buf[*at] >= '0' && buf[*at] <= '9' && *at - start < 10)
		v = v * 10 + (buf[(*at)++] - '0');
	if (*at == len)
		return *at - start < 10 ? -2 : -1;
	if (*at == start || !strchr(ends, buf[*at]) || buf[*at] == '\0')
		return -1;
	return v;
}

static int bad(struct agent_status *st)
{
	st->said = AGENT_BAD;
	return -1;
}

static int parse_exited(const char *buf, size_t len, size_t at, struct agent_status *st)
{
	long long status = number(buf, len, &at, " "), n;

	if (status == -2)
		return 0;
	if (status < 0 || status > 0xffff)
		return bad(st);
	at++;
	if ((n = number(buf, len, &at, ":")) == -2)
		return 0;
	if (n < 0 || n > AGENTIO_FAILURE_MAX)
		return bad(st);
	at++;
	if (len < at + (size_t)n + 1)
		return 0;
	if (buf[at + n] != '\n')
		return bad(st);
	st->said = AGENT_EXITED;
	st->status = (int)status;
	st->failure_len = (size_t)n;
	memcpy(st->failure, buf + at, (size_t)n);
	st->failure[n] = '\0';
	return (int)(at + n + 1);
}

int agentio_parse(const char *buf, size_t len, struct agent_status *st)
{
	const char *nl;
	size_t at;

	memset(st, 0, sizeof(*st));
	if (len >= 7 && memcmp(buf, "exited ", 7) == 0)
		return parse_exited(buf, len, 7, st);
	nl = memchr(buf, '\n', len < AGENTIO_LINE_MAX ? len : AGENTIO_LINE_MAX);
	if (!nl)
		return len >= AGENTIO_LINE_MAX ? bad(st) : 0;
	at = (size_t)(nl - buf);
	if (at == 5 && memcmp(buf, "ready", 5) == 0) {
		st->said = AGENT_READY;
		return 6;
	}
	if (at > 8 && memcmp(buf, "started ", 8) == 0) {
		size_t p = 8;
		long long pid = number(buf, at + 1, &p, "\n");
		if (pid <= 0 || pid > 4194304 || p != at)
			return bad(st);
		st->said = AGENT_STARTED;
		st->pid = (pid_t)pid;
		return (int)at + 1;
	}
	/* a prefix of "exited " still arriving */
	if (len < 7 && memcmp(buf, "exited ", len) == 0)
		return 0;
	return bad(st);
}
