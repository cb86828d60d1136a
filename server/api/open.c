/* open.c - "Open in labd" (docs/api.md): the /open page, and the API behind it
 * that clones or updates a repository in the caller's running runtime
 * (runtime/gitopen.h) and says where the notebook is.
 *
 * gitopen_run blocks for as long as git takes, and an HTTP worker serves many
 * connections: so each open runs in a thread of its own, one per user at a
 * time, at most OPEN_SLOTS at once, and the page asks for the outcome
 * (GET /api/v1/me/runtime/open). A slot keeps the user's last outcome until
 * that user opens again or the slot is needed for another user. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "api/pages.h"
#include "config/config.h"
#include "http/http.h"
#include "http/static.h"
#include "labd/app.h"
#include "labd/log.h"
#include "labd/thread.h"
#include "runtime/gitopen.h"
#include "runtime/runtime.h"
#include "store/audit.h"
#include "store/runtimes.h"

#define OPEN_SLOTS 32
#define OPEN_URL_MAX (64 + GITSOURCE_FOLDER_MAX + 3 * GITSOURCE_PATH_MAX)

struct open_slot {
	int64_t user_id; /* 0: free */
	bool running;
	int64_t started_at, finished_at;
	char user[USER_NAME_MAX + 1];
	char repo[GITSOURCE_URL_MAX + 1], path[GITSOURCE_PATH_MAX + 1];
	char socket_path[RUNTIME_ENDPOINT_MAX], token[RUNTIME_TOKEN_LEN + 1];
	uid_t peer_uid; /* the runtime's host uid: who must listen on socket_path */
	struct gitopen_result result;
};

static struct open_slot slots[OPEN_SLOTS];
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

/* 400 naming field (the message says the rule). */
static void reply_field(struct http_request *req, const char *field, const char *message)
{
	json_t *body = http_error_json("bad_field", message);

	json_object_set_new(json_object_get(body, "error"), "field", json_string(field));
	http_reply_json(req, MHD_HTTP_BAD_REQUEST, body);
}

/* The message of the first bad one of repo and path, and its field; NULL when both pass. */
static const char *check_inputs(const char *repo, const char *path, const char **field)
{
	const char *why;

	*field = "repo";
	if ((why = gitsource_check_url(repo)))
		return why;
	*field = "path";
	return gitsource_check_path(path);
}

void pages_open(struct http_request *req)
{
	const char *field;
	bool bad = check_inputs(http_query(req, "repo"), http_query(req, "path"), &field) != NULL;

	/* The page's script asks the API, which names the field and the rule. */
	static_serve_html(req, bad ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_OK, "open.html");
}

/* Where JupyterLab shows the outcome: the notebook, else its folder; "" when none. */
static void lab_url(const struct open_slot *s, char *out, size_t len)
{
	char encoded[3 * GITSOURCE_PATH_MAX + 1];

	*out = '\0';
	if (!s->result.folder[0])
		return;
	if (!s->result.notebook_found) {
		snprintf(out, len, "/user/%s/lab/tree/%s", s->user, s->result.folder);
		return;
	}
	http_url_encode(s->path, encoded, sizeof(encoded)); /* keeps the slashes */
	snprintf(out, len, "/user/%s/lab/tree/%s/%s", s->user, s->result.folder, encoded);
}

/* {"state","repo","path","started_at","finished_at","result","folder",
 * "notebook_found","message","url"}; caller holds slots_lock. */
static json_t *slot_json(const struct open_slot *s)
{
	char started[21], finished[21], url[OPEN_URL_MAX];
	bool done = !s->running;

	api_time(s->started_at, started);
	api_time(s->finished_at, finished);
	if (done)
		lab_url(s, url, sizeof(url));
	return json_pack("{s:s,s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o}", "state",
			 done ? "done" : "running", "repo", s->repo, "path", s->path, "started_at",
			 started, "finished_at", done ? json_string(finished) : json_null(), "result",
			 done ? json_string(gitopen_outcome_name(s->result.outcome)) : json_null(),
			 "folder", done && s->result.folder[0] ? json_string(s->result.folder) : json_null(),
			 "notebook_found", done ? json_boolean(s->result.notebook_found) : json_null(),
			 "message", done ? json_string(s->result.message) : json_null(), "url",
			 done && url[0] ? json_string(url) : json_null());
}

static void *open_thread(void *arg)
{
	struct open_slot *s = arg;
	struct gitopen_target t = {.socket_path = s->socket_path,
				   .user = s->user,
				   .token = s->token,
				   .peer_uid = s->peer_uid};
	struct gitopen_result result;

	/* Nobody else writes a running slot: its inputs are stable without the lock. */
	gitopen_run(&t, s->repo, s->path, GITOPEN_TIMEOUT_MS, &result);
	log_info("open: %s %s for %s: %s", gitopen_outcome_name(result.outcome), s->repo, s->user,
		 result.message);
	pthread_mutex_lock(&slots_lock);
	explicit_bzero(s->token, sizeof(s->token)); /* kept no longer than needed */
	s->result = result;
	s->finished_at = time(NULL);
	s->running = false;
	pthread_mutex_unlock(&slots_lock);
	return NULL;
}

/* The user's slot, a free one, or the one finished longest ago; NULL when
 * every slot runs. Caller holds slots_lock. */
static struct open_slot *slot_for(int64_t user_id)
{
	struct open_slot *pick = NULL;

	for (int i = 0; i < OPEN_SLOTS; i++)
		if (slots[i].user_id == user_id)
			return &slots[i];
	for (int i = 0; i < OPEN_SLOTS; i++) {
		struct open_slot *s = &slots[i];
		if (s->user_id == 0)
			return s;
		if (!s->running && (!pick || s->finished_at < pick->finished_at))
			pick = s;
	}
	return pick;
}

/* Starts the open in s (slots_lock held); 0, or -1 when no thread could start. */
static int start_slot(struct open_slot *s, const struct user *u, const char *repo,
		      const char *path, const char *socket_path, const char *token, uid_t peer_uid)
{
	int rc;

	memset(s, 0, sizeof(*s));
	s->user_id = u->id;
	s->running = true;
	s->started_at = time(NULL);
	snprintf(s->user, sizeof(s->user), "%s", u->name);
	snprintf(s->repo, sizeof(s->repo), "%s", repo);
	snprintf(s->path, sizeof(s->path), "%s", path);
	snprintf(s->socket_path, sizeof(s->socket_path), "%s", socket_path);
	snprintf(s->token, sizeof(s->token), "%s", token);
	s->peer_uid = peer_uid;
	if ((rc = thread_detached(open_thread, s, 0)) != 0) {
		memset(s, 0, sizeof(*s));
		return -1;
	}
	return 0;
}

/* The caller's running runtime and its socket: 0, or -1 with the reply set. */
static int running_runtime(struct http_request *req, struct runtime *r, char *socket_path,
			   size_t len)
{
	int rc = runtimes_live(http_app(req)->db, http_identity(req)->user.id, r);

	if (rc < 0) {
		http_reply_internal(req);
		return -1;
	}
	if (rc == 0 || r->state != RUNTIME_RUNNING) {
		http_reply_error(req, MHD_HTTP_CONFLICT, "runtime_not_running",
				 "your runtime is not running; start it first");
		return -1;
	}
	if (runtime_socket_path(r, socket_path, len) < 0) {
		http_reply_error(req, MHD_HTTP_CONFLICT, "unsupported",
				 "your runtime is not reached over a Unix socket");
		return -1;
	}
	return 0;
}

void api_runtime_open(struct http_request *req)
{
	static const char *const allowed[] = {"repo", "path", NULL};
	const struct auth_identity *ident = http_identity(req);
	char socket_path[RUNTIME_ENDPOINT_MAX], detail[GITSOURCE_URL_MAX + GITSOURCE_PATH_MAX + 16];
	const char *repo = NULL, *path = NULL, *field, *why;
	struct open_slot *s;
	struct runtime r;
	json_t *body = api_body(req, allowed);

	if (!body || api_string(req, body, "repo", &repo) < 0 ||
	    api_string(req, body, "path", &path) < 0)
		goto out;
	if ((why = check_inputs(repo, path, &field))) {
		reply_field(req, field, why);
		goto out;
	}
	if (running_runtime(req, &r, socket_path, sizeof(socket_path)) < 0)
		goto out;
	pthread_mutex_lock(&slots_lock);
	s = slot_for(ident->user.id);
	if (!s || (s->user_id == ident->user.id && s->running)) {
		pthread_mutex_unlock(&slots_lock);
		http_reply_error(req, s ? MHD_HTTP_CONFLICT : MHD_HTTP_SERVICE_UNAVAILABLE,
				 s ? "open_in_progress" : "busy",
				 s ? "a repository is being opened for you; wait for it"
				   : "too many repositories are being opened; try again shortly");
		goto out;
	}
	if (start_slot(s, &ident->user, repo, path, socket_path, r.token,
		       (uid_t)(http_app(req)->cfg->uid_base + r.user_id)) < 0) {
		pthread_mutex_unlock(&slots_lock);
		http_reply_internal(req);
		goto out;
	}
	json_t *reply = json_pack("{s:o}", "open", slot_json(s));
	pthread_mutex_unlock(&slots_lock);
	snprintf(detail, sizeof(detail), "%s %s", repo, path);
	if (audit_add(http_app(req)->db, time(NULL), ident->user.name, "runtime.open_repo",
		      ident->user.name, http_address(req), detail) < 0)
		log_error("audit: runtime.open_repo of %s not recorded", ident->user.name);
	http_reply_json(req, MHD_HTTP_ACCEPTED, reply);
out:
	json_decref(body);
}

void api_runtime_open_get(struct http_request *req)
{
	int64_t user_id = http_identity(req)->user.id;
	json_t *reply = NULL;

	pthread_mutex_lock(&slots_lock);
	for (int i = 0; i < OPEN_SLOTS; i++)
		if (slots[i].user_id == user_id)
			reply = json_pack("{s:o}", "open", slot_json(&slots[i]));
	pthread_mutex_unlock(&slots_lock);
	if (reply)
		http_reply_json(req, MHD_HTTP_OK, reply);
	else
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "no_open",
				 "you have opened no repository since labd started");
}
