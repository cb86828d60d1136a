/* scope.c - scope names and role sets; see scope.h. */
#include "auth/scope.h"

#include <stdio.h>
#include <string.h>

static const struct {
	unsigned bit;
	const char *name;
} scopes[] = {
	{SCOPE_IDENTIFY, "identify"},
	{SCOPE_ACCOUNT, "account"},
	{SCOPE_TOKENS, "tokens"},
	{SCOPE_RUNTIMES, "runtimes"},
	{SCOPE_READ_USAGE, "read:usage"},
	{SCOPE_READ_QUOTA, "read:quota"},
	{SCOPE_READ_GPUS, "read:gpus"},
	{SCOPE_ADMIN_USERS, "admin:users"},
	{SCOPE_ADMIN_QUOTA, "admin:quota"},
	{SCOPE_ADMIN_USAGE, "admin:usage"},
	{SCOPE_ADMIN_RUNTIMES, "admin:runtimes"},
	{SCOPE_ADMIN_AUDIT, "admin:audit"},
	{SCOPE_METRICS, "metrics"},
	{SCOPE_JOBS, "jobs"},
	{SCOPE_ADMIN_JOBS, "admin:jobs"},
};

#define N_SCOPES (sizeof(scopes) / sizeof(scopes[0]))
#define USER_SCOPES                                                                    \
	(SCOPE_IDENTIFY | SCOPE_ACCOUNT | SCOPE_TOKENS | SCOPE_RUNTIMES | SCOPE_READ_USAGE | \
	 SCOPE_READ_QUOTA | SCOPE_READ_GPUS | SCOPE_JOBS)
#define ALL_SCOPES ((SCOPE_ADMIN_JOBS << 1) - 1)

unsigned scope_of_role(enum user_role role)
{
	return role == USER_ROLE_ADMIN ? ALL_SCOPES : USER_SCOPES;
}

const char *scope_name(unsigned bit)
{
	for (size_t i = 0; i < N_SCOPES; i++)
		if (scopes[i].bit == bit)
			return scopes[i].name;
	return NULL;
}

unsigned scope_parse(const char *name)
{
	for (size_t i = 0; i < N_SCOPES; i++)
		if (strcmp(scopes[i].name, name) == 0)
			return scopes[i].bit;
	return 0;
}

unsigned scope_parse_list(const char *text, enum user_role role)
{
	char word[32];
	unsigned set = 0;
	size_t n;

	while (*text) {
		text += strspn(text, " ");
		n = strcspn(text, " ");
		if (n == 1 && *text == '*')
			set |= scope_of_role(role);
		else if (n > 0 && n < sizeof(word)) {
			memcpy(word, text, n);
			word[n] = '\0';
			set |= scope_parse(word);
		}
		text += n;
	}
	return set;
}

void scope_format(unsigned set, char *out, size_t len)
{
	size_t used = 0;

	if (len)
		out[0] = '\0';
	for (size_t i = 0; i < N_SCOPES; i++) {
		if (!(set & scopes[i].bit))
			continue;
		int n = snprintf(out + used, len - used, "%s%s", used ? " " : "", scopes[i].name);
		if (n < 0 || (size_t)n >= len - used)
			return;
		used += (size_t)n;
	}
}

void scope_each(void (*fn)(unsigned bit, const char *name, void *ctx), void *ctx)
{
	for (size_t i = 0; i < N_SCOPES; i++)
		fn(scopes[i].bit, scopes[i].name, ctx);
}
