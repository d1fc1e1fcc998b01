/*-------------------------------------------------------------------------
 *
 * queue.c
 *	  Queue administration: create_queue, alter_queue, pause_queue and
 *	  resume_queue (a queue's options are read by tables.c).
 *
 * Options are checked here, with 22023 and a message that names the
 * option; the table's CHECK constraints repeat the rules for raw SQL
 * (retention's floor, job_state.min_retention, only here: the table
 * takes down to one second).
 * Locks: the queue row, by the statements' own row locks; the job
 * table's triggers on the queue (queue_trigger.c) take theirs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/tableam.h"
#include "executor/tuptable.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "job_state.h"
#include "acl.h"
#include "tables.h"

PG_FUNCTION_INFO_V1(js_create_queue);
PG_FUNCTION_INFO_V1(js_alter_queue);
PG_FUNCTION_INFO_V1(js_pause_queue);
PG_FUNCTION_INFO_V1(js_resume_queue);

#define JS_QUEUE_NARGS 12

/* argument positions, shared by create_queue and alter_queue */
enum
{
	ARG_NAME = 0,
	ARG_LEASE,
	ARG_MAX_LEASE,
	ARG_RETRY_INTERVAL,
	ARG_BACKOFF_RATE,
	ARG_MAX_RETRIES,
	ARG_MAX_DELAY,
	ARG_JITTER,
	ARG_MAX_ATTEMPTS,
	ARG_ON_LEASE_EXPIRY,
	ARG_CONCURRENCY_LIMIT,
	ARG_PER_KEY_LIMIT,
	ARG_RETENTION,				/* 0.2.0; not passed on the 0.1.0 schema */
	ARG_MIN_SYNC				/* 0.2.0: min_synchronous_commit */
};

static const char *const js_queue_args[JS_QUEUE_NARGS] = {
	"name", "lease", "max_lease", "retry_interval", "backoff_rate",
	"max_retries", "max_delay", "jitter", "max_attempts", "on_lease_expiry",
	"concurrency_limit", "per_key_limit"
};

/* the options that are spans added to timestamps (JsCheckSpanBound) */
static const int js_queue_span_args[] = {
	ARG_LEASE, ARG_MAX_LEASE, ARG_RETRY_INTERVAL, ARG_MAX_DELAY
};

/* the types of the arguments, in the order of js_queue_args */
#define JS_QUEUE_ARGTYPES \
	{TEXTOID, INTERVALOID, INTERVALOID, INTERVALOID, FLOAT8OID, INT4OID, \
	INTERVALOID, TEXTOID, INT4OID, TEXTOID, INT4OID, INT4OID}

static JsPlan create_plan = {
	"INSERT INTO job_state.queue (name, lease, max_lease, retry_interval,"
	"  backoff_rate, max_retries, max_delay, jitter, max_attempts,"
	"  on_lease_expiry, concurrency_limit, per_key_limit)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
	" ON CONFLICT (name) DO NOTHING RETURNING id",
	JS_QUEUE_NARGS, JS_QUEUE_ARGTYPES
};

static JsPlan alter_plan = {
	"UPDATE job_state.queue SET"
	"  lease = COALESCE($2, lease),"
	"  max_lease = COALESCE($3, max_lease),"
	"  retry_interval = COALESCE($4, retry_interval),"
	"  backoff_rate = COALESCE($5, backoff_rate),"
	"  max_retries = COALESCE($6, max_retries),"
	"  max_delay = COALESCE($7, max_delay),"
	"  jitter = COALESCE($8, jitter),"
	"  max_attempts = COALESCE($9, max_attempts),"
	"  on_lease_expiry = COALESCE($10, on_lease_expiry),"
	"  concurrency_limit = COALESCE($11, concurrency_limit),"
	"  per_key_limit = COALESCE($12, per_key_limit)"
	" WHERE name OPERATOR(pg_catalog.=) $1",
	JS_QUEUE_NARGS, JS_QUEUE_ARGTYPES
};

/*
 * retention is written by a statement of its own, so that create_queue
 * and alter_queue still work, without it, on the 0.1.0 schema (a backend
 * of the new library before ALTER EXTENSION UPDATE), where the function
 * has no retention argument and the table no column.
 */
static JsPlan retention_plan = {
	"UPDATE job_state.queue SET retention = $2 WHERE name OPERATOR(pg_catalog.=) $1",
	2, {TEXTOID, INTERVALOID}
};

/* min_synchronous_commit: a statement of its own for the same reason */
static JsPlan min_sync_plan = {
	"UPDATE job_state.queue SET min_synchronous_commit = $2 WHERE name OPERATOR(pg_catalog.=) $1",
	2, {TEXTOID, TEXTOID}
};

static JsPlan pause_plan = {
	"UPDATE job_state.queue SET paused = $2 WHERE name OPERATOR(pg_catalog.=) $1",
	2, {TEXTOID, BOOLOID}
};

/*
 * The per-queue counter of stale-token refusals (see fence.c).  The name is
 * built from our own queue number, never from input.
 */
static void
JsCreateStaleCounter(int32 queue_id)
{
	char		sql[128];

	snprintf(sql, sizeof(sql),
			 "CREATE SEQUENCE job_state.stale_refusals_%d"
			 " OWNED BY job_state.queue.id", queue_id);
	if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "job_state: could not create the stale-refusal counter");
}

static void
JsBadOption(const char *option, const char *rule)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("queue option %s %s", option, rule)));
}

/*
 * Check the options given; a NULL is refused for create_queue options that
 * have no "unset" meaning, and means "keep" for alter_queue.
 */
static void JsCheckRetention(Interval *retention);

static void
JsCheckQueueOptions(FunctionCallInfo fcinfo, bool creating)
{
	int			i;

	JsRefuseNull(fcinfo, ARG_NAME, "name");
	JsCheckName("queue", text_to_cstring(PG_GETARG_TEXT_PP(ARG_NAME)));

	if (creating)
		for (i = ARG_LEASE; i <= ARG_ON_LEASE_EXPIRY; i++)
			if (i != ARG_MAX_ATTEMPTS)
				JsRefuseNull(fcinfo, i, js_queue_args[i]);

	if (!PG_ARGISNULL(ARG_LEASE) && !JsIntervalPositive(PG_GETARG_INTERVAL_P(ARG_LEASE)))
		JsBadOption("lease", "must be positive");
	if (!PG_ARGISNULL(ARG_MAX_LEASE) && !JsIntervalPositive(PG_GETARG_INTERVAL_P(ARG_MAX_LEASE)))
		JsBadOption("max_lease", "must be positive");
	if (!PG_ARGISNULL(ARG_RETRY_INTERVAL))
		JsCheckNotNegative("queue option retry_interval", PG_GETARG_INTERVAL_P(ARG_RETRY_INTERVAL));
	for (i = 0; i < lengthof(js_queue_span_args); i++)
		if (!PG_ARGISNULL(js_queue_span_args[i]))
			JsCheckSpanBound(psprintf("queue option %s",
									  js_queue_args[js_queue_span_args[i]]),
							 PG_GETARG_INTERVAL_P(js_queue_span_args[i]));
	if (!PG_ARGISNULL(ARG_BACKOFF_RATE))
	{
		float8		rate = PG_GETARG_FLOAT8(ARG_BACKOFF_RATE);

		if (!(rate >= 1.0 && rate <= 1000.0))
			JsBadOption("backoff_rate", "must be between 1.0 and 1000.0");
	}
	if (!PG_ARGISNULL(ARG_MAX_RETRIES) && PG_GETARG_INT32(ARG_MAX_RETRIES) < 0)
		JsBadOption("max_retries", "must not be negative");
	if (!PG_ARGISNULL(ARG_MAX_DELAY))
		JsCheckNotNegative("queue option max_delay", PG_GETARG_INTERVAL_P(ARG_MAX_DELAY));
	if (!PG_ARGISNULL(ARG_JITTER))
	{
		char	   *jitter = text_to_cstring(PG_GETARG_TEXT_PP(ARG_JITTER));

		if (strcmp(jitter, "full") != 0 && strcmp(jitter, "none") != 0)
			JsBadOption("jitter", "must be \"full\" or \"none\"");
	}
	if (!PG_ARGISNULL(ARG_MAX_ATTEMPTS) && PG_GETARG_INT32(ARG_MAX_ATTEMPTS) < 1)
		JsBadOption("max_attempts", "must be at least 1");
	if (!PG_ARGISNULL(ARG_ON_LEASE_EXPIRY))
	{
		char	   *v = text_to_cstring(PG_GETARG_TEXT_PP(ARG_ON_LEASE_EXPIRY));

		if (strcmp(v, "unknown") != 0 && strcmp(v, "retry") != 0)
			JsBadOption("on_lease_expiry", "must be \"unknown\" or \"retry\"");
	}
	if (!PG_ARGISNULL(ARG_CONCURRENCY_LIMIT) && PG_GETARG_INT32(ARG_CONCURRENCY_LIMIT) < 1)
		JsBadOption("concurrency_limit", "must be at least 1");
	if (!PG_ARGISNULL(ARG_PER_KEY_LIMIT) && PG_GETARG_INT32(ARG_PER_KEY_LIMIT) < 1)
		JsBadOption("per_key_limit", "must be at least 1");
	if (PG_NARGS() > ARG_RETENTION && !PG_ARGISNULL(ARG_RETENTION))
		JsCheckRetention(PG_GETARG_INTERVAL_P(ARG_RETENTION));
	if (PG_NARGS() > ARG_MIN_SYNC && !PG_ARGISNULL(ARG_MIN_SYNC))
		JsCheckSyncCommitFloor(text_to_cstring(PG_GETARG_TEXT_PP(ARG_MIN_SYNC)));
}

/*
 * retention: '0' is "keep forever" (stored as NULL); anything else lies
 * between job_state.min_retention (one minute unless a superuser lowered
 * it) and the bound of every span.
 */
static void
JsCheckRetention(Interval *retention)
{
	Interval	floor;

	JsCheckNotNegative("queue option retention", retention);
	if (!JsIntervalPositive(retention))
		return;
	JsCheckSpanBound("queue option retention", retention);
	memset(&floor, 0, sizeof(floor));
	floor.time = (int64) js_min_retention * USECS_PER_SEC;
	if (DatumGetBool(DirectFunctionCall2(interval_lt,
										 IntervalPGetDatum(retention),
										 IntervalPGetDatum(&floor))))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("queue option retention must be at least %d seconds",
						js_min_retention),
				 errdetail("The value given is %s.",
						   DatumGetCString(DirectFunctionCall1(interval_out,
															   IntervalPGetDatum(retention)))),
				 errhint("Give '0' to keep finished jobs until purge() deletes them.")));
}

/*
 * Write the retention option if it was given (after the row's INSERT or
 * UPDATE); '0' clears it.  Needs SPI.
 */
static void
JsWriteRetention(FunctionCallInfo fcinfo)
{
	Datum		values[2];
	char		nulls[2] = {' ', ' '};

	if (PG_NARGS() <= ARG_RETENTION || PG_ARGISNULL(ARG_RETENTION))
		return;
	values[0] = PG_GETARG_DATUM(ARG_NAME);
	values[1] = PG_GETARG_DATUM(ARG_RETENTION);
	if (!JsIntervalPositive(PG_GETARG_INTERVAL_P(ARG_RETENTION)))
		nulls[1] = 'n';
	JsExecute(&retention_plan, values, nulls, false, 0);
}

/*
 * Write the durability floor if it was given; off clears it (no floor is
 * below off).  Needs SPI.
 */
static void
JsWriteMinSync(FunctionCallInfo fcinfo)
{
	Datum		values[2];
	char		nulls[2] = {' ', ' '};

	if (PG_NARGS() <= ARG_MIN_SYNC || PG_ARGISNULL(ARG_MIN_SYNC))
		return;
	values[0] = PG_GETARG_DATUM(ARG_NAME);
	values[1] = PG_GETARG_DATUM(ARG_MIN_SYNC);
	if (strcmp(text_to_cstring(PG_GETARG_TEXT_PP(ARG_MIN_SYNC)), "off") == 0)
		nulls[1] = 'n';
	JsExecute(&min_sync_plan, values, nulls, false, 0);
}

static void
JsQueueArgs(FunctionCallInfo fcinfo, Datum *values, char *nulls)
{
	int			i;

	for (i = 0; i < JS_QUEUE_NARGS; i++)
	{
		values[i] = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}
}

static void
JsNoSuchQueue(FunctionCallInfo fcinfo)
{
	ereport(ERROR,
			(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
			 errmsg("queue \"%s\" does not exist",
					text_to_cstring(PG_GETARG_TEXT_PP(ARG_NAME))),
			 errhint("Create it with job_state.create_queue().")));
}

Datum
js_create_queue(PG_FUNCTION_ARGS)
{
	Datum		values[JS_QUEUE_NARGS];
	char		nulls[JS_QUEUE_NARGS];

	JsCheckQueueOptions(fcinfo, true);
	JsQueueArgs(fcinfo, values, nulls);

	SPI_connect();
	if (JsExecute(&create_plan, values, nulls, false, 0) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("queue \"%s\" already exists",
						text_to_cstring(PG_GETARG_TEXT_PP(ARG_NAME))),
				 errhint("Use job_state.alter_queue() to change its options.")));
	/* the queue trigger creates the slots of its limits */
	JsCreateStaleCounter(JsGetInt32(0, 1, NULL));
	JsWriteRetention(fcinfo);
	JsWriteMinSync(fcinfo);
	SPI_finish();
	PG_RETURN_VOID();
}

Datum
js_alter_queue(PG_FUNCTION_ARGS)
{
	Datum		values[JS_QUEUE_NARGS];
	char		nulls[JS_QUEUE_NARGS];

	JsCheckQueueOptions(fcinfo, false);
	JsQueueArgs(fcinfo, values, nulls);

	SPI_connect();
	if (JsExecute(&alter_plan, values, nulls, false, 0) == 0)
		JsNoSuchQueue(fcinfo);
	JsWriteRetention(fcinfo);
	JsWriteMinSync(fcinfo);
	SPI_finish();
	PG_RETURN_VOID();
}

static Datum
JsSetPaused(FunctionCallInfo fcinfo, bool paused)
{
	Datum		values[2];

	values[0] = PG_GETARG_DATUM(0);
	values[1] = BoolGetDatum(paused);
	JsRequireQueuePrivilegeByName(values[0], JS_QUEUE_OPERATE);
	SPI_connect();
	if (JsExecute(&pause_plan, values, NULL, false, 0) == 0)
		JsNoSuchQueue(fcinfo);
	SPI_finish();
	PG_RETURN_VOID();
}

Datum
js_pause_queue(PG_FUNCTION_ARGS)
{
	return JsSetPaused(fcinfo, true);
}

Datum
js_resume_queue(PG_FUNCTION_ARGS)
{
	return JsSetPaused(fcinfo, false);
}
