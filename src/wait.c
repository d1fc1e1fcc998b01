/*-------------------------------------------------------------------------
 *
 * wait.c
 *	  CALL job_state.wait(job_id, timeout, ...): the job's outcome as soon
 *	  as it has ended, or its state when the timeout passes.
 *
 * A waiter must not hold back VACUUM while it sleeps, so it holds no
 * snapshot and no lock then: wait() is a procedure, and between two reads
 * of the job it commits the transaction it runs in (SPI_commit in a
 * non-atomic CALL: the portal's snapshot is released, the locks of the read
 * go, and a new transaction starts that takes no snapshot until the next
 * read).  Each read therefore sees every commit made before it, also under
 * the procedure's own start.  That only works where CALL may commit: in
 * autocommit, not inside a transaction block or a function (an atomic
 * context, refused with 25001), and in READ COMMITTED (a REPEATABLE READ
 * or SERIALIZABLE caller asked for one snapshot, refused with 25004);
 * there, only a timeout of 0 is allowed: one read under the caller's
 * snapshot, nothing committed.  Called from a procedure or a DO block that
 * may commit, wait() commits the caller's transaction, as COMMIT there
 * would.
 * For the same reason the procedure is neither SECURITY DEFINER nor has a
 * SET clause (PostgreSQL makes such a CALL atomic): each read runs as the
 * owner of the job table, for the moment of the read, and every statement
 * names its schemas.
 *
 * Who may wait: the role that submitted the job (GetOuterUserId, as
 * submit records it) or a role with the read privilege on its queue
 * (acl.c).  Any other role gets the error of a job that does not exist
 * (JS008), so that it cannot learn which ids exist; the check is made on
 * every read, so a revoke reaches a sleeping waiter.
 *
 * Between reads the waiter sleeps on its job's wake-up slot (waiter.c) for
 * at most job_state.wait_poll_interval.  A timeout of 0 reads once.  The
 * longest timeout is JS_WAIT_MAX_USECS (1 hour): a longer wait is better
 * served by LISTEN job_state_done, and a waiter occupies a connection.
 *
 * Locks: AccessShareLock on the job and queue tables and their indexes
 * during each read, released by the commit that follows it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "job_state.h"
#include "tables.h"
#include "acl.h"
#include "waiter.h"

PG_FUNCTION_INFO_V1(js_wait);

#define JS_WAIT_MAX_USECS (INT64CONST(3600) * USECS_PER_SEC)
#define JS_WAIT_MAX_TEXT "1 hour"

/* the job as one read saw it; varlena values detoasted, in the wait's context */
typedef struct JsWaitState
{
	bool		done;			/* succeeded, failed, cancelled or unknown */
	Datum		values[5];		/* status, result, last_error, reason, finished_at */
	bool		nulls[5];
} JsWaitState;

/*
 * The job by id alone, probing the primary key (queue, id) once per queue
 * (see operator.c).  The statuses that end a wait are named one by one:
 * the list of statuses is not closed.
 */
static JsPlan wait_read_plan = {
	"SELECT queue, submitted_by::pg_catalog.oid,"
	"  status OPERATOR(pg_catalog.=) ANY"
	"   ('{succeeded,failed,cancelled,unknown}'::job_state.status[]),"
	"  status, result, last_error, reason, finished_at"
	" FROM job_state.job"
	" WHERE queue OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT name FROM job_state.queue))"
	"  AND id OPERATOR(pg_catalog.=) $1",
	1, {INT8OID}
};

pg_noreturn static void
JsWaitNoSuchJob(int64 job_id)
{
	ereport(ERROR,
			(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
			 errmsg("job %lld does not exist", (long long) job_id),
			 errhint("A role may wait for the jobs it submitted and for the jobs of the queues it may read; a purged job is gone.")));
}

/*
 * Read job_id under a new snapshot into *state (allocated in cxt): JS008
 * when there is no such job or the caller may not read it.
 */
static void
JsWaitRead(int64 job_id, JsWaitState *state, MemoryContext cxt)
{
	Oid			caller = GetOuterUserId();
	Oid			saved_user;
	int			saved_sec;
	Datum		id = Int64GetDatum(job_id);
	bool		isnull;
	bool		allowed;
	Datum		queue;
	int			i;

	GetUserIdAndSecContext(&saved_user, &saved_sec);
	SetUserIdAndSecContext(JsOwnRelOwner("job"),
						   saved_sec | SECURITY_LOCAL_USERID_CHANGE);

	if (JsExecute(&wait_read_plan, &id, NULL, false, 1) == 0)
		JsWaitNoSuchJob(job_id);

	/* copied out first: the privilege check runs statements of its own */
	queue = JsGetDatumCopy(0, 1, &isnull);
	allowed = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
											 SPI_tuptable->tupdesc, 2,
											 &isnull)) == caller;
	state->done = JsGetBool(0, 3);
	for (i = 0; i < 5; i++)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0],
									  SPI_tuptable->tupdesc, 4 + i,
									  &state->nulls[i]);

		if (state->nulls[i])
			state->values[i] = (Datum) 0;
		else if (i == 1 || i == 2 || i == 3)
		{
			/* no TOAST pointer may outlive the commit that follows */
			MemoryContext old = MemoryContextSwitchTo(cxt);

			state->values[i] = PointerGetDatum(PG_DETOAST_DATUM_COPY(d));
			MemoryContextSwitchTo(old);
		}
		else
			state->values[i] = d;	/* status (an enum's oid), finished_at */
	}

	if (!allowed)
	{
		Acl		   *acl;

		allowed = JsReadQueueAcl(queue, &acl) &&
			JsQueueAllows(acl, caller, JS_QUEUE_READ);
	}
	if (!allowed)
		JsWaitNoSuchJob(job_id);

	SetUserIdAndSecContext(saved_user, saved_sec);
}

/*
 * Whether wait() may end its transaction between reads: only in a
 * non-atomic CALL at READ COMMITTED.  Elsewhere only a timeout of 0 (one
 * read, under the caller's snapshot) is allowed: 25001 / 25004.
 */
static bool
JsWaitMayCommit(FunctionCallInfo fcinfo, int64 timeout)
{
	if (fcinfo->context == NULL || !IsA(fcinfo->context, CallContext) ||
		castNode(CallContext, fcinfo->context)->atomic)
	{
		if (timeout == 0)
			return false;
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("job_state.wait() cannot wait inside a transaction block or a function"),
				 errdetail("wait() commits its own transaction between two reads of the job so that it holds no snapshot and no lock while it sleeps; here the transaction is not its own to commit."),
				 errhint("CALL job_state.wait() as a statement of its own in autocommit mode; inside a transaction only a timeout of 0 (one read) is allowed.")));
	}
	if (IsolationUsesXactSnapshot())
	{
		if (timeout == 0)
			return false;
		ereport(ERROR,
				(errcode(ERRCODE_INAPPROPRIATE_ISOLATION_LEVEL_FOR_BRANCH_TRANSACTION),
				 errmsg("job_state.wait() cannot wait at isolation level %s",
						XactIsoLevel == XACT_SERIALIZABLE ? "SERIALIZABLE" : "REPEATABLE READ"),
				 errdetail("wait() reads the job with a new snapshot each time it wakes; this isolation level asks for one snapshot for the whole transaction."),
				 errhint("SET default_transaction_isolation = 'read committed' in the session that waits; at this level only a timeout of 0 (one read) is allowed.")));
	}
	return true;
}

/* the timeout in microseconds: 0 .. JS_WAIT_MAX_USECS */
static int64
JsWaitTimeout(FunctionCallInfo fcinfo)
{
	Interval   *span;
	int64		usecs;

	JsRefuseNull(fcinfo, 1, "timeout");
	span = PG_GETARG_INTERVAL_P(1);
	JsCheckNotNegative("timeout", span);
	usecs = JsIntervalMicroseconds(span);
	if (usecs > JS_WAIT_MAX_USECS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("timeout must be at most %s", JS_WAIT_MAX_TEXT),
				 errdetail("The value given is %s.",
						   DatumGetCString(DirectFunctionCall1(interval_out,
															   IntervalPGetDatum(span)))),
				 errhint("Wait again after the timeout, or LISTEN job_state_done for longer waits.")));
	return usecs;
}

Datum
js_wait(PG_FUNCTION_ARGS)
{
	MemoryContext callcxt = CurrentMemoryContext;
	MemoryContext readcxt;
	TupleDesc	tupdesc;
	int64		job_id;
	int64		timeout;
	TimestampTz end;
	JsWaitState state;
	HeapTuple	tuple;
	bool		may_commit;

	JsRefuseNull(fcinfo, 0, "job_id");
	job_id = PG_GETARG_INT64(0);
	timeout = JsWaitTimeout(fcinfo);
	may_commit = JsWaitMayCommit(fcinfo, timeout);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "job_state.wait: return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	end = GetCurrentTimestamp() + timeout;

	/* the values read last, across the commits (a child of the portal's) */
	readcxt = AllocSetContextCreate(callcxt, "job_state wait",
									ALLOCSET_SMALL_SIZES);

	if (SPI_connect_ext(may_commit ? SPI_OPT_NONATOMIC : 0) != SPI_OK_CONNECT)
		elog(ERROR, "job_state: SPI_connect failed");
	for (;;)
	{
		uint64		ticket = JsWaiterTicket(job_id);
		long		left;

		MemoryContextReset(readcxt);
		JsWaitRead(job_id, &state, readcxt);

		/* no snapshot, no lock from here until the next read */
		if (may_commit)
			SPI_commit();

		if (state.done || timeout == 0)
			break;
		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), end);
		if (left <= 0)
			break;
		JsWaiterSleep(job_id, ticket, Min(left, (long) js_wait_poll_interval));
	}
	SPI_finish();

	MemoryContextSwitchTo(callcxt);
	tuple = heap_form_tuple(tupdesc, state.values, state.nulls);
	PG_RETURN_DATUM(HeapTupleGetDatum(tuple));
}
