/*-------------------------------------------------------------------------
 *
 * claim_limited.c
 *	  The slot-taking claim, for queues with a concurrency limit, a per-key
 *	  limit or jobs naming a resource.
 *
 * The candidates are read by a walk of the ready index (JsReadCandidates,
 * take.c); for each, in claim order, a free slot of every limit that
 * applies is locked (slot.c), then the job itself is locked, judged
 * (attempts, deadline, budget) and moved to running by the same code as an
 * unlimited claim (JsTakeJob, take.c), then a resource's start token is
 * taken (bucket.c).  Everything is SKIP LOCKED: claimers never wait for
 * one another, and a slot is taken only as its newest, free version, so
 * the running jobs of a scope never exceed its limit.  When every shard of
 * a resource's bucket was empty, its other jobs are passed for the rest of
 * the call without being locked; when a shard was only held by another
 * claimer, the resource's next job tries again.
 *
 * Locks, in order, per job: a queue slot, a resource slot, a key slot, the
 * job row, a shard of the resource's bucket; all SKIP LOCKED.  A slot
 * taken for a job that could not start is kept for the next one, so a
 * claim holds at most one unused slot per scope, and it locks only the
 * jobs it starts (and the used-up ones it fails).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/tuplestore.h"

#include "job_state.h"
#include "tables.h"
#include "slots.h"
#include "take.h"

static bool
JsSlotFor(JsSlot *slot, const char *kind, const char *scope, const char *key,
		  int32 limit)
{
	if (slot->n != 0 && strcmp(slot->scope, scope) == 0 &&
		strcmp(slot->key, key ? key : "") == 0)
		return true;			/* the spare fits */
	/* a spare of another scope stays locked, but unused: drop it */
	return JsSlotLockFree(slot, kind, scope, key, limit);
}

/*
 * The resource's part: a slot if it limits concurrency (*slotted), and its
 * start rate (*rate, 0 for none: else a token must be taken at the start).
 * A resource without a concurrency limit needs no slot, and the job must
 * not hold the spare another resource's job left in *slot.
 */
static bool
JsResourceSlot(const char *resource, JsSlot *slot, bool *slotted, double *rate)
{
	int32		limit;

	if (!JsReadResourceLimits(resource, &limit, rate))
		ereport(ERROR,
				(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
				 errmsg("resource \"%s\" does not exist", resource)));
	*slotted = limit != 0;
	return !*slotted || JsSlotFor(slot, "resource", resource, NULL, limit);
}

/* a start token (bucket.c) of a resource, as JsTakeJob's may_start */
typedef struct JsRated
{
	const char *resource;
	double		rate;
	bool		busy;			/* no token: another claimer held one */
} JsRated;

static bool
JsTakeTokenFor(void *arg)
{
	JsRated    *r = (JsRated *) arg;

	return JsTakeStartToken(r->resource, r->rate, &r->busy);
}

/*
 * One slot-taking claim call: its limits, the slots it has locked, what it
 * took, and the mark (claim_mark.c) it will leave: the last job of the
 * unbroken run of candidates, from the start of the scan, that it took or
 * found gone (taken by another claimer, used up).  A job passed over for a
 * full slot or an empty bucket stops that run, so it stays ahead of the
 * mark and the next claim looks at it again.
 */
typedef struct JsLimitedClaim
{
	const char *queue;
	const JsQueueOptions *q;	/* its id, lease and limits */
	JsTake	   *take;			/* the job table, for JsTakeJob */
	JsTakeArgs	args;
	int32		max_jobs;
	ReturnSetInfo *rsinfo;
	JsSlot		queue_slot;
	JsSlot		resource_slot;
	JsSlot		key_slot;
	int			claimed;
	bool		queue_full;
	List	   *dry;			/* resources whose shards were all empty */
	bool		unbroken;		/* no job passed over yet in this scan */
	bool		marked;
	JsClaimKey	mark;
} JsLimitedClaim;

/* resource found with every start-rate shard empty earlier in this call? */
static bool
JsResourceDry(const JsLimitedClaim *lc, const char *resource)
{
	ListCell   *lcell;

	foreach(lcell, lc->dry)
	{
		if (strcmp((const char *) lfirst(lcell), resource) == 0)
			return true;
	}
	return false;
}

static void
JsLimitedMark(JsLimitedClaim *lc, const JsCandidate *c)
{
	if (!lc->unbroken)
		return;
	lc->marked = true;
	lc->mark = c->key;
}

/*
 * For each candidate in claim order: a free slot of every limit that
 * applies (queue, resource, key), then the job itself, then a start token;
 * all SKIP LOCKED.  Jobs other claimers hold are skipped, and so are jobs
 * whose resource or key has no free slot.
 */
static void
JsTakeCandidates(JsLimitedClaim *lc, const JsCandidate *cands, int ncand)
{
	int			i;

	for (i = 0; i < ncand && lc->claimed < lc->max_jobs; i++)
	{
		const JsCandidate *c = &cands[i];
		int64		job_id = c->key.id;
		char	   *resource = c->resource;
		char	   *key = c->concurrency_key;
		JsRated		rated = {resource, 0, false};
		bool		resource_slotted = false;
		bool		key_slotted = lc->q->has_key_limit && key != NULL;
		int32		slots[JS_NUM_SLOT_KINDS] = {0, 0, 0};
		JsTaken		taken;

		/* a resource whose start-rate shards were all empty this call */
		if (resource != NULL && JsResourceDry(lc, resource))
		{
			lc->unbroken = false;
			continue;
		}

		/* slots first: one that stays unused is the next job's spare */
		if (lc->q->has_queue_limit &&
			!JsSlotFor(&lc->queue_slot, "queue", lc->queue, NULL, lc->q->queue_limit))
		{
			lc->queue_full = true;
			break;
		}
		if ((resource != NULL &&
			 !JsResourceSlot(resource, &lc->resource_slot, &resource_slotted,
							 &rated.rate)) ||
			(key_slotted &&
			 !JsSlotFor(&lc->key_slot, "key", lc->queue, key, lc->q->key_limit)))
		{
			lc->unbroken = false;
			continue;
		}

		/* then the job, unless another claimer has it; a token last */
		if (lc->q->has_queue_limit)
			slots[JS_SLOT_QUEUE] = lc->queue_slot.n;
		if (resource_slotted)
			slots[JS_SLOT_RESOURCE] = lc->resource_slot.n;
		if (key_slotted)
			slots[JS_SLOT_KEY] = lc->key_slot.n;
		switch (JsTakeJob(lc->take, &lc->args, c, slots,
						  rated.rate > 0 ? JsTakeTokenFor : NULL, &rated, &taken))
		{
			case JS_TAKE_SKIPPED:
			case JS_TAKE_HELD:
				JsLimitedMark(lc, c);
				continue;
			case JS_TAKE_THROTTLED:
				/* every shard empty: the resource's other jobs wait too */
				if (!rated.busy)
					lc->dry = lappend(lc->dry, resource);
				lc->unbroken = false;
				continue;
			case JS_TAKE_TAKEN:
				break;
		}
		if (!taken.started)
		{
			/* failed as used up: the slots stay for the next job */
			JsLimitedMark(lc, c);
			continue;
		}

		if (lc->q->has_queue_limit)
			JsSlotHold(&lc->queue_slot, job_id, lc->queue);
		if (resource_slotted)
			JsSlotHold(&lc->resource_slot, job_id, lc->queue);
		if (key_slotted)
			JsSlotHold(&lc->key_slot, job_id, lc->queue);

		/* minting may run SPI (first use of the secret): after the reads */
		JsReturnClaimed(lc->rsinfo, &taken, lc->q->id);
		lc->claimed++;
		JsLimitedMark(lc, c);
	}
}

/*
 * One walk of the ready jobs, from the head (mark NULL) or resuming after
 * the mark, read a page at a time: the first page has room for the jobs
 * asked and a few passed over, each further one (after the last job read)
 * twice as many, up to JS_MAX_CANDIDATES in all, so that jobs passed over
 * for full slots never hide the ones behind them.  True when the walk ran
 * out of ready jobs.
 */
#define JS_MAX_CANDIDATES 10000

static bool
JsLimitedWalk(JsLimitedClaim *lc, const JsClaimKey *mark)
{
	JsClaimKey	page_mark;
	JsCandidate *cands;
	int			page = Min(lc->max_jobs + 4, JS_MAX_CANDIDATES);
	int			read = 0;
	int			ncand;

	lc->unbroken = true;
	lc->args.mark = mark;
	lc->args.after_mark_only = false;
	cands = palloc(sizeof(JsCandidate) * page);
	for (;;)
	{
		lc->args.asked = page;
		ncand = JsReadCandidates(lc->take, &lc->args, cands);
		JsTakeCandidates(lc, cands, ncand);
		read += ncand;
		if (ncand < page)
		{
			pfree(cands);
			return true;
		}
		if (lc->claimed >= lc->max_jobs || lc->queue_full ||
			read >= JS_MAX_CANDIDATES)
			break;
		page_mark = cands[ncand - 1].key;
		lc->args.mark = &page_mark;
		lc->args.after_mark_only = true;
		page = Min(page * 2, Min(JS_MAX_CANDIDATES - read, JS_MAX_CANDIDATES / 2));
		cands = repalloc(cands, sizeof(JsCandidate) * page);
	}
	pfree(cands);
	return false;
}

/*
 * The slot-taking claim, for queues with a limit or jobs naming a
 * resource.  Like the plain claim it resumes after this session's mark in
 * the queue, and looks from the head when the resumed walk runs out
 * before the claim is full.
 */
int
JsClaimWithLimits(const char *queue, const JsQueueOptions *q, Oid job_relid,
				  Datum worker, int32 max_jobs, ReturnSetInfo *rsinfo)
{
	JsLimitedClaim lc = {0};
	JsTake		take;
	TimestampTz now = GetCurrentTimestamp();
	JsClaimKey	mark;
	bool		from_head = true;

	lc.queue = queue;
	lc.q = q;
	lc.max_jobs = max_jobs;
	lc.rsinfo = rsinfo;
	JsTakeOpen(&take);
	lc.take = &take;
	lc.args.queue = CStringGetTextDatum(queue);
	lc.args.worker = worker;
	lc.args.lease = (Interval *) &q->lease;
	lc.args.now = now;

	/* from the head when the resumed walk ran out before the claim was full */
	if (JsClaimMarkGet(queue, now, &mark))
		from_head = JsLimitedWalk(&lc, &mark) &&
			lc.claimed < max_jobs && !lc.queue_full;
	if (from_head)
	{
		lc.marked = false;
		(void) JsLimitedWalk(&lc, NULL);
	}
	JsTakeClose(&take);
	JsClaimMarkSet(job_relid, queue, now, from_head,
				   lc.marked ? &lc.mark : NULL);
	return lc.claimed;
}
