/*-------------------------------------------------------------------------
 *
 * resource.c
 *	  Resources: create_resource, alter_resource, and the resource table's
 *	  triggers: a resource that jobs name is never deleted nor truncated
 *	  away, no resource is ever renamed, and a resource's concurrency slots
 *	  follow its limit and its token-bucket shards its rate.
 *
 * Jobs name their resource (job.resource), and claim reads the resource
 * of every job that names one.  A job whose resource row is gone could
 * never start: claim refuses with JS008 when it reaches the job, and with
 * it every claim of the queue that comes that far.  A finished job naming
 * it would do the same once redriven.  So a resource row leaves only once
 * no job names it any more (purge removes the finished ones), and its name
 * never changes.  Its slots leave with it.
 *
 * The check must see every job, also one a concurrent submit is about to
 * commit.  As for queues (queue_trigger.c), the trigger takes SHARE lock
 * on job_state.job, which waits for every transaction that has written
 * jobs, and looks under the latest snapshot.  The job trigger, for its
 * part, checks that the resource a new job names exists after the job is
 * written (limits.c), also under the latest snapshot: a delete that
 * committed while the submit or INSERT waited for the job table is seen
 * (JS008), and one that comes later waits for it and sees its job (JS003).
 * No job may name the resource, so the look is a scan of the job table:
 * deleting a resource is an operator's rare act.
 *
 * When a resource is created with a concurrency_limit, or its limit is set
 * or raised (by create_resource, alter_resource or raw SQL alike), the
 * AFTER trigger creates the slots the limit needs, and running jobs naming
 * the resource that hold none take free ones (limits.c), so that the limit
 * counts them.  Slots above a lowered limit stay and go unused.  When its
 * max_starts_per_second is set or changed, the trigger makes the shards of
 * its token bucket again (bucket.c).
 *
 * job_state.restore lets a superuser replay or repair a dump as it is: the
 * dump brings the slots and shards with it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "commands/trigger.h"
#include "executor/tuptable.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "job_state.h"
#include "tables.h"
#include "slots.h"

PG_FUNCTION_INFO_V1(js_create_resource);
PG_FUNCTION_INFO_V1(js_alter_resource);
PG_FUNCTION_INFO_V1(js_resource_trigger);

#define JS_RESOURCE_IN_USE_HINT \
	"A resource leaves only once no job names it: remove finished jobs with job_state.purge(), resolve unknown ones with job_state.reconcile() first."

static JsPlan create_resource_plan = {
	"INSERT INTO job_state.resource (name, concurrency_limit, max_starts_per_second)"
	" VALUES ($1, $2, $3)"
	" ON CONFLICT (name) DO NOTHING",
	3, {TEXTOID, INT4OID, FLOAT8OID}
};

static JsPlan alter_resource_plan = {
	"UPDATE job_state.resource"
	" SET concurrency_limit = COALESCE($2, concurrency_limit),"
	"  max_starts_per_second = COALESCE($3, max_starts_per_second)"
	" WHERE name OPERATOR(pg_catalog.=) $1",
	3, {TEXTOID, INT4OID, FLOAT8OID}
};

/* a job naming resource $1, or any resource when $1 is NULL */
static JsPlan naming_job_plan = {
	"SELECT id, status::pg_catalog.text, queue, resource FROM job_state.job"
	" WHERE resource OPERATOR(pg_catalog.=) $1 OR ($1 IS NULL AND resource IS NOT NULL)"
	" LIMIT 1",
	1, {TEXTOID}
};

/* the slots of resource $1, or of every resource when $1 is NULL */
static JsPlan drop_slots_plan = {
	"DELETE FROM job_state.slot"
	" WHERE kind OPERATOR(pg_catalog.=) 'resource'"
	"  AND ($1 IS NULL OR scope OPERATOR(pg_catalog.=) $1)",
	1, {TEXTOID}
};

/* the start-rate shards (bucket.c) of resource $1, or of every resource */
static JsPlan drop_buckets_plan = {
	"DELETE FROM job_state.bucket"
	" WHERE $1 IS NULL OR resource OPERATOR(pg_catalog.=) $1",
	1, {TEXTOID}
};

/*
 * Refuse a concurrency_limit or max_starts_per_second argument out of
 * range; NULL passes (create_resource refuses two NULLs itself).
 */
static void
JsCheckResourceLimits(FunctionCallInfo fcinfo)
{
	if (!PG_ARGISNULL(1) && PG_GETARG_INT32(1) < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("concurrency_limit must be at least 1"),
				 errdetail("The value given is %d.", PG_GETARG_INT32(1))));
	if (!PG_ARGISNULL(2) && !(PG_GETARG_FLOAT8(2) > 0 && PG_GETARG_FLOAT8(2) <= 1e6))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_starts_per_second must be greater than 0 and at most 1000000"),
				 errdetail("The value given is %g.", PG_GETARG_FLOAT8(2))));
}

/* name, concurrency_limit, max_starts_per_second as statement arguments */
static void
JsResourceArgs(FunctionCallInfo fcinfo, Datum *values, char *nulls)
{
	int			i;

	for (i = 0; i < 3; i++)
	{
		values[i] = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}
}

Datum
js_create_resource(PG_FUNCTION_ARGS)
{
	char	   *name;
	Datum		values[3];
	char		nulls[3];

	JsRefuseNull(fcinfo, 0, "name");
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	JsCheckName("resource", name);
	JsCheckResourceLimits(fcinfo);
	if (PG_ARGISNULL(1) && PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a resource needs concurrency_limit or max_starts_per_second"),
				 errdetail("Both are NULL for resource \"%s\".", name),
				 errhint("Give concurrency_limit (running jobs), max_starts_per_second (starts a second) or both.")));
	JsResourceArgs(fcinfo, values, nulls);

	/* the AFTER INSERT trigger creates the slots */
	SPI_connect();
	if (JsExecute(&create_resource_plan, values, nulls, false, 0) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("resource \"%s\" already exists", name),
				 errhint("Change its limits with job_state.alter_resource().")));
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * alter_resource(name, concurrency_limit, max_starts_per_second): changes
 * the limits it is given; a NULL keeps the current value.
 */
Datum
js_alter_resource(PG_FUNCTION_ARGS)
{
	Datum		values[3];
	char		nulls[3];

	JsRefuseNull(fcinfo, 0, "name");
	JsCheckResourceLimits(fcinfo);
	JsResourceArgs(fcinfo, values, nulls);

	/* the AFTER UPDATE trigger creates the slots of a raised limit */
	SPI_connect();
	if (JsExecute(&alter_resource_plan, values, nulls, false, 0) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
				 errmsg("resource \"%s\" does not exist",
						text_to_cstring(PG_GETARG_TEXT_PP(0))),
				 errhint("Create it with job_state.create_resource().")));
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * A job naming resource (any resource when resource is 0) that any
 * transaction may still commit or has committed: refuse with JS003.
 * Needs SPI.
 */
static void
JsRefuseResourceInUse(Datum resource)
{
	char		nulls[1] = {resource == (Datum) 0 ? 'n' : ' '};

	LockRelationOid(JsOwnRelid("job"), ShareLock);
	if (JsExecuteLatest(&naming_job_plan, &resource, nulls, 1) == 0)
		return;
	if (resource != (Datum) 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("cannot delete resource \"%s\" while jobs name it",
						TextDatumGetCString(resource)),
				 errdetail("Job %lld of queue \"%s\" names it and is %s.",
						   (long long) JsGetInt64(0, 1, NULL), JsGetText(0, 3),
						   JsGetText(0, 2)),
				 errhint(JS_RESOURCE_IN_USE_HINT)));
	ereport(ERROR,
			(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
			 errmsg("cannot truncate job_state.resource while jobs name a resource"),
			 errdetail("Job %lld of queue \"%s\" names resource \"%s\" and is %s.",
					   (long long) JsGetInt64(0, 1, NULL), JsGetText(0, 3),
					   JsGetText(0, 4), JsGetText(0, 2)),
			 errhint(JS_RESOURCE_IN_USE_HINT)));
}

/*
 * The limits of a resource row: its concurrency_limit (0 when NULL) and
 * max_starts_per_second (0 when NULL).
 */
static void
JsResourceRowLimits(HeapTuple tuple, Relation rel, int32 *limit, double *rate)
{
	TupleDesc	desc = RelationGetDescr(rel);
	bool		isnull;
	Datum		value;

	value = heap_getattr(tuple, JsColumnNumber(rel, "concurrency_limit"), desc, &isnull);
	*limit = isnull ? 0 : DatumGetInt32(value);
	value = heap_getattr(tuple, JsColumnNumber(rel, "max_starts_per_second"), desc, &isnull);
	*rate = isnull ? 0 : DatumGetFloat8(value);
}

Datum
js_resource_trigger(PG_FUNCTION_ARGS)
{
	JsSavedUser saved_user;
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TriggerEvent event;
	Relation	rel;
	HeapTuple	old;
	Datum		name;
	bool		isnull;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "job_state_resource: not called by trigger manager");
	event = trigdata->tg_event;
	rel = trigdata->tg_relation;

	if (TRIGGER_FIRED_BY_TRUNCATE(event))
	{
		Datum		none = (Datum) 0;
		char		null[1] = {'n'};

		if (js_restore)
			return PointerGetDatum(NULL);
		JsTriggerSpiConnect(rel, &saved_user);
		JsRefuseResourceInUse((Datum) 0);
		JsExecute(&drop_slots_plan, &none, null, false, 0);
		JsExecute(&drop_buckets_plan, &none, null, false, 0);
		JsTriggerSpiFinish(&saved_user);
		return PointerGetDatum(NULL);
	}

	if (!TRIGGER_FIRED_FOR_ROW(event))
		elog(ERROR, "job_state_resource: must be fired for each row");
	old = trigdata->tg_trigtuple;
	name = heap_getattr(old, JsColumnNumber(rel, "name"), RelationGetDescr(rel), &isnull);

	if (TRIGGER_FIRED_AFTER(event))
	{
		/*
		 * INSERT, or UPDATE OF concurrency_limit or max_starts_per_second:
		 * slots for a higher limit, shards for a changed rate
		 */
		bool		insert = TRIGGER_FIRED_BY_INSERT(event);
		int32		limit;
		int32		old_limit = 0;
		double		rate;
		double		old_rate = 0;

		if (TRIGGER_FIRED_BY_DELETE(event))
			elog(ERROR, "job_state_resource: must be fired after INSERT or UPDATE");
		if (insert)
			JsResourceRowLimits(old, rel, &limit, &rate);
		else
		{
			JsResourceRowLimits(old, rel, &old_limit, &old_rate);
			JsResourceRowLimits(trigdata->tg_newtuple, rel, &limit, &rate);
		}
		if (js_restore || (limit <= old_limit && rate == old_rate))
			return PointerGetDatum(NULL);
		JsTriggerSpiConnect(rel, &saved_user);
		if (limit > old_limit)
			JsResourceLimitSlots(TextDatumGetCString(name), !insert, limit);
		if (rate != old_rate)
			JsMakeBuckets(TextDatumGetCString(name), rate);
		JsTriggerSpiFinish(&saved_user);
		return PointerGetDatum(NULL);
	}

	if (TRIGGER_FIRED_BY_UPDATE(event))
	{
		HeapTuple	new = trigdata->tg_newtuple;

		if (!js_restore &&
			!datumIsEqual(name,
						  heap_getattr(new, JsColumnNumber(rel, "name"),
									   RelationGetDescr(rel), &isnull),
						  false, -1))
			ereport(ERROR,
					(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
					 errmsg("the name of resource \"%s\" cannot change",
							TextDatumGetCString(name)),
					 errdetail("Jobs name their resource."),
					 errhint("Create a resource under the new name with job_state.create_resource().")));
		return PointerGetDatum(new);
	}

	if (!TRIGGER_FIRED_BY_DELETE(event))
		elog(ERROR, "job_state_resource: must be fired before UPDATE or DELETE");
	if (js_restore)
		return PointerGetDatum(old);
	JsTriggerSpiConnect(rel, &saved_user);
	JsRefuseResourceInUse(name);
	JsExecute(&drop_slots_plan, &name, NULL, false, 0);
	JsExecute(&drop_buckets_plan, &name, NULL, false, 0);
	JsTriggerSpiFinish(&saved_user);
	return PointerGetDatum(old);
}
