/*-------------------------------------------------------------------------
 *
 * budget.c
 *	  charge, reserve and budget_exhausted: the SQL face of a job's cost
 *	  meters (their rules are meter.c's).
 *
 * charge records spend that happened (never refused, any MAC-valid token
 * of the job); reserve checks a planned spend against the limit for the
 * current claim, holding nothing.  Spent amounts only grow (the job
 * trigger checks it).
 *
 * Locks: charge takes the job's row lock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

#include "job_state.h"
#include "rules.h"
#include "token.h"

PG_FUNCTION_INFO_V1(js_budget_exhausted);
PG_FUNCTION_INFO_V1(js_charge);
PG_FUNCTION_INFO_V1(js_reserve);

Datum
js_budget_exhausted(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(JsBudgetExhaustedMeter(PG_GETARG_JSONB_P(0),
										  PG_ARGISNULL(1) ? NULL : PG_GETARG_JSONB_P(1)) != NULL);
}

/*
 * The arguments of charge and reserve: (token, meter, amount), none NULL,
 * amount a number of at least 0.
 */
static Numeric
JsMeterArgs(FunctionCallInfo fcinfo, JsClaimToken **token, char **meter)
{
	Numeric		amount;

	JsRefuseNull(fcinfo, 0, "token");
	JsRefuseNull(fcinfo, 1, "meter");
	JsRefuseNull(fcinfo, 2, "amount");
	*token = PG_GETARG_CLAIM_TOKEN(0);
	*meter = text_to_cstring(PG_GETARG_TEXT_PP(1));
	amount = PG_GETARG_NUMERIC(2);

	/*
	 * JSON has no infinity: to_jsonb would store 'Infinity' as a string,
	 * which no budget check would count.
	 */
	if (numeric_is_nan(amount) || numeric_is_inf(amount) ||
		DatumGetBool(DirectFunctionCall2(numeric_lt, NumericGetDatum(amount),
										 NumericGetDatum(int64_to_numeric(0)))))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("amount must be a finite number of at least 0"),
				 errdetail("The value given is %s.",
						   DatumGetCString(DirectFunctionCall1(numeric_out,
															   NumericGetDatum(amount))))));
	return amount;
}

static void
JsNoSuchMeter(int64 job_id, const char *meter)
{
	ereport(ERROR,
			(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
			 errmsg("job %lld has no meter \"%s\"", (long long) job_id, meter),
			 errhint("Meters are set by the budget argument of submit.")));
}

/*
 * charge: spend that happened.  Any token of the job whose MAC verifies is
 * accepted, also a stale one: the amount is added to job.spent and logged
 * with the token's generation in job_state.spend.  Returns what is left
 * (limit - spent, may be <= 0).
 */
static JsPlan charge_plan = {
	"WITH u AS ("
	"  UPDATE job_state.job SET spent = pg_catalog.jsonb_set(spent, ARRAY[$5],"
	"   pg_catalog.to_jsonb(COALESCE((spent OPERATOR(pg_catalog.->>) $5)::pg_catalog.numeric, 0)"
	"    OPERATOR(pg_catalog.+) $6))"
	"  WHERE queue OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2 AND budget OPERATOR(pg_catalog.?) $5"
	"  RETURNING (budget OPERATOR(pg_catalog.->>) $5)::pg_catalog.numeric"
	"   OPERATOR(pg_catalog.-) (spent OPERATOR(pg_catalog.->>) $5)::pg_catalog.numeric AS left_over),"
	" l AS (INSERT INTO job_state.spend (queue, job_id, generation, meter, amount)"
	"  SELECT $1, $2, $3, $5, $6 FROM u)"
	" SELECT left_over FROM u",
	6, {JS_FENCE_ARGTYPES, TEXTOID, NUMERICOID}
};

static JsPlan job_exists_plan = {
	"SELECT 1 FROM job_state.job WHERE queue OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2",
	2, {TEXTOID, INT8OID}
};

Datum
js_charge(PG_FUNCTION_ARGS)
{
	JsClaimToken *token;
	char	   *meter;
	Datum		values[6];
	bool		isnull;
	Datum		left_over;

	(void) JsMeterArgs(fcinfo, &token, &meter);

	SPI_connect();
	(void) JsTokenFence(token, values);
	values[4] = PG_GETARG_DATUM(1);
	values[5] = PG_GETARG_DATUM(2);
	if (JsExecute(&charge_plan, values, NULL, false, 0) != 1)
	{
		if (JsExecute(&job_exists_plan, values, NULL, false, 1) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
					 errmsg("job %lld does not exist", (long long) token->job_id)));
		JsNoSuchMeter(token->job_id, meter);
	}
	left_over = JsGetDatumCopy(0, 1, &isnull);
	SPI_finish();
	PG_RETURN_DATUM(left_over);
}

/*
 * reserve: checks that a planned spend fits (JS004 if not) for the current
 * claim.  Nothing is held; returns what would be left after it.
 */
#define JS_SQL_RESERVE(nonce) \
	"SELECT budget OPERATOR(pg_catalog.?) $5," \
	"  (budget OPERATOR(pg_catalog.->>) $5)::pg_catalog.numeric," \
	"  COALESCE((spent OPERATOR(pg_catalog.->>) $5)::pg_catalog.numeric, 0)" \
	" FROM job_state.job" \
	" WHERE queue OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2 AND generation OPERATOR(pg_catalog.=) $3" \
	nonce("") \
	"  AND status OPERATOR(pg_catalog.=) 'running'"

/* the fence (token.h): $1 queue, $2 job, $3 generation, $4 nonce; $5 meter */
static JsPlan reserve_plans[2] = {
	{JS_SQL_RESERVE(JS_FENCE_NONE), 5, {JS_FENCE_ARGTYPES, TEXTOID}},
	{JS_SQL_RESERVE(JS_FENCE_NONCE), 5, {JS_FENCE_ARGTYPES, TEXTOID}},
};

Datum
js_reserve(PG_FUNCTION_ARGS)
{
	JsClaimToken *token;
	const char *queue;
	char	   *meter;
	Numeric		amount;
	Datum		values[5];
	bool		isnull;
	Datum		limit;
	Datum		spent;
	Datum		left_over;

	amount = JsMeterArgs(fcinfo, &token, &meter);

	SPI_connect();
	queue = JsTokenFence(token, values);
	values[4] = PG_GETARG_DATUM(1);
	if (JsExecute(JsFencePlan(reserve_plans), values, NULL, false, 1) != 1)
		JsRefuseToken(queue, token, "reserve");
	if (!JsGetBool(0, 1))
		JsNoSuchMeter(token->job_id, meter);
	limit = JsGetDatumCopy(0, 2, &isnull);
	spent = JsGetDatumCopy(0, 3, &isnull);
	SPI_finish();

	left_over = DirectFunctionCall2(numeric_sub,
									DirectFunctionCall2(numeric_sub, limit, spent),
									NumericGetDatum(amount));
	if (DatumGetBool(DirectFunctionCall2(numeric_lt, left_over,
										 NumericGetDatum(int64_to_numeric(0)))))
		ereport(ERROR,
				(errcode(ERRCODE_JS_BUDGET_EXCEEDED),
				 errmsg("reserving %s of meter \"%s\" would exceed the budget of job %lld",
						DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(amount))),
						meter, (long long) token->job_id),
				 errdetail("The limit is %s and %s is spent.",
						   DatumGetCString(DirectFunctionCall1(numeric_out, limit)),
						   DatumGetCString(DirectFunctionCall1(numeric_out, spent))),
				 errhint("Plan a smaller step, or ask an operator to redrive with extra_budget.")));
	PG_RETURN_DATUM(left_over);
}
