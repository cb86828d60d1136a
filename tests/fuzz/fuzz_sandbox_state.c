/* fuzz_sandbox_state.c - the sandbox state record (sandbox/state.c), which the
 * supervisor reads after a crash to find what a sandbox holds on the host; and
 * the /proc/<pid>/stat reader beside it, whose comm field the user names. */
#include "fuzz.h"
#include "sandbox/parse.h"
#include "sandbox/state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sandbox_state st, again;
	char *text = malloc(size ? size : 1), *cstr;
	char out[16384];
	uint64_t v;

	FUZZ_ASSERT(text);
	memcpy(text, data, size);
	if (sandbox_state_parse(text, size, &st) == 0) {
		int n = sandbox_state_format(&st, out, sizeof(out));
		FUZZ_ASSERT(n > 0);
		FUZZ_ASSERT(sandbox_state_parse(out, (size_t)n, &again) == 0);
		/* field by field: a key given twice leaves bytes after the NUL */
		FUZZ_ASSERT(!strcmp(st.id, again.id) && !strcmp(st.user, again.user));
		FUZZ_ASSERT(st.pid == again.pid && st.start_time_ticks == again.start_time_ticks);
		FUZZ_ASSERT(!strcmp(st.home_image, again.home_image) &&
			    !strcmp(st.run_dir, again.run_dir) &&
			    !strcmp(st.home_key, again.home_key) &&
			    !strcmp(st.cgroup_parent, again.cgroup_parent));
		FUZZ_ASSERT(!strchr(st.id, '/') && !strchr(st.user, '/') && st.id[0] != '.');
		FUZZ_ASSERT(st.home_key[0] && !strchr(st.home_key, '/') && st.home_key[0] != '.');
		(void)sandbox_state_path_under("/var/lib/labd", st.home_image);
		(void)sandbox_state_path_under("/var/lib/labd", st.run_dir);
	}
	free(text);
	cstr = fuzz_cstr(data, size);
	for (unsigned field = 3; field <= 52; field += 7)
		(void)sandbox_parse_stat_field(cstr, field, &v);
	(void)sandbox_state_path_under("/var/lib/labd", cstr);
	free(cstr);
	return 0;
}
