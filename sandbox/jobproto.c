/* jobproto.c - the job agent's protocol (jobagent.h): commands parsed by the agent,
 * formatted by the supervisor; status lines the other way.  libc only: linked into the
 * static agent as well as libsandbox. */
#include "sandbox/jobagent.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEED_MORE 0
#define BAD (-1)

/* A decimal at buf[*pos] ended by `end`; 1, NEED_MORE or BAD. */
static int take_number(const char *buf, size_t len, size_t *pos, char end, size_t max, size_t *out)
{
	size_t v = 0, i = *pos;

	for (; i < len && buf[i] >= '0' && buf[i] <= '9'; i++) {
		v = v * 10 + (size_t)(buf[i] - '0');
		if (i - *pos >= 9 || v > max)
			return BAD;
	}
	if (i == len)
		return NEED_MORE;
	if (i == *pos || buf[i] != end)
		return BAD;
	*out = v;
	*pos = i + 1;
	return 1;
}

/* A netstring at buf[*pos]: its bytes' offset and length; 1, NEED_MORE or BAD. */
static int take_netstring(const char *buf, size_t len, size_t *pos, size_t *off, size_t *n)
{
	size_t p = *pos;
	int rc = take_number(buf, len, &p, ':', JOBAGENT_MAX_COMMAND_BYTES, n);

	if (rc != 1)
		return rc;
	if (len - p < *n + 1)
		return NEED_MORE;
	if (buf[p + *n] != ',' || memchr(buf + p, '\0', *n))
		return BAD;
	*off = p;
	*pos = p + *n + 1;
	return 1;
}

static bool env_entry_ok(const char *s)
{
	return s[0] && s[0] != '=' && strchr(s, '=');
}

/* Copies the strings (offsets in spans) out of buf into cmd. */
static int build_run(const char *buf, const size_t (*spans)[2], size_t argc, size_t envc,
		     struct jobagent_cmd *cmd)
{
	size_t total = 0, n = 1 + argc + envc;
	char *p;

	for (size_t i = 0; i < n; i++)
		total += spans[i][1] + 1;
	cmd->mem = malloc(total);
	cmd->argv = calloc(argc + 1, sizeof(char *));
	cmd->envp = calloc(envc + 1, sizeof(char *));
	if (!cmd->mem || !cmd->argv || !cmd->envp)
		return BAD;
	p = cmd->mem;
	for (size_t i = 0; i < n; i++) {
		memcpy(p, buf + spans[i][0], spans[i][1]);
		p[spans[i][1]] = '\0';
		if (i == 0)
			cmd->cwd = p;
		else if (i <= argc)
			cmd->argv[i - 1] = p;
		else if (!env_entry_ok(p))
			return BAD;
		else
			cmd->envp[i - 1 - argc] = p;
		p += spans[i][1] + 1;
	}
	return 1;
}

static long parse_run(const char *buf, size_t len, struct jobagent_cmd *cmd)
{
	size_t pos = 4, argc, envc, (*spans)[2];
	int rc;

	if ((rc = take_number(buf, len, &pos, ' ', JOBAGENT_MAX_ARGS, &argc)) != 1 ||
	    (rc = take_number(buf, len, &pos, ' ', JOBAGENT_MAX_ENV, &envc)) != 1)
		return rc;
	if (argc == 0)
		return BAD;
	if (!(spans = calloc(1 + argc + envc, sizeof(*spans))))
		return BAD;
	for (size_t i = 0; i < 1 + argc + envc && rc == 1; i++)
		rc = take_netstring(buf, len, &pos, &spans[i][0], &spans[i][1]);
	if (rc == 1 && pos == len)
		rc = NEED_MORE;
	else if (rc == 1 && buf[pos] != '\n')
		rc = BAD;
	if (rc == 1) {
		cmd->kind = JOBAGENT_RUN;
		rc = build_run(buf, (const size_t(*)[2])spans, argc, envc, cmd);
		if (rc != 1)
			jobagent_cmd_free(cmd);
	}
	free(spans);
	return rc == 1 ? (long)pos + 1 : rc;
}

long jobagent_parse_command(const char *buf, size_t len, struct jobagent_cmd *cmd)
{
	static const char term[] = "term\n", run[] = "run ";
	long rc;

	memset(cmd, 0, sizeof(*cmd));
	/* shorter than any whole command: a prefix of one waits for more */
	if (len < sizeof(term) - 1)
		return memcmp(buf, term, len) == 0 || memcmp(buf, run, len < 4 ? len : 4) == 0 ? NEED_MORE : BAD;
	if (memcmp(buf, term, sizeof(term) - 1) == 0) {
		cmd->kind = JOBAGENT_TERM;
		return (long)sizeof(term) - 1;
	}
	if (memcmp(buf, run, 4) != 0)
		return BAD;
	rc = parse_run(buf, len, cmd);
	if (rc == NEED_MORE && len > JOBAGENT_MAX_COMMAND_BYTES)
		return BAD;
	return rc;
}

void jobagent_cmd_free(struct jobagent_cmd *cmd)
{
	free(cmd->mem);
	free(cmd->argv);
	free(cmd->envp);
	memset(cmd, 0, sizeof(*cmd));
}

static size_t netstring_size(const char *s)
{
	size_t n = strlen(s);
	return n + 12;
}

static size_t put_netstring(char *p, const char *s)
{
	size_t n = strlen(s);
	int w = snprintf(p, 12, "%zu:", n);

	memcpy(p + w, s, n);
	p[(size_t)w + n] = ',';
	return (size_t)w + n + 1;
}

char *jobagent_format_run(const char *cwd, char *const argv[], char *const envp[], size_t *len)
{
	size_t argc = 0, envc = 0, total = 32, off;
	char *buf;

	cwd = cwd ? cwd : "";
	total += netstring_size(cwd);
	for (; argv && argv[argc]; argc++)
		total += netstring_size(argv[argc]);
	for (; envp && envp[envc]; envc++)
		total += netstring_size(envp[envc]);
	if (argc == 0 || argc > JOBAGENT_MAX_ARGS || envc > JOBAGENT_MAX_ENV ||
	    total > JOBAGENT_MAX_COMMAND_BYTES || !(buf = malloc(total)))
		return NULL;
	off = (size_t)snprintf(buf, 32, "run %zu %zu ", argc, envc);
	off += put_netstring(buf + off, cwd);
	for (size_t i = 0; i < argc; i++)
		off += put_netstring(buf + off, argv[i]);
	for (size_t i = 0; i < envc; i++)
		off += put_netstring(buf + off, envp[i]);
	buf[off++] = '\n';
	buf[off] = '\0';
	*len = off;
	return buf;
}

/* The length of the UTF-8 sequence at s (len bytes left) as JSON parsers take it
 * (RFC 3629: no overlong form, no surrogate, nothing past U+10FFFF); 0 when invalid. */
static size_t utf8_seq(const unsigned char *s, size_t len)
{
	size_t n = s[0] < 0x80 ? 1 : s[0] < 0xC2 ? 0 : s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3
		 : s[0] < 0xF5 ? 4 : 0;
	uint32_t cp;

	if (n == 0 || n > len)
		return 0;
	cp = n == 1 ? s[0] : s[0] & (0x7F >> n);
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3F);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
	    (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return n;
}

void jobagent_utf8_clean(char *text, size_t len)
{
	unsigned char *s = (unsigned char *)text;

	for (size_t i = 0; i < len;) {
		size_t n = s[i] ? utf8_seq(s + i, len - i) : 0;
		if (n == 0) {
			s[i++] = '?';
			continue;
		}
		i += n;
	}
}

size_t jobagent_netstring_text(char *buf, size_t size, const char *text, size_t text_len)
{
	int w;

	if (text_len > JOBAGENT_TEXT_MAX)
		text_len = JOBAGENT_TEXT_MAX;
	if (size < text_len + 16)
		text_len = size > 16 ? size - 16 : 0;
	w = snprintf(buf, size, "%zu:", text_len);
	for (size_t i = 0; i < text_len; i++) {
		unsigned char c = (unsigned char)text[i];
		buf[(size_t)w + i] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
	}
	/* a cut (ours, or the writer's) may split a character: JSON takes only UTF-8 */
	jobagent_utf8_clean(buf + w, text_len);
	buf[(size_t)w + text_len] = ',';
	buf[(size_t)w + text_len + 1] = '\0';
	return (size_t)w + text_len + 1;
}

/* "<len>:<text>," at p (len bytes left) into st->text; 0 or -1. */
static int status_text(const char *p, size_t len, struct jobagent_status *st)
{
	size_t pos = 0, off, n;

	if (take_netstring(p, len, &pos, &off, &n) != 1 || n > JOBAGENT_TEXT_MAX || pos != len)
		return -1;
	memcpy(st->text, p + off, n);
	st->text[n] = '\0';
	return 0;
}

static int status_number(const char *p, size_t len, char end, long long max, long long *out)
{
	char tmp[24], *e;

	if (len == 0 || len >= sizeof(tmp))
		return -1;
	memcpy(tmp, p, len);
	tmp[len] = '\0';
	*out = strtoll(tmp, &e, 10);
	return (e == tmp || *e != end || *out < 0 || *out > max) ? -1 : 0;
}

int jobagent_parse_status(const char *line, size_t len, struct jobagent_status *st)
{
	const char *sp;
	long long v;

	memset(st, 0, sizeof(*st));
	if (len && line[len - 1] == '\n')
		len--;
	if (len == 5 && memcmp(line, "ready", 5) == 0) {
		st->kind = JOBAGENT_READY;
		return 0;
	}
	if (len > 8 && memcmp(line, "started ", 8) == 0) {
		st->kind = JOBAGENT_STARTED;
		if (status_number(line + 8, len - 8, '\0', 0x7fffffff, &v) < 0)
			return -1;
		st->pid = (pid_t)v;
		return 0;
	}
	if (len > 6 && memcmp(line, "error ", 6) == 0) {
		st->kind = JOBAGENT_ERROR;
		return status_text(line + 6, len - 6, st);
	}
	if (len > 7 && memcmp(line, "exited ", 7) == 0 && (sp = memchr(line + 7, ' ', len - 7))) {
		st->kind = JOBAGENT_EXITED;
		if (status_number(line + 7, (size_t)(sp - line - 7), '\0', 0xffff, &v) < 0)
			return -1;
		st->wait_status = (int)v;
		return status_text(sp + 1, len - (size_t)(sp + 1 - line), st);
	}
	return -1;
}
