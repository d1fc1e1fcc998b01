/*-------------------------------------------------------------------------
 *
 * schedule.c
 *	  Periodic submits: job_state.schedule(), unschedule(), and
 *	  JsRunSchedules, which sweep() (and so the background worker) calls.
 *
 * A schedule row names a cron expression (UTC, see cron.c), a queue and an
 * input.  At each sweep, a schedule whose latest tick t <= now() is later
 * than its last_tick (or, never having ticked, not earlier than created_at
 * truncated to the minute) submits one job with idempotency key
 * "name@YYYY-MM-DDTHH:MIZ" (t in UTC) and sets last_tick = t.  Only the
 * latest missed tick is submitted after downtime.  The key makes the tick
 * idempotent: two sweepers, a stale last_tick or a failover that lost the
 * last_tick update can only find the job already there, never double it.
 *
 * Clock steps back: a last_tick ahead of now() would hold every tick back
 * until the clock passed it, the step and up to a cron period more.  Such
 * a schedule is due at once: its latest tick <= now() is submitted (or
 * found already there, for the step replays ticks already done) and
 * last_tick moves back to it.  A schedule that never ticked and whose
 * created_at is ahead of now() counts from now() (rebase_plan).  So a step
 * back never stalls a schedule; a step forward and back again submits at
 * most the ticks the forward clock saw.
 *
 * Locks: the due rows of job_state.schedule, FOR UPDATE SKIP LOCKED, so
 * two sweepers never wait on each other (the one that skips a row leaves
 * that tick to the other); then submit's locks (the idempotency key's
 * index entry).  Each due schedule runs in its own subtransaction: one
 * schedule that cannot submit (its queue is gone, its key was taken with
 * another input) gets a WARNING and is tried again at the next sweep,
 * without holding back the others or the lease expiry of the same sweep.
 * A query cancel is not swallowed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "pgtime.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "job_state.h"
#include "acl.h"
#include "cron.h"

PG_FUNCTION_INFO_V1(js_schedule);
PG_FUNCTION_INFO_V1(js_unschedule);

/* "@YYYY-MM-DDTHH:MIZ" after the name, and keys have at most 255 bytes */
#define JS_TICK_SUFFIX_LEN 18
#define JS_SCHEDULE_NAME_MAX_BYTES (255 - JS_TICK_SUFFIX_LEN)

static JsPlan queue_exists_plan = {
	"SELECT 1 FROM job_state.queue WHERE name OPERATOR(pg_catalog.=) $1",
	1, {TEXTOID}
};

static JsPlan insert_plan = {
	"INSERT INTO job_state.schedule (name, cron, queue, input)"
	" VALUES ($1, $2, $3, $4)"
	" ON CONFLICT (name) DO NOTHING",
	4, {TEXTOID, TEXTOID, TEXTOID, JSONBOID}
};

static JsPlan delete_plan = {
	"DELETE FROM job_state.schedule WHERE name OPERATOR(pg_catalog.=) $1",
	1, {TEXTOID}
};

/*
 * The due schedules with their latest tick.  FOR UPDATE re-checks the
 * WHERE clause on the newest row version, so a tick another sweeper has
 * just committed is not due any more.
 */
static JsPlan due_plan = {
	"SELECT s.name, s.queue, s.input, d.tick"
	" FROM job_state.schedule s"
	" CROSS JOIN LATERAL (SELECT job_state.cron_prev(s.cron, pg_catalog.now())) d(tick)"
	" WHERE d.tick IS NOT NULL AND CASE WHEN s.last_tick IS NULL"
	"  THEN d.tick OPERATOR(pg_catalog.>=)"
	"   pg_catalog.date_trunc('minute', s.created_at, 'UTC')"
	"  ELSE d.tick OPERATOR(pg_catalog.>) s.last_tick"
	"   OR s.last_tick OPERATOR(pg_catalog.>) pg_catalog.now() END"
	" ORDER BY s.name"
	" FOR UPDATE OF s SKIP LOCKED",
	0, {0}
};

/*
 * A schedule that has never ticked and was created ahead of now (the clock
 * stepped back since) counts from now: it would otherwise wait for the
 * clock to reach created_at and then for the next tick after it, which for
 * a daily cron is a day more than the step.  SKIP LOCKED as above.
 */
static JsPlan rebase_plan = {
	"UPDATE job_state.schedule s SET created_at = pg_catalog.now()"
	" FROM (SELECT name FROM job_state.schedule"
	"  WHERE last_tick IS NULL AND created_at OPERATOR(pg_catalog.>) pg_catalog.now()"
	"  FOR UPDATE SKIP LOCKED) r"
	" WHERE s.name OPERATOR(pg_catalog.=) r.name",
	0, {0}
};

static JsPlan submit_plan = {
	"SELECT job_id, created"
	" FROM job_state.submit($1, $2, idempotency_key => $3)",
	3, {TEXTOID, JSONBOID, TEXTOID}
};

static JsPlan advance_plan = {
	"UPDATE job_state.schedule SET last_tick = $2 WHERE name OPERATOR(pg_catalog.=) $1",
	2, {TEXTOID, TIMESTAMPTZOID}
};

/*
 * The idempotency key of a tick: name@YYYY-MM-DDTHH:MIZ, the tick in UTC
 * (what to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI"Z"') gives).
 */
static char *
JsTickKey(const char *name, TimestampTz tick)
{
	struct pg_tm tm;
	fsec_t		fsec;

	if (timestamp2tm(tick, NULL, &tm, &fsec, NULL, NULL) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	return psprintf("%s@%04d-%02d-%02dT%02d:%02dZ", name,
					tm.tm_year, tm.tm_mon, tm.tm_mday, tm.tm_hour, tm.tm_min);
}

Datum
js_schedule(PG_FUNCTION_ARGS)
{
	char	   *name;
	char	   *cron_text;
	char	   *queue;
	JsCron		cron;
	Datum		values[4];

	JsRefuseNull(fcinfo, 0, "name");
	JsRefuseNull(fcinfo, 1, "cron");
	JsRefuseNull(fcinfo, 2, "queue");
	JsRefuseNull(fcinfo, 3, "input");
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	cron_text = text_to_cstring(PG_GETARG_TEXT_PP(1));
	queue = text_to_cstring(PG_GETARG_TEXT_PP(2));

	JsCheckName("schedule", name);
	if (strlen(name) > JS_SCHEDULE_NAME_MAX_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("schedule name is too long for its tick keys"),
				 errdetail("The name has %zu bytes; tick keys \"name@YYYY-MM-DDTHH:MIZ\" must fit in 255 bytes, so a name may have at most %d.",
						   strlen(name), JS_SCHEDULE_NAME_MAX_BYTES)));
	JsCronParse(cron_text, &cron);
	JsCheckName("queue", queue);

	values[0] = PG_GETARG_DATUM(0);
	values[1] = PG_GETARG_DATUM(1);
	values[2] = PG_GETARG_DATUM(2);
	values[3] = PG_GETARG_DATUM(3);

	SPI_connect();
	if (JsExecute(&queue_exists_plan, &values[2], NULL, true, 1) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
				 errmsg("queue \"%s\" does not exist", queue),
				 errdetail("Schedule \"%s\" would submit its jobs to it.", name),
				 errhint("Create it with job_state.create_queue().")));
	/* the sweeper submits its ticks: the caller must be allowed to submit */
	JsRequireQueuePrivilegeByName(values[2], JS_QUEUE_SUBMIT);
	if (JsExecute(&insert_plan, values, NULL, false, 0) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("schedule \"%s\" already exists", name),
				 errhint("Remove it with job_state.unschedule() first to replace it.")));
	SPI_finish();
	PG_RETURN_VOID();
}

Datum
js_unschedule(PG_FUNCTION_ARGS)
{
	Datum		value;

	JsRefuseNull(fcinfo, 0, "name");
	value = PG_GETARG_DATUM(0);

	SPI_connect();
	if (JsExecute(&delete_plan, &value, NULL, false, 0) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
				 errmsg("schedule \"%s\" does not exist",
						text_to_cstring(PG_GETARG_TEXT_PP(0))),
				 errhint("The schedules are listed in job_state.schedule.")));
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * Submit the tick of one due schedule and advance its last_tick, in a
 * subtransaction.  Returns false (after a WARNING) when that failed.
 */
static bool
JsRunOneSchedule(Datum name, Datum queue, Datum input, TimestampTz tick)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	char	   *name_text = TextDatumGetCString(name);
	char	   *key = JsTickKey(name_text, tick);
	bool		ok = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcontext);

	PG_TRY();
	{
		Datum		submit_args[3];
		Datum		advance_args[2];

		submit_args[0] = queue;
		submit_args[1] = input;
		submit_args[2] = CStringGetTextDatum(key);
		if (JsExecute(&submit_plan, submit_args, NULL, false, 0) != 1)
			elog(ERROR, "job_state: submit returned no row");
		ereport(DEBUG1,
				(errmsg_internal("job_state: schedule \"%s\" tick \"%s\" is job %lld%s",
								 name_text, key,
								 (long long) JsGetInt64(0, 1, NULL),
								 JsGetBool(0, 2) ? "" : " (already there)")));

		advance_args[0] = name;
		advance_args[1] = TimestampTzGetDatum(tick);
		JsExecute(&advance_plan, advance_args, NULL, false, 0);

		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		FlushErrorState();

		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;

		/* a cancel or statement timeout ends the whole sweep */
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
			ReThrowError(edata);

		ereport(WARNING,
				(errcode(edata->sqlerrcode),
				 errmsg("schedule \"%s\" could not submit its tick: %s",
						name_text, edata->message),
				 errdetail_internal("%s%sThe tick's idempotency key is \"%s\"; the next sweep tries again.",
									edata->detail ? edata->detail : "",
									edata->detail ? " " : "",
									key)));
		FreeErrorData(edata);
		ok = false;
	}
	PG_END_TRY();

	return ok;
}

/*
 * Submit the latest tick of every due schedule.  Returns how many ticks
 * were done (the job created, or found already there).  Needs SPI.
 */
int
JsRunSchedules(void)
{
	SPITupleTable *due;
	uint64		ndue;
	uint64		i;
	int			done = 0;

	(void) JsExecute(&rebase_plan, NULL, NULL, false, 0);
	ndue = JsExecute(&due_plan, NULL, NULL, false, 0);
	due = SPI_tuptable;

	/* due stays valid: later statements run in subtransactions of ours */
	for (i = 0; i < ndue; i++)
	{
		HeapTuple	row = due->vals[i];
		bool		isnull;
		Datum		name = SPI_getbinval(row, due->tupdesc, 1, &isnull);
		Datum		queue = SPI_getbinval(row, due->tupdesc, 2, &isnull);
		Datum		input = SPI_getbinval(row, due->tupdesc, 3, &isnull);
		Datum		tick = SPI_getbinval(row, due->tupdesc, 4, &isnull);

		if (JsRunOneSchedule(name, queue, input, DatumGetTimestampTz(tick)))
			done++;
	}
	return done;
}
