/*-------------------------------------------------------------------------
 *
 * event.c
 *	  Job history: one event per change of a job's status or generation
 *	  after its submit, for the job_state_fsm and job_state_event triggers
 *	  (fsm.c, job_trigger.c).  The submit itself is recorded by the job row
 *	  (accepted_at, submitted_by: fixed, fsm.c).
 *
 * Every write of a job, by our functions or by raw SQL, fires those
 * triggers, so history is decided in one place.  An event is stored in one
 * of two ways:
 *	- the job row holds the job's latest claim (accepted -> running) and
 *	  the change that ended it (running -> succeeded, failed, unknown or
 *	  cancelled), as the seqs held_claim_seq and held_end_seq: everything
 *	  else such an event says is in the row already (started_at, worker and
 *	  generation; status, finished_at and reason), and the job_state_fsm
 *	  trigger, which holds it, is what stamps those columns.  A job that
 *	  ran once writes no history row;
 *	- every other event, and a held one before a change of the row would
 *	  alter what it says, is a row of job_event_log.
 * The view job_event reads both, so a job's history reads the same either
 * way.  JsHoldEvents decides, before the row is written, what the new row
 * holds; JsWriteOutHeld, after it, stores as rows the held events the new
 * row no longer holds, and says whether it holds the change itself.
 *
 * A row goes in through the executor's single-row insert (rowwrite.c):
 * job_event_log's constraints, its indexes and any trigger an operator adds
 * to it all apply, but there is no statement to plan or start.
 *
 * History is the system's record, written whoever changed the job: a role
 * allowed to write job by raw SQL needs no privilege on job_event_log or
 * its sequence (and so cannot forge history rows), cannot set the held
 * seqs (fsm.c refuses), and row level security on job_event_log governs
 * who reads it, not this write.
 *
 * seq is the next of job_event_seq when the event happens (a held event
 * keeps it when it is written out), at the database clock then;
 * job_event_log (job_event in a 0.1.0 schema, where no row holds
 * anything) and job_event_seq are found in the job table's schema.
 *
 * Locks: RowExclusiveLock on job_event_log (and the sequence's lock).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "job_state.h"
#include "tables.h"
#include "rowwrite.h"
#include "rules.h"

static void
JsPushText(JsonbParseState **state, const char *key, Datum value)
{
	text	   *t = DatumGetTextPP(value);
	JsonbValue	v;

	v.type = jbvString;
	v.val.string.val = (char *) key;
	v.val.string.len = strlen(key);
	pushJsonbValue(state, WJB_KEY, &v);
	v.val.string.val = VARDATA_ANY(t);
	v.val.string.len = VARSIZE_ANY_EXHDR(t);
	pushJsonbValue(state, WJB_VALUE, &v);
}

/* {"reason": ..., "worker": ...} without the NULL ones; NULL when both are
 * (the trigger passes the worker only where the change set it) */
static Datum
JsEventDetail(const JsEvent *ev, bool *isnull)
{
	JsonbParseState *state = NULL;
	JsonbValue *obj;

	*isnull = ev->reason_null && ev->worker_null;
	if (*isnull)
		return (Datum) 0;
	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	if (!ev->reason_null)
		JsPushText(&state, "reason", ev->reason);
	if (!ev->worker_null)
		JsPushText(&state, "worker", ev->worker);
	obj = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	return JsonbPGetDatum(JsonbValueToJsonb(obj));
}

/*
 * job_event_log, or in a 0.1.0 schema the table job_event, opened with
 * RowExclusiveLock.  Its kind is checked on the open relation: a
 * job_event that is not a table (the view of 0.2.0) is no history table.
 * Either refusal (no such relation: 42P01; not a table: 42809) is an
 * error, so the change that needed the row is rolled back with it.
 */
static Relation
JsOpenEventLog(void)
{
	Oid			relid = JsOwnRelidIfAny("job_event_log");
	Relation	rel;

	if (!OidIsValid(relid))
		relid = JsOwnRelidIfAny("job_event");
	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("job_state: table job_event_log is missing"),
				 errdetail("A change of a job that the job row does not hold needs a history row, and the schema of the job table has no relation job_event_log or job_event."),
				 errhint("Rename the table back to job_event_log; the change was not made.")));
	rel = table_open(relid, RowExclusiveLock);
	if (rel->rd_rel->relkind != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("job_state: relation %s is not a table",
						RelationGetRelationName(rel)),
				 errdetail("A change of a job that the job row does not hold needs a history row, and table job_event_log is missing; history rows go only into a plain table."),
				 errhint("Rename the table back to job_event_log; the change was not made.")));
	return rel;
}

static int64
JsNextEventSeq(void)
{
	return nextval_internal(JsOwnRelid("job_event_seq"), false);
}

/*
 * Write one history row into job_event_log, with the next seq of
 * job_event_seq unless ev has one; status_oids are the OIDs of the status
 * labels, in JsStatus order.
 */
void
JsWriteEvent(const Oid *status_oids, const JsEvent *ev)
{
	Relation	rel;
	const JsEventColumns *cols;
	Datum		detail;
	bool		detail_null;
	JsRowWriter w;
	TupleTableSlot *slot;
	int64		seq = ev->seq != 0 ? ev->seq : JsNextEventSeq();

	detail = JsEventDetail(ev, &detail_null);
	rel = JsOpenEventLog();
	cols = JsEventColumnsFor(rel);

	JsRowWriterBegin(&w, rel, false);
	slot = JsRowWriterSlot(&w, &TTSOpsVirtual);
	ExecClearTuple(slot);
	memset(slot->tts_isnull, true, sizeof(bool) * slot->tts_tupleDescriptor->natts);
	slot->tts_values[cols->queue - 1] = ev->queue;
	slot->tts_isnull[cols->queue - 1] = false;
	slot->tts_values[cols->job_id - 1] = ev->job_id;
	slot->tts_isnull[cols->job_id - 1] = false;
	slot->tts_values[cols->seq - 1] = Int64GetDatum(seq);
	slot->tts_isnull[cols->seq - 1] = false;
	slot->tts_values[cols->from_status - 1] = ObjectIdGetDatum(status_oids[ev->from]);
	slot->tts_isnull[cols->from_status - 1] = false;
	slot->tts_values[cols->to_status - 1] = ObjectIdGetDatum(status_oids[ev->to]);
	slot->tts_isnull[cols->to_status - 1] = false;
	slot->tts_values[cols->generation - 1] = Int32GetDatum(ev->generation);
	slot->tts_isnull[cols->generation - 1] = false;
	slot->tts_values[cols->at - 1] =
		TimestampTzGetDatum(ev->has_at ? ev->at : GetCurrentTimestamp());
	slot->tts_isnull[cols->at - 1] = false;
	slot->tts_values[cols->detail - 1] = detail;
	slot->tts_isnull[cols->detail - 1] = detail_null;
	ExecStoreVirtualTuple(slot);

	ExecSimpleRelationInsert(w.rri, w.estate, slot);
	JsRowWriterEnd(&w);
	table_close(rel, NoLock);
}

static bool
JsTupleHas(TupleTableSlot *slot, int attnum, int64 *seq)
{
	bool		isnull;
	Datum		d = slot_getattr(slot, attnum, &isnull);

	*seq = isnull ? 0 : DatumGetInt64(d);
	return !isnull;
}

/*
 * Whether what a held claim says (started_at, worker, generation) is the
 * same in both rows, and with it what a held end says (status,
 * finished_at, reason).
 */
static bool
JsClaimSaysSame(const JsJobColumns *cols, TupleTableSlot *a, TupleTableSlot *b)
{
	return JsSameValue(a, b, cols->generation) &&
		JsSameValue(a, b, cols->started_at) &&
		JsSameValue(a, b, cols->worker);
}

static bool
JsEndSaysSame(const JsJobColumns *cols, TupleTableSlot *a, TupleTableSlot *b)
{
	return JsClaimSaysSame(cols, a, b) &&
		JsSameValue(a, b, cols->status) &&
		JsSameValue(a, b, cols->finished_at) &&
		JsSameValue(a, b, cols->reason);
}

/*
 * job_state_fsm (BEFORE UPDATE, after its checks): what the new row holds.
 * newslot is the row as the update wrote it, before the trigger stamps it;
 * from and to are the statuses.  Returns false when the held seqs stay as
 * they are, else sets *held:
 *	- a claim out of accepted, with no reason, is held: it stamps
 *	  started_at, generation and (its caller) worker, which say the rest;
 *	- the change that ends a held claim (out of running into a status
 *	  that stamps finished_at, same generation and worker) is held beside
 *	  it;
 *	- anything else holds nothing: a change of status or generation is a
 *	  row of its own, and an update that would alter what a held event
 *	  says (the columns above, by raw SQL) has it written out first
 *	  (JsWriteOutHeld, which the AFTER trigger calls).
 * Nothing is held with job_state.track_events off.  The stamps the trigger
 * adds do not matter here: they come only with a change of status.
 */
bool
JsHoldEvents(const JsJobColumns *cols, TupleTableSlot *oldslot,
			 TupleTableSlot *newslot, JsStatus from, JsStatus to, JsHeldSeqs *held)
{
	int64		claim_seq;
	int64		end_seq;
	bool		has_claim;
	bool		has_end;
	bool		change;

	if (cols->held_claim_seq == 0)
		return false;			/* a 0.1.0 schema */
	has_claim = JsTupleHas(oldslot, cols->held_claim_seq, &claim_seq);
	has_end = JsTupleHas(oldslot, cols->held_end_seq, &end_seq);
	change = from != to || !JsSameValue(oldslot, newslot, cols->generation);

	held->claim_seq = held->end_seq = 0;
	held->claim_null = held->end_null = true;

	if (!change)
	{
		/* nothing new: what is held stays, unless what it says changes */
		if (has_end ? JsEndSaysSame(cols, oldslot, newslot) :
			!has_claim || JsClaimSaysSame(cols, oldslot, newslot))
			return false;
		return true;
	}
	if (js_track_events && from == JS_ACCEPTED && to == JS_RUNNING &&
		slot_attisnull(newslot, cols->reason))
	{
		held->claim_seq = JsNextEventSeq();
		held->claim_null = false;
		return true;
	}
	if (js_track_events && has_claim && !has_end && from == JS_RUNNING &&
		to != JS_ACCEPTED && to != JS_WAITING && to != JS_RUNNING &&
		JsClaimSaysSame(cols, oldslot, newslot))
	{
		held->claim_seq = claim_seq;
		held->claim_null = false;
		held->end_seq = JsNextEventSeq();
		held->end_null = false;
		return true;
	}
	return has_claim || has_end;
}

/*
 * The event a row holds, as the view job_event reads it: the claim
 * (accepted -> running at started_at, by worker) or its end (running ->
 * status at finished_at, with reason), in the row's generation.
 */
static void
JsHeldEvent(const JsJobColumns *cols, TupleTableSlot *slot, bool end,
			int64 seq, JsEvent *ev)
{
	bool		at_null;
	bool		isnull;
	Datum		at = slot_getattr(slot, end ? cols->finished_at : cols->started_at,
								  &at_null);

	ev->queue = slot_getattr(slot, cols->queue, &isnull);
	ev->job_id = slot_getattr(slot, cols->id, &isnull);
	ev->generation = JsTupleInt32(slot, cols->generation, &isnull);
	ev->from = end ? JS_RUNNING : JS_ACCEPTED;
	ev->to = end ? JsTupleStatus(cols, slot) : JS_RUNNING;
	ev->seq = seq;
	ev->has_at = !at_null;		/* set by raw SQL to NULL: now */
	ev->at = at_null ? 0 : DatumGetTimestampTz(at);
	ev->reason = (Datum) 0;
	ev->reason_null = true;
	ev->worker = (Datum) 0;
	ev->worker_null = true;
	if (end)
		ev->reason = slot_getattr(slot, cols->reason, &ev->reason_null);
	else
		ev->worker = slot_getattr(slot, cols->worker, &ev->worker_null);
}

/*
 * job_state_event (AFTER UPDATE): the events the old row held and the new
 * one no longer does go to job_event_log, as the old row says them, in
 * order.  Returns whether the new row holds an event the old one did not:
 * the change itself, which then needs no row.
 */
bool
JsWriteOutHeld(const JsJobColumns *cols, TupleTableSlot *oldslot,
			   TupleTableSlot *newslot)
{
	int			attnums[2] = {cols->held_claim_seq, cols->held_end_seq};
	bool		holds_new = false;
	int			i;

	if (cols->held_claim_seq == 0)
		return false;			/* a 0.1.0 schema */
	for (i = 0; i < 2; i++)
	{
		int64		old_seq;
		int64		new_seq;
		bool		has_old = JsTupleHas(oldslot, attnums[i], &old_seq);
		bool		has_new = JsTupleHas(newslot, attnums[i], &new_seq);

		if (has_old && (!has_new || new_seq != old_seq))
		{
			JsEvent		ev;

			JsHeldEvent(cols, oldslot, i == 1, old_seq, &ev);
			JsWriteEvent(cols->status_oids, &ev);
		}
		if (has_new && (!has_old || new_seq != old_seq))
			holds_new = true;
	}
	return holds_new;
}
