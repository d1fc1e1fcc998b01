/*-------------------------------------------------------------------------
 *
 * take.h
 *	  The claim paths: the walk of the ready index (take.c) and the
 *	  slot-taking claim (claim_limited.c); the session's mark is
 *	  claim_mark.h's.
 *	  Named after take.c, the floor it describes, not after claim.c, the
 *	  entry point above that uses it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef JS_TAKE_H
#define JS_TAKE_H

#include "access/tableam.h"
#include "utils/relcache.h"

#include "job_state.h"
#include "tables.h"
#include "claim_mark.h"

/* take.c: claim's walk of the ready index */
typedef struct JsTake
{
	Relation	job;
	Relation	ready;			/* job_ready */
	Relation	lease;			/* job_lease */
	Relation	pkey;			/* job_pkey, opened by JsTakeJob when needed */
	const JsJobColumns *cols;
	TupleTableSlot *scanslot;
} JsTake;

typedef struct JsTakeArgs
{
	Datum		queue;			/* text */
	Datum		worker;			/* text */
	Interval   *lease;
	TimestampTz now;			/* the database clock */
	int			asked;
	const JsClaimKey *mark;		/* resume after it; NULL: from the head */
	bool		after_mark_only;	/* JsReadCandidates: not the priorities
									 * above the mark's */
} JsTakeArgs;

/*
 * What a walk of the ready index accounted for (frontier.c): the key of
 * the last entry it read in an unbroken run from the start of a scan, no
 * entry of which another transaction held.
 */
typedef struct JsTakeRun
{
	bool		have;
	JsClaimKey	end;
} JsTakeRun;

typedef struct JsTaken
{
	int64		job_id;
	int32		generation;
	int32		nonce;			/* claim_nonce of the generation */
	int32		attempts;
	bool		started;		/* false: failed as used up */
	Datum		input;
	Datum		deadline;
	bool		deadline_null;
	JsClaimKey	key;
} JsTaken;

typedef enum JsTakeResult
{
	JS_TAKE_SKIPPED,			/* gone, or not ready */
	JS_TAKE_HELD,				/* held by another transaction (SKIP LOCKED) */
	JS_TAKE_THROTTLED,			/* may_start said no; left locked */
	JS_TAKE_TAKEN				/* started, or failed as used up */
} JsTakeResult;

/* a ready job as the limited path reads it before taking its slots */
typedef struct JsCandidate
{
	JsClaimKey	key;
	char	   *resource;		/* NULL: none */
	char	   *concurrency_key;	/* NULL: none */
} JsCandidate;

extern void JsTakeOpen(JsTake *t);
extern void JsTakeClose(JsTake *t);
extern bool JsTakeReadQueue(JsTake *t, Datum queue, Interval *asked, JsQueueOptions *q);
extern int	JsTakeReady(JsTake *t, const JsTakeArgs *args, JsTaken *out,
						bool *expiry_due, JsTakeRun *run);
extern void JsClaimReady(JsTake *t, const char *queue, Datum queue_datum,
						 Datum worker, const JsQueueOptions *q, int32 max_jobs,
						 TimestampTz started, ReturnSetInfo *rsinfo);
extern void JsReturnClaimed(ReturnSetInfo *rsinfo, const JsTaken *taken, int32 queue_id);
extern bool JsLeaseExpiryDue(JsTake *t, Datum queue, TimestampTz now);
extern int	JsReadCandidates(JsTake *t, const JsTakeArgs *args, JsCandidate *out);
extern JsTakeResult JsTakeJob(JsTake *t, const JsTakeArgs *args,
							  const JsCandidate *cand, const int32 *slots,
							  bool (*may_start) (void *arg), void *arg,
							  JsTaken *out);

/* claim_limited.c */
extern int	JsClaimWithLimits(const char *queue, const JsQueueOptions *q,
							  Oid job_relid, Datum worker, int32 max_jobs,
							  ReturnSetInfo *rsinfo);


#endif							/* JS_TAKE_H */
