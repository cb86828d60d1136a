/* oidc_account.c - claims to a labd account; see oidc_account.h. */
#include "auth/oidc_account.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "config/config.h"
#include "labd/app.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "store/audit.h"
#include "store/db.h"
#include "store/groups.h"

#define GROUPS_CLAIM_MAX 256 /* groups of one claim looked at */

__attribute__((format(printf, 3, 4))) static int refuse(struct oidc_refusal *why, const char *code,
							 const char *fmt, ...)
{
	va_list ap;

	why->code = code;
	va_start(ap, fmt);
	vsnprintf(why->message, sizeof(why->message), fmt, ap);
	va_end(ap);
	return 0;
}

/* True when item is one of the comma-separated entries of list (case-insensitive
 * for domains, exact for groups). */
static bool listed(const char *list, const char *item, bool fold_case)
{
	size_t len = strlen(item);

	for (const char *p = list; *p;) {
		p += strspn(p, " ,");
		size_t n = strcspn(p, ",");
		while (n > 0 && p[n - 1] == ' ')
			n--;
		if (n == len && n > 0 && (fold_case ? !strncasecmp(p, item, n) : !strncmp(p, item, n)))
			return true;
		p += strcspn(p, ",");
	}
	return false;
}

static int check_domain(const struct labd_config *cfg, const json_t *claims,
			struct oidc_refusal *why)
{
	const char *email = json_string_value(json_object_get(claims, "email"));
	const char *at = email ? strrchr(email, '@') : NULL;

	if (!cfg->oidc_allowed_domains[0])
		return 1;
	if (!at || json_is_false(json_object_get(claims, "email_verified")))
		return refuse(why, "domain_not_allowed",
			      "the identity provider names no verified e-mail address, and only "
			      "addresses of allowed domains may sign in");
	if (!listed(cfg->oidc_allowed_domains, at + 1, true))
		return refuse(why, "domain_not_allowed",
			      "e-mail addresses of the domain \"%.100s\" may not sign in", at + 1);
	return 1;
}

/* The groups claim: an array of strings, or NULL when absent or off. */
static const json_t *groups_of(const struct labd_config *cfg, const json_t *claims)
{
	const json_t *g = cfg->oidc_groups_claim[0] ? json_object_get(claims, cfg->oidc_groups_claim)
						    : NULL;
	return json_is_array(g) ? g : NULL;
}

static bool in_claim(const json_t *groups, const char *name)
{
	size_t i;
	json_t *g;

	json_array_foreach(groups, i, g)
	{
		if (i >= GROUPS_CLAIM_MAX)
			break;
		if (json_is_string(g) && !strcmp(json_string_value(g), name))
			return true;
	}
	return false;
}

static int check_groups(const struct labd_config *cfg, const json_t *groups,
			struct oidc_refusal *why)
{
	size_t i;
	json_t *g;

	if (!cfg->oidc_allowed_groups[0])
		return 1;
	json_array_foreach(groups, i, g)
	{
		if (i < GROUPS_CLAIM_MAX && json_is_string(g) &&
		    listed(cfg->oidc_allowed_groups, json_string_value(g), false))
			return 1;
	}
	return refuse(why, "group_not_allowed", "you are in none of the groups allowed to sign in");
}

/* The account by name: 1 found or made, 0 refused, -1 error. */
static int find_or_provision(struct app *app, const char *name, struct user *user,
			     struct oidc_refusal *why)
{
	int found = users_find_by_name(app->db, name, user);

	if (found == 0 && !app->cfg->oidc_provision)
		return refuse(why, "not_provisioned",
			      "labd has no account \"%s\", and accounts are not created at sign-in: "
			      "ask your lab's administrator",
			      name);
	if (found == 0) {
		int rc = users_create(app->db, name, USER_ROLE_USER, "", time(NULL), user);
		if (rc == DB_CONFLICT) /* made by a parallel sign-in just now */
			found = users_find_by_name(app->db, name, user);
		else if (rc < 0)
			return -1;
		else {
			log_info("oidc: created user %s at first sign-in", name);
			if (audit_add(app->db, time(NULL), name, "user.create", name, NULL,
				      "single sign-on") < 0)
				log_error("audit: user.create of %s not recorded", name);
			return 1;
		}
	}
	if (found < 0)
		return -1;
	if (user->password_hash[0])
		return refuse(why, "local_account",
			      "the account \"%s\" has a password: sign in with the form", name);
	if (user->disabled)
		return refuse(why, "disabled", "the account \"%s\" is disabled", name);
	return 1;
}

#define MIRROR_MAX 256 /* labd groups looked at */

/* Names of labd groups, collected before any change (no store change runs
 * inside an iteration). */
struct names {
	char name[MIRROR_MAX][QUOTA_NAME_MAX + 1];
	size_t n;
};

static int collect_group(const struct group *g, void *ctx)
{
	struct names *all = ctx;

	if (all->n < MIRROR_MAX)
		snprintf(all->name[all->n++], QUOTA_NAME_MAX + 1, "%s", g->name);
	return 0;
}

static int collect_name(const char *name, void *ctx)
{
	struct names *mine = ctx;

	if (mine->n < MIRROR_MAX)
		snprintf(mine->name[mine->n++], QUOTA_NAME_MAX + 1, "%s", name);
	return 0;
}

static bool among(const struct names *list, const char *name)
{
	for (size_t i = 0; i < list->n; i++)
		if (!strcmp(list->name[i], name))
			return true;
	return false;
}

/* The claim's groups mirrored onto labd's groups of the same names: the user
 * joins those the claim names and leaves those it does not, so plans follow
 * the provider. Groups labd does not have are ignored (an administrator makes
 * a group, with its plan, for those that matter). */
static int mirror_groups(struct app *app, const struct user *user, const json_t *groups)
{
	static __thread struct names all, mine;
	const char *one[1] = {user->name};
	char missing[QUOTA_NAME_MAX + 1];

	all.n = mine.n = 0;
	if (groups_each(app->db, collect_group, &all) < 0 ||
	    groups_of_user_each(app->db, user->id, collect_name, &mine) < 0)
		return -1;
	for (size_t i = 0; i < all.n; i++) {
		bool want = in_claim(groups, all.name[i]), have = among(&mine, all.name[i]);
		struct group_change c = {0};

		if (want == have)
			continue;
		if (want) {
			c.add = one;
			c.n_add = 1;
		} else {
			c.remove = one;
			c.n_remove = 1;
		}
		if (groups_update(app->db, all.name[i], &c, missing) != QUOTA_OK)
			log_warn("oidc: could not %s group %s for user %s", want ? "join" : "leave",
				 all.name[i], user->name);
		else
			log_info("oidc: user %s %s group %s", user->name, want ? "joined" : "left",
				 all.name[i]);
	}
	return 0;
}

int oidc_account_resolve(struct app *app, const json_t *claims, struct user *user,
			 struct oidc_refusal *why)
{
	const struct labd_config *cfg = app->cfg;
	const char *name = json_string_value(json_object_get(claims, cfg->oidc_username_claim));
	const json_t *groups = groups_of(cfg, claims);
	int rc;

	if (!name)
		return refuse(why, "bad_name", "the identity provider sent no \"%.60s\" claim",
			      cfg->oidc_username_claim);
	if (!parse_user_name_ok(name))
		return refuse(why, "bad_name",
			      "the \"%.60s\" claim \"%.64s\" is not a valid labd user name",
			      cfg->oidc_username_claim, name);
	if ((rc = check_domain(cfg, claims, why)) <= 0 || (rc = check_groups(cfg, groups, why)) <= 0)
		return rc;
	return find_or_provision(app, name, user, why);
}

int oidc_account_mirror_groups(struct app *app, const struct user *user, const json_t *claims)
{
	const json_t *groups = groups_of(app->cfg, claims);

	return groups ? mirror_groups(app, user, groups) : 0;
}
