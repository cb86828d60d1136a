/* oidc.c - the sign-in flow: begin, finish, logout; see oidc.h. */
#include "auth/oidc.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth/oidc_fetch.h"
#include "auth/oidc_jwt.h"
#include "auth/oidc_provider.h"
#include "auth/origin.h"
#include "config/config.h"
#include "http/http.h"
#include "labd/app.h"
#include "labd/buf.h"
#include "labd/crypto.h"
#include "labd/log.h"
#include "labd/str.h"
#include "metrics/labd.h"
#include "store/audit.h"

#define CALLBACK_PATH "/oidc/callback"
#define CODE_MAX 2048 /* an authorization code taken from the callback */

/* A sign-in begun: what the callback must match and what the token request sends. */
struct signin {
	char state[OIDC_STATE_LEN + 1]; /* "" = free */
	char nonce[OIDC_STATE_LEN + 1];
	char verifier[OIDC_STATE_LEN + 1]; /* PKCE code_verifier (RFC 7636) */
	char redirect_uri[OIDC_URL_MAX];
	char next[OIDC_NEXT_MAX];
	int64_t created_at;
};

struct oidc {
	struct oidc_provider *provider;
	pthread_mutex_t lock;
	struct signin pending[OIDC_PENDING_MAX];
};

/* ---- configuration, as root ---- */

static int read_secret(struct labd_config *cfg)
{
	char text[sizeof(cfg->oidc_client_secret) + 1];
	int fd = open(cfg->oidc_client_secret_file, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return log_errno("[oidc] client_secret_file: cannot open %s",
				 cfg->oidc_client_secret_file);
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n < 0)
		return log_errno("[oidc] client_secret_file: cannot read %s",
				 cfg->oidc_client_secret_file);
	text[n] = '\0';
	while (n > 0 && strchr("\r\n ", text[n - 1])) /* what editors and echo leave */
		text[--n] = '\0';
	if (n == 0 || (size_t)n >= sizeof(cfg->oidc_client_secret) || strpbrk(text, "\r\n")) {
		log_error("[oidc] client_secret_file: %s must hold one line of 1 to %zu characters",
			  cfg->oidc_client_secret_file, sizeof(cfg->oidc_client_secret) - 1);
		return -1;
	}
	memcpy(cfg->oidc_client_secret, text, (size_t)n + 1);
	explicit_bzero(text, sizeof(text));
	return 0;
}

/* Plain http only to the host itself: tokens and the client secret travel there. */
static bool issuer_ok(const char *issuer)
{
	static const char *const loopback[] = {"http://127.", "http://localhost:", "http://localhost/",
					       "http://[::1]"};

	if (!strncmp(issuer, "https://", 8))
		return strlen(issuer) > 8;
	for (size_t i = 0; i < sizeof(loopback) / sizeof(loopback[0]); i++)
		if (!strncmp(issuer, loopback[i], strlen(loopback[i])))
			return true;
	return false;
}

int oidc_load(struct labd_config *cfg)
{
	if (!cfg->oidc_issuer[0])
		return 0;
	if (!issuer_ok(cfg->oidc_issuer))
		return log_error("[oidc] issuer: %s must be an https:// URL (http:// only on loopback)",
				 cfg->oidc_issuer);
	if (!cfg->oidc_client_id[0])
		return log_error("[oidc] client_id: required when issuer is set");
	if (cfg->oidc_client_secret[0] && cfg->oidc_client_secret_file[0])
		return log_error("[oidc] client_secret and client_secret_file: set only one");
	if (cfg->oidc_client_secret_file[0] && read_secret(cfg) < 0)
		return -1;
	if (!cfg->oidc_client_secret[0])
		return log_error("[oidc] client_secret or client_secret_file: required when issuer "
				 "is set");
	if (strncmp(cfg->oidc_scopes, "openid", 6) != 0 || (cfg->oidc_scopes[6] != ' ' &&
							    cfg->oidc_scopes[6] != '\0'))
		return log_error("[oidc] scopes: must begin with \"openid\"");
	return 0;
}

/* ---- the state ---- */

struct oidc *oidc_new(const struct labd_config *cfg, bool *failed)
{
	struct oidc_provider_settings s = {.issuer = cfg->oidc_issuer,
					   .timeout_s = cfg->oidc_timeout_s,
					   .cache_s = cfg->oidc_cache_s,
					   .keys_refetch_s = cfg->oidc_keys_refetch_s};
	struct oidc *o;

	*failed = false;
	if (!cfg->oidc_issuer[0])
		return NULL;
	if (!(o = calloc(1, sizeof(*o))) || !(o->provider = oidc_provider_new(&s))) {
		free(o);
		*failed = true;
		return NULL;
	}
	pthread_mutex_init(&o->lock, NULL);
	return o;
}

void oidc_free(struct oidc *o)
{
	if (!o)
		return;
	oidc_provider_free(o->provider);
	explicit_bzero(o->pending, sizeof(o->pending));
	pthread_mutex_destroy(&o->lock);
	free(o);
}

const char *oidc_display_name(const struct app *app)
{
	return app->oidc ? app->cfg->oidc_name : NULL;
}

static const char *cookie_name(const struct app *app)
{
	return app->cfg->secure_cookies ? "__Host-" OIDC_COOKIE : OIDC_COOKIE;
}

void oidc_cookie_clear(const struct app *app, char *out, size_t outlen)
{
	snprintf(out, outlen, "%s=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0%s",
		 cookie_name(app), app->cfg->secure_cookies ? "; Secure" : "");
}

/* Keeps p, replacing an entry that ran out or, when every one is live, the
 * oldest: a flood of begun sign-ins pushes out others' but holds no more memory. */
static void signin_put(struct oidc *o, const struct signin *p)
{
	size_t victim = 0;

	pthread_mutex_lock(&o->lock);
	for (size_t i = 0; i < OIDC_PENDING_MAX; i++) {
		struct signin *e = &o->pending[i];
		if (!e->state[0] || e->created_at + OIDC_PENDING_TTL_S < p->created_at) {
			victim = i;
			break;
		}
		if (e->created_at < o->pending[victim].created_at)
			victim = i;
	}
	o->pending[victim] = *p;
	pthread_mutex_unlock(&o->lock);
}

/* Takes (and so uses up) the entry of state: 1 found and live, 0 not. */
static int signin_take(struct oidc *o, const char *state, int64_t now, struct signin *out)
{
	int found = 0;

	if (strlen(state) != OIDC_STATE_LEN)
		return 0;
	pthread_mutex_lock(&o->lock);
	for (size_t i = 0; i < OIDC_PENDING_MAX; i++) {
		struct signin *e = &o->pending[i];
		if (e->state[0] && crypto_equal(e->state, state, OIDC_STATE_LEN)) {
			found = e->created_at + OIDC_PENDING_TTL_S >= now;
			*out = *e;
			explicit_bzero(e, sizeof(*e));
			break;
		}
	}
	pthread_mutex_unlock(&o->lock);
	return found;
}

/* ---- begin ---- */

static int add_param(struct buf *b, const char *name, const char *value, bool first)
{
	char enc[OIDC_URL_MAX * 3 + 1];

	http_url_encode(value, enc, sizeof(enc));
	return buf_addf(b, "%s%s=%s", first ? "" : "&", name, enc);
}

static int authorization_url(const struct labd_config *cfg, const char *endpoint,
			     const struct signin *p, char *out, size_t outlen)
{
	unsigned char digest[32];
	char challenge[48];
	struct buf b;
	int rc;

	crypto_sha256(p->verifier, strlen(p->verifier), digest);
	crypto_b64url(digest, sizeof(digest), challenge, sizeof(challenge));
	buf_init(&b, outlen - 1);
	rc = buf_addf(&b, "%s%c", endpoint, strchr(endpoint, '?') ? '&' : '?');
	rc = rc ?: add_param(&b, "response_type", "code", true);
	rc = rc ?: add_param(&b, "client_id", cfg->oidc_client_id, false);
	rc = rc ?: add_param(&b, "redirect_uri", p->redirect_uri, false);
	rc = rc ?: add_param(&b, "scope", cfg->oidc_scopes, false);
	rc = rc ?: add_param(&b, "state", p->state, false);
	rc = rc ?: add_param(&b, "nonce", p->nonce, false);
	rc = rc ?: add_param(&b, "code_challenge", challenge, false);
	rc = rc ?: add_param(&b, "code_challenge_method", "S256", false);
	if (rc == 0)
		str_copy(out, outlen, buf_str(&b));
	buf_release(&b);
	return rc;
}

int oidc_begin(struct app *app, struct http_request *req, const char *next, char *location,
	       size_t location_len, char *cookie, size_t cookie_len, char *err, size_t errlen)
{
	struct signin p = {.created_at = time(NULL)};
	struct oidc_endpoints ends;
	char origin[OIDC_URL_MAX - sizeof(CALLBACK_PATH)];
	int rc;

	if ((rc = oidc_provider_endpoints(app->oidc->provider, &ends, err, errlen)) < 0)
		return rc;
	if (origin_ui_url(req, origin, sizeof(origin)) < 0 ||
	    crypto_random_token(p.state, sizeof(p.state), 32) < 0 ||
	    crypto_random_token(p.nonce, sizeof(p.nonce), 32) < 0 ||
	    crypto_random_token(p.verifier, sizeof(p.verifier), 32) < 0) {
		snprintf(err, errlen, "no randomness or no origin");
		return -EIO;
	}
	snprintf(p.redirect_uri, sizeof(p.redirect_uri), "%s%s", origin, CALLBACK_PATH);
	str_copy(p.next, sizeof(p.next), next);
	if (authorization_url(app->cfg, ends.authorization, &p, location, location_len) < 0) {
		snprintf(err, errlen, "the authorization URL is too long");
		return -EIO;
	}
	signin_put(app->oidc, &p);
	snprintf(cookie, cookie_len, "%s=%s; Path=/; HttpOnly; SameSite=Lax; Max-Age=%d%s",
		 cookie_name(app), p.state, OIDC_PENDING_TTL_S,
		 app->cfg->secure_cookies ? "; Secure" : "");
	explicit_bzero(&p, sizeof(p));
	return 0;
}

/* ---- finish ---- */

static enum oidc_finish_result refused(struct oidc_outcome *out, enum oidc_finish_result res,
				       const char *code, const char *fmt, const char *arg)
{
	out->why.code = code;
	snprintf(out->why.message, sizeof(out->why.message), fmt, arg ? arg : "");
	return res;
}

/* RFC 6749 4.1.3: the code for tokens, with the PKCE verifier. */
static enum oidc_finish_result exchange(struct app *app, const struct signin *p,
					const char *code, char **id_token,
					struct oidc_outcome *out)
{
	char err[320], enc[CODE_MAX * 3 + 1];
	struct oidc_endpoints ends;
	struct buf form;
	long status;
	json_t *body = NULL;
	int rc;

	*id_token = NULL;
	if ((rc = oidc_provider_endpoints(app->oidc->provider, &ends, err, sizeof(err))) < 0)
		return refused(out, OIDC_UNAVAILABLE, "unavailable",
			       "the identity provider cannot be reached: %.150s", err);
	buf_init(&form, 16384);
	http_url_encode(code, enc, sizeof(enc));
	buf_addf(&form, "grant_type=authorization_code&code=%s", enc);
	http_url_encode(p->redirect_uri, enc, sizeof(enc));
	buf_addf(&form, "&redirect_uri=%s&code_verifier=%s", enc, p->verifier);
	struct oidc_request rq = {.url = ends.token,
				  .form = buf_str(&form),
				  .user = app->cfg->oidc_client_id,
				  .password = app->cfg->oidc_client_secret,
				  .timeout_s = app->cfg->oidc_timeout_s};
	rc = oidc_fetch(&rq, &status, &body, err, sizeof(err));
	buf_release(&form);
	if (rc < 0)
		return refused(out, OIDC_UNAVAILABLE, rc == -EBUSY ? "busy" : "unavailable",
			       "the identity provider's token endpoint did not answer: %.150s", err);
	const char *token = json_string_value(json_object_get(body, "id_token"));
	const char *error = json_string_value(json_object_get(body, "error"));
	if (status != 200 || !token) {
		snprintf(err, sizeof(err), "%.64s", error ? error : "no ID token");
		json_decref(body);
		/* invalid_grant: a code used before, expired, or not this client's */
		return refused(out, OIDC_REFUSED, "code_refused",
			       "the identity provider refused the sign-in's code (%.64s); start again",
			       err);
	}
	*id_token = strdup(token);
	json_decref(body);
	return *id_token ? OIDC_SIGNED_IN : OIDC_ERROR;
}

static enum oidc_finish_result verify(struct app *app, const struct signin *p,
				      const char *id_token, json_t **claims,
				      struct oidc_outcome *out)
{
	struct oidc_expect want = {.client_id = app->cfg->oidc_client_id,
				   .nonce = p->nonce,
				   .now_s = time(NULL),
				   .skew_s = app->cfg->oidc_clock_skew_s};
	char err[320];
	int res = oidc_provider_verify(app->oidc->provider, id_token, &want, claims, err,
				       sizeof(err));

	if (res < 0)
		return refused(out, OIDC_UNAVAILABLE, "unavailable",
			       "the identity provider's keys cannot be fetched: %.150s", err);
	if (res != OIDC_JWT_OK)
		return refused(out, OIDC_REFUSED, oidc_jwt_result_code(res), "%s",
			       oidc_jwt_result_text(res));
	return OIDC_SIGNED_IN;
}

/* state from the query must be this browser's (the cookie) and a live entry. */
static enum oidc_finish_result check_state(struct app *app, struct http_request *req,
					   struct signin *p, struct oidc_outcome *out)
{
	const char *state = http_query(req, "state");
	const char *cookie = http_cookie(req, cookie_name(app));

	if (!state || !cookie || strlen(state) != strlen(cookie) ||
	    !crypto_equal(state, cookie, strlen(state)))
		return refused(out, OIDC_REFUSED, "state_mismatch",
			       "this sign-in was not started by this browser (state mismatch); "
			       "start again%s", NULL);
	if (!signin_take(app->oidc, state, time(NULL), p))
		return refused(out, OIDC_REFUSED, "state_mismatch",
			       "this sign-in is unknown, finished or too old; start again%s", NULL);
	return OIDC_SIGNED_IN;
}

static enum oidc_finish_result sign_in(struct app *app, struct http_request *req,
				       const struct signin *p, struct oidc_outcome *out)
{
	const char *code = http_query(req, "code");
	const char *error = http_query(req, "error");
	char *id_token = NULL;
	json_t *claims = NULL;
	enum oidc_finish_result res;
	int rc;

	if (error) {
		char e[80];
		snprintf(e, sizeof(e), "%.64s", error);
		for (char *c = e; *c; c++) /* it is shown: only plain characters */
			if (*c < 0x20 || *c > 0x7e || *c == '<' || *c == '&')
				*c = '?';
		return refused(out, OIDC_REFUSED, "provider_error",
			       "the identity provider did not sign you in (%s)", e);
	}
	/* RFC 9207: a provider that names itself in the answer must be ours (mix-up) */
	const char *iss = http_query(req, "iss");
	if (iss && strcmp(iss, app->cfg->oidc_issuer) != 0)
		return refused(out, OIDC_REFUSED, "wrong_issuer",
			       "the answer comes from another identity provider%s", NULL);
	if (!code || !*code || strlen(code) > CODE_MAX)
		return refused(out, OIDC_REFUSED, "malformed_callback",
			       "the identity provider's answer carries no code%s", NULL);
	if ((res = exchange(app, p, code, &id_token, out)) != OIDC_SIGNED_IN)
		return res;
	res = verify(app, p, id_token, &claims, out);
	free(id_token);
	if (res != OIDC_SIGNED_IN)
		return res;
	rc = oidc_account_resolve(app, claims, &out->user, &out->why);
	if (rc > 0 && sessions_create(app->db, out->user.id, http_address(req), app->session,
				      time(NULL), out->secret, &out->session) < 0)
		rc = -1;
	if (rc <= 0) {
		json_decref(claims);
		return rc < 0 ? OIDC_ERROR : OIDC_REFUSED;
	}
	out->claims = claims;
	return OIDC_SIGNED_IN;
}

enum oidc_finish_result oidc_finish(struct app *app, struct http_request *req,
				    struct oidc_outcome *out)
{
	struct signin p;
	enum oidc_finish_result res;
	int64_t now = time(NULL);
	char detail[320];

	memset(out, 0, sizeof(*out));
	res = check_state(app, req, &p, out);
	if (res == OIDC_SIGNED_IN)
		res = sign_in(app, req, &p, out);
	explicit_bzero(&p.verifier, sizeof(p.verifier));
	str_copy(out->next, sizeof(out->next), res == OIDC_SIGNED_IN ? p.next : "");
	if (res == OIDC_SIGNED_IN) {
		if (audit_add(app->db, now, out->user.name, "login.success", out->user.name,
			      http_address(req), "single sign-on") < 0)
			log_error("audit: login.success of %s not recorded", out->user.name);
		return res;
	}
	if (res == OIDC_ERROR)
		out->why.code = "internal";
	metrics_login_failure();
	snprintf(detail, sizeof(detail), "single sign-on: %s: %s", out->why.code,
		 out->why.message);
	log_info("oidc: sign-in from %s refused: %s", http_address(req), detail + 16);
	if (audit_add(app->db, now, NULL, "login.failure", "(sso)", http_address(req), detail) < 0)
		log_error("audit: login.failure not recorded");
	return res;
}

/* ---- logout ---- */

/* The cached endpoints only: a logout never waits for the provider. */
static bool has_end_session(struct app *app, struct oidc_endpoints *ends)
{
	char err[256];

	return app->oidc && oidc_provider_endpoints(app->oidc->provider, ends, err, sizeof(err)) == 0 &&
	       ends->end_session[0];
}

int oidc_logout_location(struct app *app, const struct user *user, char *location,
			 size_t location_len)
{
	struct oidc_endpoints ends;

	if (user->password_hash[0] || !has_end_session(app, &ends))
		return 0;
	return str_copy(location, location_len, "/login?logout=sso") < 0 ? 0 : 1;
}

int oidc_end_session_url(struct app *app, struct http_request *req, char *location,
			 size_t location_len)
{
	struct oidc_endpoints ends;
	char origin[OIDC_URL_MAX], back[OIDC_URL_MAX + 16];
	char enc_back[sizeof(back) * 3], enc_id[sizeof(app->cfg->oidc_client_id) * 3];

	if (!has_end_session(app, &ends) || origin_ui_url(req, origin, sizeof(origin)) < 0)
		return 0;
	snprintf(back, sizeof(back), "%s/login", origin);
	http_url_encode(back, enc_back, sizeof(enc_back));
	http_url_encode(app->cfg->oidc_client_id, enc_id, sizeof(enc_id));
	int n = snprintf(location, location_len, "%s%cclient_id=%s&post_logout_redirect_uri=%s",
			 ends.end_session, strchr(ends.end_session, '?') ? '&' : '?', enc_id,
			 enc_back);
	return n > 0 && (size_t)n < location_len;
}
