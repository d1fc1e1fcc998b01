/*-------------------------------------------------------------------------
 *
 * complete.c
 *	  A worker's completions: succeed, succeed_many and fail, each fenced
 *	  by the claim token.
 *
 * A completion locks its job and checks the token's fence on the locked
 * version: the generation, and the statuses it acts on (running; waiting,
 * for a callback; or unknown: a late completion that carries the current
 * generation resolves it), so a stale worker, a sweeper or a re-claim can
 * never be overwritten.  The same completion sent again (the token's
 * generation, an attempt that ended with an equal result, or with the
 * same class and error) finds its own outcome and writes nothing.  The
 * worker needs the queue's claim privilege, an external system answering
 * a waiting job its callback privilege (token.c).  fail's outcome is decided a floor down (retry.c).  The new
 * version goes through the executor's single-row update (rowwrite.c), so
 * the job triggers check and record it.
 *
 * Locks: the job's row lock; succeed_many locks its batch in (queue, id)
 * order (the global lock order, job_state.h).
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
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"

#include "job_state.h"
#include "tables.h"
#include "rowwrite.h"
#include "rules.h"
#include "token.h"

PG_FUNCTION_INFO_V1(js_succeed);
PG_FUNCTION_INFO_V1(js_succeed_many);
PG_FUNCTION_INFO_V1(js_fail);

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

/* two nullable jsonb values, equal as jsonb's = says */
static bool
JsSameJsonb(Datum a, bool a_null, Datum b, bool b_null)
{
	if (a_null || b_null)
		return a_null && b_null;
	return DatumGetBool(DirectFunctionCall2(jsonb_eq, a, b));
}

/*
 * Lock the job and check the token's fence on the locked version: its
 * generation and claim nonce (token.h), and running, waiting (a callback)
 * or unknown (a late completion).  Then newslot holds a copy to change.  JS_FENCE_STALE: the
 * token is stale (or its job gone); JS_FENCE_ENDED: the generation is the
 * token's but the attempt has ended (*status says how), which may be this
 * very completion sent again.
 */
typedef enum JsFence
{
	JS_FENCE_OK,
	JS_FENCE_ENDED,
	JS_FENCE_STALE
} JsFence;

static JsFence
JsLockFenced(JsCompletion *c, Datum queue, Datum id, int32 generation,
			 int32 nonce, JsStatus *status)
{
	const JsJobColumns *cols = c->cols;

	if (!JsLockJob(&c->w, c->pkey, queue, id, c->locked))
		return JS_FENCE_STALE;
	JsRowWriterCopy(c->newslot, c->locked);
	if (DatumGetInt32(c->newslot->tts_values[cols->generation - 1]) != generation)
		return JS_FENCE_STALE;
	if (cols->claim_nonce != 0 &&
		DatumGetInt32(c->newslot->tts_values[cols->claim_nonce - 1]) != nonce)
		return JS_FENCE_STALE;	/* a claim this server never saw */
	*status = JsStatusOfLabel(cols, c->newslot->tts_values[cols->status - 1]);
	return *status == JS_RUNNING || *status == JS_WAITING || *status == JS_UNKNOWN ?
		JS_FENCE_OK : JS_FENCE_ENDED;
}

/*
 * false: the token is stale (or its job gone).  The same success sent
 * again (a retried request whose answer was lost, a callback delivered
 * twice) finds its own outcome: it is harmless and writes nothing.
 */
static bool
JsSucceedOne(JsCompletion *c, Datum queue, Datum id, int32 generation,
			 int32 nonce, Datum result, bool result_null)
{
	const JsJobColumns *cols = c->cols;
	JsStatus	status;

	switch (JsLockFenced(c, queue, id, generation, nonce, &status))
	{
		case JS_FENCE_OK:
			break;
		case JS_FENCE_ENDED:
			return status == JS_SUCCEEDED &&
				JsSameJsonb(c->newslot->tts_values[cols->result - 1],
							c->newslot->tts_isnull[cols->result - 1],
							result, result_null);
		case JS_FENCE_STALE:
			return false;
	}
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
	Datum		values[4];
	JsCompletion c;
	bool		done;

	JsRefuseNull(fcinfo, 0, "token");
	token = PG_GETARG_CLAIM_TOKEN(0);

	SPI_connect();
	queue = JsTokenFenceCallback(token, values);
	JsCompletionBegin(&c, "succeed()");
	done = JsSucceedOne(&c, values[0], values[1], token->generation,
						DatumGetInt32(values[3]), PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1), PG_ARGISNULL(1));
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
	int32		nonce;			/* the claim nonce the token stands for */
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
	if (x->nonce != y->nonce)
		return x->nonce < y->nonce ? -1 : 1;
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
		Datum		fence[4];

		CHECK_FOR_INTERRUPTS();

		if (token_nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("tokens must not contain nulls"),
					 errdetail("Element %d is null.", i + 1)));
		token = DatumGetClaimToken(tokens[i]);
		/* the MAC of every token is checked before anything is written */
		items[i].queue = JsTokenFenceCallback(token, fence);
		items[i].job_id = token->job_id;
		items[i].generation = token->generation;
		items[i].nonce = DatumGetInt32(fence[3]);
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
			it->generation == items[i - 1].generation &&
			it->nonce == items[i - 1].nonce)
			succeeded[it->pos] = succeeded[items[i - 1].pos];	/* given twice */
		else
			succeeded[it->pos] =
				JsSucceedOne(&c, CStringGetTextDatum(it->queue), Int64GetDatum(it->job_id),
							 it->generation, it->nonce,
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
 * decided from the locked version and the queue's retry policy (retry.c)
 * and written through the same single-row update.
 */
Datum
js_fail(PG_FUNCTION_ARGS)
{
	JsClaimToken *token;
	const char *queue;
	Datum		class = PG_GETARG_DATUM(1);
	char	   *class_name;
	Datum		fence[4];
	JsCompletion c;
	const JsJobColumns *cols;
	Datum	   *values;
	bool	   *nulls;
	JsStatus	to;
	JsStatus	status = JS_RUNNING;
	JsFence		fenced;
	JsFailOutcome outcome;
	bool		retry;
	TimestampTz run_after;

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
	queue = JsTokenFenceCallback(token, fence);
	JsCompletionBegin(&c, "fail()");
	fenced = JsLockFenced(&c, fence[0], fence[1], token->generation,
						  DatumGetInt32(fence[3]), &status);
	cols = c.cols;
	values = c.newslot->tts_values;
	nulls = c.newslot->tts_isnull;
	/* the same failure sent again finds its own outcome: harmless */
	if (fenced == JS_FENCE_ENDED && !nulls[cols->error_class - 1] &&
		values[cols->error_class - 1] == class &&
		JsSameJsonb(values[cols->last_error - 1], nulls[cols->last_error - 1],
					PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2), PG_ARGISNULL(2)))
	{
		JsCompletionEnd(&c);
		SPI_finish();
		PG_RETURN_DATUM(ObjectIdGetDatum(cols->status_oids[status]));
	}
	if (fenced != JS_FENCE_OK)
	{
		JsCompletionEnd(&c);
		JsRefuseToken(queue, token, "fail");
	}

	JsDecideFail(class_name, cols, values, nulls, fence[0], queue,
				 token->job_id, PG_ARGISNULL(3) ? NULL : PG_GETARG_INTERVAL_P(3),
				 &outcome);
	to = outcome.to;
	retry = outcome.retry;
	run_after = outcome.run_after;
	if (to != JS_CANCELLED)
	{
		values[cols->reason - 1] = outcome.reason != NULL ?
			CStringGetTextDatum(outcome.reason) : (Datum) 0;
		nulls[cols->reason - 1] = outcome.reason == NULL;
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

