/*-------------------------------------------------------------------------
 *
 * tables.h
 *	  How job_state's own tables are read (tables.c): column maps, tuple
 *	  helpers, a queue's options, a resource's limits, the input hash.
 *
 *-------------------------------------------------------------------------
 */
#ifndef JS_TABLES_H
#define JS_TABLES_H

#include "access/htup.h"
#include "executor/tuptable.h"
#include "utils/acl.h"
#include "utils/jsonb.h"
#include "utils/relcache.h"

#include "job_state.h"
#include "frontier.h"

/*
 * The three kinds of concurrency limit, in the order claim takes their
 * slots and job.queue_slot, resource_slot and key_slot record them.
 */
typedef enum JsSlotKind
{
	JS_SLOT_QUEUE,
	JS_SLOT_RESOURCE,
	JS_SLOT_KEY
} JsSlotKind;

#define JS_NUM_SLOT_KINDS 3

/*
 * Attribute numbers of the job table and the OIDs of the status labels,
 * looked up once per relation.
 */
typedef struct JsJobColumns
{
	Oid			relid;
	Oid			status_oids[JS_NUM_STATUS];
	int			queue;
	int			id;
	int			status;
	int			generation;
	int			attempts;
	int			retries;
	int			throttles;
	int			idempotency_key;
	int			concurrency_key;
	int			input;
	int			input_hash;
	int			result;
	int			last_error;
	int			error_class;
	int			reason;
	int			deadline;
	int			max_attempts;
	int			budget;
	int			spent;
	int			slot[JS_NUM_SLOT_KINDS];	/* queue_slot, resource_slot, key_slot */
	int			cancel_requested;
	int			lease_expires_at;
	int			worker;
	int			started_at;
	int			finished_at;
	int			priority;
	int			run_after;
	int			resource;
	int			submitted_by;
	bool		submitted_by_oid;	/* regrole since 0.2.0; text before */
	int			accepted_at;
	/* the waiting window (callback.c); 0 in a 0.1.0 schema */
	int			callback_timeout_at;
	int			heartbeat_interval;
	/* the events the row holds (event.c); 0 in a 0.1.0 schema */
	int			held_claim_seq;
	int			held_end_seq;
	/* the progress a heartbeat reports; 0 in a 0.1.0 schema */
	int			progress;
	int			progress_generation;
	int			progress_at;
	/* the nonce of the job's current generation (token.c); 0 in a 0.1.0 schema */
	int			claim_nonce;
} JsJobColumns;

extern const JsJobColumns *JsJobColumnsFor(Relation rel);
extern bool JsStatusFinished(JsStatus s);
extern JsStatus JsTupleStatus(const JsJobColumns *cols, TupleTableSlot *slot);
extern JsStatus JsStatusOfLabel(const JsJobColumns *cols, Datum label);
extern int32 JsTupleInt32(TupleTableSlot *slot, int attnum, bool *isnull);
extern int64 JsTupleJobId(const JsJobColumns *cols, TupleTableSlot *slot);
extern bool JsTupleReadyKey(const JsJobColumns *cols, TupleTableSlot *slot,
							JsClaimKey *key);
extern void JsNoteReadiness(const JsJobColumns *cols, Relation rel,
							TupleTableSlot *oldslot, TupleTableSlot *newslot);
extern void JsNoteLease(const JsJobColumns *cols, Relation rel, TupleTableSlot *newslot);
extern bool JsSameValue(TupleTableSlot *a, TupleTableSlot *b, int attnum);

/* attribute numbers of job_event, looked up once per relation */
typedef struct JsEventColumns
{
	Oid			relid;
	int			queue;
	int			job_id;
	int			seq;
	int			from_status;
	int			to_status;
	int			generation;
	int			at;
	int			detail;
} JsEventColumns;

extern const JsEventColumns *JsEventColumnsFor(Relation rel);

extern int	JsColumnNumber(Relation rel, const char *name);

extern Oid	JsOwnRelid(const char *name);
extern Oid	JsOwnRelidIfAny(const char *name);
extern Oid	JsOwnRelOwner(const char *name);
extern bool JsQueueHasAcl(void);
extern bool JsSchemaHasWaiting(void);

/* a queue's options, as claim, fail and the privilege checks read them */
typedef struct JsQueueOptions
{
	int32		id;
	Interval	lease;			/* what a claim gives: asked or the queue's, capped */
	Interval	max_lease;		/* the cap */
	bool		has_max_attempts;
	int32		max_attempts;
	bool		paused;
	bool		limited;		/* limits.c's path */
	bool		has_queue_limit;
	int32		queue_limit;
	bool		has_key_limit;
	int32		key_limit;
	/* the retry policy (fail) */
	Interval	retry_interval;
	double		backoff_rate;
	int32		max_retries;
	Interval	max_delay;
	bool		full_jitter;
	Acl		   *acl;			/* the queue's privileges; NULL: open (acl.c) */
	/* the secret of its notification channels (notify.c); "" on 0.1.0 */
	char		channel[JS_CHANNEL_KEY_LEN + 1];
	int			min_sync;		/* min_synchronous_commit's level; -1: none */
} JsQueueOptions;

/* durability.c */
extern int	JsSyncCommitLevel(const char *name);
extern void JsCheckSyncCommitFloor(const char *name);
extern void JsRaiseSynchronousCommit(int level);

extern bool JsReadQueueCached(Datum queue, Interval *asked, JsQueueOptions *q);
extern bool JsReadQueueLatest(Datum queue, JsQueueOptions *q);

extern bool JsReadResourceLimits(const char *name, int32 *limit, double *rate);

extern bytea *JsInputHash(Jsonb *input);

#endif							/* JS_TABLES_H */
