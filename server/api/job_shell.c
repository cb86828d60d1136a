/* job_shell.c - GET or POST /api/v1/jobs/{id}/shell as a WebSocket: a terminal
 * in a running job's sandbox, as its owner (docs/jobs.md, "A shell into a running
 * job"). The route's gate has checked the credentials and the jobs scope. Only the
 * job's owner gets a shell, administrators included: a shell acts as the user,
 * with the user's files and network, which no admin scope grants. Browsers open a
 * WebSocket with GET and cannot send X-CSRF-Token, so a cookie session's Origin
 * must be labd's own (cross-site WebSocket hijacking). */
#include <errno.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "api/job_shell_relay.h"
#include "auth/auth.h"
#include "http/http.h"
#include "jobs/hosts.h"
#include "jobs/shell.h"
#include "labd/app.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "store/audit.h"
#include "store/jobs.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

static void on_upgraded(void *cls, struct MHD_Connection *conn, void *con_cls,
			const char *extra_in, size_t extra_in_size, MHD_socket sock,
			struct MHD_UpgradeResponseHandle *urh)
{
	(void)conn;
	(void)con_cls;
	job_shell_relay_attach((uint64_t)(uintptr_t)cls, sock, urh, extra_in, extra_in_size);
}

/* Sec-WebSocket-Accept for key (RFC 6455 section 4.2.2): base64 of SHA-1 of key + GUID. */
static int ws_accept(const char *key, char out[64])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char in[128];
	int n = snprintf(in, sizeof(in), "%s%s", key, WS_GUID);

	if (n < 0 || (size_t)n >= sizeof(in) ||
	    !EVP_Digest(in, (size_t)n, md, &mdlen, EVP_sha1(), NULL))
		return -1;
	EVP_EncodeBlock((unsigned char *)out, md, (int)mdlen);
	return 0;
}

/* A WebSocket handshake (RFC 6455 section 4.2.1) with its accept value; false
 * with the reply set when it is none. */
static bool handshake_ok(struct http_request *req, char accept[64])
{
	const char *up = http_header(req, "Upgrade"), *key = http_header(req, "Sec-WebSocket-Key"),
		   *ver = http_header(req, "Sec-WebSocket-Version");

	if (!up || strcasecmp(up, "websocket") != 0 || !key || strlen(key) != 24 || !ver ||
	    strcmp(ver, "13") != 0 || ws_accept(key, accept) < 0) {
		http_add_header(req, "Upgrade", "websocket");
		http_reply_error(req, MHD_HTTP_UPGRADE_REQUIRED, "websocket_required",
				 "open a shell as a WebSocket (Upgrade: websocket, "
				 "Sec-WebSocket-Version: 13)");
		return false;
	}
	return true;
}

/* ?cols=&rows= (1..1000; 80 x 24 when absent); false with the reply set. */
static bool size_ok(struct http_request *req, int *cols, int *rows)
{
	const char *c = http_query(req, "cols"), *r = http_query(req, "rows");
	uint64_t v;

	*cols = 80;
	*rows = 24;
	if (c && parse_uint(c, 1, 1000, &v) == 0)
		*cols = (int)v;
	else if (c)
		goto bad;
	if (r && parse_uint(r, 1, 1000, &v) == 0)
		*rows = (int)v;
	else if (r)
		goto bad;
	return true;
bad:
	http_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad_request",
			 "cols and rows are whole numbers from 1 to 1000");
	return false;
}

/* The job, its owner's and training; false with the reply set (and j freed). */
static bool job_ok(struct http_request *req, struct job *j)
{
	const struct auth_identity *ident = http_identity(req);

	if (api_path_job(req, j) < 0)
		return false;
	if (j->user_id != ident->user.id)
		http_reply_error(req, MHD_HTTP_FORBIDDEN, "forbidden",
				 "only the job's owner may open a shell into it");
	else if (!jobs_shell_possible(j))
		http_reply_error(req, MHD_HTTP_CONFLICT, "job_not_running",
				 "job %lld is not running its command now", (long long)j->id);
	else
		return true;
	jobs_row_free(j);
	return false;
}

/* ?host=algo-K: one of the job's hosts (algo-1 when absent); false with the reply set. */
static bool host_ok(struct http_request *req, const struct job *j, int *host)
{
	const char *h = http_query(req, "host");
	int n = jobs_instance_count(j);
	uint64_t v;

	*host = 1;
	if (!h)
		return true;
	if (strncmp(h, "algo-", 5) == 0 && parse_uint(h + 5, 1, (uint64_t)n, &v) == 0) {
		*host = (int)v;
		return true;
	}
	if (n == 1)
		api_reply_field(req, "host", "job %lld runs on one host, algo-1", (long long)j->id);
	else
		api_reply_field(req, "host", "job %lld runs on the hosts algo-1 to algo-%d",
				(long long)j->id, n);
	return false;
}

static void reply_open_failed(struct http_request *req, const struct job *j, int rc,
			      const char *err)
{
	if (rc == -ENOENT)
		http_reply_error(req, MHD_HTTP_CONFLICT, "job_not_running",
				 "job %lld is not running its command now", (long long)j->id);
	else if (rc == -EBUSY || rc == -ETIMEDOUT) {
		http_add_header(req, "Retry-After", "5");
		http_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE, "busy",
				 "the shell could not start now; try again");
	} else
		http_reply_error(req, MHD_HTTP_INTERNAL_SERVER_ERROR, "shell_failed",
				 "the shell could not start: %s", err[0] ? err : strerror(-rc));
}

/* Starts the shell into s's reservation and sets the 101 reply; false with an
 * error reply set (the reservation is the caller's to cancel). */
static bool open_shell(struct http_request *req, const struct job *j, uint64_t shell,
		       const char *accept, int host, int cols, int rows)
{
	struct MHD_Response *resp;
	char err[256] = "", detail[160], where[24] = "";
	int fd, rc = jobs_shell_open(http_app(req), j, host, cols, rows, &fd, err, sizeof(err));

	if (rc < 0) {
		reply_open_failed(req, j, rc, err);
		return false;
	}
	if (job_shell_relay_set_pty(shell, fd) < 0) { /* given up: labd-web stops */
		http_add_header(req, "Retry-After", "5");
		http_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE, "busy", "labd is stopping");
		return false;
	}
	if (jobs_instance_count(j) > 1)
		snprintf(where, sizeof(where), " on algo-%d", host);
	snprintf(detail, sizeof(detail), "job %lld (%s)%s", (long long)j->id, j->name, where);
	if (audit_add(http_app(req)->db, time(NULL), http_identity(req)->user.name,
		      "job.shell.open", j->user_name, http_address(req), detail) < 0) {
		http_reply_internal(req); /* not opened without its audit entry */
		return false;
	}
	/* the reservation's id, not a pointer: it may be given up before the upgrade */
	if (!(resp = MHD_create_response_for_upgrade(on_upgraded, (void *)(uintptr_t)shell))) {
		http_reply_internal(req);
		return false;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "websocket");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "Upgrade");
	MHD_add_response_header(resp, "Sec-WebSocket-Accept", accept);
	http_reply_response(req, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
	return true;
}

void api_job_shell(struct http_request *req)
{
	const struct auth_identity *ident = http_identity(req);
	struct job_shell_who who = {0};
	uint64_t shell;
	char accept[64];
	struct job j;
	int cols, rows, host;

	if (!handshake_ok(req, accept) || !size_ok(req, &cols, &rows))
		return;
	if (ident->kind == AUTH_COOKIE && !auth_origin_ok(req)) {
		http_reply_error(req, MHD_HTTP_FORBIDDEN, "csrf_failed", "cross-origin request refused");
		return;
	}
	if (!job_ok(req, &j))
		return;
	if (!host_ok(req, &j, &host)) {
		jobs_row_free(&j);
		return;
	}
	snprintf(who.actor, sizeof(who.actor), "%s", ident->user.name);
	snprintf(who.address, sizeof(who.address), "%s", http_address(req));
	who.job_id = j.id;
	who.user_id = ident->user.id;
	who.session_id = ident->kind == AUTH_COOKIE ? ident->session_id : 0;
	who.token_id = ident->kind == AUTH_TOKEN ? ident->token_id : 0;
	snprintf(who.job_name, sizeof(who.job_name), "%s", j.name);
	if (!(shell = job_shell_relay_reserve(http_app(req), &who))) {
		http_add_header(req, "Retry-After", "30");
		http_reply_error(req, MHD_HTTP_TOO_MANY_REQUESTS, "too_many_shells",
				 "at most %d shells per job (%d on this server) are open at once",
				 JOB_SHELLS_PER_JOB, JOB_SHELLS_MAX);
	} else if (!open_shell(req, &j, shell, accept, host, cols, rows)) {
		job_shell_relay_cancel(shell);
	} else {
		log_info("job %lld: shell opened by %s", (long long)j.id, ident->user.name);
	}
	jobs_row_free(&j);
}
