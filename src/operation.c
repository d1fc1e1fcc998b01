/*-------------------------------------------------------------------------
 *
 * operation.c
 *	  Side effects at most once: begin_operation / finish_operation.
 *
 * A worker records each external side effect under an operation id before
 * doing it.  begin_operation answers
 *	new		 recorded as started by this generation: go ahead;
 *	done	 finished earlier: here is its result, do not repeat it;
 *	in_doubt started earlier and never finished: ask the external system,
 *			 using op_id as its idempotency key, then finish_operation.
 * abandon_operation records that the attempt which began an operation did
 * not perform it (it failed before it called the external system): the
 * operation is 'abandoned', and the next begin_operation answers new and
 * starts it again.  Only the attempt that began it may say so, under its
 * current claim: a later attempt cannot know, and a done operation stays
 * done.
 * Both calls are fenced by the token and hold the job row (FOR SHARE) for
 * the rest of the transaction, so a re-claim (which must lock the row to
 * bump the generation) cannot slip between the fence check and the write:
 * of two attempts beginning the same operation, exactly one gets "new".
 * The job_state_operation trigger keeps finished operations immutable.
 *
 * Locks: the job row (FOR SHARE), then the operation row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/trigger.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"

#include "job_state.h"
#include "token.h"

PG_FUNCTION_INFO_V1(js_begin_operation);
PG_FUNCTION_INFO_V1(js_finish_operation);
PG_FUNCTION_INFO_V1(js_abandon_operation);
PG_FUNCTION_INFO_V1(js_operation_trigger);

#define JS_SQL_OPERATION_FENCE(nonce) \
	"SELECT 1 FROM job_state.job" \
	" WHERE queue OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2 AND generation OPERATOR(pg_catalog.=) $3" \
	nonce("") \
	"  AND status OPERATOR(pg_catalog.<>) ALL ('{accepted,succeeded,failed,cancelled}'::job_state.status[])" \
	" FOR SHARE"

/* the fence (token.h): $1 queue, $2 job, $3 generation, $4 nonce; $5 op_id */
static JsPlan fence_plans[2] = {
	{JS_SQL_OPERATION_FENCE(JS_FENCE_NONE), 5, {JS_FENCE_ARGTYPES, TEXTOID}},
	{JS_SQL_OPERATION_FENCE(JS_FENCE_NONCE), 5, {JS_FENCE_ARGTYPES, TEXTOID}},
};

static JsPlan begin_plan = {
	"INSERT INTO job_state.operation (queue, job_id, op_id, generation)"
	" VALUES ($1, $2, $5, $3)"
	" ON CONFLICT (queue, job_id, op_id) DO NOTHING",
	5, {JS_FENCE_ARGTYPES, TEXTOID}
};

/* an operation met again */
static JsPlan again_plan = {
	"SELECT state, result FROM job_state.operation"
	" WHERE queue OPERATOR(pg_catalog.=) $1 AND job_id OPERATOR(pg_catalog.=) $2 AND op_id OPERATOR(pg_catalog.=) $5",
	5, {JS_FENCE_ARGTYPES, TEXTOID}
};

static JsPlan finish_plan = {
	"UPDATE job_state.operation SET state = 'done', result = $6,"
	"  generation = $3, finished_at = pg_catalog.clock_timestamp()"
	" WHERE queue OPERATOR(pg_catalog.=) $1 AND job_id OPERATOR(pg_catalog.=) $2 AND op_id OPERATOR(pg_catalog.=) $5 AND state OPERATOR(pg_catalog.=) 'started'",
	6, {JS_FENCE_ARGTYPES, TEXTOID, JSONBOID}
};

/* abandon: $3 the generation that began it */
static JsPlan abandon_plan = {
	"UPDATE job_state.operation SET state = 'abandoned', finished_at = pg_catalog.clock_timestamp()"
	" WHERE queue OPERATOR(pg_catalog.=) $1 AND job_id OPERATOR(pg_catalog.=) $2 AND op_id OPERATOR(pg_catalog.=) $5"
	"  AND state OPERATOR(pg_catalog.=) 'started' AND generation OPERATOR(pg_catalog.=) $3",
	5, {JS_FENCE_ARGTYPES, TEXTOID}
};

/* an abandoned operation begun again: new, for this generation */
static JsPlan restart_plan = {
	"UPDATE job_state.operation SET state = 'started', generation = $3,"
	"  started_at = pg_catalog.clock_timestamp(), finished_at = NULL"
	" WHERE queue OPERATOR(pg_catalog.=) $1 AND job_id OPERATOR(pg_catalog.=) $2 AND op_id OPERATOR(pg_catalog.=) $5"
	"  AND state OPERATOR(pg_catalog.=) 'abandoned'",
	5, {JS_FENCE_ARGTYPES, TEXTOID}
};

static JsPlan op_begun_plan = {
	"SELECT state, generation FROM job_state.operation"
	" WHERE queue OPERATOR(pg_catalog.=) $1 AND job_id OPERATOR(pg_catalog.=) $2 AND op_id OPERATOR(pg_catalog.=) $5",
	5, {JS_FENCE_ARGTYPES, TEXTOID}
};

static JsPlan op_state_plan = {
	"SELECT state FROM job_state.operation"
	" WHERE queue OPERATOR(pg_catalog.=) $1 AND job_id OPERATOR(pg_catalog.=) $2 AND op_id OPERATOR(pg_catalog.=) $5",
	5, {JS_FENCE_ARGTYPES, TEXTOID}
};

/* check the token, fence it and hold the job row; fills values[0..4] */
static void
JsOperationStart(FunctionCallInfo fcinfo, const char *action, Datum *values)
{
	JsClaimToken *token;
	const char *queue;

	JsRefuseNull(fcinfo, 0, "token");
	JsRefuseNull(fcinfo, 1, "op_id");
	token = PG_GETARG_CLAIM_TOKEN(0);
	JsCheckKey("op_id", text_to_cstring(PG_GETARG_TEXT_PP(1)));

	queue = JsTokenFence(token, values);
	values[4] = PG_GETARG_DATUM(1);
	if (JsExecute(JsFencePlan(fence_plans), values, NULL, false, 0) != 1)
		JsRefuseToken(queue, token, action);
}

Datum
js_begin_operation(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[5];
	Datum		out[2];
	bool		outnulls[2] = {false, true};

	JsInitMaterialized(fcinfo);
	SPI_connect();
	JsOperationStart(fcinfo, "begin_operation", values);

	if (JsExecute(&begin_plan, values, NULL, false, 0) == 1)
		out[0] = CStringGetTextDatum("new");
	else
	{
		char	   *state;

		if (JsExecute(&again_plan, values, NULL, false, 1) != 1)
			elog(ERROR, "job_state: operation vanished under its job's lock");
		state = JsGetText(0, 1);
		if (strcmp(state, "done") == 0)
		{
			out[0] = CStringGetTextDatum("done");
			out[1] = JsGetDatumCopy(0, 2, &outnulls[1]);
		}
		else if (strcmp(state, "abandoned") == 0)
		{
			/* not performed by the attempt that began it: begin again */
			if (JsExecute(&restart_plan, values, NULL, false, 0) != 1)
				elog(ERROR, "job_state: abandoned operation changed under its job's lock");
			out[0] = CStringGetTextDatum("new");
		}
		else
			out[0] = CStringGetTextDatum("in_doubt");
	}
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnulls);
	SPI_finish();
	return (Datum) 0;
}

Datum
js_finish_operation(PG_FUNCTION_ARGS)
{
	Datum		values[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};

	SPI_connect();
	JsOperationStart(fcinfo, "finish_operation", values);
	values[5] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	nulls[5] = PG_ARGISNULL(2) ? 'n' : ' ';
	if (JsExecute(&finish_plan, values, nulls, false, 0) != 1)
	{
		char	   *op_id = text_to_cstring(PG_GETARG_TEXT_PP(1));

		if (JsExecute(&op_state_plan, values, NULL, false, 1) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
					 errmsg("operation \"%s\" of job %lld was never begun", op_id,
							(long long) DatumGetInt64(values[1])),
					 errhint("Call job_state.begin_operation() before the side effect.")));
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("operation \"%s\" of job %lld is already finished", op_id,
						(long long) DatumGetInt64(values[1])),
				 errdetail("A finished operation keeps its first result.")));
	}
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * abandon_operation: the attempt that began an operation did not perform
 * it.  Fenced like finish_operation; refused for an operation another
 * attempt began (JS003: only that one knows) or finished (JS003), JS008
 * for one never begun; abandoning it again changes nothing.
 */
Datum
js_abandon_operation(PG_FUNCTION_ARGS)
{
	Datum		values[5];
	char	   *op_id;
	char	   *state;
	int32		began;
	bool		isnull;

	SPI_connect();
	JsOperationStart(fcinfo, "abandon_operation", values);
	if (JsExecute(&abandon_plan, values, NULL, false, 0) == 1)
	{
		SPI_finish();
		PG_RETURN_VOID();
	}
	op_id = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (JsExecute(&op_begun_plan, values, NULL, false, 1) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
				 errmsg("operation \"%s\" of job %lld was never begun", op_id,
						(long long) DatumGetInt64(values[1])),
				 errhint("Only an operation begun with job_state.begin_operation() can be abandoned.")));
	state = JsGetText(0, 1);
	began = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	if (strcmp(state, "done") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("operation \"%s\" of job %lld is already finished", op_id,
						(long long) DatumGetInt64(values[1])),
				 errdetail("A finished operation keeps its first result; it was performed."),
				 errhint("Later attempts get its result from job_state.begin_operation().")));
	if (strcmp(state, "abandoned") != 0 && began != DatumGetInt32(values[2]))
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("operation \"%s\" of job %lld was begun by an earlier attempt", op_id,
						(long long) DatumGetInt64(values[1])),
				 errdetail("Generation %d began it; the token's generation is %d.",
						   began, DatumGetInt32(values[2])),
				 errhint("Only the attempt that began an operation knows it did not perform it: ask the external system with op_id as its idempotency key, then call job_state.finish_operation().")));
	/* abandoned already: nothing changes */
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * job_state_operation (BEFORE ROW): a finished operation never changes;
 * operations leave only with their job, through purge.
 */
Datum
js_operation_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TriggerEvent event;
	TupleDesc	tupdesc;
	int			state_col;
	bool		isnull;
	char	   *old_state;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "job_state_operation: not called by trigger manager");
	event = trigdata->tg_event;
	if (!TRIGGER_FIRED_BEFORE(event) || !TRIGGER_FIRED_FOR_ROW(event))
		elog(ERROR, "job_state_operation: must be fired before row");
	if (js_restore || TRIGGER_FIRED_BY_INSERT(event))
		return PointerGetDatum(trigdata->tg_trigtuple);

	tupdesc = RelationGetDescr(trigdata->tg_relation);
	if (TRIGGER_FIRED_BY_DELETE(event))
	{
		if (js_purging)
			return PointerGetDatum(trigdata->tg_trigtuple);
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("operations can only be deleted with their job, by job_state.purge()")));
	}

	state_col = SPI_fnumber(tupdesc, "state");
	if (state_col <= 0)
		elog(ERROR, "job_state_operation: column state is missing");
	old_state = TextDatumGetCString(heap_getattr(trigdata->tg_trigtuple, state_col,
												tupdesc, &isnull));
	if (strcmp(old_state, "done") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("a finished operation cannot change"),
				 errdetail("The operation is done; its result is final.")));
	return PointerGetDatum(trigdata->tg_newtuple);
}
