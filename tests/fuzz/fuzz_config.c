/* fuzz_config.c - the config file (config/config.c through config_load, with
 * the listen address splitter): written by an administrator, but read by the
 * root process before anything else, so no file may crash it. */
#include <sys/mman.h>
#include <unistd.h>

#include "config/config.h"
#include "fuzz.h"
#include "labd/log.h"

static int fd = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	log_set_level(LOG_LEVEL_ERROR);
	fd = memfd_create("labd.ini", MFD_CLOEXEC);
	if (fd < 0)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct labd_config *cfg = malloc(sizeof(*cfg));
	char err[512] = "", host[256];
	unsigned port;

	if (ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	config_defaults(cfg, false);
	int rc = config_load(cfg, path, err, sizeof(err));
	FUZZ_ASSERT(rc == 0 || (rc < 0 && err[0]));
	if (rc == 0) {
		FUZZ_ASSERT(cfg->n_trusted_proxies <= CONFIG_MAX_TRUSTED_PROXIES);
		(void)config_split_listen(cfg->listen, host, sizeof(host), &port);
	}
	free(cfg);
	return 0;
}
