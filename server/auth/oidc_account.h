/* oidc_account.h - from a verified ID token's claims to a labd account: the
 * name ([oidc] username_claim, through labd's one user-name rule), the
 * allowed e-mail domains and groups, provisioning on first sign-in, and the
 * groups claim mirrored onto labd groups of the same names. */
#ifndef LABD_OIDC_ACCOUNT_H
#define LABD_OIDC_ACCOUNT_H

#include <jansson.h>

#include "store/users.h"

struct app;

/* Why a sign-in was refused: a code for URLs, logs and audits, and a sentence. */
struct oidc_refusal {
	const char *code;
	char message[256];
};

/* Applies the policy to claims. 1 with *user filled (created when provisioning
 * is on and the name is new); 0 with *why filled when
 * refused (nothing in the store changed); -1 on a store error. An account that
 * has a local password never signs in through the provider: a claim must not
 * take over a break-glass administrator's account. */
int oidc_account_resolve(struct app *app, const json_t *claims, struct user *user,
			 struct oidc_refusal *why);
/* Mirrors the groups claim onto labd's groups of the same names: user joins
 * those it names and leaves those it does not (a token without the claim
 * changes nothing). Called once the sign-in succeeded, by whoever applies
 * what a changed plan means (the home's storage). 0, or -1 on a store error. */
int oidc_account_mirror_groups(struct app *app, const struct user *user, const json_t *claims);

#endif
