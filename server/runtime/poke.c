/* poke.c - see poke.h. */
#include "runtime/poke.h"

#include "labd/ticker.h"

void reconcile_poke(struct reconciler *rc)
{
	if (rc)
		ticker_poke(__atomic_load_n(&rc->ticker, __ATOMIC_ACQUIRE));
}

void reconcile_wake(struct reconciler *rc)
{
	if (!rc)
		return;
	__atomic_store_n(&rc->wanted, true, __ATOMIC_SEQ_CST);
	reconcile_poke(rc);
}

bool reconcile_take_wanted(struct reconciler *rc)
{
	return __atomic_exchange_n(&rc->wanted, false, __ATOMIC_SEQ_CST);
}
