/*-------------------------------------------------------------------------
 *
 * callback.c
 *	  wait_for_callback: a worker hands its job to a system that finishes
 *	  later and calls back (an agent runtime's asynchronous session, a
 *	  webhook, a human approval), as AWS Step Functions' waitForTaskToken
 *	  does.
 *
 * The job goes from running to waiting under the same generation, so the
 * worker's claim token is the callback token: succeed, fail and heartbeat
 * (complete.c, claim.c) accept it from the worker and from any role that
 * holds the callback privilege on the queue (acl.c, token.c).  A waiting
 * job has a callback timeout (callback_timeout_at) and a waiting window
 * (lease_expires_at): the timeout, or, with a heartbeat interval, the next
 * heartbeat's due time, never past the timeout.  When the window closes,
 * lease expiry (lease.c) makes the job unknown (reason callback_timeout or
 * heartbeat_timeout), or retries it where the queue declares its work safe
 * to repeat, exactly as a lease ends; a callback with the current
 * generation still resolves it after that, an older one is refused.  The
 * job keeps the concurrency slots it started with, or gives them up as
 * the wait begins (release_slots): the job triggers free them (fsm.c,
 * job_trigger.c).
 *
 * A callback can be faster than the wait's own commit: it then waits on
 * the job's row lock, or, when the wait call comes second, finds the job
 * already finished under its generation; the wait call reports the state
 * the callback left instead of failing.  A wait called again while the
 * job waits reports the window it has and changes nothing.
 *
 * Tokens are never written to job_event, errors or the log: only job ids
 * and generations are.
 *
 * Locks: the job's row lock (the update), and what the job triggers take
 * for slots given up (slot.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "executor/executor.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "job_state.h"
#include "tables.h"
#include "rowwrite.h"
#include "token.h"

PG_FUNCTION_INFO_V1(js_wait_for_callback);

#define ARG_TOKEN		0
#define ARG_TIMEOUT		1
#define ARG_HEARTBEAT	2
#define ARG_RELEASE		3

/* one output row: status, callback_timeout_at, lease_expires_at */
static void
JsPutWaitRow(ReturnSetInfo *rsinfo, Datum status, TupleTableSlot *slot,
			 const JsJobColumns *cols, bool waiting)
{
	Datum		out[3];
	bool		outnulls[3] = {false, true, true};

	out[0] = status;
	out[1] = out[2] = (Datum) 0;
	if (waiting)
	{
		out[1] = slot->tts_values[cols->callback_timeout_at - 1];
		outnulls[1] = slot->tts_isnull[cols->callback_timeout_at - 1];
		out[2] = slot->tts_values[cols->lease_expires_at - 1];
		outnulls[2] = slot->tts_isnull[cols->lease_expires_at - 1];
	}
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnulls);
}

Datum
js_wait_for_callback(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	JsClaimToken *token;
	Interval   *timeout;
	Interval   *heartbeat = NULL;
	bool		release;
	const char *queue;
	Datum		fence[4];
	Relation	rel;
	Relation	pkey;
	const JsJobColumns *cols;
	JsRowWriter w;
	TupleTableSlot *locked;
	TupleTableSlot *newslot;
	Datum	   *values;
	bool	   *nulls;
	Oid			status;
	TimestampTz now;
	Datum		timeout_at;
	Datum		window;
	int			kind;

	JsRefuseNull(fcinfo, ARG_TOKEN, "token");
	JsRefuseNull(fcinfo, ARG_TIMEOUT, "timeout");
	JsRefuseNull(fcinfo, ARG_RELEASE, "release_slots");
	token = PG_GETARG_CLAIM_TOKEN(ARG_TOKEN);
	timeout = PG_GETARG_INTERVAL_P(ARG_TIMEOUT);
	if (!JsIntervalPositive(timeout))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("timeout must be positive"),
				 errhint("It is how long the job waits for its callback before its outcome is unknown.")));
	JsCheckSpanBound("timeout", timeout);
	if (!PG_ARGISNULL(ARG_HEARTBEAT))
	{
		heartbeat = PG_GETARG_INTERVAL_P(ARG_HEARTBEAT);
		if (!JsIntervalPositive(heartbeat))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("heartbeat must be positive"),
					 errhint("Pass NULL to wait without heartbeats, up to the timeout.")));
		JsCheckSpanBound("heartbeat", heartbeat);
	}
	release = PG_GETARG_BOOL(ARG_RELEASE);
	PreventCommandIfReadOnly("wait_for_callback()");

	JsInitMaterialized(fcinfo);
	SPI_connect();
	/* the MAC first, then the worker's claim privilege */
	queue = JsTokenFence(token, fence);
	if (!JsSchemaHasWaiting())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("waiting for a callback needs job_state 0.2.0"),
				 errhint("Run ALTER EXTENSION job_state UPDATE.")));

	rel = table_open(JsOwnRelid("job"), RowExclusiveLock);
	pkey = index_open(JsOwnRelid("job_pkey"), RowExclusiveLock);
	cols = JsJobColumnsFor(rel);
	JsRowWriterBeginUpdate(&w, rel, &locked, &newslot);
	if (!JsLockJob(&w, pkey, fence[0], fence[1], locked))
	{
		JsRowWriterEndUpdate(&w, locked);
		JsRefuseToken(queue, token, "wait_for_callback");
	}
	JsRowWriterCopy(newslot, locked);
	values = newslot->tts_values;
	nulls = newslot->tts_isnull;
	status = DatumGetObjectId(values[cols->status - 1]);
	now = GetCurrentTimestamp();

	if (DatumGetInt32(values[cols->generation - 1]) != token->generation ||
		(cols->claim_nonce != 0 &&
		 DatumGetInt32(values[cols->claim_nonce - 1]) != DatumGetInt32(fence[3])) ||
		(status == cols->status_oids[JS_RUNNING] &&
		 DatumGetTimestampTz(values[cols->lease_expires_at - 1]) <= now))
	{
		/* a newer generation or a claim never seen here, or a lease that ran out: say which */
		JsRowWriterEndUpdate(&w, locked);
		JsRefuseToken(queue, token, "wait_for_callback");
	}
	if (status != cols->status_oids[JS_RUNNING])
	{
		/*
		 * The callback came first (the job is finished, unknown or has a
		 * retry scheduled), or the job already waits: report, change
		 * nothing.
		 */
		JsPutWaitRow(rsinfo, ObjectIdGetDatum(status), newslot, cols,
					 status == cols->status_oids[JS_WAITING]);
		JsRowWriterEndUpdate(&w, locked);
		index_close(pkey, NoLock);
		table_close(rel, NoLock);
		SPI_finish();
		return (Datum) 0;
	}

	timeout_at = DirectFunctionCall2(timestamptz_pl_interval,
									 TimestampTzGetDatum(now), PointerGetDatum(timeout));
	window = timeout_at;
	if (heartbeat != NULL)
	{
		Datum		due = DirectFunctionCall2(timestamptz_pl_interval,
											  TimestampTzGetDatum(now),
											  PointerGetDatum(heartbeat));

		if (DatumGetTimestampTz(due) < DatumGetTimestampTz(timeout_at))
			window = due;
	}
	values[cols->status - 1] = ObjectIdGetDatum(cols->status_oids[JS_WAITING]);
	values[cols->callback_timeout_at - 1] = timeout_at;
	nulls[cols->callback_timeout_at - 1] = false;
	values[cols->heartbeat_interval - 1] = heartbeat != NULL ? PointerGetDatum(heartbeat) : (Datum) 0;
	nulls[cols->heartbeat_interval - 1] = heartbeat == NULL;
	values[cols->lease_expires_at - 1] = window;
	nulls[cols->lease_expires_at - 1] = false;
	if (release)
		for (kind = 0; kind < JS_NUM_SLOT_KINDS; kind++)
			nulls[cols->slot[kind] - 1] = true;
	ExecStoreVirtualTuple(newslot);
	JsPutWaitRow(rsinfo, ObjectIdGetDatum(cols->status_oids[JS_WAITING]), newslot,
				 cols, true);
	JsRowWriterUpdate(&w, locked, newslot);
	JsRowWriterEndUpdate(&w, locked);
	index_close(pkey, NoLock);
	table_close(rel, NoLock);
	SPI_finish();
	return (Datum) 0;
}
