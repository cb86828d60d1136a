/* poke.c - see poke.h. */
#include "jobs/poke.h"

#include "labd/app.h"
#include "labd/ticker.h"

static struct jobs_runner *handle(struct app *app)
{
	return __atomic_load_n(&app->jobs, __ATOMIC_ACQUIRE);
}

void jobs_poke(struct app *app)
{
	struct jobs_runner *r = handle(app);

	if (r)
		ticker_poke(__atomic_load_n(&r->ticker, __ATOMIC_ACQUIRE));
}

void jobs_wake(struct app *app)
{
	struct jobs_runner *r = handle(app);

	if (!r)
		return;
	__atomic_store_n(&r->wanted, true, __ATOMIC_SEQ_CST);
	ticker_poke(__atomic_load_n(&r->ticker, __ATOMIC_ACQUIRE));
}

bool jobs_take_wanted(struct jobs_runner *r)
{
	return __atomic_exchange_n(&r->wanted, false, __ATOMIC_SEQ_CST);
}
