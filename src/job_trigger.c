/*-------------------------------------------------------------------------
 *
 * job_trigger.c
 *	  The job table's AFTER trigger and the guards of TRUNCATE and of the
 *	  append-only history.
 *
 * job_state_event (AFTER ROW, ENABLE ALWAYS) records each change of the
 * status or the generation that the job row does not hold, and the held
 * events a change displaces, in job_state.job_event_log (event.c), frees the
 * concurrency slots of a job that left running or waiting or gave them up
 * to wait (slot.c), and has a job that names a resource or a
 * concurrency key counted by its limits (limits.c: the resource must
 * exist, the queue is marked for the slot-taking claim, a new key gets
 * its slots), and notes where a job becomes or stops being ready for the
 * queue's claim frontier (frontier.c), and has a job that became
 * succeeded, failed, cancelled or unknown announced at commit (waiter.c),
 * and checks that a job inserted by raw SQL names a queue that exists and
 * an id the sequence gave and no other queue's job holds.
 * TRUNCATE of job or job_event_log is
 * refused while live jobs exist; job_event_log takes no UPDATE and no DELETE
 * outside purge().  job_state.restore (superuser only) lets
 * a dump be replayed.
 *
 * Locks: none beyond those of the statement that fires them, except the
 * slot rows a finished job frees and the queue row the first job naming a
 * resource marks.  The SPI statements run as the table's owner.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "commands/trigger.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "job_state.h"
#include "tables.h"
#include "rules.h"
#include "slots.h"
#include "waiter.h"

PG_FUNCTION_INFO_V1(js_job_event_trigger);
PG_FUNCTION_INFO_V1(js_job_truncate_trigger);
PG_FUNCTION_INFO_V1(js_append_only_trigger);

/*
 * Whether newslot names a resource or a concurrency key that oldslot (NULL
 * for an insert) did not.
 */
static bool
JsNamesNewLimit(const JsJobColumns *cols, TupleTableSlot *newslot,
				TupleTableSlot *oldslot)
{
	int			attnums[2] = {cols->resource, cols->concurrency_key};
	int			i;

	for (i = 0; i < 2; i++)
		if (!slot_attisnull(newslot, attnums[i]) &&
			(oldslot == NULL || !JsSameValue(oldslot, newslot, attnums[i])))
			return true;
	return false;
}

/*
 * Free the slots whose numbers oldslot records and newslot no longer does
 * (slot.c): the BEFORE trigger clears them when a job leaves running or
 * waiting, a wait that gives them up clears them itself.  A resource's or
 * a key's slot is found by the job's resource or key, which cannot change
 * while it holds a claim.
 */
static void
JsReleaseJobSlots(const JsJobColumns *cols, TupleTableSlot *oldslot,
				  TupleTableSlot *newslot)
{
	int32		numbers[JS_NUM_SLOT_KINDS];
	char	   *scopes[JS_NUM_SLOT_KINDS] = {NULL, NULL, NULL};
	bool		held = false;
	bool		isnull;
	int			kind;

	for (kind = 0; kind < JS_NUM_SLOT_KINDS; kind++)
	{
		int			scope_col = kind == JS_SLOT_RESOURCE ? cols->resource :
			kind == JS_SLOT_KEY ? cols->concurrency_key : cols->queue;
		Datum		scope;

		numbers[kind] = JsTupleInt32(oldslot, cols->slot[kind], &isnull);
		if (numbers[kind] == 0 || !slot_attisnull(newslot, cols->slot[kind]))
		{
			numbers[kind] = 0;	/* none, or still held */
			continue;
		}
		scope = slot_getattr(oldslot, scope_col, &isnull);
		if (isnull)
			numbers[kind] = 0;	/* set by hand on a job without a resource or key */
		else
		{
			scopes[kind] = TextDatumGetCString(scope);
			held = true;
		}
	}
	if (held)
		JsReleaseSlots(JsTupleJobId(cols, oldslot),
					   TextDatumGetCString(slot_getattr(oldslot, cols->queue, &isnull)),
					   scopes[JS_SLOT_RESOURCE], scopes[JS_SLOT_KEY], numbers);
}

/*
 * Whether the row is one the submit whose AFTER triggers are firing
 * inserted (its queue, an id it drew): no other row, a trigger of the
 * user's inserting one meanwhile included, passes over the raw-INSERT
 * checks.
 */
static bool
JsSubmitWrote(const JsJobColumns *cols, TupleTableSlot *slot)
{
	int64		id;
	bool		isnull;
	Datum		queue;
	text	   *q;

	if (js_submitting.queue == NULL)
		return false;
	id = JsTupleJobId(cols, slot);
	if (id < js_submitting.min_id || id > js_submitting.max_id)
		return false;
	queue = slot_getattr(slot, cols->queue, &isnull);
	if (isnull)
		return false;
	q = DatumGetTextPP(queue);
	return VARSIZE_ANY_EXHDR(q) == strlen(js_submitting.queue) &&
		memcmp(VARDATA_ANY(q), js_submitting.queue, VARSIZE_ANY_EXHDR(q)) == 0;
}

/*
 * A job row inserted by raw SQL (submit reads the queue and draws the id
 * itself, JsSubmitWrote): its queue must exist, as submit requires (JS008:
 * no claim, reconcile or redrive would ever find it, and a queue that has
 * jobs cannot be deleted), and its id must be one job_state.job_id_seq
 * gave and no job of another queue holds.  The primary key is (queue, id),
 * but every call that names a job by id alone (cancel, redrive, reconcile,
 * wait) needs the id to name one job, and a later submit would draw an id
 * beyond the sequence's for a job of its own.  $1 queue, $2 id.  Runs as
 * a statement of its own, so it sees the other rows of the same INSERT.
 */
static JsPlan raw_insert_plan = {
	"SELECT EXISTS (SELECT 1 FROM job_state.queue q WHERE q.name OPERATOR(pg_catalog.=) $1),"
	"  (SELECT j.queue FROM job_state.job j"
	"    WHERE j.queue OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT q.name FROM job_state.queue q))"
	"     AND j.queue OPERATOR(pg_catalog.<>) $1 AND j.id OPERATOR(pg_catalog.=) $2 LIMIT 1),"
	"  COALESCE(pg_catalog.pg_sequence_last_value('job_state.job_id_seq'::pg_catalog.regclass), 0)",
	2, {TEXTOID, INT8OID}
};

/* the id hint of a job row inserted by raw SQL */
#define JS_RAW_ID_HINT \
	"Leave id out of the INSERT: it defaults to the next value of job_state.job_id_seq."

static void
JsCheckRawInsert(const JsJobColumns *cols, TupleTableSlot *newslot)
{
	bool		isnull;
	Datum		args[2];
	int64		job_id = JsTupleJobId(cols, newslot);
	char	   *queue;

	args[0] = slot_getattr(newslot, cols->queue, &isnull);
	args[1] = Int64GetDatum(job_id);
	queue = TextDatumGetCString(args[0]);
	JsExecute(&raw_insert_plan, args, NULL, false, 1);
	if (!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
		ereport(ERROR,
				(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
				 errmsg("queue \"%s\" does not exist", queue),
				 errdetail("Job %lld names it.", (long long) job_id),
				 errhint("Create it with job_state.create_queue().")));
	(void) SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	if (!isnull)
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("job id %lld is already used in queue \"%s\"",
						(long long) job_id, JsGetText(0, 2)),
				 errdetail("A job id names one job across all queues: cancel, redrive, reconcile and wait take the id alone."),
				 errhint(JS_RAW_ID_HINT)));
	if (job_id > JsGetInt64(0, 3, &isnull))
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("job id %lld was not drawn from job_state.job_id_seq",
						(long long) job_id),
				 errdetail("The sequence has given ids up to %lld; a later submit would draw this one for another job.",
						   (long long) JsGetInt64(0, 3, &isnull)),
				 errhint(JS_RAW_ID_HINT)));
}

/*
 * job_state_event (AFTER ROW): the history of a change of status or
 * generation (event.c), and the concurrency slots of a job that left
 * running or waiting, or gave them up to wait, go back (slot.c).
 */
Datum
js_job_event_trigger(PG_FUNCTION_ARGS)
{
	JsSavedUser saved_user;
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TriggerEvent event;
	const JsJobColumns *cols;
	TupleTableSlot *oldslot;
	TupleTableSlot *newslot;
	JsStatus	to;
	JsEvent		ev;
	bool		isnull;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "job_state_event: not called by trigger manager");
	event = trigdata->tg_event;
	if (!TRIGGER_FIRED_AFTER(event) || !TRIGGER_FIRED_FOR_ROW(event) ||
		TRIGGER_FIRED_BY_DELETE(event) || TRIGGER_FIRED_BY_TRUNCATE(event))
		elog(ERROR, "job_state_event: must be fired after insert or update, for each row");

	cols = JsJobColumnsFor(trigdata->tg_relation);
	/* the rows through the trigger's slots, each deformed once (tables.c) */
	oldslot = TRIGGER_FIRED_BY_UPDATE(event) ? trigdata->tg_trigslot : NULL;
	newslot = TRIGGER_FIRED_BY_UPDATE(event) ? trigdata->tg_newslot : trigdata->tg_trigslot;
	to = JsTupleStatus(cols, newslot);

	/* the final rows, as written: what the queue's frontier learns of */
	JsNoteReadiness(cols, trigdata->tg_relation, oldslot, newslot);
	/* and a lease this session's checks for run-out leases must not pass */
	JsNoteLease(cols, trigdata->tg_relation, newslot);

	/* a job that ended: its waiters and job_state_done hear of it at commit */
	if ((to == JS_SUCCEEDED || to == JS_FAILED || to == JS_CANCELLED ||
		 to == JS_UNKNOWN) && !js_restore &&
		(oldslot == NULL || JsTupleStatus(cols, oldslot) != to))
		JsWaiterNoteDone(JsTupleJobId(cols, newslot),
						 slot_getattr(newslot, cols->queue, &isnull));

	/* the slot numbers the update cleared: those slots go back */
	if (oldslot != NULL && to != JS_RUNNING && !js_restore)
		JsReleaseJobSlots(cols, oldslot, newslot);

	/* a row of raw SQL: its queue exists, its id is unique (a restore
	 * replays job rows before queue rows: pg_dump orders them by name) */
	if (oldslot == NULL && !js_restore && !JsSubmitWrote(cols, newslot))
	{
		JsTriggerSpiConnect(trigdata->tg_relation, &saved_user);
		JsCheckRawInsert(cols, newslot);
		JsTriggerSpiFinish(&saved_user);
	}

	/* a restore brings the slots and the queue's flag with it */
	if (!js_restore && JsNamesNewLimit(cols, newslot, oldslot))
	{
		Datum		queue = slot_getattr(newslot, cols->queue, &isnull);
		bool		no_resource;
		bool		no_key;
		Datum		resource = slot_getattr(newslot, cols->resource, &no_resource);
		Datum		key = slot_getattr(newslot, cols->concurrency_key, &no_key);

		JsTriggerSpiConnect(trigdata->tg_relation, &saved_user);
		JsJobNamesLimits(queue, resource, !no_resource, key, !no_key);
		JsTriggerSpiFinish(&saved_user);
	}

	/*
	 * A restore brings the history with it.  The submit writes no history
	 * row: the job row itself records it (accepted_at and submitted_by,
	 * which no update can change), and a job leaves with its history, so
	 * the row would say nothing the job does not.
	 */
	if (js_restore || !TRIGGER_FIRED_BY_UPDATE(event))
		return PointerGetDatum(NULL);

	/*
	 * The events the old row held and the new one does not go to
	 * job_event_log (with track_events off too: they were recorded); a
	 * change the new row holds needs no row.
	 */
	if (JsWriteOutHeld(cols, oldslot, newslot) || !js_track_events)
		return PointerGetDatum(NULL);

	ev.generation = JsTupleInt32(newslot, cols->generation, &isnull);
	ev.from = JsTupleStatus(cols, oldslot);
	if (ev.from == to &&
		JsTupleInt32(oldslot, cols->generation, &isnull) == ev.generation)
		return PointerGetDatum(NULL);
	ev.to = to;
	ev.queue = slot_getattr(newslot, cols->queue, &isnull);
	ev.job_id = slot_getattr(newslot, cols->id, &isnull);
	ev.reason = slot_getattr(newslot, cols->reason, &ev.reason_null);
	/*
	 * The worker only where the change named it (a claim): every later
	 * event of the generation has the same one, and a worker's name is
	 * often the widest part of the row.
	 */
	if (to == JS_RUNNING || !JsSameValue(oldslot, newslot, cols->worker))
		ev.worker = slot_getattr(newslot, cols->worker, &ev.worker_null);
	else
	{
		ev.worker = (Datum) 0;
		ev.worker_null = true;
	}
	ev.seq = 0;
	ev.has_at = false;
	JsWriteEvent(cols->status_oids, &ev);

	return PointerGetDatum(NULL);
}

/*
 * TRUNCATE of job or job_event_log: only when no job is live.
 */
static JsPlan live_job_plan = {
	"SELECT id FROM job_state.job"
	" WHERE status OPERATOR(pg_catalog.<>) ALL"
	"  ('{succeeded,failed,cancelled}'::job_state.status[]) LIMIT 1",
	0, {0}
};

Datum
js_job_truncate_trigger(PG_FUNCTION_ARGS)
{
	JsSavedUser saved_user;
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "job_state_truncate: not called by trigger manager");
	if (!TRIGGER_FIRED_BY_TRUNCATE(trigdata->tg_event))
		elog(ERROR, "job_state_truncate: must be fired by TRUNCATE");

	if (js_restore)
		return PointerGetDatum(NULL);

	/*
	 * TRUNCATE holds its ACCESS EXCLUSIVE lock by now, so every transaction
	 * that wrote jobs has ended; the statement's snapshot is older than that
	 * wait and would miss a job committed during it.
	 */
	JsTriggerSpiConnect(trigdata->tg_relation, &saved_user);
	if (JsExecuteLatest(&live_job_plan, NULL, NULL, 1) > 0)
	{
		int64		job_id = JsGetInt64(0, 1, NULL);

		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("cannot truncate %s while jobs are live",
						RelationGetRelationName(trigdata->tg_relation)),
				 errdetail("Job %lld is not finished.", (long long) job_id),
				 errhint("Finished jobs are removed with job_state.purge().")));
	}
	JsTriggerSpiFinish(&saved_user);
	return PointerGetDatum(NULL);
}

/*
 * job_event_log is append-only: no UPDATE; DELETE only inside purge(); TRUNCATE
 * only when no job is live.  The view job_event takes no write at all (its
 * INSTEAD OF trigger).
 */
Datum
js_append_only_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TriggerEvent event;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "job_state_append_only: not called by trigger manager");
	event = trigdata->tg_event;
	if (TRIGGER_FIRED_INSTEAD(event))
	{
		/* the view job_event: written by nobody, restore included */
		if (TRIGGER_FIRED_BY_INSERT(event))
			ereport(ERROR,
					(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
					 errmsg("%s is written only by job_state",
							RelationGetRelationName(trigdata->tg_relation)),
					 errdetail("Each change of a job's status or generation is recorded by the job table's triggers.")));
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("%s is append-only",
						RelationGetRelationName(trigdata->tg_relation)),
				 errdetail("History rows are removed only with their job, by job_state.purge().")));
	}
	if (!TRIGGER_FIRED_BEFORE(event))
		elog(ERROR, "job_state_append_only: must be fired before the event");

	if (js_restore)
		return PointerGetDatum(TRIGGER_FIRED_FOR_ROW(event) ? trigdata->tg_trigtuple : NULL);

	if (TRIGGER_FIRED_BY_TRUNCATE(event))
		return js_job_truncate_trigger(fcinfo);
	if (TRIGGER_FIRED_BY_DELETE(event) && js_purging)
		return PointerGetDatum(trigdata->tg_trigtuple);

	ereport(ERROR,
			(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
			 errmsg("%s is append-only",
					RelationGetRelationName(trigdata->tg_relation)),
			 errdetail("History rows are removed only with their job, by job_state.purge().")));
	pg_unreachable();
}
