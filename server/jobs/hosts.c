/* hosts.c - a job's instance_count; see hosts.h. */
#include "jobs/hosts.h"

#include <jansson.h>

int jobs_instance_count(const struct job *j)
{
	json_t *req = j->spec ? json_loads(j->spec, 0, NULL) : NULL;
	json_t *v = json_object_get(req, "instance_count");
	int n = json_is_integer(v) && json_integer_value(v) > 1 && json_integer_value(v) <= 64
			? (int)json_integer_value(v)
			: 1;

	json_decref(req);
	return n;
}
