/* main.c - labd's command line: the daemon, --demo, `user` administration and
 * `doctor`. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "auth/oidc.h"
#include "web/backup.h"
#include "web/cli.h"
#include "config/config.h"
#include "supervisor/doctor.h"
#include "supervisor/node.h"
#include "labd/log.h"
#include "proto/link.h"
#include "runtime/endpoint.h"
#include "supervisor/supervisor.h"
#include "supervisor/uidmap.h"
#include "web/routes.h"
#include "web/scrape.h"

#define DEFAULT_CONFIG "/etc/labd/labd.ini"

/* The sandbox and the state files want absolute paths; --demo's is ./var. */
static int absolute_state_dir(struct labd_config *cfg)
{
	char cwd[CONFIG_PATH_MAX], abs[CONFIG_PATH_MAX];
	const char *rel = cfg->state_dir;

	if (rel[0] == '/')
		return 0;
	if (!getcwd(cwd, sizeof(cwd)))
		return log_errno("getcwd");
	while (rel[0] == '.' && rel[1] == '/')
		rel += 2;
	if (snprintf(abs, sizeof(abs), "%s/%s", cwd, rel) >= (int)sizeof(abs))
		return log_error("state_dir path too long");
	snprintf(cfg->state_dir, sizeof(cfg->state_dir), "%s", abs);
	return 0;
}

/* [slurm] secret_file, the head's copy of the nodes' secret: read as root, kept in
 * cfg for the web process (the link listener, the data lines of the proxy). */
static int load_slurm_secret(struct labd_config *cfg)
{
	struct link_secret secret;
	char err[300];

	if (!cfg->slurm_secret_file[0])
		return 0;
	if (link_secret_read(cfg->slurm_secret_file, &secret, err, sizeof(err)) < 0)
		return log_error("[slurm] secret_file: %s", err);
	memcpy(cfg->link_secret, secret.bytes, secret.len);
	cfg->link_secret_len = secret.len;
	link_secret_clear(&secret);
	/* the proxy and the Jupyter client sign their data lines with it */
	endpoint_set_secret(cfg->link_secret, cfg->link_secret_len);
	return 0;
}

/* `labd node`: the [node] keys checked and its secret read as root, the uid base
 * settled as the daemon settles it, then the supervisor with the link. */
static int run_node(struct labd_config *cfg)
{
	char err[1024];

	if (node_prepare(cfg, err, sizeof(err)) < 0 ||
	    uidmap_settle_base(cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "labd: %s\n", err);
		return 1;
	}
	return supervisor_run_node(cfg);
}

static int usage(FILE *to)
{
	fprintf(to, "usage: labd [--config FILE] [--demo]        run the daemon\n"
		    "       labd [--config FILE] [--demo] user add|passwd|list ...\n"
		    "       labd [--config FILE] [--demo] routes   print the route table\n"
		    "       labd [--config FILE] [--demo] doctor [--fix]\n"
		    "                 check the host's prerequisites and list what a crash left\n"
		    "                 (mounts, loop devices, cgroups, pasta, records); --fix\n"
		    "                 removes it while labd is stopped; exit 1 on FAIL or LEFT\n"
		    "       labd [--config FILE] backup [--freeze-max SECONDS] DIR\n"
		    "            copy the store, every home (a running one frozen for its\n"
		    "            copy) and job logs into the new folder DIR, with a manifest\n"
		    "       labd [--config FILE] backup --verify DIR   check every checksum\n"
		    "       labd [--config FILE] restore DIR --state-dir NEW\n"
		    "            a verified backup into a new, empty state dir\n"
		    "       labd [--config FILE] restore-home USER --from IMAGE [--reown]\n"
		    "            swap one user's home (their sandboxes stopped; the old image\n"
		    "            is kept in the archive); --reown: another user id's home\n"
		    "       labd --config FILE node   (or labd node --config FILE)\n"
		    "            a Slurm compute node: sandboxes as the daemon runs them, linked\n"
		    "            to the head ([node] in FILE) instead of serving HTTP\n"
		    "       labd --version\n"
		    "--demo keeps state in ./var, serves ./web and listens on 127.0.0.1:8080;\n"
		    "without --demo or --config, " DEFAULT_CONFIG " is read.\n");
	return to == stderr ? 2 : 0;
}

int main(int argc, char **argv)
{
	const char *config_path = NULL;
	bool demo = false;
	struct labd_config cfg;
	char err[1024];
	enum log_level level;
	int i;

	/* `labd node --config FILE` as well as `labd --config FILE node` */
	bool node = argc > 1 && strcmp(argv[1], "node") == 0;

	for (i = node ? 2 : 1; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
			config_path = argv[++i];
		else if (strcmp(argv[i], "--demo") == 0)
			demo = true;
		else if (strcmp(argv[i], "--version") == 0)
			return printf("labd %s\n", LABD_VERSION) < 0;
		else if (strcmp(argv[i], "--help") == 0)
			return usage(stdout);
		else
			return usage(stderr);
	}
	config_defaults(&cfg, demo);
	if (!config_path && !demo)
		config_path = DEFAULT_CONFIG;
	if (config_path && config_load(&cfg, config_path, err, sizeof(err)) < 0) {
		fprintf(stderr, "labd: %s\n", err);
		return 1;
	}
	if (absolute_state_dir(&cfg) < 0)
		return 1;
	if (log_level_parse(cfg.log_level, &level) == 0)
		log_set_level(level);
	if (geteuid() != 0) {
		fprintf(stderr, "labd: must be started as root (it drops to the %s user itself)\n",
			cfg.user);
		return 1;
	}
	if (node)
		return i == argc ? run_node(&cfg) : usage(stderr);
	if (i + 1 == argc && strcmp(argv[i], "node") == 0)
		return run_node(&cfg);
	if (i < argc && strcmp(argv[i], "user") == 0)
		return cli_user(&cfg, argc - i, argv + i);
	if (i < argc && (strcmp(argv[i], "doctor") == 0 || backup_is_command(argv[i]))) {
		/* both read sandbox uids (leftovers, a home's owner): "auto" settled as the
		 * daemon settles it, read-only */
		if (uidmap_settle_base(&cfg, err, sizeof(err)) < 0) {
			fprintf(stderr, "labd: %s\n", err);
			return 1;
		}
		return strcmp(argv[i], "doctor") == 0 ? doctor_main(&cfg, argc - i, argv + i)
						       : backup_cli(&cfg, argc - i, argv + i);
	}
	if (i + 1 == argc && strcmp(argv[i], "routes") == 0)
		return routes_print(stdout);
	if (i < argc)
		return usage(stderr);
	/* Read as root, once: every web process the supervisor forks inherits it,
	 * and a bad file stops labd here rather than in a web restart loop. */
	if (scrape_load_token(&cfg) < 0 || oidc_load(&cfg) < 0 || load_slurm_secret(&cfg) < 0)
		return 1;
	/* before the supervisor and the web process read it: both use the same base */
	if (uidmap_settle_base(&cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "labd: %s\n", err);
		return 1;
	}
	return supervisor_run(&cfg);
}
