/*-------------------------------------------------------------------------
 *
 * rowwrite.c
 *	  Writing rows without a statement: the executor state that the
 *	  single-row insert and update of execReplication.c need.
 *
 * Logical replication applies rows this way, and so do we where starting a
 * statement would cost more than the row itself: history rows (event.c) and
 * the jobs a claim takes (take.c).  The executor's single-row calls fire
 * the table's row triggers, check its constraints and maintain all its
 * indexes, exactly as an INSERT or UPDATE does; the AFTER row triggers they
 * queue fire when the writer ends, as at the end of a statement.
 *
 * The caller opens and locks the relation, keeps it open until
 * JsRowWriterEnd, and provides an active snapshot for triggers that read.
 * JsLockJob finds and locks one job for such an update.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "parser/parse_relation.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "job_state.h"

void
JsRowWriterBegin(JsRowWriter *w, Relation rel)
{
	RangeTblEntry *rte;

	w->estate = CreateExecutorState();
	rte = makeNode(RangeTblEntry);
	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
#if PG_VERSION_NUM >= 160000
	{
		List	   *perminfos = NIL;

		addRTEPermissionInfo(&perminfos, rte);
#if PG_VERSION_NUM >= 180000
		ExecInitRangeTable(w->estate, list_make1(rte), perminfos,
						   bms_make_singleton(1));
#else
		ExecInitRangeTable(w->estate, list_make1(rte), perminfos);
#endif
	}
#else
	ExecInitRangeTable(w->estate, list_make1(rte));
#endif
	w->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(w->rri, rel, 1, NULL, 0);

	/*
	 * Listed as opened (without a reference of its own, so never closed by
	 * the executor) for the AFTER trigger queue to find it, as logical
	 * replication does.
	 */
	w->estate->es_opened_result_relations =
		lappend(w->estate->es_opened_result_relations, w->rri);
	w->estate->es_output_cid = GetCurrentCommandId(true);
	if (ActiveSnapshotSet())
		w->estate->es_snapshot = GetActiveSnapshot();
	ExecOpenIndices(w->rri, false);
#if PG_VERSION_NUM >= 160000
	EvalPlanQualInit(&w->epqstate, w->estate, NULL, NIL, -1, NIL);
#else
	EvalPlanQualInit(&w->epqstate, w->estate, NULL, NIL, -1);
#endif
	AfterTriggerBeginQuery();
}

/* a relation of job_state's own schema */
Oid
JsOwnRelid(const char *name)
{
	Oid			relid = get_relname_relid(name, get_namespace_oid("job_state", false));

	if (!OidIsValid(relid))
		elog(ERROR, "job_state: relation job_state.%s is missing", name);
	return relid;
}

/*
 * Start the new version of a row as a copy of the locked one: the caller
 * changes the columns it writes, then ExecStoreVirtualTuple(newslot).
 */
void
JsRowWriterCopy(TupleTableSlot *newslot, TupleTableSlot *locked)
{
	int			natts = locked->tts_tupleDescriptor->natts;

	ExecClearTuple(newslot);
	slot_getallattrs(locked);
	memcpy(newslot->tts_values, locked->tts_values, sizeof(Datum) * natts);
	memcpy(newslot->tts_isnull, locked->tts_isnull, sizeof(bool) * natts);
}

/* a slot of the relation's row type, released by JsRowWriterEnd */
TupleTableSlot *
JsRowWriterSlot(JsRowWriter *w, const TupleTableSlotOps *ops)
{
	return ExecInitExtraTupleSlot(w->estate,
								  RelationGetDescr(w->rri->ri_RelationDesc), ops);
}

/* fire the AFTER row triggers the writes queued, then free everything */
void
JsRowWriterEnd(JsRowWriter *w)
{
	ListCell   *lc;

	AfterTriggerEndQuery(w->estate);
	/* relations the trigger queue opened itself (none, normally) */
	foreach(lc, w->estate->es_trig_target_relations)
		table_close(((ResultRelInfo *) lfirst(lc))->ri_RelationDesc, NoLock);
	EvalPlanQualEnd(&w->epqstate);
	ExecCloseIndices(w->rri);
	ExecResetTupleTable(w->estate->es_tupleTable, false);
	FreeExecutorState(w->estate);
	w->estate = NULL;
}

/*
 * Lock the row at tid FOR NO KEY UPDATE into slot, as ExecLockRows does:
 * with LockWaitBlock wait for another locker, with LockWaitSkip skip the
 * row.  Under READ COMMITTED a row updated since the snapshot is followed
 * to its newest version, which the caller re-checks (as an UPDATE
 * re-checks its WHERE clause); under REPEATABLE READ and SERIALIZABLE that
 * is a serialization failure.  False when the row is to be skipped: locked
 * by another (LockWaitSkip), gone, or already changed by this command.
 */
bool
JsLockRow(JsRowWriter *w, ItemPointer tid, TupleTableSlot *slot,
		  LockWaitPolicy wait)
{
	TM_FailureData tmfd;
	TM_Result	result;

	result = table_tuple_lock(w->rri->ri_RelationDesc, tid, GetActiveSnapshot(),
							  slot, w->estate->es_output_cid,
							  LockTupleNoKeyExclusive, wait,
							  IsolationUsesXactSnapshot() ? 0 : TUPLE_LOCK_FLAG_FIND_LAST_VERSION,
							  &tmfd);
	switch (result)
	{
		case TM_Ok:
			return true;
		case TM_WouldBlock:
		case TM_SelfModified:
			return false;
		case TM_Updated:
			if (IsolationUsesXactSnapshot())
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("could not serialize access due to concurrent update")));
			break;
		case TM_Deleted:
			if (IsolationUsesXactSnapshot())
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("could not serialize access due to concurrent delete")));
			return false;
		default:
			break;
	}
	elog(ERROR, "job_state: unexpected result %d locking a row", (int) result);
	pg_unreachable();
}

/*
 * Find job (queue, id) by the job table's primary key under the active
 * snapshot and lock it (JsLockRow, waiting).  False when the job is not
 * there (any more).
 */
bool
JsLockJob(JsRowWriter *w, Relation pkey, Datum queue, Datum id,
		  TupleTableSlot *slot)
{
	Relation	rel = w->rri->ri_RelationDesc;
	ScanKeyData keys[2];
	IndexScanDesc scan;
	bool		found;
	ItemPointerData tid;

	ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
						   pkey->rd_indcollation[0], F_TEXTEQ, queue);
	ScanKeyEntryInitialize(&keys[1], 0, 2, BTEqualStrategyNumber, InvalidOid,
						   pkey->rd_indcollation[1], F_INT8EQ, id);
	scan = JsIndexBeginScan(rel, pkey, GetActiveSnapshot(), 2);
	index_rescan(scan, keys, 2, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	index_endscan(scan);
	if (!found)
		return false;
	tid = slot->tts_tid;
	return JsLockRow(w, &tid, slot, LockWaitBlock);
}
