/* fuzz_api_json.c - API request bodies: api_parse_object (every body of the
 * API), then the job submit check (jobs/submit.c) on what it lets through,
 * and the small validators other bodies' fields go through (names, scopes,
 * quota limits, sizes, durations, CPU counts, roles, kinds, images). */
#include <errno.h>

#include "api/api.h"
#include "auth/scope.h"
#include "config/images.h"
#include "fuzz.h"
#include "jobs/submit.h"
#include "labd/parse.h"
#include "store/quota.h"
#include "store/runtimes.h"
#include "store/users.h"

/* The other bodies' fields (users, plans, groups, tokens, quota, runtime). */
static const char *const other_fields[] = {
	"name", "password", "role", "plan", "disabled", "scopes", "expires_in_s", "kind",
	"image", "current_password", "new_password", "limits", "members", "gpus", "memory",
	"cpus", "home_size", "max_runtime", "repo", "path", "ref", NULL,
};

static void validators(const char *s)
{
	struct quota_limits ql;
	enum user_role role;
	enum runtime_kind kind;
	uint64_t u;
	int64_t d;
	uint32_t milli;

	(void)scope_parse_list(s, USER_ROLE_ADMIN);
	(void)scope_parse_list(s, USER_ROLE_USER);
	(void)quota_limits_parse(s, &ql);
	(void)users_role_parse(s, &role);
	(void)runtimes_kind_parse(s, &kind);
	(void)images_name_ok(s);
	(void)parse_user_name_ok(s);
	(void)parse_token_ok(s);
	(void)parse_uint(s, 0, UINT64_MAX, &u);
	(void)parse_size_bytes(s, &u);
	(void)parse_duration_s(s, &d);
	(void)parse_cpus_milli(s, &milli);
	(void)jobs_name_ok(s);
	(void)jobs_path_ok(s, strlen(s));
}

static void submit(json_t *body)
{
	struct jobs_limits lim = {
		.gpus_max = 2, .max_runtime_s = 86400, .memory_bytes = 8LL << 30,
		.cpus_milli = 4000, .image = "", .keep_alive_max_s = 3600,
		.max_wait_default_s = 600,
	};
	struct jobs_submit out;
	struct jobs_submit_error err = {0};

	if (jobs_submit_check(body, &lim, &out, &err) == 0) {
		FUZZ_ASSERT(out.spec && jobs_name_ok(out.name));
		FUZZ_ASSERT(out.max_runtime_s > 0 && out.max_runtime_s <= lim.max_runtime_s);
		FUZZ_ASSERT(out.gpu_count >= 0 && (unsigned)out.gpu_count <= lim.gpus_max);
		FUZZ_ASSERT(out.memory_bytes <= lim.memory_bytes && out.cpus_milli <= lim.cpus_milli);
		jobs_submit_release(&out);
	} else {
		FUZZ_ASSERT(err.field[0] && err.message[0]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *code, *key;
	char message[256];
	json_t *obj, *value;

	obj = api_parse_object((const char *)data, size, jobs_submit_fields, &code, message,
			       sizeof(message));
	if (obj) {
		submit(obj);
		json_decref(obj);
	} else {
		FUZZ_ASSERT(message[0] && (!strcmp(code, "bad_json") || !strcmp(code, "bad_field")));
	}
	obj = api_parse_object((const char *)data, size, other_fields, &code, message,
			       sizeof(message));
	if (obj) {
		json_object_foreach(obj, key, value)
			if (json_is_string(value))
				validators(json_string_value(value));
		json_decref(obj);
	}
	return 0;
}
