/*-------------------------------------------------------------------------
 *
 * spi.c
 *	  The kept-plan registry and small accessors for SPI results.
 *
 * Each file keeps its statements next to the code that runs them, as
 * static JsPlan entries.  A plan is prepared the first time a backend runs
 * it and kept (SPI_keepplan) for the life of the backend, as a generic plan
 * planned once; the plan cache revalidates it if our tables are dropped and
 * created again.  Statements use fully qualified names and $n parameters
 * only.
 *
 * Callers must be connected to SPI.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/snapmgr.h"

#include "job_state.h"

static SPIPlanPtr
JsPreparePlan(JsPlan *plan)
{
	SPIPlanPtr	prepared;

	/*
	 * A generic plan, always: our statements are short and their best plan
	 * does not depend on the values (the queue, the job id).  Left to the
	 * plan cache, statements with a LIMIT $n or a CTE looked cheaper as
	 * custom plans and were planned again on every call.
	 */
	prepared = SPI_prepare_cursor(plan->sql, plan->nargs, plan->argtypes,
								  CURSOR_OPT_GENERIC_PLAN);
	if (prepared == NULL)
		elog(ERROR, "job_state: SPI_prepare failed: %s",
			 SPI_result_code_string(SPI_result));
	JsCheckStatementNames(prepared, plan->sql);
	if (SPI_keepplan(prepared) != 0)
		elog(ERROR, "job_state: SPI_keepplan failed");
	plan->plan = prepared;
	return prepared;
}

/*
 * Run a kept plan; returns SPI_processed.  Any SPI failure is an internal
 * error: user-facing errors come from the statement itself.
 *
 * read_only = true runs under the caller's snapshot.  Use it only for data
 * that cannot have changed under us; a read that explains why a fenced
 * UPDATE touched no row must see what that UPDATE waited for, so it takes
 * read_only = false (a fresh snapshot under READ COMMITTED).
 */
int
JsExecute(JsPlan *plan, Datum *values, const char *nulls, bool read_only,
		  long count)
{
	SPIPlanPtr	prepared = plan->plan;
	int			rc;

	if (prepared == NULL)
		prepared = JsPreparePlan(plan);

	rc = SPI_execute_plan(prepared, values, nulls, read_only, count);
	if (rc < 0)
		elog(ERROR, "job_state: SPI_execute_plan failed: %s",
			 SPI_result_code_string(rc));
	return (int) SPI_processed;
}

/*
 * A write that must see every row committed while the caller waited for a
 * lock, whatever the isolation level (an INSERT ... SELECT after a SHARE
 * lock on the job table): the statement runs under the latest snapshot,
 * as the foreign-key triggers' checks do.
 */
int
JsExecuteWriteLatest(JsPlan *plan, Datum *values, const char *nulls)
{
	SPIPlanPtr	prepared = plan->plan;
	int			rc;

	if (prepared == NULL)
		prepared = JsPreparePlan(plan);
	CommandCounterIncrement();
	rc = SPI_execute_snapshot(prepared, values, nulls, GetLatestSnapshot(),
							  InvalidSnapshot, false, true, 0);
	if (rc < 0)
		elog(ERROR, "job_state: SPI_execute_snapshot failed: %s",
			 SPI_result_code_string(rc));
	return (int) SPI_processed;
}

/*
 * JsExecute, read-only, under the latest snapshot rather than the
 * statement's: for a check that must see rows committed while the caller
 * waited for a lock (a TRUNCATE, a SHARE lock on the job table, a submit
 * that waited for one of those).
 */
int
JsExecuteLatest(JsPlan *plan, Datum *values, const char *nulls, long count)
{
	int			n;

	PushActiveSnapshot(GetLatestSnapshot());
	n = JsExecute(plan, values, nulls, true, count);
	PopActiveSnapshot();
	return n;
}

static Datum
JsGetDatum(int row, int col, bool *isnull)
{
	Assert(row >= 0 && (uint64) row < SPI_processed);
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc,
						 col, isnull);
}

bool
JsGetBool(int row, int col)
{
	bool		isnull;
	Datum		d = JsGetDatum(row, col, &isnull);

	return !isnull && DatumGetBool(d);
}

int32
JsGetInt32(int row, int col, bool *isnull)
{
	bool		null;
	Datum		d = JsGetDatum(row, col, &null);

	if (isnull)
		*isnull = null;
	return null ? 0 : DatumGetInt32(d);
}

int64
JsGetInt64(int row, int col, bool *isnull)
{
	bool		null;
	Datum		d = JsGetDatum(row, col, &null);

	if (isnull)
		*isnull = null;
	return null ? 0 : DatumGetInt64(d);
}

/*
 * A copy of a value in the caller's memory context (upper executor context
 * when called after SPI_connect, so it survives SPI_finish).
 */
Datum
JsGetDatumCopy(int row, int col, bool *isnull)
{
	Datum		d = JsGetDatum(row, col, isnull);
	Form_pg_attribute att = TupleDescAttr(SPI_tuptable->tupdesc, col - 1);

	if (*isnull)
		return (Datum) 0;
	return SPI_datumTransfer(d, att->attbyval, att->attlen);
}

/* text of a column, palloc'd in the SPI context; NULL for SQL NULL */
char *
JsGetText(int row, int col)
{
	Assert(row >= 0 && (uint64) row < SPI_processed);
	return SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);
}

/*
 * Triggers run under the role of whoever wrote the row, a role that may
 * hold no privilege on the tables the trigger's statements read and write
 * (an operator allowed to UPDATE job_state.job, nothing else).  As the
 * foreign-key triggers do, the statements run as the owner of the table
 * the trigger fires on, which owns all of job_state; JsTriggerSpiFinish
 * switches back, and an error on the way switches back with the
 * (sub)transaction's abort.
 */
void
JsTriggerSpiConnect(Relation rel, JsSavedUser *saved)
{
	GetUserIdAndSecContext(&saved->userid, &saved->sec_context);
	SetUserIdAndSecContext(rel->rd_rel->relowner,
						   saved->sec_context | SECURITY_LOCAL_USERID_CHANGE);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "job_state: SPI_connect failed");
}

void
JsTriggerSpiFinish(JsSavedUser *saved)
{
	SPI_finish();
	SetUserIdAndSecContext(saved->userid, saved->sec_context);
}
