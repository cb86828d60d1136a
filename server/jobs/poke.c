/* poke.c - see poke.h. */
#include "jobs/poke.h"

#include "labd/ticker.h"

void jobs_poke(struct jobs_runner *r)
{
	if (r)
		ticker_poke(__atomic_load_n(&r->ticker, __ATOMIC_ACQUIRE));
}

void jobs_wake(struct jobs_runner *r)
{
	if (!r)
		return;
	__atomic_store_n(&r->wanted, true, __ATOMIC_SEQ_CST);
	jobs_poke(r);
}

bool jobs_take_wanted(struct jobs_runner *r)
{
	return __atomic_exchange_n(&r->wanted, false, __ATOMIC_SEQ_CST);
}
