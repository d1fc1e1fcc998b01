/*-------------------------------------------------------------------------
 *
 * queue_trigger.c
 *	  The queue table's triggers: a queue that still has jobs is never
 *	  deleted, nor truncated away, and no queue is ever renamed.
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
 * job_state.restore lets a superuser replay or repair a dump as it is.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/trigger.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "job_state.h"

PG_FUNCTION_INFO_V1(js_queue_trigger);

static JsPlan queue_job_plan = {
	"SELECT id, status::pg_catalog.text FROM job_state.job WHERE queue = $1 LIMIT 1",
	1, {TEXTOID}
};

static JsPlan any_job_plan = {
	"SELECT id, status::pg_catalog.text, queue FROM job_state.job LIMIT 1",
	0, {0}
};

static JsPlan drop_slots_plan = {
	"DELETE FROM job_state.slot"
	" WHERE kind OPERATOR(pg_catalog.=) ANY ('{queue,key}'::pg_catalog.text[])"
	"  AND scope = $1",
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
	bool		found;

	LockRelationOid(JsOwnRelid("job"), ShareLock);
	PushActiveSnapshot(GetLatestSnapshot());
	if (queue != (Datum) 0)
		found = JsExecute(&queue_job_plan, &queue, NULL, true, 1) > 0;
	else
		found = JsExecute(&any_job_plan, NULL, NULL, true, 1) > 0;
	PopActiveSnapshot();
	return found;
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

Datum
js_queue_trigger(PG_FUNCTION_ARGS)
{
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

	if (TRIGGER_FIRED_BY_TRUNCATE(event))
	{
		if (js_restore)
			return PointerGetDatum(NULL);
		SPI_connect();
		if (JsQueueHasJob((Datum) 0))
			JsRefuseQueueWithJobs(NULL);
		SPI_finish();
		return PointerGetDatum(NULL);
	}

	if (!TRIGGER_FIRED_BEFORE(event) || !TRIGGER_FIRED_FOR_ROW(event))
		elog(ERROR, "job_state_queue: must be fired before, for each row");

	desc = RelationGetDescr(rel);
	old = trigdata->tg_trigtuple;
	name_att = JsColumnNumber(rel, "name");
	id_att = JsColumnNumber(rel, "id");
	name = heap_getattr(old, name_att, desc, &isnull);

	if (TRIGGER_FIRED_BY_UPDATE(event))
	{
		HeapTuple	new = trigdata->tg_newtuple;
		Datum		new_name = heap_getattr(new, name_att, desc, &isnull);

		if (!js_restore &&
			(!datumIsEqual(name, new_name, false, -1) ||
			 DatumGetInt32(heap_getattr(old, id_att, desc, &isnull)) !=
			 DatumGetInt32(heap_getattr(new, id_att, desc, &isnull))))
			ereport(ERROR,
					(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
					 errmsg("the name and id of queue \"%s\" cannot change",
							TextDatumGetCString(name)),
					 errdetail("Jobs name their queue, and claim tokens carry its id."),
					 errhint("Create a queue under the new name with job_state.create_queue().")));
		return PointerGetDatum(new);
	}

	if (!TRIGGER_FIRED_BY_DELETE(event))
		elog(ERROR, "job_state_queue: must be fired by UPDATE, DELETE or TRUNCATE");
	if (js_restore)
		return PointerGetDatum(old);

	SPI_connect();
	if (JsQueueHasJob(name))
		JsRefuseQueueWithJobs(TextDatumGetCString(name));
	JsExecute(&drop_slots_plan, &name, NULL, false, 0);
	SPI_finish();
	return PointerGetDatum(old);
}
