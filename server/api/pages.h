/* pages.h - HTML routes and the form login/logout. */
#ifndef LABD_PAGES_H
#define LABD_PAGES_H

#include <stdbool.h>
#include <stddef.h>

struct http_request;

void pages_root(struct http_request *req);
void pages_login_form(struct http_request *req);
void pages_login_post(struct http_request *req);
void pages_logout_post(struct http_request *req);
/* single sign-on's start, the provider's callback, the provider's logout (api/oidc.c) */
void pages_oidc_login(struct http_request *req);
void pages_oidc_callback(struct http_request *req);
void pages_oidc_logout(struct http_request *req);
void pages_dashboard(struct http_request *req);
void pages_admin(struct http_request *req);
/* GET /jobs/{id}: one training job's page (job.html; the API answers 404 for others' jobs). */
void pages_job(struct http_request *req);
/* GET /jobs/{id}/report: its profiler report (job-report.html, printable). */
void pages_job_report(struct http_request *req);
/* GET /open?repo=&path= ("Open in labd", open.c): the page, 400 when either is bad. */
void pages_open(struct http_request *req);

#endif
