/*-------------------------------------------------------------------------
 *
 * rowwrite.h
 *	  Single-row reads, locks and writes without a statement (rowwrite.c),
 *	  as logical replication applies rows: triggers, constraints and
 *	  indexes apply to them exactly as to an INSERT or UPDATE.
 *
 *-------------------------------------------------------------------------
 */
#ifndef JS_ROWWRITE_H
#define JS_ROWWRITE_H

#include "access/skey.h"
#include "access/tableam.h"
#include "nodes/execnodes.h"

#include "job_state.h"

/*
 * Server structs whose size a minor release may change.  PostgreSQL keeps
 * the fields of a released struct where they are but may add new ones at
 * its end (17.1, 16.5 and 15.9 did so to ResultRelInfo), which is harmless
 * only where the server allocates the struct.  So the server allocates
 * them where a server function does (ResultRelInfo), and where we must
 * (EPQState, RangeTblEntry, TM_FailureData) we allocate JS_STRUCT_ROOM
 * bytes past the size in our headers; rowwrite.c puts a canary past that
 * room where the server writes the struct.  A build with
 * -DJS_STRUCT_ROOM=-8 (room short of our own headers) makes the canary
 * fire: test/t/010_struct_room.pl.
 */
#ifndef JS_STRUCT_ROOM
#define JS_STRUCT_ROOM 256
#endif

/* what table_tuple_lock fills, with room (see JS_STRUCT_ROOM) */
typedef union JsTMFailureData
{
	TM_FailureData tmfd;
	char		room[sizeof(TM_FailureData) + JS_STRUCT_ROOM];
} JsTMFailureData;

/*
 * rowwrite.c: single-row writes without a statement.  Everything a writer
 * points to lives in its estate's memory and is allocated once per writer.
 */
typedef struct JsRowWriter
{
	EState	   *estate;
	ResultRelInfo *rri;			/* allocated by the server */
	EPQState   *epqstate;		/* with room and a canary */
	ExprState **defaults;		/* per column, built on first use */
	uint64		defaults_generation;	/* of the column defaults they were built from */
} JsRowWriter;

/* index_beginscan gained an instrumentation argument in PostgreSQL 18 */
#if PG_VERSION_NUM >= 180000
#define JsIndexBeginScan(heap, index, snapshot, nkeys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), 0)
#else
#define JsIndexBeginScan(heap, index, snapshot, nkeys) \
	index_beginscan((heap), (index), (snapshot), (nkeys), 0)
#endif

extern void JsStatementBegin(void);
extern void JsRowWriterBegin(JsRowWriter *w, Relation rel, bool speculative);

extern void JsRowWriterCopy(TupleTableSlot *newslot, TupleTableSlot *locked);
extern TupleTableSlot *JsRowWriterSlot(JsRowWriter *w, const TupleTableSlotOps *ops);
extern void JsRowWriterEnd(JsRowWriter *w);
extern void JsRowWriterBeginUpdate(JsRowWriter *w, Relation rel,
								   TupleTableSlot **locked, TupleTableSlot **newslot);
extern void JsRowWriterEndUpdate(JsRowWriter *w, TupleTableSlot *locked);
extern void JsRowWriterOpenUpdate(JsRowWriter *w, Relation rel,
								  TupleTableSlot **locked, TupleTableSlot **newslot);
extern void JsRowWriterCloseUpdate(JsRowWriter *w, TupleTableSlot *locked);
extern void JsRowWriterUpdate(JsRowWriter *w, TupleTableSlot *locked,
							  TupleTableSlot *newslot);
extern void JsRefuseSkippedUpdate(void);
extern void JsRowWriterDefaults(JsRowWriter *w, TupleTableSlot *slot, const bool *set);
typedef enum JsInsertResult
{
	JS_INSERTED,
	JS_INSERT_CONFLICT,			/* an arbiter index holds the key */
	JS_INSERT_SKIPPED			/* a BEFORE row trigger returned NULL */
} JsInsertResult;

extern JsInsertResult JsRowWriterInsert(JsRowWriter *w, TupleTableSlot *slot,
										List *arbiters);
extern void JsScanKey(ScanKey key, Relation index, AttrNumber attno,
					  StrategyNumber strategy, RegProcedure proc, Datum arg);
extern TM_Result JsLockTuple(Relation rel, ItemPointer tid, TupleTableSlot *slot,
							 CommandId cid, LockWaitPolicy wait, int flags);
typedef enum JsRowLock
{
	JS_ROW_LOCKED,				/* locked, into the slot */
	JS_ROW_HELD,				/* another transaction holds it (skipped) */
	JS_ROW_GONE					/* deleted, or changed by this command */
} JsRowLock;

extern JsRowLock JsLockRowFor(JsRowWriter *w, ItemPointer tid,
							  TupleTableSlot *slot, LockWaitPolicy wait);
extern bool JsLockRow(JsRowWriter *w, ItemPointer tid, TupleTableSlot *slot,
					  LockWaitPolicy wait);
extern bool JsRowGoneForGood(Relation rel, ItemPointer tid, Snapshot snapshot);
extern bool JsFindJob(Relation rel, Relation pkey, Datum queue, Datum id,
					  TupleTableSlot *slot);

extern bool JsLockJob(JsRowWriter *w, Relation pkey, Datum queue, Datum id,
					  TupleTableSlot *slot);

#endif							/* JS_ROWWRITE_H */
