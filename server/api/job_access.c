/* job_access.c - the job named in a /api/v1/jobs/{id}/... path, as the
 * caller may see it: their own, or any for an administrator whose request
 * holds admin:jobs (a jobs-only admin token reaches the admin's own jobs). */
#include <stdlib.h>

#include "api/api.h"
#include "http/http.h"
#include "http/router.h"
#include "labd/app.h"
#include "auth/scope.h"
#include "labd/parse.h"
#include "store/jobs.h"
#include "store/users.h"

int api_path_job(struct http_request *req, struct job *out)
{
	const struct auth_identity *ident = http_identity(req);
	const char *text = http_match(req)->params[0];
	uint64_t id;
	int rc;

	if (parse_uint(text, 1, INT64_MAX, &id) < 0) {
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no job with id %.32s",
				 text);
		return -1;
	}
	/* another user's job is answered as missing: ids reveal nothing */
	rc = jobs_find_for(http_app(req)->db,
			   api_admin_reach(req, SCOPE_ADMIN_JOBS) ? 0 : ident->user.id, (int64_t)id,
			   out);
	if (rc < 0) {
		http_reply_internal(req);
		return -1;
	}
	if (rc == 0) {
		http_reply_error(req, MHD_HTTP_NOT_FOUND, "not_found", "no job with id %llu",
				 (unsigned long long)id);
		return -1;
	}
	return 0;
}
