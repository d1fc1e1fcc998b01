/*-------------------------------------------------------------------------
 *
 * slot.c
 *	  Concurrency slot rows taken, held and freed without a statement.
 *
 * A limit of N running jobs is N rows of job_state.slot (limits.c).  The
 * three row operations of every limited claim and completion run here as
 * index scans and single-row updates, as the job's own do (take.c,
 * complete.c), in place of the statements
 *
 *	SELECT n FROM job_state.slot
 *	 WHERE kind = $1 AND scope = $2 AND key = $3 AND job_id IS NULL
 *	   AND n <= $4 ORDER BY n LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED;
 *	UPDATE job_state.slot SET job_id = $5, queue = $6 WHERE <that row>;
 *	UPDATE job_state.slot SET job_id = NULL, queue = NULL
 *	 WHERE (kind, scope, key, n) = (...) AND job_id = $1;
 *
 * The last finds the slot by the number the job row records.  None of them
 * changes an indexed column, so a slot is taken and freed by HOT updates
 * (the table keeps half of each page free for them): no index entry is
 * added, and the walk of a scope's slots passes exactly its N entries,
 * however many times they were taken.
 *
 * Slots are bookkeeping shared by all claimers, not data a transaction
 * reads: they are read under the latest snapshot whatever the isolation
 * level, so a REPEATABLE READ claim sees the slots freed since its
 * snapshot and never fails for a slot that moved.
 *
 * A free slot is taken only as its newest version: the row is locked
 * without following its update chain, and a row that another claimer
 * holds locked, or that changed since it was read, is skipped (it was just
 * taken or freed; the next claim sees it).  So two claimers never take one
 * slot, and a claimer never keeps a lock on a slot it did not take, which
 * would make the completion of that slot's job wait for the claimer's
 * transaction.  The number of running jobs holding a scope's slots
 * therefore never exceeds its N.
 *
 * Locks: RowExclusiveLock on job_state.slot and its indexes; the row locks
 * of the slots taken and freed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "job_state.h"
#include "tables.h"
#include "rowwrite.h"
#include "slots.h"

/* job_state.slot's columns */
enum
{
	SLOT_KIND = 1,
	SLOT_SCOPE,
	SLOT_KEY,
	SLOT_N,
	SLOT_QUEUE,
	SLOT_JOB_ID
};

/* keys[0..2]: the slots of (kind, scope, key) in slot_pkey */
static void
JsSlotScopeKeys(ScanKey keys, Relation pkey, const char *kind, const char *scope,
				const char *key)
{
	JsScanKey(&keys[0], pkey, 1, BTEqualStrategyNumber, F_TEXTEQ,
			  CStringGetTextDatum(kind));
	JsScanKey(&keys[1], pkey, 2, BTEqualStrategyNumber, F_TEXTEQ,
			  CStringGetTextDatum(scope));
	JsScanKey(&keys[2], pkey, 3, BTEqualStrategyNumber, F_TEXTEQ,
			  CStringGetTextDatum(key ? key : ""));
}

/* the slot table has the columns this file writes, by number */
static void
JsSlotCheckShape(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);

	if (desc->natts != SLOT_JOB_ID ||
		strcmp(NameStr(TupleDescAttr(desc, SLOT_N - 1)->attname), "n") != 0 ||
		strcmp(NameStr(TupleDescAttr(desc, SLOT_JOB_ID - 1)->attname), "job_id") != 0)
		elog(ERROR, "job_state: job_state.slot does not have the expected columns");
}

/*
 * The slots are walked in ranges of n, the first JS_SLOT_RANGE wide and
 * each next one four times wider.  A B-tree scan reads every entry of a
 * leaf page that its keys allow before it returns the first, and the
 * upper bound of n is what stops it: with one range of 1 to limit, each
 * claim of a scope of a thousand slots compared a page of them, when the
 * first free one is found among the first few (the lowest are taken first
 * and freed soonest).
 */
#define JS_SLOT_RANGE 16

/*
 * Lock a free slot numbered 1 to limit of (kind, scope, key), the lowest
 * one to be had, into *slot.  False when every slot is held or being taken
 * or freed by another transaction.
 */
bool
JsSlotLockFree(JsSlot *slot, const char *kind, const char *scope,
			   const char *key, int32 limit)
{
	Relation	rel = table_open(JsOwnRelid("slot"), RowExclusiveLock);
	Relation	pkey = index_open(JsOwnRelid("slot_pkey"), RowExclusiveLock);
	TupleTableSlot *scanslot = table_slot_create(rel, NULL);
	TupleTableSlot *locked = table_slot_create(rel, NULL);
	ScanKeyData keys[5];
	IndexScanDesc scan;
	int64		low = 1;
	int64		width = JS_SLOT_RANGE;
	bool		found = false;

	JsSlotCheckShape(rel);
	JsSlotScopeKeys(keys, pkey, kind, scope, key);

	CommandCounterIncrement();
	PushActiveSnapshot(GetLatestSnapshot());
	scan = JsIndexBeginScan(rel, pkey, GetActiveSnapshot(), 5);
	while (!found && low <= limit)
	{
		int64		high = Min(low + width - 1, (int64) limit);

		JsScanKey(&keys[3], pkey, 4, BTGreaterEqualStrategyNumber, F_INT4GE,
				  Int32GetDatum((int32) low));
		JsScanKey(&keys[4], pkey, 4, BTLessEqualStrategyNumber, F_INT4LE,
				  Int32GetDatum((int32) high));
		index_rescan(scan, keys, 5, NULL, 0);
		while (index_getnext_slot(scan, ForwardScanDirection, scanslot))
		{
			ItemPointerData tid = scanslot->tts_tid;
			bool		isnull;

			(void) slot_getattr(scanslot, SLOT_JOB_ID, &isnull);
			if (!isnull || JsLockTuple(rel, &tid, locked, GetCurrentCommandId(false),
								   LockWaitSkip, 0) != TM_Ok)
				continue;
			/* the newest version, locked: still free, as it was read */
			(void) slot_getattr(locked, SLOT_JOB_ID, &isnull);
			if (!isnull)
				continue;
			slot->kind = kind;
			slot->scope = pstrdup(scope);
			slot->key = pstrdup(key ? key : "");
			slot->n = DatumGetInt32(slot_getattr(locked, SLOT_N, &isnull));
			slot->tid = locked->tts_tid;
			found = true;
			break;
		}
		low = high + 1;
		width *= 4;
	}
	index_endscan(scan);
	PopActiveSnapshot();

	ExecDropSingleTupleTableSlot(locked);
	ExecDropSingleTupleTableSlot(scanslot);
	index_close(pkey, NoLock);
	table_close(rel, NoLock);
	return found;
}

/*
 * The slot this transaction locked (JsSlotLockFree) is held by the job
 * from now on; slot->n becomes 0.
 */
void
JsSlotHold(JsSlot *slot, int64 job_id, const char *queue)
{
	Relation	rel;
	JsRowWriter w;
	TupleTableSlot *locked;
	TupleTableSlot *newslot;

	if (slot->n == 0)
		return;
	rel = table_open(JsOwnRelid("slot"), RowExclusiveLock);
	JsRowWriterBeginUpdate(&w, rel, &locked, &newslot);
	/* our lock keeps it the newest version */
	if (!table_tuple_fetch_row_version(rel, &slot->tid, SnapshotAny, locked))
		elog(ERROR, "job_state: a locked slot is gone");
	JsRowWriterCopy(newslot, locked);
	newslot->tts_values[SLOT_JOB_ID - 1] = Int64GetDatum(job_id);
	newslot->tts_isnull[SLOT_JOB_ID - 1] = false;
	newslot->tts_values[SLOT_QUEUE - 1] = CStringGetTextDatum(queue);
	newslot->tts_isnull[SLOT_QUEUE - 1] = false;
	ExecStoreVirtualTuple(newslot);
	JsRowWriterUpdate(&w, locked, newslot);
	JsRowWriterEndUpdate(&w, locked);
	table_close(rel, NoLock);
	slot->n = 0;
}

/*
 * Free the slots of a job that left running, numbers[kind] of each kind
 * (JsSlotKind order, 0 for none): the queue's and the key's are scoped by
 * queue, the resource's by resource.  Called by the job's AFTER trigger
 * (fsm.c) with the numbers the old row recorded.  A slot row another
 * transaction has locked is waited for, as an UPDATE waits, and only a
 * slot still held by the job is freed.
 */
void
JsReleaseSlots(int64 job_id, const char *queue, const char *resource,
			   const char *key, const int32 *numbers)
{
	static const char *const kinds[JS_NUM_SLOT_KINDS] = {"queue", "resource", "key"};
	Relation	rel = table_open(JsOwnRelid("slot"), RowExclusiveLock);
	Relation	pkey = index_open(JsOwnRelid("slot_pkey"), RowExclusiveLock);
	TupleTableSlot *scanslot = table_slot_create(rel, NULL);
	JsRowWriter w;
	TupleTableSlot *locked;
	TupleTableSlot *newslot;
	IndexScanDesc scan;
	int			kind;

	JsSlotCheckShape(rel);
	JsRowWriterBeginUpdate(&w, rel, &locked, &newslot);
	PushActiveSnapshot(GetLatestSnapshot());
	scan = JsIndexBeginScan(rel, pkey, GetActiveSnapshot(), 4);
	for (kind = 0; kind < JS_NUM_SLOT_KINDS; kind++)
	{
		ScanKeyData keys[4];
		ItemPointerData tid;
		bool		isnull;
		Datum		holder;

		if (numbers[kind] == 0)
			continue;
		JsSlotScopeKeys(keys, pkey, kinds[kind],
						kind == JS_SLOT_RESOURCE ? resource : queue,
						kind == JS_SLOT_KEY ? key : NULL);
		JsScanKey(&keys[3], pkey, 4, BTEqualStrategyNumber, F_INT4EQ,
				  Int32GetDatum(numbers[kind]));
		index_rescan(scan, keys, 4, NULL, 0);
		if (!index_getnext_slot(scan, ForwardScanDirection, scanslot))
			continue;			/* gone with its queue or resource */
		tid = scanslot->tts_tid;

		/* its newest version, as an UPDATE re-checks its WHERE clause */
		if (JsLockTuple(rel, &tid, locked, GetCurrentCommandId(false),
						LockWaitBlock, TUPLE_LOCK_FLAG_FIND_LAST_VERSION) != TM_Ok)
			continue;
		holder = slot_getattr(locked, SLOT_JOB_ID, &isnull);
		if (isnull || DatumGetInt64(holder) != job_id)
			continue;
		JsRowWriterCopy(newslot, locked);
		newslot->tts_isnull[SLOT_JOB_ID - 1] = true;
		newslot->tts_isnull[SLOT_QUEUE - 1] = true;
		ExecStoreVirtualTuple(newslot);
		JsRowWriterUpdate(&w, locked, newslot);
	}
	index_endscan(scan);
	PopActiveSnapshot();
	JsRowWriterEndUpdate(&w, locked);

	ExecDropSingleTupleTableSlot(scanslot);
	index_close(pkey, NoLock);
	table_close(rel, NoLock);
}
