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
 * Names and owners: a schedule's name is unique within its queue (the
 * primary key is (queue, name), as its tick keys are the queue's
 * idempotency keys), so tenants of different queues never see or take
 * each other's names.  The role that called schedule() owns the schedule
 * (schedule.owner).  Its ticks are submitted as that role: at each tick
 * the owner must still exist and hold the submit privilege on the queue,
 * and the job records it as submitted_by, whoever runs sweep().  A tick
 * whose owner was dropped or lost the privilege is skipped, never
 * submitted: a WARNING names the schedule, and last_tick moves on, so the
 * schedule ticks again once the privilege is back.  unschedule() needs
 * the submit privilege on the queue or the owner's privileges; a schedule
 * the caller may not remove is answered as one that does not exist.
 *
 * Until ALTER EXTENSION UPDATE brings 0.2.0's schema (owner, the key by
 * queue), the 0.1.0 statements below serve the old table as before.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "miscadmin.h"
#include "pgtime.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/syscache.h"

#include "job_state.h"
#include "acl.h"
#include "cron.h"
#include "tables.h"

PG_FUNCTION_INFO_V1(js_schedule);
PG_FUNCTION_INFO_V1(js_unschedule);

/* "@YYYY-MM-DDTHH:MIZ" after the name, and keys have at most 255 bytes */
#define JS_TICK_SUFFIX_LEN 18
#define JS_SCHEDULE_NAME_MAX_BYTES (255 - JS_TICK_SUFFIX_LEN)

static JsPlan insert_plan = {
	"INSERT INTO job_state.schedule (name, cron, queue, input, owner)"
	" VALUES ($1, $2, $3, $4, $5)"
	" ON CONFLICT (queue, name) DO NOTHING",
	5, {TEXTOID, TEXTOID, TEXTOID, JSONBOID, REGROLEOID}
};

/* the schedules of a name ($2: in one queue), with their owners */
static JsPlan find_plan = {
	"SELECT queue, owner::pg_catalog.oid FROM job_state.schedule"
	" WHERE name OPERATOR(pg_catalog.=) $1"
	"  AND ($2::pg_catalog.text IS NULL OR queue OPERATOR(pg_catalog.=) $2)",
	2, {TEXTOID, TEXTOID}
};

static JsPlan delete_plan = {
	"DELETE FROM job_state.schedule"
	" WHERE name OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
	2, {TEXTOID, TEXTOID}
};

/* 0.1.0's table: names unique over all queues, no owner */
static JsPlan insert_plan_010 = {
	"INSERT INTO job_state.schedule (name, cron, queue, input)"
	" VALUES ($1, $2, $3, $4)"
	" ON CONFLICT (name) DO NOTHING",
	4, {TEXTOID, TEXTOID, TEXTOID, JSONBOID}
};

static JsPlan find_plan_010 = {
	"SELECT queue, 0::pg_catalog.oid FROM job_state.schedule"
	" WHERE name OPERATOR(pg_catalog.=) $1"
	"  AND ($2::pg_catalog.text IS NULL OR queue OPERATOR(pg_catalog.=) $2)",
	2, {TEXTOID, TEXTOID}
};

/*
 * The due schedules with their latest tick.  FOR UPDATE re-checks the
 * WHERE clause on the newest row version, so a tick another sweeper has
 * just committed is not due any more.
 */
#define JS_DUE_SCHEDULES(owner) \
	"SELECT s.name, s.queue, s.input, d.tick, " owner ", s.ctid" \
	" FROM job_state.schedule s" \
	" CROSS JOIN LATERAL (SELECT job_state.cron_prev(s.cron, pg_catalog.now())) d(tick)" \
	" WHERE d.tick IS NOT NULL AND CASE WHEN s.last_tick IS NULL" \
	"  THEN d.tick OPERATOR(pg_catalog.>=)" \
	"   pg_catalog.date_trunc('minute', s.created_at, 'UTC')" \
	"  ELSE d.tick OPERATOR(pg_catalog.>) s.last_tick" \
	"   OR s.last_tick OPERATOR(pg_catalog.>) pg_catalog.now() END" \
	" ORDER BY s.queue, s.name" \
	" FOR UPDATE OF s SKIP LOCKED"

static JsPlan due_plan = {
	JS_DUE_SCHEDULES("s.owner::pg_catalog.oid"),
	0, {0}
};

static JsPlan due_plan_010 = {
	JS_DUE_SCHEDULES("0::pg_catalog.oid"),
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
	" FROM (SELECT ctid FROM job_state.schedule"
	"  WHERE last_tick IS NULL AND created_at OPERATOR(pg_catalog.>) pg_catalog.now()"
	"  FOR UPDATE SKIP LOCKED) r"
	" WHERE s.ctid OPERATOR(pg_catalog.=) r.ctid",
	0, {0}
};

static JsPlan submit_plan = {
	"SELECT job_id, created"
	" FROM job_state.submit($1, $2, idempotency_key => $3)",
	3, {TEXTOID, JSONBOID, TEXTOID}
};

/* the row due_plan locked, by its ctid (either schema) */
static JsPlan advance_plan = {
	"UPDATE job_state.schedule SET last_tick = $2 WHERE ctid OPERATOR(pg_catalog.=) $1",
	2, {TIDOID, TIMESTAMPTZOID}
};

/* whether the schedule table is 0.2.0's: owned, named per queue */
static bool
JsSchedulesOwned(void)
{
	return get_attnum(JsOwnRelid("schedule"), "owner") != InvalidAttrNumber;
}

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
	Datum		values[5];
	bool		owned;

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
	/* the owner: its ticks are submitted as this role */
	values[4] = ObjectIdGetDatum(JsCallingRole());

	SPI_connect();
	/*
	 * The caller must be allowed to submit (JS008 as for a missing queue
	 * when it holds no privilege on it at all), before any name of the
	 * queue is looked at.
	 */
	JsRequireQueuePrivilegeByName(values[2], JS_QUEUE_SUBMIT);
	owned = JsSchedulesOwned();
	if (JsExecute(owned ? &insert_plan : &insert_plan_010, values, NULL, false, 0) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("schedule \"%s\" already exists", name),
				 owned ? errdetail("Queue \"%s\" has a schedule of that name.", queue) :
				 errdetail("Schedule names are unique over all queues until ALTER EXTENSION job_state UPDATE."),
				 errhint("Remove it with job_state.unschedule() first to replace it.")));
	SPI_finish();
	PG_RETURN_VOID();
}

/* JS008: the answer for a schedule that does not exist, or that the caller may not remove */
pg_noreturn static void
JsNoSuchSchedule(const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
			 errmsg("schedule \"%s\" does not exist", name),
			 errhint("A role may remove the schedules it created and those of the queues it may submit to.")));
}

/*
 * Whether role may remove a schedule of queue owned by owner: it has the
 * owner's privileges, or it may submit to the queue (what schedule()
 * needs).  On 0.1.0's table (no owner, no queue privileges) every role
 * may.
 */
static bool
JsMayUnschedule(Oid role, Datum queue, Oid owner, bool owned)
{
	Acl		   *acl;

	if (!owned)
		return true;
	if (OidIsValid(owner) && has_privs_of_role(role, owner))
		return true;
	return JsReadQueueAcl(queue, &acl) && JsQueueAllows(acl, role, JS_QUEUE_SUBMIT);
}

/*
 * unschedule(name, queue = NULL): the schedule of that name in queue, or,
 * without a queue, the one schedule of that name the caller may remove.
 */
Datum
js_unschedule(PG_FUNCTION_ARGS)
{
	Oid			role = JsCallingRole();
	char	   *name;
	Datum		find[2];
	char		find_nulls[2] = {' ', ' '};
	Datum		target[2];
	bool		owned;
	int			n;
	int			i;
	int			found = 0;

	JsRefuseNull(fcinfo, 0, "name");
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	find[0] = PG_GETARG_DATUM(0);
	/* 0.1.0's unschedule(name) has no queue argument */
	if (PG_NARGS() < 2 || PG_ARGISNULL(1))
	{
		find[1] = (Datum) 0;
		find_nulls[1] = 'n';
	}
	else
		find[1] = PG_GETARG_DATUM(1);

	SPI_connect();
	owned = JsSchedulesOwned();
	n = JsExecute(owned ? &find_plan : &find_plan_010, find, find_nulls, false, 0);
	target[0] = find[0];
	target[1] = (Datum) 0;
	/* at most one row per queue: a bounded loop */
	for (i = 0; i < n; i++)
	{
		bool		isnull;
		Datum		queue = JsGetDatumCopy(i, 1, &isnull);
		Oid			owner = DatumGetObjectId(JsGetDatumCopy(i, 2, &isnull));

		/* reads the queue's privileges without SPI: the rows stay */
		CHECK_FOR_INTERRUPTS();
		if (!JsMayUnschedule(role, queue, owner, owned))
			continue;
		if (++found > 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("schedule \"%s\" exists in more than one queue", name),
					 errdetail("Queues \"%s\" and \"%s\" each have a schedule of that name.",
							   TextDatumGetCString(target[1]), TextDatumGetCString(queue)),
					 errhint("Name the queue: job_state.unschedule(name, queue).")));
		target[1] = queue;
	}
	if (found == 0 || JsExecute(&delete_plan, target, NULL, false, 0) == 0)
		JsNoSuchSchedule(name);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * Why owner may not submit a tick to queue now (NULL if it may): it was
 * dropped, or it holds the submit privilege no longer.  A queue that is
 * gone is left to submit, whose error the caller reports.
 */
static char *
JsTickRefusal(Datum queue, Oid owner)
{
	Acl		   *acl;

	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(owner)))
		return psprintf("Its owner, role %u, was dropped.", owner);
	if (JsReadQueueAcl(queue, &acl) && !JsQueueAllows(acl, owner, JS_QUEUE_SUBMIT))
		return psprintf("Its owner, role \"%s\", does not hold the submit privilege on queue \"%s\".",
						GetUserNameFromId(owner, false), TextDatumGetCString(queue));
	return NULL;
}

/*
 * Submit the tick of one due schedule as its owner and advance its
 * last_tick (row), in a subtransaction.  A tick the owner may not submit
 * any more is skipped: last_tick advances, nothing is submitted, and a
 * WARNING says why.  Returns false (after a WARNING) when the tick was
 * not submitted.
 */
static bool
JsRunOneSchedule(Datum name, Datum queue, Datum input, TimestampTz tick,
				 Oid owner, Datum row)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	char	   *name_text = TextDatumGetCString(name);
	char	   *key = JsTickKey(name_text, tick);
	char	   *refusal = OidIsValid(owner) ? JsTickRefusal(queue, owner) : NULL;
	bool		ok = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcontext);

	PG_TRY();
	{
		Datum		submit_args[3];
		Datum		advance_args[2];

		if (refusal == NULL)
		{
			submit_args[0] = queue;
			submit_args[1] = input;
			submit_args[2] = CStringGetTextDatum(key);
			/* authorised and recorded as the owner (0.1.0's table: the caller) */
			js_acting_role = owner;
			if (JsExecute(&submit_plan, submit_args, NULL, false, 0) != 1)
				elog(ERROR, "job_state: submit returned no row");
			js_acting_role = InvalidOid;
			ereport(DEBUG1,
					(errmsg_internal("job_state: schedule \"%s\" tick \"%s\" is job %lld%s",
									 name_text, key,
									 (long long) JsGetInt64(0, 1, NULL),
									 JsGetBool(0, 2) ? "" : " (already there)")));
		}

		advance_args[0] = row;
		advance_args[1] = TimestampTzGetDatum(tick);
		JsExecute(&advance_plan, advance_args, NULL, false, 0);

		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		js_acting_role = InvalidOid;
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

	if (ok && refusal != NULL)
	{
		ereport(WARNING,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("schedule \"%s\" of queue \"%s\" skipped its tick",
						name_text, TextDatumGetCString(queue)),
				 errdetail("%s The tick \"%s\" was not submitted; the schedule ticks again once its owner may submit to the queue.",
						   refusal, key),
				 errhint("Grant the owner the submit privilege on the queue again, or unschedule it and schedule it again as a role that may submit.")));
		ok = false;
	}
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
	ndue = JsExecute(JsSchedulesOwned() ? &due_plan : &due_plan_010, NULL, NULL, false, 0);
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
		Datum		owner = SPI_getbinval(row, due->tupdesc, 5, &isnull);
		Datum		ctid = SPI_getbinval(row, due->tupdesc, 6, &isnull);

		if (JsRunOneSchedule(name, queue, input, DatumGetTimestampTz(tick),
							 DatumGetObjectId(owner), ctid))
			done++;
	}
	return done;
}
