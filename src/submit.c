/*-------------------------------------------------------------------------
 *
 * submit.c
 *	  Idempotent submit.
 *
 * (queue, idempotency_key) is unique (partial unique index).  The new job
 * is inserted as INSERT ... ON CONFLICT (queue, idempotency_key) DO NOTHING
 * would insert it, without starting a statement (JsRowWriterInsert,
 * rowwrite.c): two sessions submitting the same key at once get one job,
 * the second waits for the first to commit and then finds its row.  The
 * columns submit does not set take their defaults; the job triggers check
 * the row, compute its input hash and record its history.  The input hash
 * is SHA-256 over the canonical text of the jsonb (jsonb already orders and
 * de-duplicates keys); submit computes it again only when it meets an
 * existing key.
 *
 * Locks: RowExclusiveLock on job, AccessShareLock on queue; the
 * speculative insertion lock of the new row, and the wait for a concurrent
 * insert of the same key.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/xact.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"

#include "job_state.h"
#include "tables.h"
#include "rowwrite.h"
#include "rules.h"
#include "acl.h"
#include "bgworker.h"

PG_FUNCTION_INFO_V1(js_submit);

static JsPlan existing_plan = {
	"SELECT id, status, input_hash FROM job_state.job"
	" WHERE queue OPERATOR(pg_catalog.=) $1 AND idempotency_key OPERATOR(pg_catalog.=) $2",
	2, {TEXTOID, TEXTOID}
};

/* submit's arguments, in order */
enum
{
	ARG_QUEUE = 0,
	ARG_INPUT,
	ARG_KEY,
	ARG_RUN_AFTER,
	ARG_PRIORITY,
	ARG_MAX_ATTEMPTS,
	ARG_DEADLINE,
	ARG_BUDGET,
	ARG_RESOURCE,
	ARG_CONCURRENCY_KEY
};

static void
JsSetColumn(TupleTableSlot *slot, bool *set, int attno, Datum value, bool isnull)
{
	slot->tts_values[attno - 1] = value;
	slot->tts_isnull[attno - 1] = isnull;
	set[attno - 1] = true;
}

static void
JsSetArg(FunctionCallInfo fcinfo, TupleTableSlot *slot, bool *set, int attno,
		 int arg)
{
	JsSetColumn(slot, set, attno, PG_ARGISNULL(arg) ? (Datum) 0 : PG_GETARG_DATUM(arg),
				PG_ARGISNULL(arg));
}

/*
 * Insert the new job: true with its id and status, false when its key is
 * held by another job (and nothing was written).  An unknown queue is
 * JS008.  Runs like a statement: after a command-counter step, under a
 * fresh snapshot.
 */
static bool
JsSubmitInsert(FunctionCallInfo fcinfo, Datum submitter, int64 *job_id,
			   Datum *status)
{
	Relation	job = table_open(JsOwnRelid("job"), RowExclusiveLock);
	Relation	queuerel = table_open(JsOwnRelid("queue"), AccessShareLock);
	Relation	queue_pkey = index_open(JsOwnRelid("queue_pkey"), AccessShareLock);
	const JsJobColumns *cols = JsJobColumnsFor(job);
	bool		has_key = !PG_ARGISNULL(ARG_KEY);
	bool	   *set;
	JsQueueOptions q;
	JsRowWriter w;
	TupleTableSlot *slot;
	bytea	   *empty_hash;
	JsInsertResult result;
	bool		inserted;

	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (!JsReadQueue(queuerel, queue_pkey, PG_GETARG_DATUM(ARG_QUEUE), NULL, &q))
		ereport(ERROR,
				(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
				 errmsg("queue \"%s\" does not exist",
						text_to_cstring(PG_GETARG_TEXT_PP(ARG_QUEUE))),
				 errhint("Create it with job_state.create_queue().")));
	/* before the key is looked at: no answer about another's keys */
	JsRequireQueuePrivilege(text_to_cstring(PG_GETARG_TEXT_PP(ARG_QUEUE)), q.acl,
							JS_QUEUE_SUBMIT);

	JsRowWriterBegin(&w, job, has_key);
	slot = JsRowWriterSlot(&w, &TTSOpsVirtual);
	set = palloc0(sizeof(bool) * slot->tts_tupleDescriptor->natts);
	ExecClearTuple(slot);

	JsSetArg(fcinfo, slot, set, cols->queue, ARG_QUEUE);
	JsSetArg(fcinfo, slot, set, cols->idempotency_key, ARG_KEY);
	JsSetArg(fcinfo, slot, set, cols->input, ARG_INPUT);
	/* empty: the job trigger computes it */
	empty_hash = palloc(VARHDRSZ);
	SET_VARSIZE(empty_hash, VARHDRSZ);
	JsSetColumn(slot, set, cols->input_hash, PointerGetDatum(empty_hash), false);
	JsSetColumn(slot, set, cols->priority,
				PG_ARGISNULL(ARG_PRIORITY) ? Int32GetDatum(0) : PG_GETARG_DATUM(ARG_PRIORITY),
				false);
	/* run_after: the column's default, now(), unless given */
	if (!PG_ARGISNULL(ARG_RUN_AFTER))
		JsSetArg(fcinfo, slot, set, cols->run_after, ARG_RUN_AFTER);
	if (!PG_ARGISNULL(ARG_MAX_ATTEMPTS))
		JsSetArg(fcinfo, slot, set, cols->max_attempts, ARG_MAX_ATTEMPTS);
	else
		JsSetColumn(slot, set, cols->max_attempts, Int32GetDatum(q.max_attempts),
					!q.has_max_attempts);
	JsSetArg(fcinfo, slot, set, cols->deadline, ARG_DEADLINE);
	JsSetArg(fcinfo, slot, set, cols->budget, ARG_BUDGET);
	JsSetArg(fcinfo, slot, set, cols->resource, ARG_RESOURCE);
	JsSetArg(fcinfo, slot, set, cols->concurrency_key, ARG_CONCURRENCY_KEY);
	/* until ALTER EXTENSION UPDATE, a 0.1.0 table stores the role's name */
	JsSetColumn(slot, set, cols->submitted_by,
				cols->submitted_by_oid ? submitter :
				CStringGetTextDatum(GetUserNameFromId(DatumGetObjectId(submitter), false)),
				false);
	JsRowWriterDefaults(&w, slot, set);
	ExecStoreVirtualTuple(slot);

	result = JsRowWriterInsert(&w, slot,
							   has_key ? list_make1_oid(JsOwnRelid("job_idempotency_key")) : NIL);
	if (result == JS_INSERT_SKIPPED)
		ereport(ERROR,
				(errcode(ERRCODE_TRIGGERED_ACTION_EXCEPTION),
				 errmsg("submit stored no job"),
				 errdetail("A BEFORE INSERT trigger on job_state.job returned NULL for the new job."),
				 errhint("A trigger on job_state.job must not skip the rows job_state writes; raise an error to refuse a job.")));
	inserted = result == JS_INSERTED;
	if (inserted)
	{
		bool		isnull;

		*job_id = DatumGetInt64(slot_getattr(slot, cols->id, &isnull));
		*status = slot_getattr(slot, cols->status, &isnull);
	}
	JsRowWriterEnd(&w);
	PopActiveSnapshot();
	index_close(queue_pkey, NoLock);
	table_close(queuerel, NoLock);
	table_close(job, NoLock);
	return inserted;
}

Datum
js_submit(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *queue;
	Jsonb	   *input;
	char	   *key = NULL;
	Datum		submitter;
	Datum		key_values[2];
	Datum		out[3];
	bool		outnulls[3] = {false, false, false};

	JsRefuseNull(fcinfo, ARG_QUEUE, "queue");
	JsRefuseNull(fcinfo, ARG_INPUT, "input");
	PreventCommandIfReadOnly("submit()");
	queue = text_to_cstring(PG_GETARG_TEXT_PP(ARG_QUEUE));
	input = PG_GETARG_JSONB_P(ARG_INPUT);
	if (!PG_ARGISNULL(ARG_KEY))
	{
		key = text_to_cstring(PG_GETARG_TEXT_PP(ARG_KEY));
		JsCheckKey("idempotency key", key);
	}
	if (!PG_ARGISNULL(ARG_MAX_ATTEMPTS) && PG_GETARG_INT32(ARG_MAX_ATTEMPTS) < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_attempts must be at least 1"),
				 errdetail("The value given is %d.", PG_GETARG_INT32(ARG_MAX_ATTEMPTS))));
	if (!PG_ARGISNULL(ARG_BUDGET))
		JsCheckBudget(PG_GETARG_JSONB_P(ARG_BUDGET));
	if (!PG_ARGISNULL(ARG_RESOURCE))
		JsCheckName("resource", text_to_cstring(PG_GETARG_TEXT_PP(ARG_RESOURCE)));
	if (!PG_ARGISNULL(ARG_CONCURRENCY_KEY))
		JsCheckKey("concurrency key", text_to_cstring(PG_GETARG_TEXT_PP(ARG_CONCURRENCY_KEY)));

	/* the caller, not the definer: follows SET ROLE */
	submitter = ObjectIdGetDatum(GetOuterUserId());

	JsInitMaterialized(fcinfo);

	for (;;)
	{
		int64		job_id;
		Datum		status;
		bool		isnull;

		if (JsSubmitInsert(fcinfo, submitter, &job_id, &status))
		{
			out[0] = Int64GetDatum(job_id);
			out[1] = BoolGetDatum(true);
			out[2] = status;
			JsNotifyNewJob(queue);
			break;
		}

		/* the key is held: the job holding it, if it is still there */
		Assert(key != NULL);
		key_values[0] = PG_GETARG_DATUM(ARG_QUEUE);
		key_values[1] = PG_GETARG_DATUM(ARG_KEY);
		SPI_connect();
		if (JsExecute(&existing_plan, key_values, NULL, false, 1) == 1)
		{
			int64		held_by = JsGetInt64(0, 1, NULL);
			bytea	   *stored = DatumGetByteaPP(JsGetDatumCopy(0, 3, &isnull));
			bytea	   *mine = JsInputHash(input);

			if (VARSIZE_ANY_EXHDR(stored) != VARSIZE_ANY_EXHDR(mine) ||
				memcmp(VARDATA_ANY(stored), VARDATA_ANY(mine),
					   VARSIZE_ANY_EXHDR(mine)) != 0)
				ereport(ERROR,
						(errcode(ERRCODE_JS_IDEMPOTENCY_CONFLICT),
						 errmsg("idempotency key \"%s\" of queue \"%s\" was used with a different input",
								key, queue),
						 errdetail("Job %lld holds this key; its input hash differs from this input's.",
								   (long long) held_by),
						 errhint("Use a new idempotency key for a different input, or resend the original input.")));
			out[0] = Int64GetDatum(held_by);
			out[1] = BoolGetDatum(false);
			out[2] = JsGetDatumCopy(0, 2, &isnull);
			SPI_finish();
			break;
		}
		SPI_finish();
		/* the job holding the key was purged meanwhile: insert again */
	}

	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnulls);
	return (Datum) 0;
}
