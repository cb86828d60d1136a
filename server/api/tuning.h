/* tuning.h - the tuning jobs' API and page (tuning.c; docs/jobs.md "Tuning
 * jobs"). */
#ifndef LABD_API_TUNING_H
#define LABD_API_TUNING_H

struct http_request;

/* POST /api/v1/tuning-jobs: 201 with the tuning job; 400 naming the field. */
void api_tuning_create(struct http_request *req);
/* GET /api/v1/tuning-jobs (?limit, ?offset, ?user= for an administrator). */
void api_tuning_list(struct http_request *req);
/* GET /api/v1/tuning-jobs/{id}: with every trial and the best one. */
void api_tuning_get(struct http_request *req);
/* POST /api/v1/tuning-jobs/{id}/stop: 202, its trials' jobs stopped. */
void api_tuning_stop(struct http_request *req);
/* GET /tuning/{id}: the tuning job's page (tuning.html). */
void api_tuning_page(struct http_request *req);

#endif
