/* poke.c - see poke.h. */
#include "runtime/poke.h"

#include "labd/app.h"
#include "labd/ticker.h"

static struct reconciler *handle(struct app *app)
{
	return __atomic_load_n(&app->reconciler, __ATOMIC_ACQUIRE);
}

void reconcile_poke(struct app *app)
{
	struct reconciler *rc = handle(app);

	if (rc)
		ticker_poke(__atomic_load_n(&rc->ticker, __ATOMIC_ACQUIRE));
}

void reconcile_wake(struct app *app)
{
	struct reconciler *rc = handle(app);

	if (!rc)
		return;
	__atomic_store_n(&rc->wanted, true, __ATOMIC_SEQ_CST);
	ticker_poke(__atomic_load_n(&rc->ticker, __ATOMIC_ACQUIRE));
}

bool reconcile_take_wanted(struct reconciler *rc)
{
	return __atomic_exchange_n(&rc->wanted, false, __ATOMIC_SEQ_CST);
}
