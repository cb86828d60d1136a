/* cli.c - `labd user ...`; see cli.h. */
#include "web/cli.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "store/audit.h"
#include "config/config.h"
#include "store/db.h"
#include "labd/log.h"
#include "labd/parse.h"
#include "auth/password.h"
#include "labd/privdrop.h"
#include "store/users.h"
#include "web/web.h"

static int usage(void)
{
	fprintf(stderr, "usage: labd [--config FILE | --demo] user add NAME [--admin] "
			"[--password-stdin]\n"
			"       labd [--config FILE | --demo] user passwd NAME [--password-stdin]\n"
			"       labd [--config FILE | --demo] user list\n");
	return 2;
}

/* The new password: one line from stdin, or a generated one that is printed. */
static int read_password(const struct labd_config *cfg, bool from_stdin, char *out, size_t len,
			 bool *generated)
{
	const char *why;

	*generated = !from_stdin;
	if (!from_stdin)
		return password_generate(out);
	if (!fgets(out, (int)len, stdin))
		return log_error("no password on standard input");
	out[strcspn(out, "\r\n")] = '\0';
	if ((why = password_policy_error(out, cfg->min_password_length)))
		return log_error("password %s (at least %u characters)", why,
				 cfg->min_password_length);
	return 0;
}

static int print_user(const struct user *u, void *ctx)
{
	char when[32];
	struct tm tm;
	time_t t = (time_t)u->created_at;
	(void)ctx;
	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	printf("%-32s %-5s %-8s %s\n", u->name, users_role_name(u->role),
	       u->disabled ? "disabled" : "enabled", when);
	return 0;
}

static int cmd_add(const struct labd_config *cfg, struct db *db, const char *name, bool admin,
		   bool from_stdin)
{
	struct password_params pp = {cfg->scrypt_n, cfg->scrypt_r, cfg->scrypt_p};
	char password[PASSWORD_MAX_LENGTH + 2], hash[PASSWORD_HASH_MAX];
	bool generated;

	if (!parse_user_name_ok(name))
		return log_error("user name %s must match " PARSE_USER_NAME_RULE, name);
	if (read_password(cfg, from_stdin, password, sizeof(password), &generated) < 0 ||
	    password_hash(password, &pp, hash) < 0)
		return -1;
	int rc = users_create(db, name, admin ? USER_ROLE_ADMIN : USER_ROLE_USER, hash,
			      time(NULL), NULL);
	if (rc == DB_CONFLICT)
		return log_error("user %s already exists", name);
	if (rc < 0)
		return -1;
	if (audit_add(db, time(NULL), "(host)", "user.create", name, NULL, admin ? "admin" : "user") < 0)
		log_error("audit: user.create of %s not recorded", name);
	printf("created user %s (%s)\n", name, admin ? "admin" : "user");
	if (generated)
		printf("password: %s\n", password);
	return 0;
}

static int cmd_passwd(const struct labd_config *cfg, struct db *db, const char *name,
		      bool from_stdin)
{
	struct password_params pp = {cfg->scrypt_n, cfg->scrypt_r, cfg->scrypt_p};
	char password[PASSWORD_MAX_LENGTH + 2], hash[PASSWORD_HASH_MAX];
	struct user u;
	bool generated;

	int rc = users_find_by_name(db, name, &u);
	if (rc <= 0)
		return rc < 0 ? -1 : log_error("no user named %s", name);
	if (read_password(cfg, from_stdin, password, sizeof(password), &generated) < 0 ||
	    password_hash(password, &pp, hash) < 0 ||
	    users_set_password(db, u.id, hash, 0, time(NULL)) != USERS_OK)
		return -1;
	if (audit_add(db, time(NULL), "(host)", "user.password_reset", name, NULL, NULL) < 0)
		log_error("audit: user.password_reset of %s not recorded", name);
	printf("password of %s changed\n", name);
	if (generated)
		printf("password: %s\n", password);
	return 0;
}

int cli_user(const struct labd_config *cfg, int argc, char **argv)
{
	struct privdrop_user u;
	struct db *db = NULL;
	bool admin = false, from_stdin = false;
	const char *name = argc > 2 ? argv[2] : NULL;
	int rc;

	if (argc < 2)
		return usage();
	for (int i = 3; i < argc; i++) {
		if (strcmp(argv[i], "--admin") == 0 && strcmp(argv[1], "add") == 0)
			admin = true;
		else if (strcmp(argv[i], "--password-stdin") == 0)
			from_stdin = true;
		else
			return usage();
	}
	if (strcmp(argv[1], "list") == 0 ? argc != 2 : !name)
		return usage();
	if (privdrop_lookup(cfg->user, &u) < 0 || web_open_store_as_user(cfg, &u, &db) < 0)
		return 1;
	if (strcmp(argv[1], "add") == 0)
		rc = cmd_add(cfg, db, name, admin, from_stdin);
	else if (strcmp(argv[1], "passwd") == 0)
		rc = cmd_passwd(cfg, db, name, from_stdin);
	else if (strcmp(argv[1], "list") == 0)
		rc = users_each(db, print_user, NULL);
	else
		rc = usage() ? -1 : 0;
	db_close(db);
	return rc < 0 ? 1 : 0;
}
