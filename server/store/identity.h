/* identity.h - who a request comes from, as the store knows them: the user row
 * and the session or API token that vouched for them. A plain record, so the
 * HTTP layer can carry it in the request; auth/ fills it in. */
#ifndef LABD_IDENTITY_H
#define LABD_IDENTITY_H

#include <stdint.h>

#include "store/sessions.h"
#include "store/users.h"

/* AUTH_RUNTIME: the runtime cookie of a user origin (store/grants.h) */
enum auth_kind { AUTH_NONE, AUTH_COOKIE, AUTH_TOKEN, AUTH_RUNTIME };

struct auth_identity {
	enum auth_kind kind;
	struct user user;   /* valid unless kind == AUTH_NONE */
	int64_t session_id; /* AUTH_COOKIE, AUTH_RUNTIME (the session that made the grant) */
	char csrf_token[SESSION_CSRF_LEN + 1];
	int64_t token_id; /* AUTH_TOKEN */
	/* The scopes this request holds (auth/scope.h): a cookie's are its role's,
	 * a token's are its own cut down to its owner's role. */
	unsigned scopes;
	/* AUTH_NONE after a bearer token that expired then (0 otherwise), so the
	 * 401 can say why. */
	int64_t token_expired_at;
};

#endif
