/*-------------------------------------------------------------------------
 *
 * util.c
 *	  Primitives of the SQL-callable functions that know nothing of jobs:
 *	  name and key lengths, NULL arguments, interval signs and bounds, enum
 *	  labels, set-returning output, overflow-checked counters and the end of
 *	  a top-level transaction.
 *
 * Every check raises 22023 (invalid_parameter_value), 22004 (null) or
 * 22003 (out of range) with the value given.  No SPI, no locks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"
#include "common/int128.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "job_state.h"

/*
 * Prepare fcinfo for returning rows through a tuplestore (what
 * InitMaterializedSRF does from PostgreSQL 15 on).
 *
 * The rows take the descriptor the executor expects when it passes one (a
 * function in FROM or in a select list always gets one: it is the
 * function's own result type, which the executor built when the plan
 * started).  Only without it is the result type built again from the
 * function's pg_proc row, as get_call_result_type does for every call: for
 * a RETURNS TABLE function that is a syscache lookup and a descriptor built
 * from its argument arrays, each time.
 */
void
JsInitMaterialized(FunctionCallInfo fcinfo)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		expected = rsinfo != NULL && IsA(rsinfo, ReturnSetInfo) &&
		rsinfo->expectedDesc != NULL;

#if PG_VERSION_NUM >= 150001
	InitMaterializedSRF(fcinfo, expected ? MAT_SRF_USE_EXPECTED_DESC : 0);
#elif PG_VERSION_NUM >= 150000
	/* its name in 15.0 */
	SetSingleFuncCall(fcinfo, expected ? SRF_SINGLE_USE_EXPECTED : 0);
#else
	MemoryContext oldcontext;
	TupleDesc	tupdesc;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		(rsinfo->allowedModes & SFRM_Materialize) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));

	oldcontext = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	if (expected)
		tupdesc = rsinfo->expectedDesc;
	else if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = tuplestore_begin_heap(true, false, work_mem);
	rsinfo->setDesc = CreateTupleDescCopy(tupdesc);
	MemoryContextSwitchTo(oldcontext);
#endif
}

/*
 * A backend-local hash table of entrysize-byte entries, each keyed by its
 * first keysize bytes: keykind is HASH_BLOBS (compared as bytes) or
 * HASH_STRINGS (a NUL-terminated name of at most keysize - 1 bytes).  It
 * lives in context, or in TopMemoryContext when that is NULL.
 */
HTAB *
JsHashCreate(const char *name, long nelem, Size keysize, Size entrysize,
			 int keykind, MemoryContext context)
{
	HASHCTL		ctl;
	int			flags = HASH_ELEM | keykind;

	Assert(keykind == HASH_BLOBS || keykind == HASH_STRINGS);
	ctl.keysize = keysize;
	ctl.entrysize = entrysize;
	if (context != NULL)
	{
		ctl.hcxt = context;
		flags |= HASH_CONTEXT;
	}
	return hash_create(name, nelem, &ctl, flags);
}

/*
 * Names of queues, resources, meters and schedules: 1 to 128 characters.
 */
void
JsCheckName(const char *what, const char *name)
{
	int			len = pg_mbstrlen(name);

	if (len < 1 || len > 128)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s name must have 1 to 128 characters", what),
				 errdetail("The name given has %d characters.", len)));
}

/*
 * Idempotency keys, operation ids and concurrency keys: 1 to 255 bytes.
 */
void
JsCheckKey(const char *what, const char *key)
{
	size_t		len = strlen(key);

	if (len < 1 || len > 255)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must have 1 to 255 bytes", what),
				 errdetail("The value given has %zu bytes.", len)));
}

void
JsRefuseNull(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"%s\" must not be null", argname)));
}

/* an interval's length in microseconds, months as 30 days, as interval comparison counts them */
static INT128
JsIntervalTotal(const Interval *span)
{
	INT128		total = int64_to_int128(span->time);

	int128_add_int64_mul_int64(&total, span->month, 30 * USECS_PER_DAY);
	int128_add_int64_mul_int64(&total, span->day, USECS_PER_DAY);
	return total;
}

bool
JsIntervalPositive(const Interval *span)
{
	return int128_compare(JsIntervalTotal(span), int64_to_int128(0)) > 0;
}

static bool
JsIntervalNegative(const Interval *span)
{
	return int128_compare(JsIntervalTotal(span), int64_to_int128(0)) < 0;
}

/*
 * An interval's length in microseconds, months as 30 days, clamped to the
 * int64 range (an infinite interval is the largest).
 */
int64
JsIntervalMicroseconds(const Interval *span)
{
	INT128		total = JsIntervalTotal(span);

	if (int128_compare(total, int64_to_int128(PG_INT64_MAX)) > 0)
		return PG_INT64_MAX;
	if (int128_compare(total, int64_to_int128(PG_INT64_MIN)) < 0)
		return PG_INT64_MIN;
	return int128_to_int64(total);
}

/* "<what> must not be negative" (22023) for a span given by the caller */
void
JsCheckNotNegative(const char *what, const Interval *span)
{
	if (JsIntervalNegative(span))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be negative", what)));
}

/*
 * Every span we add to a timestamp (leases, retry waits, purge ages) is at
 * most JS_MAX_SPAN_DAYS long, so that now + span is always a valid
 * timestamp and its microseconds fit an int64 with room to spare.  An
 * infinite interval (PostgreSQL 17) is longer than that too.
 */
void
JsCheckSpanBound(const char *what, const Interval *span)
{
	if (int128_compare(JsIntervalTotal(span),
					   int64_to_int128(JS_MAX_SPAN_DAYS * USECS_PER_DAY)) > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be at most %s", what, JS_MAX_SPAN_TEXT),
				 errdetail("The value given is %s.",
						   DatumGetCString(DirectFunctionCall1(interval_out,
															   IntervalPGetDatum(span)))),
				 errhint("Months count as 30 days and years as 360, as interval comparison counts them.")));
}

/*
 * value + add for an int4 counter of a job (generation, attempts, retries,
 * throttles, max_attempts), refused with 22003 where it would pass the
 * largest int4: the counters only move forward, so one that wrapped would
 * be refused as going back (or, for generation, would make every token of
 * the job look stale), after undefined behaviour in C.  Only raw SQL can
 * bring a counter that far.
 */
int32
JsCounterAdd(int64 job_id, const char *column, int32 value, int32 add,
			 const char *hint)
{
	int32		result;

	if (pg_add_s32_overflow(value, add, &result))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("%s of job %lld is out of range", column, (long long) job_id),
				 errdetail("It is %d; adding %d would pass the largest int4 (2147483647).",
						   value, add),
				 errhint("%s", hint)));
	return result;
}

/* label of an enum value */
char *
JsEnumLabel(Datum value)
{
	return DatumGetCString(DirectFunctionCall1(enum_out, value));
}

/*
 * Does event end the top-level transaction in this backend (committed,
 * aborted or prepared), so that nothing of it can run any more?
 */
bool
JsXactEnded(XactEvent event)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			return true;
		default:
			return false;
	}
}
