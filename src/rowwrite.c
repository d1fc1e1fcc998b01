/*-------------------------------------------------------------------------
 *
 * rowwrite.c
 *	  Writing rows without a statement: the executor state that the
 *	  single-row insert and update of execReplication.c need.
 *
 * Logical replication applies rows this way, and so do we where starting a
 * statement would cost more than the row itself: history rows (event.c),
 * the jobs a claim takes (take.c), completions (complete.c) and submits
 * (submit.c).  The executor's single-row calls fire
 * the table's row triggers, check its constraints and maintain all its
 * indexes, exactly as an INSERT or UPDATE does; the AFTER row triggers they
 * queue fire when the writer ends, as at the end of a statement.
 *
 * The caller opens and locks the relation, keeps it open until
 * JsRowWriterEnd, and provides an active snapshot for triggers that read.
 * JsLockJob finds and locks one job for such an update.  JsRowWriterInsert
 * inserts as INSERT ... ON CONFLICT DO NOTHING does (submit.c), with the
 * column defaults of JsRowWriterDefaults.
 *
 * Safe across minor releases: the server allocates the ResultRelInfo, and
 * the EPQState and RangeTblEntry we allocate have room past the size in
 * our headers, with a canary checked after the server fills the EPQState
 * (JsAllocWithRoom; JS_STRUCT_ROOM in job_state.h).
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
#include "access/transam.h"
#include "catalog/namespace.h"
#include "catalog/pg_am_d.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/nodeModifyTable.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_relation.h"
#include "rewrite/rewriteHandler.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "job_state.h"
#include "rowindex.h"
#include "rowwrite.h"
#include "dispatch.h"

/*
 * A server struct we allocate ourselves (see JS_STRUCT_ROOM in job_state.h):
 * zeroed, with JS_STRUCT_ROOM spare bytes past the size in our headers for
 * fields a newer minor release added at its end, then a canary that a
 * server whose struct outgrew the room overwrites.
 */
#define JS_CANARY_LEN 16

StaticAssertDecl(JS_STRUCT_ROOM + JS_CANARY_LEN >= 0,
				 "JS_STRUCT_ROOM must leave the struct its own size");

/*
 * What to do about a serialization failure of claim, a completion or a
 * submit under REPEATABLE READ or SERIALIZABLE.
 */
#define JS_SERIALIZATION_HINT \
	"Retry the whole transaction; or run claim, its completions and submit in READ COMMITTED transactions, where they work on the newest version of the row (a claim skips a job another worker took)."

static const uint8 js_canary[JS_CANARY_LEN] = {
	0x6a, 0x73, 0xa5, 0x5a, 0xc3, 0x3c, 0x96, 0x69,
	0x6a, 0x73, 0xa5, 0x5a, 0xc3, 0x3c, 0x96, 0x69
};

static void *
JsAllocWithRoom(MemoryContext context, Size size)
{
	char	   *p = MemoryContextAllocZero(context,
										   size + JS_STRUCT_ROOM + JS_CANARY_LEN);

	memcpy(p + size + JS_STRUCT_ROOM, js_canary, JS_CANARY_LEN);
	return p;
}

/*
 * After the server function that fills a struct of JsAllocWithRoom: one
 * that wrote into the canary has a bigger struct than our headers and room
 * allow, and its next write could land past our allocation.  Caught here,
 * it only wrote into memory of ours.
 */
static void
JsCheckRoom(const void *p, Size size, const char *type)
{
	if (memcmp((const char *) p + size + JS_STRUCT_ROOM, js_canary,
			   JS_CANARY_LEN) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("this server's %s is bigger than job_state was built for", type),
				 errdetail("job_state's headers make an %s %zu bytes and job_state allocates %d bytes more; the server wrote past them.",
						   type, size, JS_STRUCT_ROOM),
				 errhint("Rebuild job_state against the headers of this server's PostgreSQL release; it was built against %s.",
						 PG_VERSION)));
}

/*
 * speculative: the indexes are opened for an insert with an ON CONFLICT
 * arbiter (ExecCheckIndexConstraints), as for INSERT ... ON CONFLICT.
 *
 * The ResultRelInfo is the server's own (ExecGetTriggerResultRel allocates
 * it at the server's size and lists it in es_trig_target_relations, where
 * the AFTER trigger queue finds it); the EPQState and the RangeTblEntry are
 * ours, with room (JsAllocWithRoom).  All live in the estate's memory.
 */
void
JsRowWriterBegin(JsRowWriter *w, Relation rel, bool speculative)
{
	RangeTblEntry *rte;

	w->estate = CreateExecutorState();
	w->defaults = NULL;
	w->defaults_generation = 0;

	/* the server only reads the range table: no canary to check */
	rte = JsAllocWithRoom(w->estate->es_query_cxt, sizeof(RangeTblEntry));
	rte->type = T_RangeTblEntry;
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

	/*
	 * A second reference to rel (the caller holds the lock), closed by
	 * JsRowWriterEnd.  The server initializes it for range table index 0
	 * (no entry); ours is entry 1, as for a statement's target.
	 */
	w->rri = ExecGetTriggerResultRel(w->estate, RelationGetRelid(rel), NULL);
	Assert(w->rri->ri_RelationDesc == rel);
	w->rri->ri_RangeTableIndex = 1;

	w->estate->es_output_cid = GetCurrentCommandId(true);
	if (ActiveSnapshotSet())
		w->estate->es_snapshot = GetActiveSnapshot();
	JsOpenIndices(w->rri, speculative);
	w->epqstate = JsAllocWithRoom(w->estate->es_query_cxt, sizeof(EPQState));
#if PG_VERSION_NUM >= 160000
	EvalPlanQualInit(w->epqstate, w->estate, NULL, NIL, -1, NIL);
#else
	EvalPlanQualInit(w->epqstate, w->estate, NULL, NIL, -1);
#endif
	JsCheckRoom(w->epqstate, sizeof(EPQState), "EPQState");
	AfterTriggerBeginQuery();
}

/*
 * Begin reading like a statement of the caller's transaction: after a
 * command-counter step, so that its own earlier writes are seen, under a
 * fresh snapshot (a new one in READ COMMITTED, the transaction's own in
 * REPEATABLE READ), pushed as the active one.  PopActiveSnapshot ends it.
 */
void
JsStatementBegin(void)
{
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
}

/*
 * Begin writing like an UPDATE statement of rows the caller locks: after a
 * command-counter step, under a new snapshot (see our own earlier writes),
 * with *locked for a row as locked and *newslot for its new version.
 * JsRowWriterEndUpdate ends it.
 */
void
JsRowWriterBeginUpdate(JsRowWriter *w, Relation rel, TupleTableSlot **locked,
					   TupleTableSlot **newslot)
{
	JsStatementBegin();
	JsRowWriterOpenUpdate(w, rel, locked, newslot);
}

/*
 * JsRowWriterBeginUpdate without the command-counter step and the
 * snapshot, which the caller has taken: for one that opens the writer only
 * once it has a row to write (a claim often finds none, take.c).
 * JsRowWriterCloseUpdate ends it.
 */
void
JsRowWriterOpenUpdate(JsRowWriter *w, Relation rel, TupleTableSlot **locked,
					  TupleTableSlot **newslot)
{
	JsRowWriterBegin(w, rel, false);
	*locked = table_slot_create(rel, NULL);
	*newslot = JsRowWriterSlot(w, &TTSOpsVirtual);
}

/*
 * Write newslot as the new version of the locked row, as
 * ExecSimpleRelationUpdate does: BEFORE row triggers, constraints, the heap
 * update, index entries, AFTER triggers queued.  The executor skips the row
 * silently when a BEFORE UPDATE trigger returns NULL; a claim or completion
 * that did not happen must not be reported as done, so that is an error.
 * A written row's new version leaves its TID in newslot.
 */
void
JsRowWriterUpdate(JsRowWriter *w, TupleTableSlot *locked, TupleTableSlot *newslot)
{
	ItemPointerSetInvalid(&newslot->tts_tid);
	ExecSimpleRelationUpdate(w->rri, w->estate, w->epqstate, locked, newslot);
	if (!ItemPointerIsValid(&newslot->tts_tid))
		JsRefuseSkippedUpdate();
}

/*
 * A change job_state made to a job was skipped by a BEFORE UPDATE trigger
 * the user added on the job table: raise 09000.
 */
void
JsRefuseSkippedUpdate(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_TRIGGERED_ACTION_EXCEPTION),
			 errmsg("job_state could not write a job's change"),
			 errdetail("A BEFORE UPDATE trigger on job_state.job returned NULL for the job."),
			 errhint("A trigger on job_state.job must not skip the rows job_state writes; raise an error to refuse a change.")));
}

/* the AFTER row triggers (history), then free everything */
void
JsRowWriterEndUpdate(JsRowWriter *w, TupleTableSlot *locked)
{
	JsRowWriterCloseUpdate(w, locked);
	PopActiveSnapshot();
}

/* end JsRowWriterOpenUpdate; the caller's snapshot stays */
void
JsRowWriterCloseUpdate(JsRowWriter *w, TupleTableSlot *locked)
{
	ExecDropSingleTupleTableSlot(locked);
	JsRowWriterEnd(w);
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
	EvalPlanQualEnd(w->epqstate);
	ExecCloseIndices(w->rri);
	/* the writer's own relation and any the trigger queue opened */
	foreach(lc, w->estate->es_trig_target_relations)
		table_close(((ResultRelInfo *) lfirst(lc))->ri_RelationDesc, NoLock);
	ExecResetTupleTable(w->estate->es_tupleTable, false);
	FreeExecutorState(w->estate);
	w->estate = NULL;
	w->rri = NULL;
	w->epqstate = NULL;
}

/*
 * Lock the row at tid FOR NO KEY UPDATE into slot, as ExecLockRows does:
 * with LockWaitBlock wait for another locker, with LockWaitSkip skip the
 * row.  Under READ COMMITTED a row updated since the snapshot is followed
 * to its newest version, which the caller re-checks (as an UPDATE
 * re-checks its WHERE clause); under REPEATABLE READ and SERIALIZABLE that
 * is a serialization failure.  JS_ROW_HELD when another transaction holds
 * the row (LockWaitSkip), JS_ROW_GONE when it is gone or was already
 * changed by this command.
 */
JsRowLock
JsLockRowFor(JsRowWriter *w, ItemPointer tid, TupleTableSlot *slot,
			 LockWaitPolicy wait)
{
	TM_Result	result;

	result = JsLockTuple(w->rri->ri_RelationDesc, tid, slot,
						 w->estate->es_output_cid, wait,
						 IsolationUsesXactSnapshot() ? 0 : TUPLE_LOCK_FLAG_FIND_LAST_VERSION);
	switch (result)
	{
		case TM_Ok:
			return JS_ROW_LOCKED;
		case TM_WouldBlock:
			return JS_ROW_HELD;
		case TM_SelfModified:
			return JS_ROW_GONE;
		case TM_Updated:
			if (IsolationUsesXactSnapshot())
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("could not serialize access due to concurrent update"),
						 errdetail("A row of job_state.%s was changed by a transaction that committed after this transaction's snapshot was taken.",
								   RelationGetRelationName(w->rri->ri_RelationDesc)),
						 errhint(JS_SERIALIZATION_HINT)));
			break;
		case TM_Deleted:
			if (IsolationUsesXactSnapshot())
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("could not serialize access due to concurrent delete"),
						 errdetail("A row of job_state.%s was deleted by a transaction that committed after this transaction's snapshot was taken.",
								   RelationGetRelationName(w->rri->ri_RelationDesc)),
						 errhint(JS_SERIALIZATION_HINT)));
			return JS_ROW_GONE;
		default:
			break;
	}
	elog(ERROR, "job_state: unexpected result %d locking a row", (int) result);
	pg_unreachable();
}

/* JsLockRowFor, true when locked: skipped rows need no reason */
bool
JsLockRow(JsRowWriter *w, ItemPointer tid, TupleTableSlot *slot,
		  LockWaitPolicy wait)
{
	return JsLockRowFor(w, tid, slot, wait) == JS_ROW_LOCKED;
}

/*
 * A scan key on column attno of index, with the index's collation for it.
 */
void
JsScanKey(ScanKey key, Relation index, AttrNumber attno, StrategyNumber strategy,
		  RegProcedure proc, Datum arg)
{
	ScanKeyEntryInitialize(key, 0, attno, strategy, InvalidOid,
						   index->rd_indcollation[attno - 1], proc, arg);
}

/*
 * Lock the row at tid of rel FOR NO KEY UPDATE into slot under the active
 * snapshot, as command cid; with flags TUPLE_LOCK_FLAG_FIND_LAST_VERSION
 * its newest version, else only this one.  What the server failed on is
 * written into room of our own (JS_STRUCT_ROOM) and not looked at: the
 * callers judge the result alone.
 */
TM_Result
JsLockTuple(Relation rel, ItemPointer tid, TupleTableSlot *slot, CommandId cid,
			LockWaitPolicy wait, int flags)
{
	JsTMFailureData tmfd;

	return table_tuple_lock(rel, tid, GetActiveSnapshot(), slot, cid,
							LockTupleNoKeyExclusive, wait, flags, &tmfd.tmfd);
}

/*
 * Find job (queue, id) of rel by its primary key pkey under the active
 * snapshot, into slot.  False when the job is not there (any more).
 */
bool
JsFindJob(Relation rel, Relation pkey, Datum queue, Datum id,
		  TupleTableSlot *slot)
{
	ScanKeyData keys[2];
	IndexScanDesc scan;
	bool		found;

	JsScanKey(&keys[0], pkey, 1, BTEqualStrategyNumber, F_TEXTEQ, queue);
	JsScanKey(&keys[1], pkey, 2, BTEqualStrategyNumber, F_INT8EQ, id);
	scan = JsIndexBeginScan(rel, pkey, GetActiveSnapshot(), 2);
	index_rescan(scan, keys, 2, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	index_endscan(scan);
	return found;
}

/*
 * The row at tid of rel, which an index scan under snapshot found no
 * visible version of: does no snapshot taken from now on see it either?
 * True when its line pointer is dead, or when the version the line
 * pointer leads to (through a redirect, to the first of a HOT chain) was
 * inserted by another transaction that had ended before snapshot was
 * taken (not running for it: committed or aborted), however young.  A
 * committed one is committed for snapshot and for every later one; as
 * snapshot does not see the chain, each of its versions was deleted by a
 * transaction snapshot sees as committed, which every later snapshot sees
 * so too.  (An older REPEATABLE READ snapshot may still see it.)  False
 * whenever unsure: a version of this transaction or of one that may still
 * run (a slot reused since is one), a table of another access method.
 */
bool
JsRowGoneForGood(Relation rel, ItemPointer tid, Snapshot snapshot)
{
	Buffer		buf;
	Page		page;
	OffsetNumber off = ItemPointerGetOffsetNumber(tid);
	bool		gone = false;
	int			hops;

	if (rel->rd_rel->relam != HEAP_TABLE_AM_OID || !IsMVCCSnapshot(snapshot))
		return false;
	buf = ReadBuffer(rel, ItemPointerGetBlockNumber(tid));
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	/* a redirect leads to a normal item: never more than one hop */
	for (hops = 0; hops < 2; hops++)
	{
		ItemId		lp;

		if (off < FirstOffsetNumber || off > PageGetMaxOffsetNumber(page))
			break;
		lp = PageGetItemId(page, off);
		if (ItemIdIsRedirected(lp))
		{
			off = ItemIdGetRedirect(lp);
			continue;
		}
		if (ItemIdIsDead(lp))
			gone = true;
		else if (ItemIdIsNormal(lp))
		{
			HeapTupleHeader htup = (HeapTupleHeader) PageGetItem(page, lp);
			TransactionId xmin = HeapTupleHeaderGetRawXmin(htup);

			/* ended before snapshot was taken: not running for it */
			gone = HeapTupleHeaderXminFrozen(htup) ||
				HeapTupleHeaderXminInvalid(htup) ||
				!TransactionIdIsNormal(xmin) ||
				(!TransactionIdIsCurrentTransactionId(xmin) &&
				 !XidInMVCCSnapshot(xmin, snapshot));
		}
		break;
	}
	UnlockReleaseBuffer(buf);
	return gone;
}

/*
 * Find job (queue, id) (JsFindJob) and lock it (JsLockRow, waiting).
 * False when the job is not there (any more).
 */
bool
JsLockJob(JsRowWriter *w, Relation pkey, Datum queue, Datum id,
		  TupleTableSlot *slot)
{
	ItemPointerData tid;

	if (!JsFindJob(w->rri->ri_RelationDesc, pkey, queue, id, slot))
		return false;
	tid = slot->tts_tid;
	return JsLockRow(w, &tid, slot, LockWaitBlock);
}

/*
 * Column defaults, as an INSERT that names only some columns applies them.
 * The default expressions of one relation are read from the catalog and
 * planned once per backend, in their own context, and dropped when the
 * relation's cache entry is invalidated (ALTER TABLE, DROP EXTENSION): the
 * invalidation only marks them, the next JsDefaultsFor builds them anew and
 * retires the old context to the end of the transaction (JsRetireContext),
 * as a writer whose default nested another write may still read it.  A
 * default that calls only built-in functions (nextval, clock_timestamp)
 * has its expression state kept there too: no procedural language runs
 * while it is evaluated, so no write nested in ours evaluates it at the
 * same time (see rowindex.c).  Any other default gets a state per writer.
 */
typedef struct JsDefaults
{
	Oid			relid;			/* InvalidOid: nothing cached */
	uint64		generation;		/* counts the rebuilds */
	int			natts;
	Expr	  **exprs;			/* per column; NULL: the default is NULL */
	bool	   *kept;			/* per column: its state is kept in states */
	ExprState **states;			/* per kept column, built on first use */
	MemoryContext context;
} JsDefaults;

static JsDefaults js_defaults;

static void
JsDefaultsInvalidate(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == js_defaults.relid)
		js_defaults.relid = InvalidOid;
}

static JsDefaults *
JsDefaultsFor(Relation rel)
{
	MemoryContext oldcontext;
	int			i;

	if (js_defaults.relid == RelationGetRelid(rel))
		return &js_defaults;

	JsOnRelcache(JsDefaultsInvalidate);
	/* a writer's loop over the old defaults may still be running */
	if (js_defaults.context != NULL)
		JsRetireContext(js_defaults.context);
	js_defaults.context = AllocSetContextCreate(CacheMemoryContext,
												"job_state column defaults",
												ALLOCSET_SMALL_SIZES);

	oldcontext = MemoryContextSwitchTo(js_defaults.context);
	js_defaults.natts = RelationGetNumberOfAttributes(rel);
	js_defaults.exprs = palloc0(sizeof(Expr *) * js_defaults.natts);
	js_defaults.kept = palloc0(sizeof(bool) * js_defaults.natts);
	js_defaults.states = palloc0(sizeof(ExprState *) * js_defaults.natts);
	for (i = 0; i < js_defaults.natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), i);
		Node	   *expr;

		/*
		 * A generated column's "default" is its generation expression: a
		 * stored one is computed from the row (ExecComputeStoredGenerated),
		 * a virtual one (PostgreSQL 18) is never stored.
		 */
		if (att->attisdropped || att->attgenerated)
			continue;
		expr = build_column_default(rel, i + 1);
		if (expr == NULL)
			continue;
		js_defaults.exprs[i] = expression_planner((Expr *) expr);
		js_defaults.kept[i] = JsOnlyBuiltinFunctions((Node *) js_defaults.exprs[i]);
	}
	MemoryContextSwitchTo(oldcontext);
	js_defaults.relid = RelationGetRelid(rel);
	js_defaults.generation++;
	return &js_defaults;
}

/*
 * Give every column of slot whose set[] entry is false its default (NULL
 * where it has none).  The caller has cleared the slot and set the other
 * columns; it then stores the virtual tuple.  A writer that inserts many
 * rows (submit_many) builds the expression state of each default that is
 * not kept per backend once, again only when the cached defaults were
 * rebuilt meanwhile.
 */
void
JsRowWriterDefaults(JsRowWriter *w, TupleTableSlot *slot, const bool *set)
{
	/* a copy: a write nested in a default may rebuild the cached ones */
	JsDefaults	defaults = *JsDefaultsFor(w->rri->ri_RelationDesc);
	ExprContext *econtext = GetPerTupleExprContext(w->estate);
	MemoryContext oldcontext;
	ExprState  *state;
	int			i;

	oldcontext = MemoryContextSwitchTo(w->estate->es_query_cxt);
	if (w->defaults == NULL || w->defaults_generation != defaults.generation)
	{
		w->defaults = palloc0(sizeof(ExprState *) * defaults.natts);
		w->defaults_generation = defaults.generation;
	}
	for (i = 0; i < defaults.natts; i++)
	{
		if (set[i])
			continue;
		slot->tts_values[i] = (Datum) 0;
		slot->tts_isnull[i] = true;
		if (defaults.exprs[i] == NULL)
			continue;
		if (defaults.kept[i])
		{
			if (defaults.states[i] == NULL)
			{
				MemoryContextSwitchTo(defaults.context);
				defaults.states[i] = ExecInitExpr(defaults.exprs[i], NULL);
				MemoryContextSwitchTo(w->estate->es_query_cxt);
			}
			state = defaults.states[i];
		}
		else
		{
			if (w->defaults[i] == NULL)
				w->defaults[i] = ExecInitExpr(defaults.exprs[i], NULL);
			state = w->defaults[i];
		}
		slot->tts_values[i] = ExecEvalExprSwitchContext(state, econtext,
														&slot->tts_isnull[i]);
	}
	MemoryContextSwitchTo(oldcontext);
}

/*
 * If a row conflicting with slot on one of the arbiter indexes exists
 * (the caller's snapshot aside), under REPEATABLE READ and SERIALIZABLE it
 * must be visible to the transaction's snapshot, as for INSERT ... ON
 * CONFLICT; one inserted by this transaction always is.
 */
static void
JsCheckConflictVisible(JsRowWriter *w, ItemPointer tid)
{
	Relation	rel = w->rri->ri_RelationDesc;
	TupleTableSlot *existing;
	bool		isnull;

	if (!IsolationUsesXactSnapshot())
		return;
	existing = table_slot_create(rel, NULL);
	if (!table_tuple_fetch_row_version(rel, tid, SnapshotAny, existing))
		elog(ERROR, "job_state: conflicting row not found");
	if (!table_tuple_satisfies_snapshot(rel, existing, w->estate->es_snapshot) &&
		!TransactionIdIsCurrentTransactionId(
			DatumGetTransactionId(slot_getsysattr(existing, MinTransactionIdAttributeNumber, &isnull))))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent update"),
				 errdetail("A row holding the same key was inserted by a transaction that committed after this transaction's snapshot was taken."),
				 errhint(JS_SERIALIZATION_HINT)));
	ExecDropSingleTupleTableSlot(existing);
}

static List *
JsInsertIndexTuples(JsRowWriter *w, TupleTableSlot *slot, bool noDupErr,
					bool *specConflict, List *arbiters)
{
#if PG_VERSION_NUM >= 160000
	return ExecInsertIndexTuples(w->rri, slot, w->estate, false, noDupErr,
								 specConflict, arbiters, false);
#else
	return ExecInsertIndexTuples(w->rri, slot, w->estate, false, noDupErr,
								 specConflict, arbiters);
#endif
}

/*
 * Insert the row in slot as INSERT ... ON CONFLICT DO NOTHING does with
 * the arbiter indexes (a list of index OIDs; NIL: a plain INSERT): BEFORE
 * row triggers, constraints, a speculative heap insert confirmed once no
 * arbiter holds a conflicting entry, every index, and the AFTER row
 * triggers queued for JsRowWriterEnd.  Nothing is written when a
 * conflicting row exists or a BEFORE trigger skipped the row.  The writer
 * must have been begun with speculative = true for arbiters.
 */
JsInsertResult
JsRowWriterInsert(JsRowWriter *w, TupleTableSlot *slot, List *arbiters)
{
	ResultRelInfo *rri = w->rri;
	EState	   *estate = w->estate;
	Relation	rel = rri->ri_RelationDesc;
	List	   *recheck;

	if (rri->ri_TrigDesc && rri->ri_TrigDesc->trig_insert_before_row &&
		!ExecBRInsertTriggers(estate, rri, slot))
		return JS_INSERT_SKIPPED;
	if (rel->rd_att->constr && rel->rd_att->constr->has_generated_stored)
		ExecComputeStoredGenerated(rri, estate, slot, CMD_INSERT);
	if (rel->rd_att->constr)
		ExecConstraints(rri, slot, estate);

	if (arbiters == NIL)
	{
		table_tuple_insert(rel, slot, estate->es_output_cid, 0, NULL);
		recheck = JsInsertIndexTuples(w, slot, false, NULL, NIL);
	}
	else
	{
		for (;;)
		{
			ItemPointerData conflict;
			uint32		token;
			bool		specConflict = false;

			/* a committed (or our own) conflicting row: do nothing */
#if PG_VERSION_NUM >= 180000
			if (!ExecCheckIndexConstraints(rri, slot, estate, &conflict, NULL, arbiters))
#else
			if (!ExecCheckIndexConstraints(rri, slot, estate, &conflict, arbiters))
#endif
			{
				JsCheckConflictVisible(w, &conflict);
				return JS_INSERT_CONFLICT;
			}

			/*
			 * Insert, then check again while inserting the index entries: a
			 * concurrent insert of the same key makes one of us back out
			 * its row and start over (and then find the other's).
			 */
			token = SpeculativeInsertionLockAcquire(GetCurrentTransactionId());
			table_tuple_insert_speculative(rel, slot, estate->es_output_cid, 0,
										   NULL, token);
			recheck = JsInsertIndexTuples(w, slot, true, &specConflict, arbiters);
			table_tuple_complete_speculative(rel, slot, token, !specConflict);
			SpeculativeInsertionLockRelease(GetCurrentTransactionId());
			if (!specConflict)
				break;
			list_free(recheck);
		}
	}

	ExecARInsertTriggers(estate, rri, slot, recheck, NULL);
	list_free(recheck);
	return JS_INSERTED;
}
