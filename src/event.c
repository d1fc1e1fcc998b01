/*-------------------------------------------------------------------------
 *
 * event.c
 *	  Writing job history: one job_event row per change of a job's status
 *	  or generation after its submit, for the job_state_event trigger
 *	  (job_trigger.c).  The submit itself is recorded by the job row
 *	  (accepted_at, submitted_by: fixed, fsm.c).
 *
 * Every write of a job, by our functions or by raw SQL, fires that trigger,
 * so history is written in one place.  The row goes in through the
 * executor's single-row insert (rowwrite.c): job_event's constraints, its
 * indexes and any trigger an operator adds to it all apply, but there is
 * no statement to plan or start.
 *
 * History is the system's record, written whoever changed the job: a role
 * allowed to write job by raw SQL needs no privilege on job_event or its
 * sequence (and so cannot forge history rows), and row level security on
 * job_event governs who reads it, not this write.
 *
 * The seq and at columns get what their defaults give (nextval of
 * job_event_seq, clock_timestamp()); job_event_seq and job_event are found
 * in the job table's schema.
 *
 * Locks: RowExclusiveLock on job_event (and the sequence's lock).
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
#include "utils/lsyscache.h"
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
 * Write one history row.  jobrel is the job table (its schema holds
 * job_event and job_event_seq); status_oids are the OIDs of the status
 * labels, in JsStatus order.
 */
void
JsWriteEvent(Relation jobrel, const Oid *status_oids, const JsEvent *ev)
{
	Oid			nsp = RelationGetNamespace(jobrel);
	Oid			relid = get_relname_relid("job_event", nsp);
	Oid			seqid = get_relname_relid("job_event_seq", nsp);
	Relation	rel;
	const JsEventColumns *cols;
	Datum		detail;
	bool		detail_null;
	JsRowWriter w;
	TupleTableSlot *slot;

	if (!OidIsValid(relid) || !OidIsValid(seqid))
		elog(ERROR, "job_state: table job_event or sequence job_event_seq is missing");

	detail = JsEventDetail(ev, &detail_null);
	rel = table_open(relid, RowExclusiveLock);
	cols = JsEventColumnsFor(rel);

	JsRowWriterBegin(&w, rel, false);
	slot = JsRowWriterSlot(&w, &TTSOpsVirtual);
	ExecClearTuple(slot);
	memset(slot->tts_isnull, true, sizeof(bool) * slot->tts_tupleDescriptor->natts);
	slot->tts_values[cols->queue - 1] = ev->queue;
	slot->tts_isnull[cols->queue - 1] = false;
	slot->tts_values[cols->job_id - 1] = ev->job_id;
	slot->tts_isnull[cols->job_id - 1] = false;
	slot->tts_values[cols->seq - 1] = Int64GetDatum(nextval_internal(seqid, false));
	slot->tts_isnull[cols->seq - 1] = false;
	slot->tts_values[cols->from_status - 1] = ObjectIdGetDatum(status_oids[ev->from]);
	slot->tts_isnull[cols->from_status - 1] = false;
	slot->tts_values[cols->to_status - 1] = ObjectIdGetDatum(status_oids[ev->to]);
	slot->tts_isnull[cols->to_status - 1] = false;
	slot->tts_values[cols->generation - 1] = Int32GetDatum(ev->generation);
	slot->tts_isnull[cols->generation - 1] = false;
	slot->tts_values[cols->at - 1] = TimestampTzGetDatum(GetCurrentTimestamp());
	slot->tts_isnull[cols->at - 1] = false;
	slot->tts_values[cols->detail - 1] = detail;
	slot->tts_isnull[cols->detail - 1] = detail_null;
	ExecStoreVirtualTuple(slot);

	ExecSimpleRelationInsert(w.rri, w.estate, slot);
	JsRowWriterEnd(&w);
	table_close(rel, NoLock);
}
