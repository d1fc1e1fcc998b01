/*-------------------------------------------------------------------------
 *
 * retry.c
 *	  The retry policy, with AWS Step Functions semantics.
 *
 * The n-th retry (n >= 1) waits min(retry_interval * backoff_rate^(n-1),
 * max_delay); with full jitter the wait is drawn uniformly from [0, that].
 * The random draws come from a pg_prng state seeded once per backend from
 * the strong random source.  fail's whole decision lives here too
 * (JsDecideFail): which status a failed attempt leads to, and when a retry
 * may run.
 *
 * Locks: AccessShareLock on the queue table while reading its policy.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#if PG_VERSION_NUM >= 150000
#include "common/pg_prng.h"
#endif
#include "access/genam.h"
#include "access/table.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "job_state.h"
#include "tables.h"
#include "rules.h"

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

/*
 * fail's outcome for the locked version of a job (values, nulls, by the
 * job table's columns) failed with class_name: permanent and unknown end
 * the job as failed and unknown; transient and throttled retry it unless
 * its attempts, deadline (judged at the retry's start), budget or retries
 * are used up, in that order.  retry_after (NULL: the queue's policy) is
 * the wait before the retry.  A requested cancel wins over anything but
 * an unknown outcome, and keeps the reason the cancel gave.  The queue's
 * policy is read under the active snapshot.
 */
void
JsDecideFail(const char *class_name, const JsJobColumns *cols,
			 const Datum *values, const bool *nulls, Datum queue,
			 const char *queue_name, int64 job_id,
			 const Interval *retry_after, JsFailOutcome *out)
{
	out->to = JS_FAILED;
	out->reason = NULL;
	out->retry = false;
	out->run_after = 0;

	if (strcmp(class_name, "permanent") == 0)
	{
		out->to = JS_FAILED;
		out->reason = "permanent_error";
	}
	else if (strcmp(class_name, "unknown") == 0)
	{
		out->to = JS_UNKNOWN;
		out->reason = "outcome_unknown";
	}
	else
	{
		int32		attempts = DatumGetInt32(values[cols->attempts - 1]);
		int32		retries = DatumGetInt32(values[cols->retries - 1]);
		JsQueueOptions q;
		Interval   *wait;

		if (!JsReadQueueCached(queue, NULL, &q))
			ereport(ERROR,
					(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
					 errmsg("queue \"%s\" does not exist", queue_name),
					 errdetail("Job %lld belongs to queue \"%s\", whose row was deleted; its retry policy is gone with it.",
							   (long long) job_id, queue_name),
					 errhint("Fail the job with class permanent or unknown, which need no retry policy.")));

		if (retry_after != NULL)
			wait = (Interval *) retry_after;
		else
			wait = JsRetryDelay(&q.retry_interval, q.backoff_rate, &q.max_delay,
								q.full_jitter,
								retries < PG_INT32_MAX ? retries + 1 : retries);
		out->run_after = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
															TimestampTzGetDatum(GetCurrentTimestamp()),
															IntervalPGetDatum(wait)));

		/* exhaustion, in the order attempts, deadline, budget, retries */
		if (!nulls[cols->max_attempts - 1] &&
			attempts >= DatumGetInt32(values[cols->max_attempts - 1]))
			out->reason = "attempts_exhausted";
		else if (!nulls[cols->deadline - 1] &&
				 out->run_after >= DatumGetTimestampTz(values[cols->deadline - 1]))
			out->reason = "deadline_exceeded";
		else if (!nulls[cols->budget - 1] &&
				 JsBudgetExhaustedMeter(DatumGetJsonbP(values[cols->budget - 1]),
										DatumGetJsonbP(values[cols->spent - 1])) != NULL)
			out->reason = "budget_exhausted";
		else if (retries >= q.max_retries)
			out->reason = "retries_exhausted";
		else
			out->retry = true;

		out->to = out->retry ? JS_ACCEPTED : JS_FAILED;
	}

	/*
	 * A requested cancel wins over anything but an unknown outcome; the
	 * reason the cancel gave stays.
	 */
	if (DatumGetBool(values[cols->cancel_requested - 1]) && out->to != JS_UNKNOWN)
	{
		out->to = JS_CANCELLED;
		out->retry = false;
	}
}
