/*-------------------------------------------------------------------------
 *
 * job_state.c
 *	  Module entry point, GUCs and the argument checks shared by the
 *	  SQL-callable functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"
#include "common/int128.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "utils/rel.h"

#include "job_state.h"

PG_MODULE_MAGIC;

bool		js_track_events = true;
int			js_notify = JS_NOTIFY_ON;
int			js_notify_interval = 10;
bool		js_restore = false;
bool		js_drop_live_jobs = false;
int			js_sweep_interval = 1000;
char	   *js_database = NULL;

void		_PG_init(void);

static const struct config_enum_entry js_notify_options[] = {
	{"on", JS_NOTIFY_ON, false},
	{"off", JS_NOTIFY_OFF, false},
	{"commit", JS_NOTIFY_COMMIT, false},
	{"true", JS_NOTIFY_ON, true},
	{"false", JS_NOTIFY_OFF, true},
	{"yes", JS_NOTIFY_ON, true},
	{"no", JS_NOTIFY_OFF, true},
	{"1", JS_NOTIFY_ON, true},
	{"0", JS_NOTIFY_OFF, true},
	{NULL, 0, false}
};

void
_PG_init(void)
{
	DefineCustomBoolVariable("job_state.track_events",
							 "Records every job state change in job_state.job_event.",
							 NULL,
							 &js_track_events,
							 true,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("job_state.notify",
							 "Sends NOTIFY job_state with the queue name after submit creates a job.",
							 "on: the notifier worker sends it where it serves this database, else the submitting transaction; commit: always the submitting transaction; off: nobody.",
							 &js_notify,
							 JS_NOTIFY_ON,
							 js_notify_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("job_state.restore",
							 "Lets a restore write job rows as they were dumped.",
							 "Only for pg_restore or psql replaying a dump; the state machine is not checked while it is on.",
							 &js_restore,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("job_state.check_statement_names",
							 "Refuses any statement of job_state that resolves a name outside pg_catalog and job_state.",
							 "A testing aid: the test suites run with it on under a hostile search_path.",
							 &js_check_statement_names,
							 false,
							 PGC_SUSET,
							 GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("job_state.drop_live_jobs",
							 "Lets DROP EXTENSION job_state delete jobs that are not finished.",
							 "Off: the drop is refused while accepted, running or unknown jobs exist (drop_guard.c).  Set it only in the session that drops the extension on purpose.",
							 &js_drop_live_jobs,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("job_state.sweep_interval",
							"Time between two rounds of the background worker (lease expiry and schedules).",
							"Used only when job_state is in shared_preload_libraries.",
							&js_sweep_interval,
							1000, 10, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("job_state.claim_rescan_interval",
							"Longest time claim resumes after this session's last claim in a queue before it scans the queue from its start again.",
							"Resuming skips the index entries of jobs already taken; a job that becomes ready behind the resume point waits at most this long while the queue has other ready jobs.  0 scans from the start every time (strict claim order).",
							&js_claim_rescan_interval,
							1000, 0, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	JsClaimMarkInit();

	/* PGC_POSTMASTER settings and workers only while preloading */
	if (process_shared_preload_libraries_in_progress)
	{
		DefineCustomStringVariable("job_state.database",
								   "Database the background worker sweeps.",
								   "The job_state extension must be installed there; until it is, the worker waits.",
								   &js_database,
								   "postgres",
								   PGC_POSTMASTER,
								   0,
								   NULL, NULL, NULL);
		DefineCustomIntVariable("job_state.notify_interval",
								"Shortest time between two rounds of the notifier worker.",
								"Wake-ups of new jobs that come during it are sent together after it, one NOTIFY per queue.  0 sends each round at once.",
								&js_notify_interval,
								10, 0, 1000,
								PGC_SIGHUP,
								GUC_UNIT_MS,
								NULL, NULL, NULL);
		JsRegisterSweeper();
		JsRegisterNotifier();
	}

#if PG_VERSION_NUM >= 150000
	MarkGUCPrefixReserved("job_state");
#else
	EmitWarningsOnPlaceholders("job_state");
#endif
}

/*
 * Prepare fcinfo for returning rows through a tuplestore (what
 * InitMaterializedSRF does from PostgreSQL 15 on).
 */
void
JsInitMaterialized(FunctionCallInfo fcinfo)
{
#if PG_VERSION_NUM >= 150001
	InitMaterializedSRF(fcinfo, 0);
#elif PG_VERSION_NUM >= 150000
	SetSingleFuncCall(fcinfo, 0);	/* its name in 15.0 */
#else
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext oldcontext;
	TupleDesc	tupdesc;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		(rsinfo->allowedModes & SFRM_Materialize) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));

	oldcontext = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = tuplestore_begin_heap(true, false, work_mem);
	rsinfo->setDesc = CreateTupleDescCopy(tupdesc);
	MemoryContextSwitchTo(oldcontext);
#endif
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

bool
JsIntervalNegative(const Interval *span)
{
	return int128_compare(JsIntervalTotal(span), int64_to_int128(0)) < 0;
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

/* attribute number of a column of one of our tables; it must be there */
int
JsColumnNumber(Relation rel, const char *name)
{
	int			attnum = SPI_fnumber(RelationGetDescr(rel), name);

	if (attnum <= 0)
		elog(ERROR, "job_state: column %s.%s is missing",
			 RelationGetRelationName(rel), name);
	return attnum;
}
