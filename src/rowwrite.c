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
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "parser/parse_relation.h"
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
