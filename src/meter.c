/*-------------------------------------------------------------------------
 *
 * meter.c
 *	  The rules of a job's cost meters: limits (job.budget) and what was
 *	  spent (job.spent), both JSON objects of meter name to number.
 *
 * A meter's limit or spend is a number (never NaN) of at least 0.  A job
 * whose spent amount of any meter has reached its limit is used up and is
 * never started again; the start checks run in the order attempts (JS005),
 * deadline (JS006), budget (JS004).  A new spent object is an object of
 * such numbers, and no meter of the old one goes back (JS003, for the job
 * trigger).  No SPI, no locks: the callers hold
 * the job's row.
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

/* a meter's limit or spend: a number (never NaN) of at least 0 */
bool
JsMeterAmountValid(const JsonbValue *v)
{
	return v->type == jbvNumeric &&
		!numeric_is_nan(v->val.numeric) &&
		!DatumGetBool(DirectFunctionCall2(numeric_lt,
										  NumericGetDatum(v->val.numeric),
										  NumericGetDatum(int64_to_numeric(0))));
}

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

		CHECK_FOR_INTERRUPTS();
		if (tok != WJB_KEY)
			continue;
		meter = pnstrdup(v.val.string.val, v.val.string.len);
		JsCheckName("meter", meter);
		(void) JsonbIteratorNext(&it, &v, true);
		if (!JsMeterAmountValid(&v))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("budget limit of meter \"%s\" must be a number of at least 0",
							meter)));
	}
}

/*
 * The first meter whose spend has reached its limit, or NULL.  A spend that
 * is not a number (only raw SQL could write one) counts as used up: an
 * amount we cannot read never lets a job run past its limit.
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

		CHECK_FOR_INTERRUPTS();
		if (tok != WJB_KEY)
			continue;
		key = v;
		(void) JsonbIteratorNext(&it, &v, true);
		if (v.type != jbvNumeric)
			continue;
		if (spent != NULL && JB_ROOT_IS_OBJECT(spent))
			used = getKeyJsonValueFromContainer(&spent->root, key.val.string.val,
												key.val.string.len, NULL);
		if (used != NULL && used->type != jbvNumeric)
			return pnstrdup(key.val.string.val, key.val.string.len);
		zero = int64_to_numeric(0);
		if (DatumGetInt32(DirectFunctionCall2(numeric_cmp,
											  NumericGetDatum(used != NULL ? used->val.numeric : zero),
											  NumericGetDatum(v.val.numeric))) >= 0)
			return pnstrdup(key.val.string.val, key.val.string.len);
	}
	return NULL;
}

/* which limit forbids a start, checked in the order attempts, deadline, budget */
typedef enum JsStartLimit
{
	JS_START_ALLOWED,
	JS_START_ATTEMPTS,
	JS_START_DEADLINE,
	JS_START_BUDGET
} JsStartLimit;

/* the reasons (SPEC 6) of the limits, by JsStartLimit */
static const char *const js_start_limit_reasons[] = {
	NULL, "attempts_exhausted", "deadline_exceeded", "budget_exhausted"
};

/* the used-up meter into *meter for JS_START_BUDGET, NULL otherwise */
static JsStartLimit
JsStartLimitUsed(int32 attempts, bool has_max, int32 max_attempts,
				 bool has_deadline, TimestampTz deadline,
				 Jsonb *budget, Jsonb *spent, char **meter)
{
	*meter = NULL;
	if (has_max && attempts >= max_attempts)
		return JS_START_ATTEMPTS;
	if (has_deadline && deadline <= GetCurrentTimestamp())
		return JS_START_DEADLINE;
	*meter = budget != NULL ? JsBudgetExhaustedMeter(budget, spent) : NULL;
	if (*meter != NULL)
		return JS_START_BUDGET;
	return JS_START_ALLOWED;
}

/*
 * Why a job with these limits may not start, as its reason (SPEC 6), or
 * NULL when it may.  The used-up meter into *meter.
 */
const char *
JsStartRefusal(int32 attempts, bool has_max, int32 max_attempts,
			   bool has_deadline, TimestampTz deadline,
			   Jsonb *budget, Jsonb *spent, char **meter)
{
	return js_start_limit_reasons[JsStartLimitUsed(attempts, has_max, max_attempts,
												   has_deadline, deadline,
												   budget, spent, meter)];
}

/*
 * Refuse to start a job whose limits are used up, checked in the order
 * attempts (JS005), deadline (JS006), budget (JS004).  Used by the job
 * trigger for every start and by redrive for the run it would allow.
 */
void
JsCheckStartAllowed(int64 job_id, int32 attempts, bool has_max, int32 max_attempts,
					bool has_deadline, TimestampTz deadline,
					Jsonb *budget, Jsonb *spent)
{
	char	   *meter;

	switch (JsStartLimitUsed(attempts, has_max, max_attempts, has_deadline,
							 deadline, budget, spent, &meter))
	{
		case JS_START_ALLOWED:
			return;
		case JS_START_ATTEMPTS:
			ereport(ERROR,
					(errcode(ERRCODE_JS_ATTEMPTS_EXHAUSTED),
					 errmsg("job %lld has used all its attempts", (long long) job_id),
					 errdetail("It has made %d of %d attempts.", attempts, max_attempts),
					 errhint("Redrive it with extra_attempts to run it again.")));
			break;
		case JS_START_DEADLINE:
			ereport(ERROR,
					(errcode(ERRCODE_JS_DEADLINE_EXCEEDED),
					 errmsg("job %lld is past its deadline", (long long) job_id),
					 errdetail("The deadline is %s.", timestamptz_to_str(deadline)),
					 errhint("Redrive it with new_deadline to run it again.")));
			break;
		case JS_START_BUDGET:
			ereport(ERROR,
					(errcode(ERRCODE_JS_BUDGET_EXCEEDED),
					 errmsg("job %lld has used up its budget", (long long) job_id),
					 errdetail("Meter \"%s\" has reached its limit.", meter),
					 errhint("Redrive it with extra_budget to raise the limit of meter \"%s\".", meter)));
			break;
	}
}

/*
 * The first meter of extra that is not a meter of the job's budget, or
 * NULL.
 */
char *
JsUnknownMeter(Jsonb *budget, Jsonb *extra)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	it = JsonbIteratorInit(&extra->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		CHECK_FOR_INTERRUPTS();
		if (tok != WJB_KEY)
			continue;
		if (budget == NULL ||
			getKeyJsonValueFromContainer(&budget->root, v.val.string.val,
										 v.val.string.len, NULL) == NULL)
			return pnstrdup(v.val.string.val, v.val.string.len);
	}
	return NULL;
}

/*
 * Every meter of extra must be a meter of the job's budget (JS008).
 */
void
JsCheckMetersKnown(int64 job_id, Jsonb *budget, Jsonb *extra)
{
	char	   *meter = JsUnknownMeter(budget, extra);

	if (meter != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
				 errmsg("job %lld has no meter \"%s\"", (long long) job_id, meter),
				 errhint("Meters are set by the budget argument of submit.")));
}

/*
 * Every amount of a new spent object is a number of at least 0: the budget
 * checks compare numbers, and a string such as "Infinity" would slip past
 * them.
 */
static void
JsCheckSpentNumbers(int64 job_id, Jsonb *newspent)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	JsonbValue	key = {0};

	it = JsonbIteratorInit(&newspent->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		CHECK_FOR_INTERRUPTS();
		if (tok == WJB_KEY)
		{
			key = v;
			continue;
		}
		if (tok != WJB_VALUE)
			continue;
		if (!JsMeterAmountValid(&v))
			ereport(ERROR,
					(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
					 errmsg("spent amount \"%.*s\" of job %lld must be a number of at least 0",
							key.val.string.len, key.val.string.val,
							(long long) job_id)));
	}
}

/*
 * Every meter in the old spent object must be in the new one with an
 * amount that is not smaller, and every new amount a number.
 */
void
JsCheckSpentForward(int64 job_id, Jsonb *oldspent, Jsonb *newspent)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	if (!JB_ROOT_IS_OBJECT(newspent) || JB_ROOT_IS_SCALAR(newspent))
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("spent of job %lld must be a JSON object", (long long) job_id)));
	JsCheckSpentNumbers(job_id, newspent);
	if (!JB_ROOT_IS_OBJECT(oldspent) || JB_ROOT_IS_SCALAR(oldspent))
		return;

	it = JsonbIteratorInit(&oldspent->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		JsonbValue	key;
		JsonbValue *newval;

		CHECK_FOR_INTERRUPTS();
		if (tok != WJB_KEY)
			continue;
		key = v;
		tok = JsonbIteratorNext(&it, &v, true);
		if (v.type != jbvNumeric)
			continue;
		newval = getKeyJsonValueFromContainer(&newspent->root, key.val.string.val,
											  key.val.string.len, NULL);
		if (newval == NULL || newval->type != jbvNumeric ||
			DatumGetInt32(DirectFunctionCall2(numeric_cmp,
											  NumericGetDatum(newval->val.numeric),
											  NumericGetDatum(v.val.numeric))) < 0)
			ereport(ERROR,
					(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
					 errmsg("spent amount \"%.*s\" of job %lld cannot go back",
							key.val.string.len, key.val.string.val,
							(long long) job_id),
					 errdetail("It is %s.",
							   DatumGetCString(DirectFunctionCall1(numeric_out,
																   NumericGetDatum(v.val.numeric))))));
	}
}
