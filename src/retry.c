/*-------------------------------------------------------------------------
 *
 * retry.c
 *	  The retry policy, with AWS Step Functions semantics.
 *
 * The n-th retry (n >= 1) waits min(retry_interval * backoff_rate^(n-1),
 * max_delay); with full jitter the wait is drawn uniformly from [0, that].
 * The random draws come from a pg_prng state seeded once per backend from
 * the strong random source.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#if PG_VERSION_NUM >= 150000
#include "common/pg_prng.h"
#endif
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "job_state.h"

PG_FUNCTION_INFO_V1(js_retry_delay);

#if PG_VERSION_NUM >= 150000
static pg_prng_state js_prng;
#else
static unsigned short js_prng[3];
#endif
static bool js_prng_seeded = false;

/* uniform in [0, 1) */
static double
JsRandom(void)
{
	if (!js_prng_seeded)
	{
#if PG_VERSION_NUM >= 150000
		if (!pg_prng_strong_seed(&js_prng))
			pg_prng_seed(&js_prng, (uint64) GetCurrentTimestamp() ^ (uint64) MyProcPid);
#else
		if (!pg_strong_random(js_prng, sizeof(js_prng)))
			js_prng[0] = (unsigned short) MyProcPid;
#endif
		js_prng_seeded = true;
	}
#if PG_VERSION_NUM >= 150000
	return pg_prng_double(&js_prng);
#else
	return pg_erand48(js_prng);
#endif
}

/* microseconds of an interval, months as 30 days */
static double
JsIntervalUsecs(const Interval *span)
{
	return (double) span->month * 30 * USECS_PER_DAY +
		(double) span->day * USECS_PER_DAY + (double) span->time;
}

Interval *
JsRetryDelay(const Interval *retry_interval, double backoff_rate,
			 const Interval *max_delay, bool full_jitter, int32 retry)
{
	Interval   *result = palloc0(sizeof(Interval));
	double		cap = JsIntervalUsecs(max_delay);
	double		wait;

	if (retry < 1)
		retry = 1;
	wait = JsIntervalUsecs(retry_interval) * pow(backoff_rate, (double) (retry - 1));
	if (isnan(wait) || wait > cap)
		wait = cap;

	/*
	 * Options set by raw SQL may exceed the bounds create_queue checks: no
	 * wait is longer than JS_MAX_SPAN_DAYS, so the cast below and now +
	 * wait never overflow, whatever one queue's policy says.
	 */
	if (isnan(wait) || wait > (double) (JS_MAX_SPAN_DAYS * USECS_PER_DAY))
		wait = (double) (JS_MAX_SPAN_DAYS * USECS_PER_DAY);
	if (wait < 0)
		wait = 0;
	if (full_jitter)
		wait = floor(JsRandom() * (wait + 1));	/* uniform over [0, wait] */
	result->time = (TimeOffset) wait;
	return result;
}

Datum
js_retry_delay(PG_FUNCTION_ARGS)
{
	Interval   *retry_interval = PG_GETARG_INTERVAL_P(0);
	float8		backoff_rate = PG_GETARG_FLOAT8(1);
	Interval   *max_delay = PG_GETARG_INTERVAL_P(2);
	char	   *jitter = text_to_cstring(PG_GETARG_TEXT_PP(3));
	int32		retry = PG_GETARG_INT32(4);
	bool		full;

	if (strcmp(jitter, "full") == 0)
		full = true;
	else if (strcmp(jitter, "none") == 0)
		full = false;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("jitter must be \"full\" or \"none\""),
				 errdetail("The value given is \"%s\".", jitter)));
	if (retry < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("retry number must be at least 1"),
				 errdetail("The value given is %d.", retry)));

	PG_RETURN_INTERVAL_P(JsRetryDelay(retry_interval, backoff_rate, max_delay,
									  full, retry));
}
