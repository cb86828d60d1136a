/* fuzz_link.c - the node link's parsers of bytes from the network (proto/link.h):
 * the data line a node's data port reads from anyone who connects, the data path it
 * then allows, and the hello a head reads from a node.
 *
 * Input: the data line on the first line (checked as it came: never accepted, since
 * no fuzzer forges an HMAC, and a refusal leaves the nonce cache as it was); the
 * second line is a path, signed with link_data_line_make and checked: accepted once
 * exactly when the path is one a line may carry, then refused as a replay; the rest
 * is a hello, parsed as JSON and checked. */
#include <errno.h>
#include <jansson.h>

#include "fuzz.h"
#include "proto/link.h"

#define NOW_MS 1800000000000LL

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct link_secret secret = {.len = 32};
	struct link_nonces *seen = link_nonces_new(4);
	char *line = fuzz_take_line(&data, &size), *path_in = fuzz_take_line(&data, &size);
	char path[256], made[LINK_DATA_LINE_MAX], err[200];
	int rc;

	FUZZ_ASSERT(seen != NULL);
	rc = link_data_line_check(&secret, seen, line, NOW_MS, path, sizeof(path));
	FUZZ_ASSERT(rc == -EPROTO || rc == -ETIME || rc == -EACCES);
	(void)link_data_path_ok(line);

	int n = link_data_line_make(&secret, path_in, NOW_MS, made, sizeof(made));
	if (n > 0) {
		FUZZ_ASSERT((size_t)n == strlen(made) && made[n - 1] == '\n');
		FUZZ_ASSERT(link_data_line_check(&secret, seen, made, NOW_MS + 29999, path,
						 sizeof(path)) == 0);
		FUZZ_ASSERT(strcmp(path, path_in) == 0);
		FUZZ_ASSERT(link_data_line_check(&secret, seen, made, NOW_MS, path, sizeof(path)) ==
			    -EALREADY);
		if (link_data_path_ok(path)) /* a runtime's socket, never outside runtimes/ */
			FUZZ_ASSERT(strncmp(path, "runtimes/", 9) == 0 && !strstr(path, ".."));
	} else {
		FUZZ_ASSERT(n == -EINVAL || n == -ENOSPC);
	}

	json_t *hello = json_loadb((const char *)data, size, 0, NULL);
	if (hello) {
		rc = link_hello_check(hello, NULL, err, sizeof(err));
		FUZZ_ASSERT(rc == 0 || (rc == -EPROTO && err[0]));
		if (rc == 0)
			FUZZ_ASSERT(link_name_ok(json_string_value(json_object_get(hello, "name"))));
		json_decref(hello);
	}
	link_nonces_free(seen);
	free(line);
	free(path_in);
	return 0;
}
