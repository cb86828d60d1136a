/* fuzz_forwarded.c - X-Forwarded-For behind trusted proxies (http/forwarded.c)
 * and the addresses and networks it matches (config/cidr.c). Input: the
 * trusted proxies (comma-separated) on the first line, the peer on the
 * second, the header's value after. */
#include "config/cidr.h"
#include "config/config.h"
#include "fuzz.h"
#include "http/forwarded.h"

static struct labd_config cfg;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	config_defaults(&cfg, false);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *proxies = fuzz_take_line(&data, &size), *peer = fuzz_take_line(&data, &size);
	char *xff = fuzz_cstr(data, size), out[64];
	struct cidr probe;

	cfg.n_trusted_proxies = 0;
	for (char *save = NULL, *t = strtok_r(proxies, ",", &save);
	     t && cfg.n_trusted_proxies < CONFIG_MAX_TRUSTED_PROXIES; t = strtok_r(NULL, ",", &save))
		if (cidr_parse(t, &cfg.trusted_proxies[cfg.n_trusted_proxies]) == 0)
			cfg.n_trusted_proxies++;
	for (unsigned i = 0; i < cfg.n_trusted_proxies; i++)
		(void)cidr_contains(&cfg.trusted_proxies[i], xff);
	int rc = forwarded_client(&cfg, peer, xff, out, sizeof(out));
	FUZZ_ASSERT(memchr(out, '\0', sizeof(out)));
	if (rc == 1) /* only an address ever comes from the header */
		FUZZ_ASSERT(cidr_parse(out, &probe) == 0 && !strchr(out, '/') && strstr(xff, out));
	else
		FUZZ_ASSERT(rc == 0 && strncmp(out, peer, sizeof(out) - 1) == 0);
	free(proxies);
	free(peer);
	free(xff);
	return 0;
}
