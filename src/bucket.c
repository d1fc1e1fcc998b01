/*-------------------------------------------------------------------------
 *
 * bucket.c
 *	  The start rate of a resource: token buckets split into shards, so that
 *	  claimers do not queue on one row.
 *
 * A resource's max_starts_per_second R allows a burst of B = floor(max(R, 1))
 * whole starts: one second's worth, at least 1.  It is kept as K =
 * min(B, JS_BUCKET_SHARDS) rows of job_state.bucket (JsBucketShards).  The
 * burst is dealt out in whole tokens, shard i holding at most b_i = B / K,
 * or one more for the first B % K shards, and refilling at R * b_i / B
 * tokens a second: together the shards allow exactly R starts a second
 * and a burst of exactly B, as a single bucket would.  Each shard carries its
 * own rate and burst rather than deriving them from the resource's rate:
 * a claim that read the rate before a change committed still refills the
 * new shards by their own rules.
 *
 * A start takes one token from any shard.  With a single bucket row, each
 * claimer held it locked from its start to its commit and every other
 * claimer of the resource found it locked: starts of a resource ran one
 * transaction at a time, however high the rate.  With K shards, K claimers
 * in open transactions can each take a token; a claimer begins at a shard
 * of its own (by process id) and goes round the others.
 *
 * Shards are bookkeeping shared by all claimers, as slots are (slot.c):
 * read under the latest snapshot whatever the isolation level, so a
 * REPEATABLE READ claim never fails for a shard another claimer wrote.  A
 * shard is locked only when its version as read holds a whole token once
 * refilled to now (an empty shard costs neither a lock nor a write) or
 * was refilled at a time ahead of now, only as that version, and SKIP
 * LOCKED: a shard another claimer holds, or one that changed since it was
 * read, is passed for the next.  The token is taken through the executor's
 * single-row update, a HOT update (only the primary key is indexed).  The
 * lock is kept to the end of the transaction; a rolled-back start gives
 * its token back.  The caller learns whether all shards were empty or one
 * was only held by another claimer: a claim then passes the resource's
 * other jobs, or tries again for the next one.
 *
 * Clock steps: a refill time ahead of the clock (it stepped back) adds no
 * tokens and takes none away; the first claim that finds such a shard
 * without a whole token moves its refill time to now, keeping its tokens,
 * so the shard refills from there: a step back never holds starts back
 * for longer than a refill from now would.
 *
 * The shards are made again whenever the rate is set or changed
 * (resource.c's AFTER trigger: create_resource, alter_resource and raw SQL
 * alike), holding together the tokens the old ones held at that moment,
 * the first shards filled first so that whole tokens stay whole; a new
 * resource's are full.
 *
 * Locks: RowExclusiveLock on job_state.bucket and its primary key; the row
 * lock of the shard a token is taken from.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/tableam.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "job_state.h"
#include "tables.h"
#include "rowwrite.h"
#include "slots.h"

/* the most shards one resource's rate is split into */
#define JS_BUCKET_SHARDS 32

/* the highest rate, as create_resource checks it (resource.c) */
#define JS_BUCKET_MAX_RATE 1e6

/* job_state.bucket's columns */
enum
{
	BUCKET_RESOURCE = 1,
	BUCKET_N,
	BUCKET_PER_SECOND,
	BUCKET_BURST,
	BUCKET_TOKENS,
	BUCKET_REFILLED_AT
};

/* the bucket table has the columns this file reads and writes, by number */
static void
JsBucketCheckShape(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);

	if (desc->natts != BUCKET_REFILLED_AT ||
		strcmp(NameStr(TupleDescAttr(desc, BUCKET_PER_SECOND - 1)->attname), "per_second") != 0 ||
		strcmp(NameStr(TupleDescAttr(desc, BUCKET_TOKENS - 1)->attname), "tokens") != 0 ||
		strcmp(NameStr(TupleDescAttr(desc, BUCKET_REFILLED_AT - 1)->attname), "refilled_at") != 0)
		elog(ERROR, "job_state: job_state.bucket does not have the expected columns");
}

static JsPlan drop_plan = {
	"DELETE FROM job_state.bucket WHERE resource OPERATOR(pg_catalog.=) $1"
	" RETURNING per_second, burst, tokens, refilled_at",
	1, {TEXTOID}
};

static JsPlan make_plan = {
	"INSERT INTO job_state.bucket (resource, n, per_second, burst, tokens, refilled_at)"
	" VALUES ($1, $2, $3, $4, $5, $6)",
	6, {TEXTOID, INT4OID, FLOAT8OID, INT4OID, FLOAT8OID, TIMESTAMPTZOID}
};

/*
 * The burst of a rate of per_second starts a second: whole starts, at least
 * 1.  Rates above JS_BUCKET_MAX_RATE (or NaN) never reach here through
 * JsMakeBuckets; one restored as it was is taken as the bound, so the cast
 * never overflows.
 */
static int32
JsBucketBurst(double per_second)
{
	if (per_second < 1.0)
		return 1;
	if (!(per_second <= JS_BUCKET_MAX_RATE))
		return (int32) JS_BUCKET_MAX_RATE;
	return (int32) per_second;
}

/* How many shards a rate of per_second starts a second is split into. */
static int
JsBucketShards(double per_second)
{
	return Min(JsBucketBurst(per_second), JS_BUCKET_SHARDS);
}

/*
 * The tokens a shard holds at now: refilled at per_second, at most burst.
 * A refill time ahead of now (the clock stepped back) adds nothing, and
 * never takes away: the elapsed time is never negative.  The difference is
 * taken in double: a refill time of -infinity (raw SQL) is a full shard,
 * where the int64 subtraction would overflow.
 */
static double
JsBucketRefill(double per_second, int32 burst, double tokens,
			   TimestampTz refilled_at, TimestampTz now)
{
	if (now > refilled_at)
		tokens += per_second * ((double) now - (double) refilled_at) / USECS_PER_SEC;
	return Min(tokens, (double) burst);
}

/*
 * Make the shards of resource name for a rate of per_second starts a
 * second (0: the resource has no rate, and no shards).  The new shards
 * hold together what the old ones held now, or are full when there were
 * none.  Needs SPI.
 */
void
JsMakeBuckets(const char *name, double per_second)
{
	TimestampTz now = GetCurrentTimestamp();
	Datum		values[6];
	double		held = 0;
	bool		had;
	int32		burst;
	int			shards;
	int			i;
	int			n;

	/* raw SQL passes the resource's CHECK (> 0) with NaN or Infinity */
	if (!(per_second <= 0) && !(per_second <= JS_BUCKET_MAX_RATE))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_starts_per_second must be greater than 0 and at most 1000000"),
				 errdetail("Resource \"%s\" would get the rate %g.", name, per_second),
				 errhint("Use job_state.alter_resource() with a rate in that range.")));

	values[0] = CStringGetTextDatum(name);
	n = JsExecute(&drop_plan, values, NULL, false, 0);
	had = n > 0;
	for (i = 0; i < n; i++)
	{
		bool		isnull;

		held += JsBucketRefill(DatumGetFloat8(JsGetDatumCopy(i, 1, &isnull)),
							   JsGetInt32(i, 2, &isnull),
							   DatumGetFloat8(JsGetDatumCopy(i, 3, &isnull)),
							   DatumGetTimestampTz(JsGetDatumCopy(i, 4, &isnull)),
							   now);
	}
	if (per_second <= 0)
		return;

	/*
	 * burst / shards whole tokens each, one more for the first burst %
	 * shards; what the old shards held fills the first ones, so that the
	 * whole tokens among it stay whole
	 */
	burst = JsBucketBurst(per_second);
	shards = JsBucketShards(per_second);
	for (i = 1; i <= shards; i++)
	{
		int32		share = burst / shards + (i <= burst % shards ? 1 : 0);
		double		tokens = had ? Min(held, (double) share) : share;

		held -= tokens;
		values[1] = Int32GetDatum(i);
		values[2] = Float8GetDatum(per_second * share / burst);
		values[3] = Int32GetDatum(share);
		values[4] = Float8GetDatum(tokens);
		values[5] = TimestampTzGetDatum(now);
		JsExecute(&make_plan, values, NULL, false, 0);
	}
}

/*
 * Take one token from shard number n of resource name, if it holds one:
 * found, newest and not locked by another claimer.  *busy is set when it
 * held a token but another claimer had it locked or had just written it.
 * rel, pkey, the slots and the row writer are the caller's.
 */
static bool
JsTakeFromShard(Relation rel, Relation pkey, const char *name, int32 n,
				TupleTableSlot *found, JsRowWriter *w, TupleTableSlot *locked,
				TupleTableSlot *newslot, TimestampTz now, bool *busy)
{
	ScanKeyData keys[2];
	IndexScanDesc scan;
	ItemPointerData tid;
	bool		isnull;
	double		tokens;
	TimestampTz refilled_at;

	JsScanKey(&keys[0], pkey, 1, BTEqualStrategyNumber, F_TEXTEQ,
			  CStringGetTextDatum(name));
	JsScanKey(&keys[1], pkey, 2, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(n));
	scan = JsIndexBeginScan(rel, pkey, GetActiveSnapshot(), 2);
	index_rescan(scan, keys, 2, NULL, 0);
	if (!index_getnext_slot(scan, ForwardScanDirection, found))
	{
		index_endscan(scan);
		return false;
	}
	index_endscan(scan);

	/*
	 * A shard without a whole token is passed unlocked, unless its refill
	 * time is ahead of now: the clock stepped back (or it was written
	 * ahead).  Refilling from that time would refuse every start until the
	 * clock caught up and then for the refill besides, and a shard that is
	 * never written would never move it back; so it is moved to now, with
	 * the tokens it holds, and refills from here.
	 */
	refilled_at = DatumGetTimestampTz(slot_getattr(found, BUCKET_REFILLED_AT, &isnull));
	tokens = JsBucketRefill(DatumGetFloat8(slot_getattr(found, BUCKET_PER_SECOND, &isnull)),
							DatumGetInt32(slot_getattr(found, BUCKET_BURST, &isnull)),
							DatumGetFloat8(slot_getattr(found, BUCKET_TOKENS, &isnull)),
							refilled_at, now);
	if (tokens < 1.0 && refilled_at <= now)
		return false;

	/* this version only: a newer one was just written by another claimer */
	tid = found->tts_tid;
	if (JsLockTuple(rel, &tid, locked, GetCurrentCommandId(false),
					LockWaitSkip, 0) != TM_Ok)
	{
		/* a claimer that holds an empty shard has nothing for this one */
		if (tokens >= 1.0)
			*busy = true;
		return false;
	}

	JsRowWriterCopy(newslot, locked);
	newslot->tts_values[BUCKET_TOKENS - 1] =
		Float8GetDatum(tokens >= 1.0 ? tokens - 1.0 : tokens);
	newslot->tts_values[BUCKET_REFILLED_AT - 1] = TimestampTzGetDatum(now);
	ExecStoreVirtualTuple(newslot);
	JsRowWriterUpdate(w, locked, newslot);
	return tokens >= 1.0;
}

/*
 * Take a start token of resource name, whose rate is per_second starts a
 * second, for claim (claim_limited.c) and a raw-SQL start (limits.c):
 * false when no shard has one for this claimer now.  Then *busy tells whether a shard had one but another
 * claimer held it (the next try may find it free), rather than all being
 * empty.
 */
bool
JsTakeStartToken(const char *name, double per_second, bool *busy)
{
	Relation	rel = table_open(JsOwnRelid("bucket"), RowExclusiveLock);
	Relation	pkey = index_open(JsOwnRelid("bucket_pkey"), RowExclusiveLock);
	TupleTableSlot *found = table_slot_create(rel, NULL);
	TimestampTz now = GetCurrentTimestamp();
	int			shards = JsBucketShards(per_second);
	int			first = MyProcPid % shards;
	JsRowWriter w;
	TupleTableSlot *locked;
	TupleTableSlot *newslot;
	bool		taken = false;
	int			i;

	*busy = false;
	JsBucketCheckShape(rel);
	JsRowWriterBeginUpdate(&w, rel, &locked, &newslot);
	PushActiveSnapshot(GetLatestSnapshot());
	for (i = 0; i < shards && !taken; i++)
		taken = JsTakeFromShard(rel, pkey, name, (first + i) % shards + 1, found,
								&w, locked, newslot, now, busy);
	PopActiveSnapshot();
	JsRowWriterEndUpdate(&w, locked);

	ExecDropSingleTupleTableSlot(found);
	index_close(pkey, NoLock);
	table_close(rel, NoLock);
	return taken;
}
