/*-------------------------------------------------------------------------
 *
 * budget.c
 *	  Per-job cost meters: limits (job.budget) and what was spent
 *	  (job.spent), both JSON objects of meter name to number.
 *
 * A job whose spent amount of any meter has reached its limit is used up
 * and is never started again.  Spent amounts only grow (the job trigger
 * checks it).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "job_state.h"

PG_FUNCTION_INFO_V1(js_budget_exhausted);

/*
 * A budget is an object of meter names to limits (numbers >= 0).
 */
void
JsCheckBudget(Jsonb *budget)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	if (!JB_ROOT_IS_OBJECT(budget) || JB_ROOT_IS_SCALAR(budget))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("budget must be a JSON object of meter names to limits"),
				 errhint("For example: '{\"usd_cents\": 500, \"tokens\": 200000}'.")));

	it = JsonbIteratorInit(&budget->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char	   *meter;

		if (tok != WJB_KEY)
			continue;
		meter = pnstrdup(v.val.string.val, v.val.string.len);
		JsCheckName("meter", meter);
		(void) JsonbIteratorNext(&it, &v, true);
		if (v.type != jbvNumeric ||
			numeric_is_nan(v.val.numeric) ||
			DatumGetBool(DirectFunctionCall2(numeric_lt,
											 NumericGetDatum(v.val.numeric),
											 NumericGetDatum(int64_to_numeric(0)))))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("budget limit of meter \"%s\" must be a number of at least 0",
							meter)));
	}
}

/*
 * The first meter whose spend has reached its limit, or NULL.
 */
char *
JsBudgetExhaustedMeter(Jsonb *budget, Jsonb *spent)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	if (budget == NULL || !JB_ROOT_IS_OBJECT(budget) || JB_ROOT_IS_SCALAR(budget))
		return NULL;

	it = JsonbIteratorInit(&budget->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		JsonbValue	key;
		JsonbValue *used = NULL;
		Numeric		zero;

		if (tok != WJB_KEY)
			continue;
		key = v;
		(void) JsonbIteratorNext(&it, &v, true);
		if (v.type != jbvNumeric)
			continue;
		if (spent != NULL && JB_ROOT_IS_OBJECT(spent))
			used = getKeyJsonValueFromContainer(&spent->root, key.val.string.val,
												key.val.string.len, NULL);
		zero = int64_to_numeric(0);
		if (DatumGetInt32(DirectFunctionCall2(numeric_cmp,
											  NumericGetDatum(used != NULL && used->type == jbvNumeric ?
															  used->val.numeric : zero),
											  NumericGetDatum(v.val.numeric))) >= 0)
			return pnstrdup(key.val.string.val, key.val.string.len);
	}
	return NULL;
}

Datum
js_budget_exhausted(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(JsBudgetExhaustedMeter(PG_GETARG_JSONB_P(0),
										  PG_ARGISNULL(1) ? NULL : PG_GETARG_JSONB_P(1)) != NULL);
}
