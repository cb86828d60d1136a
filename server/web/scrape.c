/* scrape.c - GET /metrics; see scrape.h. The route is public in the table
 * because a scraper authenticates with its own token, not an API token:
 * this handler applies the admin rule itself. */
#include "web/scrape.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth/scope.h"
#include "config/config.h"
#include "http/http.h"
#include "labd/app.h"
#include "labd/buf.h"
#include "labd/crypto.h"
#include "labd/log.h"
#include "metrics/labd.h"
#include "metrics/metrics.h"
#include "sched/gpus.h"
#include "store/ledger.h"
#include "store/runtimes.h"

#define TOKEN_MIN 32
#define TOKEN_MAX 256
#define EXPOSITION_MAX_BYTES (1024 * 1024)
#define KINDS 2

/* The live states, each always rendered so that a series never vanishes. */
static const enum runtime_state live_states[] = {RUNTIME_QUEUED, RUNTIME_STARTING, RUNTIME_RUNNING,
						 RUNTIME_STOPPING};
#define LIVE_STATES (sizeof(live_states) / sizeof(live_states[0]))

static char scrape_token[TOKEN_MAX + 1]; /* set once before any request; "" = none */

int scrape_load_token(const struct labd_config *cfg)
{
	char text[TOKEN_MAX + 2];
	ssize_t n;
	int fd;

	if (!cfg->scrape_token_file[0])
		return 0;
	if ((fd = open(cfg->scrape_token_file, O_RDONLY | O_CLOEXEC)) < 0)
		return log_errno("[metrics] scrape_token_file: cannot open %s", cfg->scrape_token_file);
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n < 0)
		return log_errno("[metrics] scrape_token_file: cannot read %s", cfg->scrape_token_file);
	text[n] = '\0';
	/* A trailing newline is what editors and `echo` leave. */
	while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r' || text[n - 1] == ' '))
		text[--n] = '\0';
	if (n < TOKEN_MIN || n > TOKEN_MAX || strpbrk(text, " \t\r\n")) {
		log_error("[metrics] scrape_token_file: %s must hold one token of %d to %d characters",
			  cfg->scrape_token_file, TOKEN_MIN, TOKEN_MAX);
		return -1;
	}
	memcpy(scrape_token, text, (size_t)n + 1);
	return 0;
}

static bool has_scrape_token(struct http_request *req)
{
	const char *authz = http_header(req, "Authorization");
	size_t len = strlen(scrape_token);

	if (!len || !authz || strncasecmp(authz, "Bearer ", 7) != 0)
		return false;
	authz += 7;
	return strlen(authz) == len && crypto_equal(authz, scrape_token, len);
}

static int count_runtime(const struct runtime *r, void *ctx)
{
	int64_t(*counts)[KINDS] = ctx;

	for (size_t s = 0; s < LIVE_STATES; s++)
		if (live_states[s] == r->state && (int)r->kind < KINDS)
			counts[s][r->kind]++;
	return 0;
}

/* Every live state and kind, zeros included, so a series never vanishes. */
static int render_runtimes(struct buf *b, struct http_request *req)
{
	int64_t counts[LIVE_STATES][KINDS] = {{0}};
	int rc;

	if (runtimes_each_live(http_app(req)->db, count_runtime, counts) < 0)
		return -EIO;
	rc = metrics_render_family(b, "labd_runtimes", "gauge",
				   "Live runtimes by state (queued, starting, running, stopping) and kind.");
	for (size_t s = 0; s < LIVE_STATES && rc == 0; s++)
		for (int k = 0; k < KINDS && rc == 0; k++) {
			struct metrics_label l[] = {
				{"state", runtimes_state_name(live_states[s])},
				{"kind", runtimes_kind_name((enum runtime_kind)k)}};
			rc = metrics_render_sample(b, "labd_runtimes", l, 2, (double)counts[s][k]);
		}
	return rc;
}

/* One family of per-device samples: value(g) < 0 means no reading (no
 * sample); the family is left out when no device has one. Labels: the card,
 * the device's text id, its kind and profile. */
static int render_device_family(struct buf *b, const struct gpu_info *g, size_t n,
				const char *name, const char *help, double (*value)(const struct gpu_info *))
{
	static const char *const kinds[] = {"whole", "mig", "share"};
	bool any = false;
	char card[12], device[GPUDEV_TEXT_MAX];
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		any = any || value(&g[i]) >= 0;
	if (any)
		rc = metrics_render_family(b, name, "gauge", help);
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (value(&g[i]) < 0)
			continue;
		snprintf(card, sizeof(card), "%u", g[i].card);
		gpudev_format(g[i].id, device, sizeof(device));
		struct metrics_label l[] = {{"card", card}, {"device", device},
					    {"kind", kinds[g[i].kind]}, {"profile", g[i].profile}};
		rc = metrics_render_sample(b, name, l, 4, value(&g[i]));
	}
	return rc;
}

static double utilization(const struct gpu_info *g)
{
	return g->utilization_percent < 0 ? -1 : g->utilization_percent / 100.0;
}

static double memory_total(const struct gpu_info *g)
{
	return (double)g->memory_bytes;
}

static double memory_used(const struct gpu_info *g)
{
	return (double)g->memory_used_bytes;
}

/* Each GPU device's utilisation and memory as NVML last read it
 * (sched/gpus.h: a snapshot, never NVML on a scrape); devices without a
 * reading have no sample. labd_gpu_utilization_ratio{gpu} stays, for whole
 * cards, as before devices had kinds. */
static int render_gpus(struct buf *b, struct http_request *req)
{
	struct gpu_info *g = calloc(GPUS_DEVICES_MAX, sizeof(*g));
	struct app *app = http_app(req);
	size_t n = app->gpus && g ? gpus_snapshot(app->gpus, g, GPUS_DEVICES_MAX) : 0;
	bool short_of_memory = app->gpus && !g;
	bool any = false;
	char id[12];
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		any = any || (g[i].kind == GPUDEV_WHOLE && g[i].utilization_percent >= 0);
	if (any)
		rc = metrics_render_family(b, "labd_gpu_utilization_ratio", "gauge",
					   "GPU busy time over NVML's last sample period (0-1).");
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (g[i].kind != GPUDEV_WHOLE || g[i].utilization_percent < 0)
			continue;
		snprintf(id, sizeof(id), "%u", g[i].id);
		struct metrics_label l[] = {{"gpu", id}};
		rc = metrics_render_sample(b, "labd_gpu_utilization_ratio", l, 1,
					   g[i].utilization_percent / 100.0);
	}
	if (rc == 0)
		rc = render_device_family(
			b, g, n, "labd_gpu_device_utilization_ratio",
			"Busy time of each GPU device (whole card, MIG instance, share: its card's) "
			"over NVML's last sample period (0-1).",
			utilization);
	if (rc == 0)
		rc = render_device_family(
			b, g, n, "labd_gpu_device_memory_bytes",
			"GPU memory of each device: a card's, a MIG instance's own, a share's budget.",
			memory_total);
	if (rc == 0)
		rc = render_device_family(
			b, g, n, "labd_gpu_device_memory_used_bytes",
			"GPU memory in use on each device (a share: what its holder's processes use).",
			memory_used);
	free(g);
	return short_of_memory ? -ENOMEM : rc;
}

static void reply_exposition(struct http_request *req, const struct buf *b)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(b->len, b->data, MHD_RESPMEM_MUST_COPY);

	if (resp) {
		MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
		MHD_add_response_header(resp, "Cache-Control", "no-store");
	}
	http_reply_response(req, MHD_HTTP_OK, resp);
}

void scrape_metrics(struct http_request *req)
{
	const struct auth_identity *id = http_identity(req); /* the gate filled it */
	int64_t totals_s[2];
	struct buf b;
	int rc;

	if (!has_scrape_token(req)) {
		if (id->kind == AUTH_NONE) {
			http_reply_error(req, MHD_HTTP_UNAUTHORIZED, "unauthorized",
					 "send the scrape token (Authorization: Bearer) or log in as an administrator");
			return;
		}
		if (id->user.role != USER_ROLE_ADMIN) {
			http_reply_error(req, MHD_HTTP_FORBIDDEN, "forbidden", "this needs an administrator");
			return;
		}
		if (!(id->scopes & SCOPE_METRICS)) {
			http_reply_error(req, MHD_HTTP_FORBIDDEN, "insufficient_scope",
					 "this API token lacks the scope \"metrics\"");
			return;
		}
	}
	buf_init(&b, EXPOSITION_MAX_BYTES);
	if ((rc = ledger_totals_s(http_app(req)->db, totals_s)) == 0) {
		metrics_ledger_set(METRICS_LEDGER_CPU, totals_s[0]);
		metrics_ledger_set(METRICS_LEDGER_GPU, totals_s[1]);
	} /* else: the last totals stay, a counter must not drop */
	if ((rc = metrics_render_labd(&b)) == 0)
		rc = render_runtimes(&b, req);
	if (rc == 0)
		rc = render_gpus(&b, req);
	if (rc < 0) {
		log_error("metrics: cannot render the exposition: %s", strerror(-rc));
		http_reply_internal(req);
	} else {
		reply_exposition(req, &b);
	}
	buf_release(&b);
}
