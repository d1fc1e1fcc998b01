/*-------------------------------------------------------------------------
 *
 * bgworker.c
 *	  What the two background workers share (sweeper.c, notify.c): their
 *	  registration, their start, and one round of work in a transaction of
 *	  its own.
 *
 * Both are registered from _PG_init while shared_preload_libraries is
 * processed, start once recovery has finished (a standby gets them when it
 * is promoted), connect to job_state.database as the bootstrap superuser
 * and are restarted by the postmaster after restart_secs when they exit.
 *
 * A round runs in its own transaction with SPI connected and a snapshot
 * pushed, so no transaction or snapshot is held while a worker sleeps.  A
 * round that fails (a deadlock, a cancel, a broken install) is reported to
 * the server log and its transaction aborted, and the worker goes on
 * (PG_TRY + AbortCurrentTransaction, as autovacuum does per table): a
 * restart would stall the worker's duty for restart_secs after every
 * transient error, and each worker's own wait keeps a persistent error
 * from becoming a tight loop.
 *
 * Signals: SIGTERM is die(), as in worker_spi: the next
 * CHECK_FOR_INTERRUPTS (also inside a running round) exits.  SIGHUP sets
 * ConfigReloadPending and the latch, for the worker's loop to re-read the
 * configuration.  Postmaster death ends the wait and the process.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"

#include "job_state.h"
#include "bgworker.h"

static JsPlan installed_plan = {
	"SELECT 1 FROM pg_catalog.pg_extension"
	" WHERE extname OPERATOR(pg_catalog.=) 'job_state'",
	0, {0}
};

/* Called from _PG_init while shared_preload_libraries is processed. */
void
JsRegisterWorker(const char *name, const char *function, int restart_secs)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS |
		BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = restart_secs;
	strlcpy(worker.bgw_library_name, "job_state", sizeof(worker.bgw_library_name));
	strlcpy(worker.bgw_function_name, function, sizeof(worker.bgw_function_name));
	strlcpy(worker.bgw_name, name, sizeof(worker.bgw_name));
	strlcpy(worker.bgw_type, name, sizeof(worker.bgw_type));
	worker.bgw_main_arg = (Datum) 0;
	worker.bgw_notify_pid = 0;
	RegisterBackgroundWorker(&worker);
}

/*
 * The start of a worker's main function: signal handlers, the connection
 * to job_state.database (FATAL if it does not exist: the postmaster tries
 * again after restart_secs), application_name = name.
 *
 * The worker runs as the bootstrap superuser, so nothing the database's
 * owner controls may reach its statements: the connection applies the
 * database's settings (ALTER DATABASE ... SET search_path), and a schema
 * of the owner's ahead of pg_catalog could otherwise supply an operator or
 * function that runs as superuser.  search_path is pinned to pg_catalog
 * (and pg_temp, never searched for operators or functions) at the highest
 * priority, so no later SET can change it either; every statement names
 * its schema for tables, functions and operators besides.
 */
void
JsWorkerConnect(const char *name)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	BackgroundWorkerInitializeConnection(js_database, NULL, 0);
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("application_name", name, PGC_USERSET, PGC_S_SESSION);
}

/* Whether the extension is installed; inside a round. */
bool
JsExtensionInstalled(void)
{
	return JsExecute(&installed_plan, NULL, NULL, true, 1) == 1;
}

/*
 * JsExtensionInstalled for a worker that has nothing to do without the
 * extension, and says so in the server log: once when it finds the
 * extension missing (at its start, or after a DROP EXTENSION), and once
 * when it finds it again -- not every round.  The state is the worker
 * process's own, so a restarted worker says it again.
 */
bool
JsWorkerExtensionInstalled(const char *name)
{
	static bool reported_missing = false;
	bool		installed = JsExtensionInstalled();

	if (!installed && !reported_missing)
	{
		ereport(LOG,
				(errmsg("%s: extension job_state is not installed in database \"%s\"",
						name, js_database),
				 errdetail("The worker does nothing until it is; it looks again every round and logs once when it finds it."),
				 errhint("Run CREATE EXTENSION job_state in database \"%s\", or set job_state.database to the database that has it (a restart is needed).",
						 js_database)));
		reported_missing = true;
	}
	else if (installed && reported_missing)
	{
		ereport(LOG,
				(errmsg("%s: extension job_state is installed in database \"%s\"; the worker goes to work",
						name, js_database)));
		reported_missing = false;
	}
	return installed;
}

/*
 * One round: work(arg) in its own transaction, with SPI connected and a
 * snapshot pushed, shown as activity in pg_stat_activity.  False when it
 * failed: the error is logged and the transaction aborted.  Memory is
 * allocated in round_context, which the caller resets.
 */
bool
JsWorkerRound(MemoryContext round_context, const char *activity,
			  void (*work) (void *arg), void *arg)
{
	volatile bool ok = true;

	MemoryContextSwitchTo(round_context);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, activity);

		work(arg);

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
		ok = false;
	}
	PG_END_TRY();

	MemoryContextSwitchTo(round_context);
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
	return ok;
}
