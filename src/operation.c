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
PG_FUNCTION_INFO_V1(js_operation_trigger);

static JsPlan fence_plan = {
	"SELECT 1 FROM job_state.job"
	" WHERE queue OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2 AND generation OPERATOR(pg_catalog.=) $3"
	"  AND status OPERATOR(pg_catalog.<>) ALL ('{accepted,succeeded,failed,cancelled}'::job_state.status[])"
	" FOR SHARE",
	3, {TEXTOID, INT8OID, INT4OID}
};

static JsPlan begin_plan = {
	"INSERT INTO job_state.operation (queue, job_id, op_id, generation)"
	" VALUES ($1, $2, $4, $3)"
	" ON CONFLICT (queue, job_id, op_id) DO NOTHING",
	4, {TEXTOID, INT8OID, INT4OID, TEXTOID}
};

/* an operation met again */
static JsPlan again_plan = {
	"SELECT state, result FROM job_state.operation"
	" WHERE queue OPERATOR(pg_catalog.=) $1 AND job_id OPERATOR(pg_catalog.=) $2 AND op_id OPERATOR(pg_catalog.=) $4",
	4, {TEXTOID, INT8OID, INT4OID, TEXTOID}
};

static JsPlan finish_plan = {
	"UPDATE job_state.operation SET state = 'done', result = $5,"
	"  generation = $3, finished_at = pg_catalog.clock_timestamp()"
	" WHERE queue OPERATOR(pg_catalog.=) $1 AND job_id OPERATOR(pg_catalog.=) $2 AND op_id OPERATOR(pg_catalog.=) $4 AND state OPERATOR(pg_catalog.=) 'started'",
	5, {TEXTOID, INT8OID, INT4OID, TEXTOID, JSONBOID}
};

static JsPlan op_state_plan = {
	"SELECT state FROM job_state.operation"
	" WHERE queue OPERATOR(pg_catalog.=) $1 AND job_id OPERATOR(pg_catalog.=) $2 AND op_id OPERATOR(pg_catalog.=) $4",
	4, {TEXTOID, INT8OID, INT4OID, TEXTOID}
};

/* check the token, fence it and hold the job row; fills values[0..3] */
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
	values[3] = PG_GETARG_DATUM(1);
	if (JsExecute(&fence_plan, values, NULL, false, 0) != 1)
		JsRefuseToken(queue, token, action);
}

Datum
js_begin_operation(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[4];
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
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};

	SPI_connect();
	JsOperationStart(fcinfo, "finish_operation", values);
	values[4] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	nulls[4] = PG_ARGISNULL(2) ? 'n' : ' ';
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
