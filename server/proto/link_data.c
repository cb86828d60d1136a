/* link_data.c - the link's secret, node names, the data line and its nonce cache;
 * see link.h. */
#include "proto/link.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "labd/clock.h"
#include "labd/crypto.h"
#include "labd/parse.h"

#define DATA_MAGIC "LABD-DATA1"
#define DATA_PATH_MAX 200
#define NONCE_BYTES 16
#define MAC_BYTES 32
#define UNIX_MS_DIGITS_MAX 15

/* ---- the secret ---- */

int link_secret_read(const char *path, struct link_secret *out, char *err, size_t errlen)
{
	struct stat st;
	ssize_t n;
	int fd, rc = 0;

	memset(out, 0, sizeof(*out));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s is not a regular file", path);
		rc = -EINVAL;
	} else if (st.st_mode & 0007) {
		/* anyone who reads it can join as a node or open any runtime */
		snprintf(err, errlen, "%s is open to others (mode %03o): chmod o-rwx it", path,
			 (unsigned)(st.st_mode & 0777));
		rc = -EPERM;
	} else if ((n = read(fd, out->bytes, sizeof(out->bytes))) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
	} else if (n < LINK_SECRET_MIN || st.st_size > LINK_SECRET_MAX) {
		snprintf(err, errlen, "%s must hold %d to %d bytes (it has %lld): make it with "
			 "head -c 64 /dev/urandom", path, LINK_SECRET_MIN, LINK_SECRET_MAX,
			 (long long)st.st_size);
		rc = -EINVAL;
	} else {
		out->len = (size_t)n;
	}
	close(fd);
	if (rc < 0)
		link_secret_clear(out);
	return rc;
}

void link_secret_clear(struct link_secret *s)
{
	OPENSSL_cleanse(s, sizeof(*s));
}

void link_secret_set(struct link_secret *out, const unsigned char *bytes, size_t len)
{
	link_secret_clear(out);
	if (len > sizeof(out->bytes))
		return;
	memcpy(out->bytes, bytes, len);
	out->len = len;
}

bool link_name_ok(const char *name)
{
	size_t len = name ? strlen(name) : 0;

	if (len == 0 || len > LINK_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char ch = name[i];
		bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			     (ch >= '0' && ch <= '9');
		if (!alnum && (i == 0 || (ch != '.' && ch != '_' && ch != '-')))
			return false;
	}
	return true;
}

/* ---- the data line ---- */

/* Lowercase hex of exactly 2*len characters into out; false otherwise. */
static bool from_hex(const char *in, size_t in_len, unsigned char *out, size_t len)
{
	if (in_len != 2 * len)
		return false;
	for (size_t i = 0; i < in_len; i++) {
		char ch = in[i];
		int v = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
		if (v < 0)
			return false;
		if (i % 2 == 0)
			out[i / 2] = (unsigned char)(v << 4);
		else
			out[i / 2] |= (unsigned char)v;
	}
	return true;
}

static bool path_chars_ok(const char *path, size_t len)
{
	if (len == 0 || len > DATA_PATH_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (path[i] <= ' ' || path[i] > '~')
			return false;
	return true;
}

/* HMAC-SHA256(secret, "<path> <unix_ms> <nonce hex>") into mac. */
static int data_mac(const struct link_secret *secret, const char *path, size_t path_len,
		    long long unix_ms, const char *nonce_hex, unsigned char mac[MAC_BYTES])
{
	char text[DATA_PATH_MAX + 64];
	unsigned mac_len = 0;
	int n = snprintf(text, sizeof(text), "%.*s %lld %s", (int)path_len, path, unix_ms,
			 nonce_hex);

	if (n < 0 || n >= (int)sizeof(text))
		return -EINVAL;
	if (!HMAC(EVP_sha256(), secret->bytes, (int)secret->len, (const unsigned char *)text,
		  (size_t)n, mac, &mac_len) || mac_len != MAC_BYTES)
		return -EIO;
	return 0;
}

int link_data_line_make(const struct link_secret *secret, const char *path, long long now_ms,
			char *out, size_t outlen)
{
	unsigned char nonce[NONCE_BYTES], mac[MAC_BYTES];
	char nonce_hex[2 * NONCE_BYTES + 1], mac_hex[2 * MAC_BYTES + 1];
	int rc, n;

	if (!path_chars_ok(path, strlen(path)) || now_ms < 0)
		return -EINVAL;
	if (crypto_random(nonce, sizeof(nonce)) < 0)
		return -EIO;
	crypto_hex(nonce, sizeof(nonce), nonce_hex);
	if ((rc = data_mac(secret, path, strlen(path), now_ms, nonce_hex, mac)) < 0)
		return rc;
	crypto_hex(mac, sizeof(mac), mac_hex);
	n = snprintf(out, outlen, DATA_MAGIC " %s %lld %s %s\n", path, now_ms, nonce_hex, mac_hex);
	return n < 0 || (size_t)n >= outlen ? -ENOSPC : n;
}

/* ---- the nonce cache: a ring in the order nonces were seen, so the expired ones
 * are always at its head ---- */

struct seen_nonce {
	unsigned char nonce[NONCE_BYTES];
	long long expires_ms;
};

struct link_nonces {
	size_t cap, head, count;
	struct seen_nonce ring[];
};

struct link_nonces *link_nonces_new(size_t cap)
{
	struct link_nonces *n;

	if (cap == 0)
		return NULL;
	n = calloc(1, sizeof(*n) + cap * sizeof(n->ring[0]));
	if (n)
		n->cap = cap;
	return n;
}

void link_nonces_free(struct link_nonces *n)
{
	free(n);
}

static void nonces_expire(struct link_nonces *n, long long now_ms)
{
	while (n->count && n->ring[n->head].expires_ms <= now_ms) {
		n->head = (n->head + 1) % n->cap;
		n->count--;
	}
}

static bool nonces_has(const struct link_nonces *n, const unsigned char *nonce)
{
	for (size_t i = 0; i < n->count; i++)
		if (memcmp(n->ring[(n->head + i) % n->cap].nonce, nonce, NONCE_BYTES) == 0)
			return true;
	return false;
}

static void nonces_add(struct link_nonces *n, const unsigned char *nonce, long long now_ms)
{
	struct seen_nonce *e = &n->ring[(n->head + n->count) % n->cap];

	memcpy(e->nonce, nonce, NONCE_BYTES);
	/* expiries stay in ring order as long as now_ms does not go back; a clock that
	 * does only keeps an entry longer than needed */
	e->expires_ms = now_ms + LINK_NONCE_KEEP_MS;
	n->count++;
}

/* The line cut at its spaces: exactly five words, the last ended by an optional
 * '\n' and the end of the text. */
struct data_words {
	const char *w[5];
	size_t len[5];
};

static int split_line(const char *line, struct data_words *d)
{
	const char *p = line;
	size_t total = strnlen(line, LINK_DATA_LINE_MAX + 1);

	if (total > LINK_DATA_LINE_MAX)
		return -EPROTO;
	for (int i = 0; i < 5; i++) {
		d->w[i] = p;
		while (*p && *p != ' ' && *p != '\n')
			p++;
		d->len[i] = (size_t)(p - d->w[i]);
		if (d->len[i] == 0)
			return -EPROTO;
		if (i < 4) {
			if (*p != ' ')
				return -EPROTO;
			p++;
		}
	}
	if (*p == '\n')
		p++;
	return *p ? -EPROTO : 0;
}

/* A decimal without sign or leading zeros, 0..INT64_MAX, spanning [s, end). */
static bool decimal_ok(const char *s, const char *end, int64_t *out)
{
	uint64_t v = 0;

	if (end <= s || end - s > 19 || (s[0] == '0' && end - s > 1))
		return false;
	for (const char *c = s; c < end; c++) {
		if (*c < '0' || *c > '9')
			return false;
		v = v * 10 + (uint64_t)(*c - '0');
	}
	if (v > INT64_MAX)
		return false;
	*out = (int64_t)v;
	return true;
}

static bool parse_ms(const char *s, size_t len, long long *out)
{
	int64_t v;

	if (len > UNIX_MS_DIGITS_MAX || !decimal_ok(s, s + len, &v))
		return false;
	*out = v;
	return true;
}

int link_data_line_check(const struct link_secret *secret, struct link_nonces *seen,
			 const char *line, long long now_ms, char *path, size_t pathlen)
{
	unsigned char nonce[NONCE_BYTES], mac[MAC_BYTES], want[MAC_BYTES];
	char nonce_hex[2 * NONCE_BYTES + 1];
	struct data_words d;
	long long unix_ms;
	int rc;

	if (split_line(line, &d) < 0 || d.len[0] != strlen(DATA_MAGIC) ||
	    memcmp(d.w[0], DATA_MAGIC, d.len[0]) != 0 || !path_chars_ok(d.w[1], d.len[1]) ||
	    d.len[1] >= pathlen || !parse_ms(d.w[2], d.len[2], &unix_ms) ||
	    !from_hex(d.w[3], d.len[3], nonce, sizeof(nonce)) ||
	    !from_hex(d.w[4], d.len[4], mac, sizeof(mac)))
		return -EPROTO;
	if (unix_ms > now_ms + LINK_DATA_SKEW_MS || unix_ms < now_ms - LINK_DATA_SKEW_MS)
		return -ETIME;
	memcpy(nonce_hex, d.w[3], d.len[3]);
	nonce_hex[d.len[3]] = '\0';
	if ((rc = data_mac(secret, d.w[1], d.len[1], unix_ms, nonce_hex, want)) < 0)
		return rc;
	if (!crypto_equal(mac, want, sizeof(mac)))
		return -EACCES;
	nonces_expire(seen, now_ms);
	if (nonces_has(seen, nonce))
		return -EALREADY;
	if (seen->count == seen->cap)
		return -EBUSY;
	nonces_add(seen, nonce, now_ms);
	memcpy(path, d.w[1], d.len[1]);
	path[d.len[1]] = '\0';
	return 0;
}

bool link_data_path_ok(const char *path)
{
	static const char prefix[] = "runtimes/", suffix[] = "/run/jupyter.sock";
	char user[PARSE_USER_NAME_MAX + 1];
	size_t len = strlen(path), pre = sizeof(prefix) - 1, suf = sizeof(suffix) - 1;

	if (len <= pre + suf || strncmp(path, prefix, pre) != 0 ||
	    strcmp(path + len - suf, suffix) != 0 || len - pre - suf > PARSE_USER_NAME_MAX)
		return false;
	memcpy(user, path + pre, len - pre - suf);
	user[len - pre - suf] = '\0';
	return parse_user_name_ok(user);
}

bool link_data_joblog_ok(const char *path, int64_t *job_id, int64_t *offset)
{
	static const char prefix[] = "joblogs/", suffix[] = ".log@";
	size_t pre = sizeof(prefix) - 1;
	const char *at = strstr(path, suffix);
	int64_t id, off;

	if (strncmp(path, prefix, pre) != 0 || !at ||
	    !decimal_ok(path + pre, at, &id) || id < 1 ||
	    !decimal_ok(at + sizeof(suffix) - 1, path + strlen(path), &off))
		return false;
	*job_id = id;
	*offset = off;
	return true;
}

int link_data_joblog_path(int64_t job_id, int64_t offset, char *out, size_t outlen)
{
	int n;

	if (job_id < 1 || offset < 0)
		return -EINVAL;
	n = snprintf(out, outlen, "joblogs/%" PRId64 ".log@%" PRId64, job_id, offset);
	return n < 0 || (size_t)n >= outlen ? -ENOSPC : 0;
}

/* A count 1..1000 in decimal without leading zeros, spanning [s, end). */
static bool size_ok(const char *s, const char *end, int *out)
{
	int64_t v;

	if (!decimal_ok(s, end, &v) || v < 1 || v > 1000)
		return false;
	*out = (int)v;
	return true;
}

bool link_data_shell_ok(const char *path, char *token, int *cols, int *rows)
{
	static const char prefix[] = "shell/";
	size_t pre = sizeof(prefix) - 1, len = strlen(path);
	const char *t = path + pre, *end = path + len, *x;
	int c = 0, r = 0;

	if (len < pre + LINK_SHELL_TOKEN_HEX || strncmp(path, prefix, pre) != 0)
		return false;
	for (int i = 0; i < LINK_SHELL_TOKEN_HEX; i++)
		if (!((t[i] >= '0' && t[i] <= '9') || (t[i] >= 'a' && t[i] <= 'f')))
			return false;
	if (t + LINK_SHELL_TOKEN_HEX != end) { /* "@<cols>x<rows>" */
		const char *at = t + LINK_SHELL_TOKEN_HEX;
		if (*at != '@' || !(x = memchr(at, 'x', (size_t)(end - at))) ||
		    !size_ok(at + 1, x, &c) || !size_ok(x + 1, end, &r))
			return false;
	}
	memcpy(token, t, LINK_SHELL_TOKEN_HEX);
	token[LINK_SHELL_TOKEN_HEX] = '\0';
	*cols = c;
	*rows = r;
	return true;
}

int link_data_shell_path(const char *token, int cols, int rows, char *out, size_t outlen)
{
	char check[LINK_SHELL_TOKEN_HEX + 1];
	int n, c, r;

	if (cols || rows)
		n = snprintf(out, outlen, "shell/%s@%dx%d", token, cols, rows);
	else
		n = snprintf(out, outlen, "shell/%s", token);
	if (n < 0 || (size_t)n >= outlen)
		return -ENOSPC;
	return link_data_shell_ok(out, check, &c, &r) ? 0 : -EINVAL;
}

/* "HOST:PORT" or "[V6]:PORT" into host and port; -EINVAL when malformed. */
static int split_host_port(const char *hostport, char *host, size_t hostlen, char *port,
			   size_t portlen)
{
	const char *colon = strrchr(hostport, ':');
	size_t hl;

	if (!colon || colon == hostport || !colon[1] || strlen(colon + 1) >= portlen)
		return -EINVAL;
	hl = (size_t)(colon - hostport);
	if (hostport[0] == '[') {
		if (hl < 3 || colon[-1] != ']')
			return -EINVAL;
		hostport++;
		hl -= 2;
	}
	if (hl >= hostlen)
		return -EINVAL;
	snprintf(host, hostlen, "%.*s", (int)hl, hostport);
	snprintf(port, portlen, "%s", colon + 1);
	return 0;
}

/* A connected non-blocking TCP socket to host:port by deadline_ms, or a negative
 * errno. Numeric only: a name lookup would block a proxy worker for as long as DNS
 * likes. */
static int connect_numeric(const char *host, const char *port, long long deadline_ms)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	int fd, rc = 0, soerr = 0;
	socklen_t len = sizeof(soerr);

	if (getaddrinfo(host, port, &hints, &res) != 0 || !res)
		return -EINVAL;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
	} else if (connect(fd, res->ai_addr, res->ai_addrlen) < 0 && errno != EINPROGRESS) {
		rc = -errno;
	} else {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		long long left = deadline_ms - clock_ms();
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			rc = -ETIMEDOUT;
		else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0 || soerr)
			rc = soerr ? -soerr : -errno;
	}
	freeaddrinfo(res);
	if (rc < 0 && fd >= 0)
		close(fd);
	return rc < 0 ? rc : fd;
}

int link_data_connect(const struct link_secret *secret, const char *hostport, const char *path,
		      int timeout_ms)
{
	char host[64], port[8], line[LINK_DATA_LINE_MAX];
	int fd, n;

	if (split_host_port(hostport, host, sizeof(host), port, sizeof(port)) < 0)
		return -EINVAL;
	if (secret->len == 0)
		return -ENOKEY;
	if ((n = link_data_line_make(secret, path, clock_wall_ms(), line, sizeof(line))) < 0)
		return n;
	if ((fd = connect_numeric(host, port, clock_ms() + timeout_ms)) < 0)
		return fd;
	/* a fresh connection's send buffer takes the whole line at once */
	if (send(fd, line, (size_t)n, MSG_NOSIGNAL) != n) {
		int rc = errno ? -errno : -EIO;
		close(fd);
		return rc;
	}
	return fd;
}
