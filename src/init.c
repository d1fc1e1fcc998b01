/*-------------------------------------------------------------------------
 *
 * init.c
 *	  _PG_init: what loading the library does.  It stands above every other
 *	  file, which is why it is a file of its own.
 *
 * It defines the GUCs (job_state.c), sets up the claim marks' cache
 * (claim_mark.c), the frontiers' and the waiters' transaction callbacks
 * (frontier.c, waiter.c) and, only while shared_preload_libraries is
 * processed, requests the frontiers' and the waiters' shared memory and
 * registers the sweeper and the notifier
 * (bgworker.h).  No SPI, no locks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "job_state.h"
#include "claim_mark.h"
#include "frontier.h"
#include "bgworker.h"
#include "waiter.h"

void		_PG_init(void);

void
_PG_init(void)
{
	bool		preloading = process_shared_preload_libraries_in_progress;

	JsDefineGucs(preloading);
	JsClaimMarkInit();
	JsFrontierInit();
	JsWaiterInit();
	if (preloading)
	{
		JsFrontierRegister();
		JsWaiterRegister();
		JsRegisterSweeper();
		JsRegisterNotifier();
	}
}
