/* scrape.h - GET /metrics: labd's metrics (metrics/labd.h) and the runtimes
 * by state and kind (from the store) in the Prometheus text format, for an
 * administrator or a scraper holding the configured bearer token. */
#ifndef LABD_SCRAPE_H
#define LABD_SCRAPE_H

struct http_request;
struct labd_config;

/* Reads [metrics] scrape_token_file; called once by main as root (so the
 * file may be root's alone), before the supervisor forks any web process,
 * which inherits the token. 0; -1 with a logged reason when the file is set
 * but unreadable or does not hold one token of 32 to 256 characters. */
int scrape_load_token(const struct labd_config *cfg);
/* The route handler: 200 with the exposition, 401 without credentials,
 * 403 for a signed-in user who is not an administrator. */
void scrape_metrics(struct http_request *req);

#endif
