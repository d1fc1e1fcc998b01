/*-------------------------------------------------------------------------
 *
 * complete.c
 *	  Ending an attempt: succeed, succeed_many and fail (fenced by the
 *	  token); and the operator's calls on a job: reconcile (resolve an
 *	  unknown job), redrive (run a failed/unknown/cancelled job again) and
 *	  cancel.
 *
 * A worker's completion (succeed, succeed_many, fail) locks its job and
 * checks the token's fence on the locked version: the generation, and the
 * statuses it acts on (running, or unknown: a late completion that carries
 * the current generation resolves it), so a stale worker, a sweeper or a
 * re-claim can never be overwritten.  fail decides in C (retry.c,
 * budget.c).  The operator's calls are UPDATE statements that carry the
 * statuses they act on in their WHERE clause.
 *
 * Locks: the job's row lock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"

#include "job_state.h"

PG_FUNCTION_INFO_V1(js_succeed);
PG_FUNCTION_INFO_V1(js_succeed_many);
PG_FUNCTION_INFO_V1(js_fail);
PG_FUNCTION_INFO_V1(js_reconcile);
PG_FUNCTION_INFO_V1(js_redrive);
PG_FUNCTION_INFO_V1(js_cancel);

/*
 * succeed, succeed_many and fail write without a statement (rowwrite.c): each
 * job is found by primary key and locked, the fence (generation; running,
 * or unknown for a late completion that carries the current generation)
 * is checked on the locked version, as an UPDATE's WHERE clause would be,
 * and the new version goes through the executor's single-row update, so
 * the job triggers check and record it.  A completion is the most frequent
 * write there is; a statement's start-up was most of its cost.
 */
typedef struct JsCompletion
{
	Relation	rel;
	Relation	pkey;
	const JsJobColumns *cols;
	JsRowWriter w;
	TupleTableSlot *locked;
	TupleTableSlot *newslot;
} JsCompletion;

static void
JsCompletionBegin(JsCompletion *c, const char *what)
{
	/* the executor's read-only check, which these writes bypass */
	PreventCommandIfReadOnly(what);
	c->rel = table_open(JsOwnRelid("job"), RowExclusiveLock);
	c->pkey = index_open(JsOwnRelid("job_pkey"), RowExclusiveLock);
	c->cols = JsJobColumnsFor(c->rel);
	JsRowWriterBeginUpdate(&c->w, c->rel, &c->locked, &c->newslot);
}

/*
 * Lock the job and check the token's fence on the locked version: its
 * generation, and running (or unknown: a late completion).  Then newslot
 * holds a copy to change.  False: the token is stale (or its job gone).
 */
static bool
JsLockFenced(JsCompletion *c, Datum queue, Datum id, int32 generation)
{
	const JsJobColumns *cols = c->cols;
	Oid			status;

	if (!JsLockJob(&c->w, c->pkey, queue, id, c->locked))
		return false;
	JsRowWriterCopy(c->newslot, c->locked);
	status = DatumGetObjectId(c->newslot->tts_values[cols->status - 1]);
	return DatumGetInt32(c->newslot->tts_values[cols->generation - 1]) == generation &&
		(status == cols->status_oids[JS_RUNNING] ||
		 status == cols->status_oids[JS_UNKNOWN]);
}

/* false: the token is stale (or its job gone) */
static bool
JsSucceedOne(JsCompletion *c, Datum queue, Datum id, int32 generation,
			 Datum result, bool result_null)
{
	const JsJobColumns *cols = c->cols;

	if (!JsLockFenced(c, queue, id, generation))
		return false;
	c->newslot->tts_values[cols->status - 1] = ObjectIdGetDatum(cols->status_oids[JS_SUCCEEDED]);
	c->newslot->tts_values[cols->result - 1] = result;
	c->newslot->tts_isnull[cols->result - 1] = result_null;
	c->newslot->tts_isnull[cols->reason - 1] = true;
	ExecStoreVirtualTuple(c->newslot);
	JsRowWriterUpdate(&c->w, c->locked, c->newslot);
	return true;
}

/* fire the AFTER triggers (history) and close */
static void
JsCompletionEnd(JsCompletion *c)
{
	JsRowWriterEndUpdate(&c->w, c->locked);
	index_close(c->pkey, NoLock);
	table_close(c->rel, NoLock);
}

Datum
js_succeed(PG_FUNCTION_ARGS)
{
	JsClaimToken *token;
	const char *queue;
	Datum		values[3];
	JsCompletion c;
	bool		done;

	JsRefuseNull(fcinfo, 0, "token");
	token = PG_GETARG_CLAIM_TOKEN(0);

	SPI_connect();
	queue = JsTokenFence(token, values);
	JsCompletionBegin(&c, "succeed()");
	done = JsSucceedOne(&c, values[0], values[1], token->generation,
						PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1), PG_ARGISNULL(1));
	JsCompletionEnd(&c);
	if (!done)
		JsRefuseToken(queue, token, "succeed");
	SPI_finish();
	PG_RETURN_VOID();
}

/* a token of a batch, for the order in which the batch locks its jobs */
typedef struct JsBatchItem
{
	const char *queue;
	int64		job_id;
	int32		generation;
	int			pos;			/* in the batch */
} JsBatchItem;

static int
JsCompareBatchItem(const void *a, const void *b)
{
	const JsBatchItem *x = (const JsBatchItem *) a;
	const JsBatchItem *y = (const JsBatchItem *) b;
	int			cmp = strcmp(x->queue, y->queue);

	if (cmp != 0)
		return cmp;
	if (x->job_id != y->job_id)
		return x->job_id < y->job_id ? -1 : 1;
	if (x->generation != y->generation)
		return x->generation < y->generation ? -1 : 1;
	return x->pos - y->pos;
}

/*
 * succeed_many: the whole batch in one call, each token fenced on its own.
 * Jobs are locked in (queue, id) order, so two batches never deadlock on
 * each other; a token given twice counts as its first.
 */
Datum
js_succeed_many(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ArrayType  *tokens_arr;
	Datum	   *tokens;
	bool	   *token_nulls;
	int			ntokens;
	Datum	   *results = NULL;
	bool	   *result_nulls = NULL;
	int			nresults = 0;
	JsBatchItem *items;
	bool	   *succeeded;
	JsCompletion c;
	int			i;
	int16		typlen;
	bool		typbyval;
	char		typalign;

	JsRefuseNull(fcinfo, 0, "tokens");
	tokens_arr = PG_GETARG_ARRAYTYPE_P(0);
	if (ARR_NDIM(tokens_arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tokens must be a one-dimensional array")));
	get_typlenbyvalalign(ARR_ELEMTYPE(tokens_arr), &typlen, &typbyval, &typalign);
	deconstruct_array(tokens_arr, ARR_ELEMTYPE(tokens_arr), typlen, typbyval,
					  typalign, &tokens, &token_nulls, &ntokens);
	if (ntokens > JS_MAX_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("succeed_many takes at most %d tokens", JS_MAX_BATCH),
				 errdetail("There are %d tokens.", ntokens),
				 errhint("Split the batch; claim returns at most %d jobs a call.", JS_MAX_BATCH)));
	if (!PG_ARGISNULL(1))
	{
		ArrayType  *results_arr = PG_GETARG_ARRAYTYPE_P(1);

		if (ARR_NDIM(results_arr) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("results must be a one-dimensional array")));
		deconstruct_array(results_arr, JSONBOID, -1, false, TYPALIGN_INT,
						  &results, &result_nulls, &nresults);
		if (nresults != ntokens)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("succeed_many needs one result per token"),
					 errdetail("There are %d tokens and %d results.", ntokens, nresults),
					 errhint("Pass NULL results to store no result, or an array as long as tokens.")));
	}

	JsInitMaterialized(fcinfo);
	if (ntokens == 0)
		return (Datum) 0;

	SPI_connect();
	items = palloc(sizeof(JsBatchItem) * ntokens);
	for (i = 0; i < ntokens; i++)
	{
		JsClaimToken *token;

		CHECK_FOR_INTERRUPTS();

		if (token_nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("tokens must not contain nulls"),
					 errdetail("Element %d is null.", i + 1)));
		token = DatumGetClaimToken(tokens[i]);
		/* the MAC of every token is checked before anything is written */
		items[i].queue = JsTokenCheck(token);
		items[i].job_id = token->job_id;
		items[i].generation = token->generation;
		items[i].pos = i;
	}
	qsort(items, ntokens, sizeof(JsBatchItem), JsCompareBatchItem);

	succeeded = palloc(sizeof(bool) * ntokens);
	JsCompletionBegin(&c, "succeed_many()");
	for (i = 0; i < ntokens; i++)
	{
		JsBatchItem *it = &items[i];

		if (i > 0 && strcmp(it->queue, items[i - 1].queue) == 0 &&
			it->job_id == items[i - 1].job_id &&
			it->generation == items[i - 1].generation)
			succeeded[it->pos] = succeeded[items[i - 1].pos];	/* given twice */
		else
			succeeded[it->pos] =
				JsSucceedOne(&c, CStringGetTextDatum(it->queue), Int64GetDatum(it->job_id),
							 it->generation,
							 results != NULL ? results[it->pos] : (Datum) 0,
							 results == NULL || result_nulls[it->pos]);
		CHECK_FOR_INTERRUPTS();
	}
	JsCompletionEnd(&c);

	for (i = 0; i < ntokens; i++)
	{
		Datum		out[2];
		bool		outnulls[2] = {false, false};

		out[0] = tokens[i];
		out[1] = CStringGetTextDatum(succeeded[i] ? "succeeded" : "stale");
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnulls);
	}
	SPI_finish();
	return (Datum) 0;
}

/*
 * fail: the job is locked and fenced as for succeed; the outcome is
 * decided in C from the locked version and the queue's retry policy
 * (retry.c, budget.c) and written through the same single-row update.
 */
Datum
js_fail(PG_FUNCTION_ARGS)
{
	JsClaimToken *token;
	const char *queue;
	Datum		class = PG_GETARG_DATUM(1);
	char	   *class_name;
	Datum		fence[3];
	JsCompletion c;
	const JsJobColumns *cols;
	Datum	   *values;
	bool	   *nulls;
	JsStatus	to;
	const char *reason = NULL;
	bool		retry = false;
	TimestampTz run_after = 0;

	JsRefuseNull(fcinfo, 0, "token");
	JsRefuseNull(fcinfo, 1, "class");
	token = PG_GETARG_CLAIM_TOKEN(0);
	class_name = JsEnumLabel(class);
	if (!PG_ARGISNULL(3))
	{
		Interval   *after = PG_GETARG_INTERVAL_P(3);

		JsCheckNotNegative("retry_after", after);
		JsCheckSpanBound("retry_after", after);
	}

	SPI_connect();
	queue = JsTokenFence(token, fence);
	JsCompletionBegin(&c, "fail()");
	if (!JsLockFenced(&c, fence[0], fence[1], token->generation))
	{
		JsCompletionEnd(&c);
		JsRefuseToken(queue, token, "fail");
	}
	cols = c.cols;
	values = c.newslot->tts_values;
	nulls = c.newslot->tts_isnull;

	if (strcmp(class_name, "permanent") == 0)
	{
		to = JS_FAILED;
		reason = "permanent_error";
	}
	else if (strcmp(class_name, "unknown") == 0)
	{
		to = JS_UNKNOWN;
		reason = "outcome_unknown";
	}
	else
	{
		int32		attempts = DatumGetInt32(values[cols->attempts - 1]);
		int32		retries = DatumGetInt32(values[cols->retries - 1]);
		Relation	queuerel = table_open(JsOwnRelid("queue"), AccessShareLock);
		Relation	queue_pkey = index_open(JsOwnRelid("queue_pkey"), AccessShareLock);
		JsQueueOptions q;
		Interval   *wait;

		if (!JsReadQueue(queuerel, queue_pkey, fence[0], NULL, &q))
			ereport(ERROR,
					(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
					 errmsg("queue \"%s\" does not exist", queue),
					 errdetail("Job %lld belongs to queue \"%s\", whose row was deleted; its retry policy is gone with it.",
							   (long long) token->job_id, queue),
					 errhint("Fail the job with class permanent or unknown, which need no retry policy.")));
		index_close(queue_pkey, NoLock);
		table_close(queuerel, NoLock);

		if (!PG_ARGISNULL(3))
			wait = PG_GETARG_INTERVAL_P(3);
		else
			wait = JsRetryDelay(&q.retry_interval, q.backoff_rate, &q.max_delay,
								q.full_jitter,
								retries < PG_INT32_MAX ? retries + 1 : retries);
		run_after = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
															TimestampTzGetDatum(GetCurrentTimestamp()),
															IntervalPGetDatum(wait)));

		/* exhaustion, in the order attempts, deadline, budget, retries */
		if (!nulls[cols->max_attempts - 1] &&
			attempts >= DatumGetInt32(values[cols->max_attempts - 1]))
			reason = "attempts_exhausted";
		else if (!nulls[cols->deadline - 1] &&
				 run_after >= DatumGetTimestampTz(values[cols->deadline - 1]))
			reason = "deadline_exceeded";
		else if (!nulls[cols->budget - 1] &&
				 JsBudgetExhaustedMeter(DatumGetJsonbP(values[cols->budget - 1]),
										DatumGetJsonbP(values[cols->spent - 1])) != NULL)
			reason = "budget_exhausted";
		else if (retries >= q.max_retries)
			reason = "retries_exhausted";
		else
			retry = true;

		to = retry ? JS_ACCEPTED : JS_FAILED;
	}

	/*
	 * A requested cancel wins over anything but an unknown outcome; the
	 * reason the cancel gave stays.
	 */
	if (DatumGetBool(values[cols->cancel_requested - 1]) && to != JS_UNKNOWN)
	{
		to = JS_CANCELLED;
		retry = false;
	}
	else
	{
		values[cols->reason - 1] = reason != NULL ? CStringGetTextDatum(reason) : (Datum) 0;
		nulls[cols->reason - 1] = reason == NULL;
	}
	if (retry)
	{
		values[cols->run_after - 1] = TimestampTzGetDatum(run_after);
		values[cols->retries - 1] =
			Int32GetDatum(JsCounterAdd(token->job_id, "retries",
									   DatumGetInt32(values[cols->retries - 1]), 1,
									   "Fail the job with class permanent, or cancel it."));
		if (strcmp(class_name, "throttled") == 0)
			values[cols->throttles - 1] =
				Int32GetDatum(JsCounterAdd(token->job_id, "throttles",
										   DatumGetInt32(values[cols->throttles - 1]), 1,
										   "Fail the job with class transient or permanent instead."));
	}

	values[cols->status - 1] = ObjectIdGetDatum(cols->status_oids[to]);
	values[cols->last_error - 1] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	nulls[cols->last_error - 1] = PG_ARGISNULL(2);
	values[cols->error_class - 1] = class;
	nulls[cols->error_class - 1] = false;
	ExecStoreVirtualTuple(c.newslot);
	JsRowWriterUpdate(&c.w, c.locked, c.newslot);
	JsCompletionEnd(&c);
	SPI_finish();
	PG_RETURN_DATUM(ObjectIdGetDatum(cols->status_oids[to]));
}

/*
 * The operator calls below name a job by id alone.  The job table has no
 * index on id by itself (every claim and completion would have to write an
 * entry in it), so the job is found by probing the primary key (queue, id)
 * once per queue, a handful of index descents for the usual few queues,
 * and locked; the update that follows names the whole key.  With the row
 * locked and its status allowing the change, an update that changes no row
 * was skipped by a trigger.
 */
#define JS_LOCK_JOB_BY_ID \
	" FROM job_state.job" \
	" WHERE queue OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT name FROM job_state.queue))" \
	"  AND id OPERATOR(pg_catalog.=) $1 FOR NO KEY UPDATE"

static JsPlan job_queue_plan = {
	"SELECT queue FROM job_state.job"
	" WHERE queue OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT name FROM job_state.queue))"
	"  AND id OPERATOR(pg_catalog.=) $1",
	1, {INT8OID}
};

static JsPlan job_lock_plan = {
	"SELECT queue, status::pg_catalog.text" JS_LOCK_JOB_BY_ID,
	1, {INT8OID}
};

/*
 * Lock job job_id by plan (whose first two columns are queue and status):
 * its status, and its queue into *queue (copied).  JS008 when there is no
 * such job, 42501 when the calling role may not operate its queue.
 */
static char *
JsLockJobById(JsPlan *plan, int64 job_id, Datum *queue)
{
	Datum		id = Int64GetDatum(job_id);
	bool		isnull;

	/* operate on the job's queue, checked before the job is locked */
	if (JsExecute(&job_queue_plan, &id, NULL, false, 1) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
				 errmsg("job %lld does not exist", (long long) job_id)));
	JsRequireQueuePrivilegeByName(JsGetDatumCopy(0, 1, &isnull), JS_QUEUE_OPERATE);

	if (JsExecute(plan, &id, NULL, false, 1) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
				 errmsg("job %lld does not exist", (long long) job_id)));
	*queue = PointerGetDatum(DatumGetTextPCopy(SPI_getbinval(SPI_tuptable->vals[0],
															 SPI_tuptable->tupdesc,
															 1, &isnull)));
	return JsGetText(0, 2);
}

/*
 * reconcile: an operator resolves an unknown job.
 * $1 id, $2 outcome, $3 detail, $4 queue
 */
static JsPlan reconcile_plan = {
	"UPDATE job_state.job SET status = $2::job_state.status,"
	"  reason = 'reconciled',"
	"  result = CASE WHEN $2 OPERATOR(pg_catalog.=) 'succeeded' THEN COALESCE($3, result)"
	"           ELSE result END,"
	"  last_error = CASE WHEN $2 OPERATOR(pg_catalog.=) 'failed' THEN COALESCE($3, last_error)"
	"               ELSE last_error END,"
	"  run_after = CASE WHEN $2 OPERATOR(pg_catalog.=) 'accepted' THEN pg_catalog.now()"
	"              ELSE run_after END"
	" WHERE queue OPERATOR(pg_catalog.=) $4 AND id OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.=) 'unknown'",
	4, {INT8OID, TEXTOID, JSONBOID, TEXTOID}
};

Datum
js_reconcile(PG_FUNCTION_ARGS)
{
	int64		job_id;
	char	   *outcome;
	char	   *status;
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};

	JsRefuseNull(fcinfo, 0, "job_id");
	JsRefuseNull(fcinfo, 1, "outcome");
	job_id = PG_GETARG_INT64(0);
	outcome = JsEnumLabel(PG_GETARG_DATUM(1));
	if (strcmp(outcome, "succeeded") != 0 && strcmp(outcome, "failed") != 0 &&
		strcmp(outcome, "accepted") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("reconcile outcome must be succeeded, failed or accepted"),
				 errdetail("The outcome given is %s.", outcome)));

	SPI_connect();
	values[0] = Int64GetDatum(job_id);
	values[1] = CStringGetTextDatum(outcome);
	values[2] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	nulls[2] = PG_ARGISNULL(2) ? 'n' : ' ';
	status = JsLockJobById(&job_lock_plan, job_id, &values[3]);
	if (strcmp(status, "unknown") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("job %lld is %s, not unknown", (long long) job_id, status),
				 errdetail("Only a job whose outcome is unknown can be reconciled."),
				 errhint("Use job_state.redrive() to run a failed or cancelled job again.")));
	if (JsExecute(&reconcile_plan, values, nulls, false, 0) == 0)
		JsRefuseSkippedUpdate();
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * redrive: an operator re-runs a failed, unknown or cancelled job.  The
 * retry-policy counter starts again; attempts, deadline and spend carry
 * over and limits rise only by what is passed.  The job trigger bumps the
 * generation, so every older token dies at once.
 */
static JsPlan redrive_lock_plan = {
	"SELECT queue, status::pg_catalog.text, budget, max_attempts" JS_LOCK_JOB_BY_ID,
	1, {INT8OID}
};

/* $1 id, $2 extra attempts, $3 extra budget, $4 new deadline, $5 queue */
static JsPlan redrive_plan = {
	"UPDATE job_state.job SET status = 'accepted', retries = 0, reason = NULL,"
	"  run_after = pg_catalog.now(),"
	"  max_attempts = max_attempts OPERATOR(pg_catalog.+) $2,"
	"  deadline = COALESCE($4, deadline),"
	"  budget = CASE WHEN $3 IS NULL THEN budget ELSE"
	"   (SELECT pg_catalog.jsonb_object_agg(b.key, CASE WHEN e.value IS NULL"
	"     THEN b.value ELSE pg_catalog.to_jsonb(b.value::pg_catalog.text::pg_catalog.numeric"
	"      OPERATOR(pg_catalog.+) e.value::pg_catalog.text::pg_catalog.numeric) END)"
	"    FROM pg_catalog.jsonb_each(budget) b"
	"    LEFT JOIN pg_catalog.jsonb_each($3) e ON e.key OPERATOR(pg_catalog.=) b.key) END"
	" WHERE queue OPERATOR(pg_catalog.=) $5 AND id OPERATOR(pg_catalog.=) $1"
	"  AND status OPERATOR(pg_catalog.=) ANY ('{failed,unknown,cancelled}'::job_state.status[])"
	" RETURNING attempts, max_attempts, deadline, budget, spent",
	5, {INT8OID, INT4OID, JSONBOID, TIMESTAMPTZOID, TEXTOID}
};

Datum
js_redrive(PG_FUNCTION_ARGS)
{
	int64		job_id;
	int32		extra_attempts;
	char	   *status;
	Datum		queue;
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	bool		isnull;
	bool		no_max;
	int32		attempts;
	int32		max_attempts;
	Datum		deadline;
	bool		no_deadline;
	Datum		budget;
	bool		no_budget;
	Datum		spent;

	JsRefuseNull(fcinfo, 0, "job_id");
	job_id = PG_GETARG_INT64(0);
	extra_attempts = PG_ARGISNULL(1) ? 0 : PG_GETARG_INT32(1);
	if (extra_attempts < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("extra_attempts must not be negative"),
				 errdetail("The value given is %d.", extra_attempts)));
	if (!PG_ARGISNULL(2))
		JsCheckBudget(PG_GETARG_JSONB_P(2));

	SPI_connect();
	status = JsLockJobById(&redrive_lock_plan, job_id, &queue);
	if (strcmp(status, "failed") != 0 && strcmp(status, "unknown") != 0 &&
		strcmp(status, "cancelled") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("job %lld is %s and cannot be redriven", (long long) job_id, status),
				 errdetail("Only failed, unknown or cancelled jobs can be redriven.")));
	/* max_attempts + extra_attempts must stay an int4 */
	if (extra_attempts > 0)
	{
		bool		no_old_max;
		int32		old_max = JsGetInt32(0, 4, &no_old_max);

		if (!no_old_max)
			(void) JsCounterAdd(job_id, "max_attempts", old_max, extra_attempts,
								"Give a smaller extra_attempts.");
	}
	if (!PG_ARGISNULL(2))
	{
		budget = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);
		JsCheckMetersKnown(job_id, isnull ? NULL : DatumGetJsonbP(budget),
						   PG_GETARG_JSONB_P(2));
	}

	values[0] = Int64GetDatum(job_id);
	values[1] = Int32GetDatum(extra_attempts);
	values[2] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	nulls[2] = PG_ARGISNULL(2) ? 'n' : ' ';
	values[3] = PG_ARGISNULL(3) ? (Datum) 0 : PG_GETARG_DATUM(3);
	nulls[3] = PG_ARGISNULL(3) ? 'n' : ' ';
	values[4] = queue;
	if (JsExecute(&redrive_plan, values, nulls, false, 0) != 1)
		JsRefuseSkippedUpdate();

	/* the limits as they are now must allow one more start */
	attempts = JsGetInt32(0, 1, NULL);
	max_attempts = JsGetInt32(0, 2, &no_max);
	deadline = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &no_deadline);
	budget = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &no_budget);
	spent = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &isnull);
	JsCheckStartAllowed(job_id, attempts, !no_max, max_attempts,
						!no_deadline, no_deadline ? 0 : DatumGetTimestampTz(deadline),
						no_budget ? NULL : DatumGetJsonbP(budget),
						isnull ? NULL : DatumGetJsonbP(spent));
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * cancel: accepted and unknown jobs are cancelled now; a running job gets
 * cancel_requested (its worker sees it on heartbeat; fail or lease expiry
 * then ends it cancelled, succeed still wins).
 */
static JsPlan cancel_plan = {
	"UPDATE job_state.job SET"
	"  status = CASE WHEN status OPERATOR(pg_catalog.=) 'running' THEN status"
	"           ELSE 'cancelled' END::job_state.status,"
	"  cancel_requested = (status OPERATOR(pg_catalog.=) 'running'),"
	"  reason = COALESCE($2, 'cancelled')"
	" WHERE queue OPERATOR(pg_catalog.=) $3 AND id OPERATOR(pg_catalog.=) $1"
	"  AND status OPERATOR(pg_catalog.=) ANY ('{accepted,running,unknown}'::job_state.status[])",
	3, {INT8OID, TEXTOID, TEXTOID}
};

Datum
js_cancel(PG_FUNCTION_ARGS)
{
	int64		job_id;
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};
	char	   *status;
	bool		result = true;

	JsRefuseNull(fcinfo, 0, "job_id");
	job_id = PG_GETARG_INT64(0);

	SPI_connect();
	values[0] = Int64GetDatum(job_id);
	values[1] = PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1);
	nulls[1] = PG_ARGISNULL(1) ? 'n' : ' ';
	status = JsLockJobById(&job_lock_plan, job_id, &values[2]);
	if (strcmp(status, "accepted") != 0 && strcmp(status, "running") != 0 &&
		strcmp(status, "unknown") != 0)
		result = strcmp(status, "cancelled") == 0;
	else if (JsExecute(&cancel_plan, values, nulls, false, 0) == 0)
		JsRefuseSkippedUpdate();
	SPI_finish();
	PG_RETURN_BOOL(result);
}
