/*-------------------------------------------------------------------------
 *
 * queue_trigger.c
 *	  The queue table's triggers: a queue that still has jobs is never
 *	  deleted, nor truncated away, no queue is ever renamed, and a queue's
 *	  concurrency slots follow its limits.
 *
 * Jobs find their queue by its name (job.queue) and tokens by its number
 * (queue.id).  A job whose queue row is gone can no longer be claimed, and
 * reconcile, redrive and cancel do not find it: deleting the row would lose
 * the queue's accepted jobs as surely as deleting them (rule 1 of the
 * contract).  So the name and the number of a queue never change, and a
 * queue row leaves only once no job of the queue is left (purge removes
 * the finished ones; unknown jobs are resolved with reconcile first).  The
 * queue's concurrency slots leave with it.
 *
 * The check must see every job, also one that a concurrent submit is about
 * to commit.  The trigger first takes SHARE lock on job_state.job, which
 * waits for every transaction that has written jobs and keeps new writers
 * out until this transaction ends, and then looks under the latest
 * snapshot: the statement's own is older than that wait.
 *
 * When a queue is created or its concurrency_limit or per_key_limit set or
 * raised (by create_queue, alter_queue or raw SQL alike), the AFTER trigger
 * creates the slots the new limit needs (limits.c): the queue's, and those
 * of every concurrency key that has slots, waiting or running jobs.
 * Without them a limit set after jobs were submitted would hold their keys
 * at the old limit, or start none of them.  Jobs already running that hold
 * no slot of the limit take free ones, so the limit counts them too.
 * Slots above a lowered limit stay and go unused (claim takes only slot
 * numbers up to the limit).
 *
 * Once a job of the queue named a resource, uses_resources stays set: it is
 * what sends claim down the slot-taking path (claim_limited.c).
 *
 * Every UPDATE, DELETE and TRUNCATE of the table invalidates its relcache
 * entry, which resets the per-backend caches of queue options (tables.c:
 * claim, submit, fail) and of privileges (token.c): a pause, a changed
 * limit or a revoke reaches every backend when it commits.
 *
 * job_state.restore lets a superuser replay or repair a dump as it is: the
 * dump brings the slots with it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/trigger.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/inval.h"
#include "utils/rel.h"

#include "job_state.h"
#include "tables.h"
#include "slots.h"

PG_FUNCTION_INFO_V1(js_queue_trigger);

static JsPlan queue_job_plan = {
	"SELECT id, status::pg_catalog.text FROM job_state.job"
	" WHERE queue OPERATOR(pg_catalog.=) $1 LIMIT 1",
	1, {TEXTOID}
};

static JsPlan any_job_plan = {
	"SELECT id, status::pg_catalog.text, queue FROM job_state.job LIMIT 1",
	0, {0}
};

static JsPlan drop_slots_plan = {
	"DELETE FROM job_state.slot"
	" WHERE kind OPERATOR(pg_catalog.=) ANY ('{queue,key}'::pg_catalog.text[])"
	"  AND scope OPERATOR(pg_catalog.=) $1",
	1, {TEXTOID}
};

/*
 * The first job of queue (all queues when queue is NULL) that any
 * transaction may still commit or has committed; false if there is none.
 * Needs SPI.
 */
static bool
JsQueueHasJob(Datum queue)
{
	LockRelationOid(JsOwnRelid("job"), ShareLock);
	if (queue != (Datum) 0)
		return JsExecuteLatest(&queue_job_plan, &queue, NULL, 1) > 0;
	return JsExecuteLatest(&any_job_plan, NULL, NULL, 1) > 0;
}

/* the job JsQueueHasJob found: JS003 */
static void
JsRefuseQueueWithJobs(const char *queue)
{
	if (queue != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("cannot delete queue \"%s\" while it has jobs", queue),
				 errdetail("Job %lld of the queue is %s.",
						   (long long) JsGetInt64(0, 1, NULL), JsGetText(0, 2)),
				 errhint("A queue leaves only once it has no jobs: remove finished ones with job_state.purge(), resolve unknown ones with job_state.reconcile() first.")));
	ereport(ERROR,
			(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
			 errmsg("cannot truncate job_state.queue while jobs exist"),
			 errdetail("Job %lld of queue \"%s\" is %s.",
					   (long long) JsGetInt64(0, 1, NULL), JsGetText(0, 3), JsGetText(0, 2)),
			 errhint("A queue leaves only once it has no jobs: remove finished ones with job_state.purge(), resolve unknown ones with job_state.reconcile() first.")));
}

/* a nullable int4 column of a queue row, or 0 when NULL */
static int32
JsQueueLimit(HeapTuple tuple, TupleDesc desc, int attnum)
{
	bool		isnull;
	Datum		value = heap_getattr(tuple, attnum, desc, &isnull);

	return isnull ? 0 : DatumGetInt32(value);
}

/*
 * AFTER INSERT, or UPDATE OF concurrency_limit, per_key_limit: slots for a
 * limit that is new or higher than before.
 */
static void
JsQueueSlotsFollowLimits(TriggerData *trigdata)
{
	JsSavedUser saved_user;
	Relation	rel = trigdata->tg_relation;
	TupleDesc	desc = RelationGetDescr(rel);
	bool		insert = TRIGGER_FIRED_BY_INSERT(trigdata->tg_event);
	HeapTuple	new = insert ? trigdata->tg_trigtuple : trigdata->tg_newtuple;
	HeapTuple	old = insert ? NULL : trigdata->tg_trigtuple;
	int			limit_att = JsColumnNumber(rel, "concurrency_limit");
	int			key_limit_att = JsColumnNumber(rel, "per_key_limit");
	int32		limit = JsQueueLimit(new, desc, limit_att);
	int32		key_limit = JsQueueLimit(new, desc, key_limit_att);
	char	   *name;
	bool		isnull;

	if (js_restore)
		return;
	name = TextDatumGetCString(heap_getattr(new, JsColumnNumber(rel, "name"),
											desc, &isnull));
	JsTriggerSpiConnect(rel, &saved_user);
	if (limit > (old ? JsQueueLimit(old, desc, limit_att) : 0))
		JsQueueLimitSlots(name, false, limit);
	if (key_limit > (old ? JsQueueLimit(old, desc, key_limit_att) : 0))
		JsQueueLimitSlots(name, true, key_limit);
	JsTriggerSpiFinish(&saved_user);
}

Datum
js_queue_trigger(PG_FUNCTION_ARGS)
{
	JsSavedUser saved_user;
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TriggerEvent event;
	Relation	rel;
	TupleDesc	desc;
	HeapTuple	old;
	int			name_att;
	int			id_att;
	Datum		name;
	bool		isnull;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "job_state_queue: not called by trigger manager");
	event = trigdata->tg_event;
	rel = trigdata->tg_relation;

	/*
	 * Claim, submit and fail keep a queue's options per backend, and token
	 * checks its privileges (tables.c, token.c): any change to the table
	 * resets both in every backend once it commits.
	 */
	if (TRIGGER_FIRED_BEFORE(event))
		CacheInvalidateRelcacheByRelid(RelationGetRelid(rel));

	if (TRIGGER_FIRED_BY_TRUNCATE(event))
	{
		if (js_restore)
			return PointerGetDatum(NULL);
		JsTriggerSpiConnect(rel, &saved_user);
		if (JsQueueHasJob((Datum) 0))
			JsRefuseQueueWithJobs(NULL);
		JsTriggerSpiFinish(&saved_user);
		return PointerGetDatum(NULL);
	}

	if (!TRIGGER_FIRED_FOR_ROW(event))
		elog(ERROR, "job_state_queue: must be fired for each row");
	if (TRIGGER_FIRED_AFTER(event))
	{
		if (TRIGGER_FIRED_BY_DELETE(event))
			elog(ERROR, "job_state_queue: must be fired after INSERT or UPDATE");
		JsQueueSlotsFollowLimits(trigdata);
		return PointerGetDatum(NULL);
	}

	desc = RelationGetDescr(rel);
	old = trigdata->tg_trigtuple;
	name_att = JsColumnNumber(rel, "name");
	id_att = JsColumnNumber(rel, "id");
	name = heap_getattr(old, name_att, desc, &isnull);

	if (TRIGGER_FIRED_BY_UPDATE(event))
	{
		HeapTuple	new = trigdata->tg_newtuple;
		Datum		new_name = heap_getattr(new, name_att, desc, &isnull);
		int			uses_att = JsColumnNumber(rel, "uses_resources");

		if (js_restore)
			return PointerGetDatum(new);
		if (!datumIsEqual(name, new_name, false, -1) ||
			DatumGetInt32(heap_getattr(old, id_att, desc, &isnull)) !=
			DatumGetInt32(heap_getattr(new, id_att, desc, &isnull)))
			ereport(ERROR,
					(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
					 errmsg("the name and id of queue \"%s\" cannot change",
							TextDatumGetCString(name)),
					 errdetail("Jobs name their queue, and claim tokens carry its id."),
					 errhint("Create a queue under the new name with job_state.create_queue().")));

		/*
		 * uses_resources sends claim down the slot-taking path once a job of
		 * the queue named a resource; cleared, claim would ignore the
		 * resources' limits.
		 */
		if (DatumGetBool(heap_getattr(old, uses_att, desc, &isnull)) &&
			!DatumGetBool(heap_getattr(new, uses_att, desc, &isnull)))
			ereport(ERROR,
					(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
					 errmsg("uses_resources of queue \"%s\" cannot be cleared",
							TextDatumGetCString(name)),
					 errdetail("Jobs of the queue have named a resource, and claim must count them against its limits.")));
		return PointerGetDatum(new);
	}

	if (!TRIGGER_FIRED_BY_DELETE(event))
		elog(ERROR, "job_state_queue: must be fired before UPDATE or DELETE");
	if (js_restore)
		return PointerGetDatum(old);

	JsTriggerSpiConnect(rel, &saved_user);
	if (JsQueueHasJob(name))
		JsRefuseQueueWithJobs(TextDatumGetCString(name));
	JsExecute(&drop_slots_plan, &name, NULL, false, 0);
	JsTriggerSpiFinish(&saved_user);
	return PointerGetDatum(old);
}
