/*-------------------------------------------------------------------------
 *
 * take.c
 *	  Taking ready jobs for claim without a statement: the queue's options,
 *	  the walk of the ready index, the SKIP LOCKED row locks, the move to
 *	  running and the probe for leases that ran out.
 *
 * The steps run as index scans and single-row updates (starting one SQL
 * statement would cost more than the work it does), with the semantics of
 * the statement:
 *
 *	SELECT ... FROM job_state.job
 *	 WHERE queue = $1 AND status = 'accepted' AND run_after <= now
 *	 ORDER BY priority DESC, run_after, id
 *	 FOR NO KEY UPDATE SKIP LOCKED
 *
 * followed by an UPDATE of each row taken:
 * - the ready index job_ready (queue, priority DESC, run_after, id) WHERE
 *   status = 'accepted' is walked in its order under a fresh snapshot
 *   (the transaction's under REPEATABLE READ and SERIALIZABLE);
 * - each visible job is locked FOR NO KEY UPDATE, skipping rows locked by
 *   others; a row updated since the snapshot is followed to its newest
 *   version and re-checked (status, run_after) under READ COMMITTED, and
 *   is a serialization failure otherwise, as in ExecLockRows (JsLockRow,
 *   rowwrite.c);
 * - a locked job whose attempts, deadline or budget are used up becomes
 *   failed with the reason, others running with the worker and the lease;
 *   the write goes through the executor's single-row update (rowwrite.c),
 *   so the job triggers check it, bump generation and attempts, and record
 *   it, as for any UPDATE.
 *
 * Resuming after a mark (claim_mark.c) walks the priorities above the
 * mark's from their start, the mark's priority from the mark on, then the
 * priorities below, each a bounded index scan.
 * The plain claim (JsClaimReady, for queues without limits) runs whole
 * here: passes of this walk, lease expiry between them (lease.c) and the
 * mark it leaves; claim_limited.c takes the jobs one by one instead
 * (JsReadCandidates, JsTakeJob).  Both return their rows through
 * JsReturnClaimed.
 *
 * Locks: RowExclusiveLock on job and its indexes; AccessShareLock on queue;
 * the row locks of the jobs taken.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/itup.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "utils/tuplestore.h"

#include "job_state.h"
#include "tables.h"
#include "rowwrite.h"
#include "rules.h"
#include "take.h"
#include "frontier.h"
#include "token.h"
#include "lease_floor.h"

/*
 * One step of taking jobs: the writer and its slots.  A walk of the ready
 * index opens the writer at its first visible entry (JsTakeStepOpen), so
 * a claim of an empty queue opens no executor state and none of the job
 * table's indexes.
 */
typedef struct JsTakeStep
{
	bool		open;			/* the writer and the slots exist */
	JsRowWriter w;
	TupleTableSlot *locked;		/* the job as locked */
	TupleTableSlot *newslot;	/* its new version */
} JsTakeStep;

static void
JsTakeStepOpen(JsTake *t, JsTakeStep *step)
{
	if (step->open)
		return;
	JsRowWriterOpenUpdate(&step->w, t->job, &step->locked, &step->newslot);
	step->open = true;
}

/* a scan of the ready index */
typedef struct JsReadyScan
{
	int			nkeys;
	ScanKeyData keys[4];
	ScanKeyData row[2];			/* (run_after, id) > the mark's */
} JsReadyScan;

/*
 * Open the job table and what claim reads; the caller's SPI connection is
 * not used.
 */
void
JsTakeOpen(JsTake *t)
{
	t->job = table_open(JsOwnRelid("job"), RowExclusiveLock);
	t->ready = index_open(JsOwnRelid("job_ready"), RowExclusiveLock);
	t->lease = index_open(JsOwnRelid("job_lease"), RowExclusiveLock);
	t->pkey = NULL;
	t->cols = JsJobColumnsFor(t->job);
	t->scanslot = table_slot_create(t->job, NULL);
}

void
JsTakeClose(JsTake *t)
{
	ExecDropSingleTupleTableSlot(t->scanslot);
	if (t->pkey != NULL)
		index_close(t->pkey, NoLock);
	index_close(t->lease, NoLock);
	index_close(t->ready, NoLock);
	table_close(t->job, NoLock);
}

/*
 * The queue's options (JsReadQueueCached): false when there is no such
 * queue.  Read like a statement: after a command-counter step, under a
 * fresh snapshot.
 */
bool
JsTakeReadQueue(JsTake *t, Datum queue, Interval *asked, JsQueueOptions *q)
{
	bool		found;

	JsStatementBegin();
	found = JsReadQueueCached(queue, asked, q);
	PopActiveSnapshot();
	return found;
}

/* why a job may not start (NULL: it may), in the order of SPEC 6 */
static const char *
JsUsedUp(const JsJobColumns *cols, TupleTableSlot *slot)
{
	bool		isnull;
	Datum		max_attempts = slot_getattr(slot, cols->max_attempts, &isnull);
	Datum		deadline;
	Datum		budget;

	if (!isnull &&
		DatumGetInt32(slot_getattr(slot, cols->attempts, &isnull)) >= DatumGetInt32(max_attempts))
		return "attempts_exhausted";
	/* a start needs one more attempt and generation (int4, raw SQL only) */
	if (DatumGetInt32(slot_getattr(slot, cols->attempts, &isnull)) == PG_INT32_MAX ||
		DatumGetInt32(slot_getattr(slot, cols->generation, &isnull)) == PG_INT32_MAX)
		return "attempts_exhausted";
	deadline = slot_getattr(slot, cols->deadline, &isnull);
	if (!isnull && DatumGetTimestampTz(deadline) <= GetCurrentTimestamp())
		return "deadline_exceeded";
	budget = slot_getattr(slot, cols->budget, &isnull);
	if (!isnull &&
		JsBudgetExhaustedMeter(DatumGetJsonbP(budget),
							   DatumGetJsonbP(slot_getattr(slot, cols->spent, &isnull))) != NULL)
		return "budget_exhausted";
	return NULL;
}

/*
 * Lock the job at t->scanslot's tid and move it: JS_TAKE_SKIPPED when it
 * was passed over (locked by another claimer, gone, or no longer ready).
 * A job that may start is first offered to may_start, if given (the
 * limited path's start token): false leaves it locked and unchanged,
 * JS_TAKE_THROTTLED.  slots, if given, are the numbers of the slots the
 * job will hold (JsSlotKind order, 0 for none), recorded with the move to
 * running.  cand, if given, is the job as the limited path read it,
 * unlocked, when it chose those slots: a job whose resource or
 * concurrency key changed since is passed over, for its slots belong to
 * the old scope (the job would run holding them, and its release would
 * look in the new one).
 */
static bool
JsSameScope(TupleTableSlot *locked, int attnum, const char *expected)
{
	if (locked->tts_isnull[attnum - 1])
		return expected == NULL;
	return expected != NULL &&
		strcmp(TextDatumGetCString(locked->tts_values[attnum - 1]), expected) == 0;
}

static JsTakeResult
JsTakeOne(JsTake *t, const JsTakeArgs *args, JsTakeStep *step,
		  const JsCandidate *cand, const int32 *slots,
		  bool (*may_start) (void *arg), void *arg, JsTaken *out)
{
	const JsJobColumns *cols = t->cols;
	JsRowWriter *w;
	TupleTableSlot *locked;
	TupleTableSlot *newslot;
	ItemPointerData tid = t->scanslot->tts_tid;
	bool		isnull;
	const char *why;
	int			kind;

	JsTakeStepOpen(t, step);
	w = &step->w;
	locked = step->locked;
	newslot = step->newslot;

	/* SKIP LOCKED: a job another claimer holds is passed over */
	switch (JsLockRowFor(w, &tid, locked, LockWaitSkip))
	{
		case JS_ROW_LOCKED:
			break;
		case JS_ROW_HELD:
			return JS_TAKE_HELD;
		case JS_ROW_GONE:
			return JS_TAKE_SKIPPED;
	}

	/* the locked version may be newer than the one scanned: check it again */
	JsRowWriterCopy(newslot, locked);
	if (DatumGetObjectId(locked->tts_values[cols->status - 1]) != cols->status_oids[JS_ACCEPTED] ||
		DatumGetTimestampTz(locked->tts_values[cols->run_after - 1]) > args->now)
		return JS_TAKE_SKIPPED;
	if (cand != NULL &&
		(!JsSameScope(locked, cols->resource, cand->resource) ||
		 !JsSameScope(locked, cols->concurrency_key, cand->concurrency_key)))
		return JS_TAKE_SKIPPED;

	why = JsUsedUp(cols, locked);
	if (why == NULL && may_start != NULL && !may_start(arg))
		return JS_TAKE_THROTTLED;
	newslot->tts_values[cols->status - 1] =
		ObjectIdGetDatum(cols->status_oids[why == NULL ? JS_RUNNING : JS_FAILED]);
	newslot->tts_values[cols->reason - 1] = why == NULL ? (Datum) 0 : CStringGetTextDatum(why);
	newslot->tts_isnull[cols->reason - 1] = why == NULL;
	newslot->tts_values[cols->worker - 1] = args->worker;
	newslot->tts_isnull[cols->worker - 1] = false;
	if (why == NULL)
		newslot->tts_values[cols->lease_expires_at - 1] =
			DirectFunctionCall2(timestamptz_pl_interval,
								TimestampTzGetDatum(GetCurrentTimestamp()),
								IntervalPGetDatum(args->lease));
	newslot->tts_isnull[cols->lease_expires_at - 1] = why != NULL;
	for (kind = 0; kind < JS_NUM_SLOT_KINDS; kind++)
	{
		bool		held = slots != NULL && slots[kind] != 0 && why == NULL;

		newslot->tts_values[cols->slot[kind] - 1] = held ? Int32GetDatum(slots[kind]) : (Datum) 0;
		newslot->tts_isnull[cols->slot[kind] - 1] = !held;
	}
	ExecStoreVirtualTuple(newslot);

	/*
	 * The job trigger bumps generation and attempts: read them after.  It
	 * takes slots for a start by raw SQL; this one holds its slots already.
	 */
	js_claim_starting = true;
	PG_TRY();
	{
		JsRowWriterUpdate(w, locked, newslot);
	}
	PG_FINALLY();
	{
		js_claim_starting = false;
	}
	PG_END_TRY();

	out->job_id = DatumGetInt64(slot_getattr(newslot, cols->id, &isnull));
	out->generation = DatumGetInt32(slot_getattr(newslot, cols->generation, &isnull));
	/* and draws the new generation's nonce (0 on a 0.1.0 schema) */
	out->nonce = cols->claim_nonce == 0 ? 0 :
		DatumGetInt32(slot_getattr(newslot, cols->claim_nonce, &isnull));
	out->attempts = DatumGetInt32(slot_getattr(newslot, cols->attempts, &isnull));
	out->started = why == NULL;
	out->input = datumCopy(slot_getattr(newslot, cols->input, &isnull), false, -1);
	out->deadline = slot_getattr(newslot, cols->deadline, &out->deadline_null);
	out->key.priority = DatumGetInt32(slot_getattr(newslot, cols->priority, &isnull));
	out->key.run_after = DatumGetTimestampTz(slot_getattr(newslot, cols->run_after, &isnull));
	out->key.id = out->job_id;
	return JS_TAKE_TAKEN;
}

/* queue = $1 [AND priority <op> the mark's] AND run_after <= now */
static void
JsReadyKeys(JsTake *t, const JsTakeArgs *args, JsReadyScan *rs,
			StrategyNumber priority_strategy, RegProcedure priority_proc)
{
	JsScanKey(&rs->keys[rs->nkeys++], t->ready, 1, BTEqualStrategyNumber, F_TEXTEQ,
		  args->queue);
	if (priority_strategy != InvalidStrategy)
		JsScanKey(&rs->keys[rs->nkeys++], t->ready, 2, priority_strategy, priority_proc,
			  Int32GetDatum(args->mark->priority));
	JsScanKey(&rs->keys[rs->nkeys++], t->ready, 3, BTLessEqualStrategyNumber,
		  F_TIMESTAMPTZ_LE, TimestampTzGetDatum(args->now));
}

/*
 * (run_after, id) > (the mark's), as one row-comparison key, so that the
 * scan starts just after the mark even among jobs of equal run_after
 * (a batch submitted in one transaction).
 */
static void
JsAfterMarkKey(JsReadyScan *rs, const JsClaimKey *mark)
{
	ScanKeyEntryInitialize(&rs->row[0], SK_ROW_MEMBER, 3, BTGreaterStrategyNumber,
						   InvalidOid, InvalidOid, F_TIMESTAMP_CMP,
						   TimestampTzGetDatum(mark->run_after));
	ScanKeyEntryInitialize(&rs->row[1], SK_ROW_MEMBER | SK_ROW_END, 4,
						   BTGreaterStrategyNumber, InvalidOid, InvalidOid,
						   F_BTINT8CMP, Int64GetDatum(mark->id));
	ScanKeyEntryInitialize(&rs->keys[rs->nkeys++], SK_ROW_HEADER, 3,
						   BTGreaterStrategyNumber, InvalidOid, InvalidOid,
						   InvalidOid, PointerGetDatum(rs->row));
}

/*
 * The scans of one walk, in claim order; returns how many.  Keys in
 * attribute order: queue = $1, then the priority bound of a resumed walk,
 * then run_after <= now (and, in the mark's priority, (run_after, id) >
 * the mark's).
 */
static int
JsReadyScans(JsTake *t, const JsTakeArgs *args, JsReadyScan *scans)
{
	int			n = 0;

	memset(scans, 0, sizeof(JsReadyScan) * 3);
	if (args->mark == NULL)
	{
		JsReadyKeys(t, args, &scans[0], InvalidStrategy, InvalidOid);
		return 1;
	}
	/*
	 * Priorities above the mark's (unless only what follows the mark in
	 * claim order is asked for), the mark's from the mark on, below.
	 */
	if (!args->after_mark_only)
		JsReadyKeys(t, args, &scans[n++], BTGreaterStrategyNumber, F_INT4GT);
	JsReadyKeys(t, args, &scans[n], BTEqualStrategyNumber, F_INT4EQ);
	JsAfterMarkKey(&scans[n++], args->mark);
	JsReadyKeys(t, args, &scans[n++], BTLessStrategyNumber, F_INT4LT);
	return n;
}

/* the key of the index entry the scan is on (its index tuple) */
static void
JsScanKeyOf(IndexScanDesc scan, JsClaimKey *key)
{
	bool		isnull;

	key->priority = DatumGetInt32(index_getattr(scan->xs_itup, 2, scan->xs_itupdesc, &isnull));
	key->run_after = DatumGetTimestampTz(index_getattr(scan->xs_itup, 3, scan->xs_itupdesc, &isnull));
	key->id = DatumGetInt64(index_getattr(scan->xs_itup, 4, scan->xs_itupdesc, &isnull));
}

/*
 * Walk one ready-index scan, taking up to room jobs into out.  It reads
 * entry by entry (index_getnext_slot's loop) so that run, if given, can
 * note the key of every entry read, visible or not, until one is held by
 * another transaction; only then are the index tuples kept.
 */
static int
JsTakeFromScan(JsTake *t, const JsTakeArgs *args, JsTakeStep *step,
			   JsReadyScan *rs, int room, JsTaken *out, JsTakeRun *run)
{
	IndexScanDesc scan;
	int			taken = 0;
	bool		unbroken = true;
	JsClaimKey	key;

	if (run != NULL)
		run->have = false;
	scan = JsIndexBeginScan(t->job, t->ready, GetActiveSnapshot(), rs->nkeys);
	scan->xs_want_itup = run != NULL;
	index_rescan(scan, rs->keys, rs->nkeys, NULL, 0);
	while (taken < room)
	{
		if (!scan->xs_heap_continue)
		{
			if (index_getnext_tid(scan, ForwardScanDirection) == NULL)
				break;
			if (run != NULL)
				JsScanKeyOf(scan, &key);
		}
		if (index_fetch_heap(scan, t->scanslot))
		{
			switch (JsTakeOne(t, args, step, NULL, NULL, NULL, NULL, &out[taken]))
			{
				case JS_TAKE_TAKEN:
					taken++;
					break;
				case JS_TAKE_HELD:
					unbroken = false;
					break;
				default:
					break;
			}
		}
		if (unbroken && run != NULL)
		{
			run->have = true;
			run->end = key;
		}
		CHECK_FOR_INTERRUPTS();
	}
	index_endscan(scan);
	return taken;
}

/*
 * Take up to args->asked ready jobs of the queue, in claim order, from the
 * head of the ready index or resuming after args->mark.  Fills out (room
 * for args->asked entries) and returns how many were taken (started, or
 * failed as used up).  *expiry_due tells whether a lease in the queue has
 * run out (by args->now).  *run, if run is given (a claim at a shared
 * frontier), is what the walk accounted for: in the mark's priority if
 * that scan read any entry, else in the last scan that did.
 */
int
JsTakeReady(JsTake *t, const JsTakeArgs *args, JsTaken *out, bool *expiry_due,
			JsTakeRun *run)
{
	JsTakeStep	step;
	JsReadyScan scans[3];
	JsTakeRun	runs[3];
	int			nscans;
	int			taken = 0;
	int			i;

	/* as JsRowWriterBeginUpdate, with the writer opened when needed */
	JsStatementBegin();
	step.open = false;
	nscans = JsReadyScans(t, args, scans);
	if (run != NULL)
		run->have = false;
	for (i = 0; i < nscans && taken < args->asked; i++)
	{
		taken += JsTakeFromScan(t, args, &step, &scans[i], args->asked - taken,
								out + taken, run != NULL ? &runs[i] : NULL);
		if (run != NULL && runs[i].have &&
			!(run->have && args->mark != NULL &&
			  run->end.priority == args->mark->priority))
			*run = runs[i];
	}

	*expiry_due = JsLeaseExpiryDue(t, args->queue, args->now);

	if (step.open)
		JsRowWriterCloseUpdate(&step.w, step.locked);
	PopActiveSnapshot();
	return taken;
}

/*
 * Read up to args->asked ready jobs of the queue in claim order, from the
 * head or resuming after args->mark, without locking them: the limited
 * path (limits.c) takes a job's slots before the job.  Read like a
 * statement: after a command-counter step, under a fresh snapshot.  The
 * names in out are allocated in the current memory context.
 */
int
JsReadCandidates(JsTake *t, const JsTakeArgs *args, JsCandidate *out)
{
	const JsJobColumns *cols = t->cols;
	TupleTableSlot *slot = t->scanslot;
	JsReadyScan scans[3];
	int			nscans;
	int			n = 0;
	int			i;

	JsStatementBegin();
	nscans = JsReadyScans(t, args, scans);
	for (i = 0; i < nscans && n < args->asked; i++)
	{
		IndexScanDesc scan;

		scan = JsIndexBeginScan(t->job, t->ready, GetActiveSnapshot(), scans[i].nkeys);
		index_rescan(scan, scans[i].keys, scans[i].nkeys, NULL, 0);
		while (n < args->asked &&
			   index_getnext_slot(scan, ForwardScanDirection, slot))
		{
			JsCandidate *c = &out[n++];
			bool		isnull;
			Datum		d;

			c->key.id = DatumGetInt64(slot_getattr(slot, cols->id, &isnull));
			c->key.priority = DatumGetInt32(slot_getattr(slot, cols->priority, &isnull));
			c->key.run_after = DatumGetTimestampTz(slot_getattr(slot, cols->run_after, &isnull));
			d = slot_getattr(slot, cols->resource, &isnull);
			c->resource = isnull ? NULL : TextDatumGetCString(d);
			d = slot_getattr(slot, cols->concurrency_key, &isnull);
			c->concurrency_key = isnull ? NULL : TextDatumGetCString(d);
			CHECK_FOR_INTERRUPTS();
		}
		index_endscan(scan);
	}
	PopActiveSnapshot();
	return n;
}

/*
 * Take one job of the queue by its id, for the limited path (limits.c),
 * which has found it among the candidates and holds the slots it needs:
 * the same steps as for a job of the ready-index walk (JsTakeOne), with
 * may_start asked between the lock and the move.
 */
JsTakeResult
JsTakeJob(JsTake *t, const JsTakeArgs *args, const JsCandidate *cand,
		  const int32 *slots, bool (*may_start) (void *arg), void *arg,
		  JsTaken *out)
{
	JsTakeResult result = JS_TAKE_SKIPPED;
	JsTakeStep	step;

	if (t->pkey == NULL)
		t->pkey = index_open(JsOwnRelid("job_pkey"), AccessShareLock);
	JsRowWriterBeginUpdate(&step.w, t->job, &step.locked, &step.newslot);
	step.open = true;
	if (JsFindJob(t->job, t->pkey, args->queue, Int64GetDatum(cand->key.id),
				  t->scanslot))
		result = JsTakeOne(t, args, &step, cand, slots, may_start, arg, out);

	JsRowWriterEndUpdate(&step.w, step.locked);
	return result;
}

/*
 * Has a lease of the queue run out by now?  The first visible entry of
 * job_lease at or below now, under the active snapshot, walked from this
 * session's lease floor for the queue (lease_floor.c): the entries of
 * versions that no later snapshot sees, which a pinned xmin horizon leaves
 * behind there, are read about once per session instead of by every claim.
 * The walk notes the unbroken run of such entries from where it starts,
 * and the floor rises to the last of them.
 */
bool
JsLeaseExpiryDue(JsTake *t, Datum queue, TimestampTz now)
{
	ScanKeyData keys[3];
	IndexScanDesc scan;
	Snapshot	snapshot = GetActiveSnapshot();
	Oid			job_relid = RelationGetRelid(t->job);
	char	   *name = TextDatumGetCString(queue);
	TimestampTz floor = JsLeaseFloorGet(job_relid, name, now);
	TimestampTz gone_to = DT_NOBEGIN;
	bool		run = true;
	bool		found = false;
	int			nkeys = 0;
	ItemPointer tid;

	JsScanKey(&keys[nkeys++], t->lease, 1, BTEqualStrategyNumber, F_TEXTEQ, queue);
	if (floor != DT_NOBEGIN)
		JsScanKey(&keys[nkeys++], t->lease, 2, BTGreaterEqualStrategyNumber,
				  F_TIMESTAMPTZ_GE, TimestampTzGetDatum(floor));
	JsScanKey(&keys[nkeys++], t->lease, 2, BTLessEqualStrategyNumber, F_TIMESTAMPTZ_LE,
			  TimestampTzGetDatum(now));
	scan = JsIndexBeginScan(t->job, t->lease, snapshot, nkeys);
	scan->xs_want_itup = true;	/* the expiry of each entry, for the floor */
	index_rescan(scan, keys, nkeys, NULL, 0);
	while ((tid = index_getnext_tid(scan, ForwardScanDirection)) != NULL)
	{
		ItemPointerData htid = *tid;

		if (index_fetch_heap(scan, t->scanslot))
		{
			found = true;
			break;
		}
		if (run && JsRowGoneForGood(t->job, &htid, snapshot))
		{
			bool		isnull;
			Datum		expiry = index_getattr(scan->xs_itup, 2, scan->xs_itupdesc, &isnull);

			if (!isnull)
				gone_to = DatumGetTimestampTz(expiry);
		}
		else
			run = false;
		CHECK_FOR_INTERRUPTS();
	}
	index_endscan(scan);
	JsLeaseFloorRaise(job_relid, name, floor == DT_NOBEGIN, gone_to, now);
	pfree(name);
	return found;
}

/*
 * One output row of claim for a job it started: (token, job_id, attempts,
 * input, deadline).  Minting may run SPI (the secret's first use), so both
 * claim paths call this after their reads of the job.
 */
void
JsReturnClaimed(ReturnSetInfo *rsinfo, const JsTaken *taken, int32 queue_id)
{
	Datum		out[5];
	bool		outnulls[5] = {false, false, false, false, false};

	out[0] = ClaimTokenGetDatum(JsTokenMint(taken->job_id, taken->generation,
											queue_id, taken->nonce));
	out[1] = Int64GetDatum(taken->job_id);
	out[2] = Int32GetDatum(taken->attempts);
	out[3] = taken->input;
	out[4] = taken->deadline;
	outnulls[4] = taken->deadline_null;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnulls);
}

/*
 * The plain claim, for queues without limits: take up to max_jobs ready
 * jobs of the queue, resuming after the queue's shared frontier
 * (frontier.c) or, without one, after this session's mark in the queue
 * (claim_mark.c).  A pass looks again from the head of the queue when
 * leases ran out (their expiry, lease.c, may requeue jobs behind where it
 * resumed) and, resuming at a session mark, when the resumed walk came
 * back short (jobs may be ready behind the mark; a frontier has none);
 * another pass runs when jobs turned out used up and left room.  Each
 * started job is one output row; t is closed and the frontier or the mark
 * left for the next claim.
 */
/* bound on the passes one claim makes (used-up jobs, expiry rounds) */
#define JS_CLAIM_MAX_PASSES 16

/* where a claim call resumes, and what it leaves for the next one */
typedef struct JsResume
{
	bool		shared;			/* at the frontier, else at the session mark */
	JsFrontierTicket ticket;
	bool		have;			/* shared: resume after key */
	JsClaimKey	key;
	bool		moved;			/* shared: key was accounted for by this call */
	bool		from_head;		/* session mark: a pass looked from the head */
	bool		have_last;		/* session mark: the last job taken */
	JsClaimKey	last;
} JsResume;

void
JsClaimReady(JsTake *t, const char *queue, Datum queue_datum, Datum worker,
			 const JsQueueOptions *q, int32 max_jobs, TimestampTz started,
			 ReturnSetInfo *rsinfo)
{
	JsTaken    *taken;
	int			claimed = 0;
	int			passes = 0;
	JsResume	r = {0};
	Oid			job_relid = RelationGetRelid(t->job);

	taken = palloc(sizeof(JsTaken) * max_jobs);

	/* the frontier is read before the snapshot of the walk is taken */
	r.shared = JsFrontierBegin(job_relid, queue, &r.ticket);
	r.have = r.shared && r.ticket.have;
	if (r.have)
		r.key = r.ticket.frontier;

	for (;;)
	{
		JsTakeArgs	args;
		JsClaimKey	mark;
		bool		resumed = false;
		bool		expiry_due;
		JsTakeRun	run;
		int			n;
		int			i;
		int			used_up = 0;

		args.queue = queue_datum;
		args.worker = worker;
		args.lease = (Interval *) &q->lease;
		args.now = GetCurrentTimestamp();
		args.asked = q->paused ? 0 : max_jobs - claimed;
		args.after_mark_only = false;
		if (r.shared)
		{
			args.mark = r.have ? &r.key : NULL;
			n = JsTakeReady(t, &args, taken, &expiry_due, &run);
			if (run.have)
			{
				r.have = r.moved = true;
				r.key = run.end;
			}
		}
		else
		{
			resumed = !r.from_head && JsClaimMarkGet(queue, args.now, &mark);
			if (!resumed)
				r.from_head = true;
			args.mark = resumed ? &mark : NULL;
			n = JsTakeReady(t, &args, taken, &expiry_due, NULL);
		}

		for (i = 0; i < n; i++)
		{
			if (!taken[i].started)
			{
				used_up++;
				continue;
			}
			JsReturnClaimed(rsinfo, &taken[i], q->id);
			claimed++;
		}

		/*
		 * The next claim resumes after the last job taken, in claim order,
		 * by the last pass that took any: a pass from the head that finds
		 * nothing more leaves the mark of the resumed pass before it.
		 */
		if (n > 0)
		{
			r.last = taken[n - 1].key;
			r.have_last = true;
		}

		if (expiry_due)
			JsExpireLeases(queue);
		if (claimed >= max_jobs || ++passes > JS_CLAIM_MAX_PASSES)
			break;
		if (expiry_due)
		{
			/* requeued jobs may lie anywhere: from the head */
			r.from_head = true;
			r.have = false;
			r.moved = false;
		}
		else if (resumed && n < args.asked)
			r.from_head = true;
		else if (used_up == 0)
			break;
	}

	JsTakeClose(t);
	if (r.shared)
	{
		if (r.moved)
			JsFrontierPropose(&r.ticket, &r.key);
	}
	else
		JsClaimMarkSet(job_relid, queue, started, r.from_head,
					   r.have_last ? &r.last : NULL);
}
