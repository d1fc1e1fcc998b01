/*-------------------------------------------------------------------------
 *
 * sweeper.c
 *	  sweep() -- lease expiry (lease.c), due schedule ticks (schedule.c)
 *	  and one batch of the queues' retention (retention.c) -- and the
 *	  sweeper background worker that runs it every
 *	  job_state.sweep_interval, so that nobody has to call claim() or
 *	  sweep() for leases to expire, schedules to fire and old jobs to go.
 *	  A round whose retention batch was full is followed by the next after
 *	  a pause of JS_RETENTION_YIELD_MS, not a whole interval: each batch
 *	  commits on its own, so a backlog is worked off in short transactions.
 *
 * It is registered from _PG_init only while shared_preload_libraries is
 * being processed; without preloading, everything else works and sweep()
 * (and claim's lazy expiry) does the work.  One sweeper per cluster, in
 * job_state.database (bgworker.c: registration, start, rounds).
 *
 * Each round looks the extension up in pg_extension (not installed:
 * nothing to do, wait for the next round; the server log says so once,
 * with a hint, and once more when the extension is found, see bgworker.c)
 * and runs SELECT job_state.sweep()
 * through a kept plan -- the same code a user's sweep() runs, with its
 * SECURITY DEFINER search_path, and a plan the plan cache re-makes if the
 * extension is dropped and created again.  A failed round is logged and
 * the next one comes after the interval, so a persistent error is one log
 * entry per round.  A schedule that cannot submit does not even fail the
 * round (see schedule.c).  SIGHUP re-reads the configuration (a new
 * sweep_interval) before the next round; SIGINT cancels the running round.
 *
 * Locks: none of its own; those of sweep() (SKIP LOCKED on job and
 * schedule rows), so it never waits on workers or on another sweeper.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "common/int.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "job_state.h"
#include "rules.h"
#include "cron.h"
#include "bgworker.h"
#include "take.h"
#include "rowwrite.h"

PG_FUNCTION_INFO_V1(js_sweep);

#define JS_SWEEPER_NAME "job_state sweeper"
#define JS_SWEEPER_RESTART_SECS 5
#define JS_RETENTION_YIELD_MS 10	/* pause between two full retention batches */

PGDLLEXPORT void js_sweeper_main(Datum main_arg);

static JsPlan sweep_plan = {
	"SELECT job_state.sweep()",
	0, {0}
};

/* queues beyond which a round applies lease expiry in one pass */
#define JS_SWEEPER_FLOOR_QUEUES 1000

/* this backend is the sweeper worker */
static bool js_in_sweeper = false;

/* $1: JS_SWEEPER_FLOOR_QUEUES + 1 */
static JsPlan sweeper_queues_plan = {
	"SELECT name FROM job_state.queue ORDER BY name LIMIT $1",
	1, {INT8OID}
};

/*
 * Called from _PG_init while shared_preload_libraries is processed.
 */
void
JsRegisterSweeper(void)
{
	JsRegisterWorker(JS_SWEEPER_NAME, "js_sweeper_main", JS_SWEEPER_RESTART_SECS);
}

static void
JsSweep(void *arg)
{
	if (!JsWorkerExtensionInstalled(JS_SWEEPER_NAME))
		return;
	JsExecute(&sweep_plan, NULL, NULL, false, 1);
	if (JsGetInt32(0, 1, NULL) > 0)
		ereport(DEBUG1,
				(errmsg_internal("job_state sweeper: lease expiry and retention changed %d jobs",
								 JsGetInt32(0, 1, NULL))));
}

void
js_sweeper_main(Datum main_arg)
{
	MemoryContext round_context;

	JsWorkerConnect(JS_SWEEPER_NAME);
	js_in_sweeper = true;

	ereport(LOG,
			(errmsg("job_state sweeper started in database \"%s\"", js_database),
			 errdetail("It sweeps every %d ms.", js_sweep_interval)));

	round_context = AllocSetContextCreate(TopMemoryContext,
										  JS_SWEEPER_NAME,
										  ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		bool		more;

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

		js_retention_more = false;
		more = JsWorkerRound(round_context, sweep_plan.sql, JsSweep, NULL) &&
			js_retention_more;
		MemoryContextSwitchTo(TopMemoryContext);
		MemoryContextReset(round_context);

		/*
		 * A full retention batch: the round has committed it; yield for a
		 * moment, then delete the next batch rather than wait a whole
		 * interval.
		 */
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 more ? Min(js_sweep_interval, JS_RETENTION_YIELD_MS)
						 : js_sweep_interval,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/*
 * The sweeper's lease expiry: per queue the check a claim makes
 * (JsLeaseExpiryDue), walked from the sweeper's own lease floors
 * (lease_floor.c), and the expiry pass only in the queues where a lease
 * ran out.  A pass over every queue reads, each round, every entry of
 * job_lease below the clock that a pinned xmin horizon keeps; this reads
 * each about once.  A lease written below a floor by another session is
 * found at the floor's next reset, within JS_LEASE_FLOOR_RESET_MS (sweep()
 * called by a user uses no floor).  With more than JS_SWEEPER_FLOOR_QUEUES
 * queues, the pass over every queue.
 */
static int
JsSweeperExpireLeases(void)
{
	JsTake		t;
	uint64		nqueues;
	char	  **names;
	bool	   *due;
	uint64		i;
	int			total = 0;

	Datum		limit = Int64GetDatum(JS_SWEEPER_FLOOR_QUEUES + 1);

	JsExecute(&sweeper_queues_plan, &limit, NULL, true, 0);
	nqueues = SPI_processed;
	if (nqueues > JS_SWEEPER_FLOOR_QUEUES)
		return JsExpireLeases(NULL);
	names = palloc(sizeof(char *) * (nqueues + 1));
	due = palloc0(sizeof(bool) * (nqueues + 1));
	for (i = 0; i < nqueues; i++)
		names[i] = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);

	JsTakeOpen(&t);
	JsStatementBegin();
	for (i = 0; i < nqueues; i++)
	{
		due[i] = JsLeaseExpiryDue(&t, CStringGetTextDatum(names[i]), GetCurrentTimestamp());
		CHECK_FOR_INTERRUPTS();
	}
	PopActiveSnapshot();
	JsTakeClose(&t);

	for (i = 0; i < nqueues; i++)
	{
		if (due[i] && pg_add_s32_overflow(total, JsExpireLeases(names[i]), &total))
			total = PG_INT32_MAX;
	}
	return total;
}

Datum
js_sweep(PG_FUNCTION_ARGS)
{
	int			moved;
	int			deleted;
	int			n;

	SPI_connect();
	moved = js_in_sweeper ? JsSweeperExpireLeases() : JsExpireLeases(NULL);
	(void) JsRunSchedules();	/* ticks submitted are not counted in n */
	deleted = JsApplyRetention();
	SPI_finish();
	if (pg_add_s32_overflow(moved, deleted, &n))
		n = PG_INT32_MAX;
	PG_RETURN_INT32(n);
}
