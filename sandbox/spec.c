/* spec.c - the defaults and the checks of struct sandbox_spec; see labd/sandbox.h. */
#include "labd/sandbox.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "labd/gpucaps.h"
#include "labd/gpudev.h"
#include "sandbox/fail.h"
#include "sandbox/netpeer.h"
#include "sandbox/netveth.h"
#include "labd/parse.h"
#include "sandbox/parse.h"

#define DEFAULT_STATE_DIR "/var/lib/labd"

/* Host places every user can read that are none of a notebook's business: other
 * users' scratch files (/var/tmp), services' data (/srv), third-party software and
 * its secrets (/opt), mounted media. */
const char *const sandbox_default_hidden[] = {"/var/tmp", "/srv", "/opt", "/mnt", "/media", NULL};

void sandbox_spec_init(struct sandbox_spec *s)
{
	memset(s, 0, sizeof(*s));
	s->uid_base = 200000;
	s->inner_uid = 1000;
	s->home_size_bytes = 15ull << 30;
	s->tmp_bytes = 1ull << 30;
	s->nofile = 4096;
	s->net = SANDBOX_NET_NONE;
	s->net_deny = SANDBOX_NET_DENY_DEFAULT;
	s->pasta_path = "/usr/bin/pasta";
	s->nft_path = "/usr/sbin/nft";
	s->net_path = SANDBOX_NET_PASTA;
	s->veth_range = SANDBOX_VETH_RANGE_DEFAULT;
	s->dev_prefix = "/dev";
	s->caps_dir = "/proc/driver/nvidia/capabilities";
	s->image = "/";
	s->state_dir = DEFAULT_STATE_DIR;
	s->cgroup_parent = "labd";
	/* today's behaviour: the command writes where the caller does */
	s->stdin_fd = STDIN_FILENO;
	s->stdout_fd = STDOUT_FILENO;
	s->stderr_fd = STDERR_FILENO;
	for (const char *const *p = sandbox_default_hidden; *p; p++)
		s->hidden[s->n_hidden++] = *p;
}

static bool abs_path_ok(const char *p)
{
	return p && p[0] == '/' && strlen(p) < SANDBOX_PATH_MAX - 64 && !strstr(p, "/../") &&
	       !strstr(p, "\n");
}

/* an IPv4 or IPv6 address: it becomes an argument of pasta */
static bool dns_ok(const char *a)
{
	unsigned char bin[16];
	return inet_pton(strchr(a, ':') ? AF_INET6 : AF_INET, a, bin) == 1;
}

static int check_ids(const struct sandbox_spec *s)
{
	uint64_t host = (uint64_t)s->uid_base + s->user_id;

	if (!parse_user_name_ok(s->user))
		return fail_error("bad user name: %s", s->user ? s->user : "(none)");
	if (s->uid_base < 1000 || host > 0xfffffffeull || s->inner_uid == 0 || s->inner_uid > 65533)
		return fail_error("bad uid range: base %u user id %u inner %u", s->uid_base,
				  s->user_id, s->inner_uid);
	return 0;
}

/* A read-only bind lands over whatever the image has there: never the whole root,
 * never into the supervisor's state (which is masked because it holds secrets). */
static int check_ro_binds(const struct sandbox_spec *s)
{
	size_t n = strlen(s->state_dir);

	if (s->n_ro_binds > SANDBOX_MAX_RO_BINDS)
		return fail_error("too many read-only binds");
	for (unsigned i = 0; i < s->n_ro_binds; i++) {
		const char *b = s->ro_binds[i];
		if (!abs_path_ok(b) || strcmp(b, "/") == 0 || strstr(b, "/./") || strstr(b, "//"))
			return fail_error("bad read-only bind path: %s", b ? b : "(none)");
		if (strncmp(b, s->state_dir, n) == 0 && (b[n] == '\0' || b[n] == '/'))
			return fail_error("read-only bind %s is inside the state dir", b);
	}
	return 0;
}

/* Absolute, not "/", and every component a plain name (no "", ".", ".."). */
static bool canonical(const char *p)
{
	if (!abs_path_ok(p) || strcmp(p, "/") == 0)
		return false;
	for (const char *c = p + 1;; c++) {
		size_t n = strcspn(c, "/");
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		c += n;
		if (!*c)
			return true;
	}
}

/* Binds at another path: the source may be in the state dir (a pool's layout), the
 * inside path may not (it is masked there, secrets and all). */
static int check_binds(const struct sandbox_spec *s)
{
	size_t n = strlen(s->state_dir);

	if (s->n_binds > SANDBOX_MAX_BINDS)
		return fail_error("too many binds");
	for (unsigned i = 0; i < s->n_binds; i++) {
		const struct sandbox_bind *b = &s->binds[i];
		if (!canonical(b->src) || !canonical(b->dst))
			return fail_error("bad bind: %s:%s", b->src ? b->src : "(none)",
					  b->dst ? b->dst : "(none)");
		if (strncmp(b->dst, s->state_dir, n) == 0 && (b->dst[n] == '\0' || b->dst[n] == '/'))
			return fail_error("bind target %s is inside the state dir", b->dst);
	}
	return 0;
}

static int check_paths(const struct sandbox_spec *s)
{
	if (!abs_path_ok(s->image) || !abs_path_ok(s->state_dir) || !abs_path_ok(s->dev_prefix))
		return fail_error("image, state dir and device prefix must be absolute paths");
	if (!abs_path_ok(s->caps_dir) || (s->caps_dev_dir && !abs_path_ok(s->caps_dev_dir)))
		return fail_error("caps dir and caps device dir must be absolute paths");
	if ((s->home_image && !abs_path_ok(s->home_image)) || (s->run_dir && !abs_path_ok(s->run_dir)) ||
	    (s->driver_lib_dir && !abs_path_ok(s->driver_lib_dir)))
		return fail_error("home image, run dir and driver dir must be absolute paths");
	if (!s->cgroup_parent || !s->cgroup_parent[0] || strchr(s->cgroup_parent, '/') ||
	    s->cgroup_parent[0] == '.')
		return fail_error("bad cgroup parent");
	if (s->n_masks > SANDBOX_MAX_MASKS)
		return fail_error("too many masks");
	for (unsigned i = 0; i < s->n_masks; i++)
		if (!abs_path_ok(s->masks[i]))
			return fail_error("bad mask path");
	if (check_ro_binds(s) < 0 || check_binds(s) < 0)
		return -1;
	if (s->n_hidden > SANDBOX_MAX_HIDDEN)
		return fail_error("too many hidden paths");
	for (unsigned i = 0; i < s->n_hidden; i++)
		if (!abs_path_ok(s->hidden[i]))
			return fail_error("bad hidden path");
	return 0;
}

static int check_limits(const struct sandbox_spec *s)
{
	if (s->n_gpus > SANDBOX_MAX_GPUS)
		return fail_error("too many gpus");
	for (unsigned i = 0; i < s->n_gpus; i++) {
		struct gpudev d;
		if (!gpudev_decode(s->gpus[i], &d))
			return fail_error("gpu %u is no device id", s->gpus[i]);
		for (unsigned k = 0; k < i; k++)
			if (gpudev_conflict(s->gpus[k], s->gpus[i]))
				return fail_error("gpu %u is named twice (or with its card)",
						  s->gpus[i]);
		if ((s->gpu_uuids[i] != NULL) != (s->gpu_uuids[0] != NULL) ||
		    (s->gpu_uuids[i] && !gpucaps_uuid_ok(s->gpu_uuids[i])))
			return fail_error("gpu uuids: one per gpu, each GPU-… or MIG-…");
	}
	if (s->tmp_bytes < 4096 || s->nofile < 16 || s->nofile > (1u << 20))
		return fail_error("tmp size or nofile out of range");
	if (s->home_image && s->home_size_bytes < (16ull << 20))
		return fail_error("home size below 16 MiB");
	return 0;
}

static int check_stdio(const struct sandbox_spec *s)
{
	const int fds[3] = {s->stdin_fd, s->stdout_fd, s->stderr_fd};
	static const char *const names[3] = {"stdin", "stdout", "stderr"};

	for (int i = 0; i < 3; i++) {
		if (fds[i] == SANDBOX_FD_NULL)
			continue;
		if (fds[i] < 0 || fcntl(fds[i], F_GETFD) < 0)
			return fail_error("%s: fd %d is not open", names[i], fds[i]);
	}
	return 0;
}

int sandbox_spec_check(const struct sandbox_spec *s)
{
	if (check_ids(s) < 0)
		return -1;
	if (!s->argv || !s->argv[0])
		return fail_error("no command");
	if (s->net != SANDBOX_NET_NONE && s->net != SANDBOX_NET_EGRESS)
		return fail_error("bad network mode");
	if (s->net == SANDBOX_NET_EGRESS && (!abs_path_ok(s->pasta_path) || !abs_path_ok(s->nft_path)))
		return fail_error("pasta and nft must be absolute paths");
	if (s->net_path != SANDBOX_NET_PASTA && s->net_path != SANDBOX_NET_VETH)
		return fail_error("bad network path");
	if (s->net == SANDBOX_NET_EGRESS && s->net_path == SANDBOX_NET_VETH &&
	    netveth_range_parse(s->veth_range, NULL, NULL) < 0)
		return fail_error("bad veth range: %.64s", s->veth_range ? s->veth_range : "");
	if (s->net_dns && s->net_dns[0] && !dns_ok(s->net_dns))
		return fail_error("bad dns address: %.64s", s->net_dns);
	if (netpeer_spec_check(s) < 0)
		return -1;
	if (s->peers && !abs_path_ok(s->nft_path))
		return fail_error("nft must be an absolute path");
	if (s->scratch_home && s->home_image)
		return fail_error("a scratch home and a home image: one or the other");
	if (check_paths(s) < 0 || check_limits(s) < 0 || check_stdio(s) < 0)
		return -1;
	return 0;
}
