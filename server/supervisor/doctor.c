/* doctor.c - `labd doctor`: its command line and its report; see doctor.h. */
#include "supervisor/doctor.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "supervisor/node.h"
#include "supervisor/statedir.h"

void doctor_say(enum doctor_level level, const char *remedy, const char *fmt, ...)
{
	static const char *const names[] = {"OK", "WARN", "FAIL", "LEFT", "FIXED"};
	va_list ap;

	printf("%-5s ", names[level]);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (remedy && level != DOCTOR_OK)
		printf(" -- %s", remedy);
	putchar('\n');
}

static int usage(void)
{
	fprintf(stderr, "usage: labd [--config FILE | --demo] doctor [--fix]\n");
	return 2;
}

int doctor_main(const struct labd_config *cfg, int argc, char **argv)
{
	bool fix = argc == 2 && strcmp(argv[1], "--fix") == 0;
	char cgroup_parent[sizeof(cfg->node_cgroup_parent)];
	pid_t holder;
	int left;

	if (argc > 2 || (argc == 2 && !fix))
		return usage();
	holder = statedir_lock_holder(cfg->state_dir);
	if (fix && holder > 0) {
		fprintf(stderr,
			"labd doctor: labd (pid %d) runs on %s; --fix repairs only while it is "
			"stopped (stop it, then run labd doctor --fix again)\n",
			(int)holder, cfg->state_dir);
		return 2;
	}
	printf("labd doctor: state dir %s, labd %s\n", cfg->state_dir,
	       holder > 0 ? "running" : "not running");
	enum doctor_level worst = doctor_host(cfg);
	node_cgroup_parent(cfg, cgroup_parent, sizeof(cgroup_parent));
	left = doctor_leftovers(cfg->state_dir, cgroup_parent, holder > 0, fix);
	if (left == 0)
		doctor_say(DOCTOR_OK, NULL, "leftovers: none");
	fflush(stdout);
	return worst == DOCTOR_FAIL || left > 0 ? 1 : 0;
}
