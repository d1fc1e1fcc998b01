/*-------------------------------------------------------------------------
 *
 * sweeper.c
 *	  The background worker: every job_state.sweep_interval it runs
 *	  job_state.sweep() -- lease expiry and due schedule ticks -- so that
 *	  nobody has to call claim() or sweep() for leases to expire and
 *	  schedules to fire.
 *
 * It is registered from _PG_init only while shared_preload_libraries is
 * being processed; without preloading, everything else works and sweep()
 * (and claim's lazy expiry) does the work.  One worker per cluster,
 * connected to the database job_state.database as the bootstrap superuser;
 * it starts once recovery has finished, so a standby gets its worker when
 * it is promoted.
 *
 * Each round is one transaction, started after the sleep and committed
 * before the next, so no transaction or snapshot is held while sleeping:
 * it looks the extension up in pg_extension (not installed: nothing to do,
 * wait for the next round) and runs SELECT job_state.sweep() through a
 * kept plan -- the same code a user's sweep() runs, with its SECURITY
 * DEFINER search_path, and a plan the plan cache re-makes if the extension
 * is dropped and created again.
 *
 * Errors: a round that fails (a deadlock, a cancel, a broken install) is
 * reported to the server log, its transaction aborted, and the worker goes
 * on with the next round after the interval (PG_TRY + AbortCurrentTransaction,
 * as autovacuum does per table).  We chose this over exiting and letting
 * the postmaster restart us because a restart would stall lease expiry for
 * bgw_restart_time after every transient error, and the interval already
 * keeps a persistent error from becoming a tight loop (one log entry per
 * round).  A schedule that cannot submit does not even fail the round (see
 * schedule.c).  Errors outside a round (job_state.database does not exist)
 * are FATAL in a background worker: the postmaster starts the worker again
 * after JS_SWEEPER_RESTART_SECS, and after a crash of any backend.
 *
 * Signals: SIGTERM is die(), as in worker_spi: the next
 * CHECK_FOR_INTERRUPTS (also inside a running sweep) exits.  SIGHUP sets
 * ConfigReloadPending and the latch; the worker re-reads the configuration
 * (a new sweep_interval) before its next round.  SIGINT cancels the
 * running round.  Postmaster death ends the wait and the process.
 *
 * Locks: none of its own; those of sweep() (SKIP LOCKED on job and
 * schedule rows), so it never waits on workers or on another sweeper.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "job_state.h"

#define JS_SWEEPER_NAME "job_state sweeper"
#define JS_SWEEPER_RESTART_SECS 5

PGDLLEXPORT void js_sweeper_main(Datum main_arg);

static JsPlan installed_plan = {
	"SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'job_state'",
	0, {0}
};

static JsPlan sweep_plan = {
	"SELECT job_state.sweep()",
	0, {0}
};

/*
 * Called from _PG_init while shared_preload_libraries is processed.
 */
void
JsRegisterSweeper(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS |
		BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = JS_SWEEPER_RESTART_SECS;
	strlcpy(worker.bgw_library_name, "job_state", sizeof(worker.bgw_library_name));
	strlcpy(worker.bgw_function_name, "js_sweeper_main", sizeof(worker.bgw_function_name));
	strlcpy(worker.bgw_name, JS_SWEEPER_NAME, sizeof(worker.bgw_name));
	strlcpy(worker.bgw_type, JS_SWEEPER_NAME, sizeof(worker.bgw_type));
	worker.bgw_main_arg = (Datum) 0;
	worker.bgw_notify_pid = 0;
	RegisterBackgroundWorker(&worker);
}

/*
 * One round in its own transaction.  Errors are logged and the transaction
 * aborted; the caller goes on.  Memory is allocated in round_context,
 * which the caller resets.
 */
static void
JsSweepRound(MemoryContext round_context)
{
	MemoryContextSwitchTo(round_context);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, sweep_plan.sql);

		if (JsExecute(&installed_plan, NULL, NULL, true, 1) == 1)
		{
			JsExecute(&sweep_plan, NULL, NULL, false, 1);
			if (JsGetInt32(0, 1, NULL) > 0)
				ereport(DEBUG1,
						(errmsg_internal("job_state sweeper: lease expiry moved %d jobs",
										 JsGetInt32(0, 1, NULL))));
		}

		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		/* log it, abort the round, go on with the next one */
		HOLD_INTERRUPTS();
		EmitErrorReport();
		AbortCurrentTransaction();
		FlushErrorState();
		RESUME_INTERRUPTS();
	}
	PG_END_TRY();

	MemoryContextSwitchTo(round_context);
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

void
js_sweeper_main(Datum main_arg)
{
	MemoryContext round_context;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	BackgroundWorkerInitializeConnection(js_database, NULL, 0);
	SetConfigOption("application_name", JS_SWEEPER_NAME,
					PGC_USERSET, PGC_S_SESSION);

	ereport(LOG,
			(errmsg("job_state sweeper started in database \"%s\"", js_database),
			 errdetail("It sweeps every %d ms.", js_sweep_interval)));

	round_context = AllocSetContextCreate(TopMemoryContext,
										  "job_state sweeper",
										  ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending)
		{
			int			old_interval = js_sweep_interval;

			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			if (js_sweep_interval != old_interval)
				ereport(LOG,
						(errmsg("job_state sweeper now sweeps every %d ms",
								js_sweep_interval)));
		}

		JsSweepRound(round_context);
		MemoryContextSwitchTo(TopMemoryContext);
		MemoryContextReset(round_context);

		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 js_sweep_interval,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
