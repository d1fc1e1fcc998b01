/*-------------------------------------------------------------------------
 *
 * job_state.h
 *	  Declarations shared by the files of the job_state extension.
 *
 * Conventions: SQL-callable symbols are js_<sqlname>; helpers are Js*.
 * Every statement on our tables runs through SPI with a plan prepared once
 * per backend (see spi.c).  The writes of every job's life that a
 * statement's start-up would dominate -- submit inserting it (submit.c),
 * claim taking it (take.c), succeed (complete.c) and the history row of
 * each change (event.c) -- go through the executor's single-row insert and
 * update instead (rowwrite.c), as logical replication applies rows:
 * triggers, constraints and indexes apply to them exactly as to an INSERT
 * (ON CONFLICT DO NOTHING, for submit) or UPDATE.
 *
 * The global lock order.  A path that locks several of these takes them
 * in this order, and rows of one kind in the order given:
 *	1. table locks: job_state.job (SHARE for a queue's or resource's delete,
 *	   queue_trigger.c and resource.c; ACCESS EXCLUSIVE for a guarded drop,
 *	   drop_guard.c), then job_state.secret (rotate_secret, token.c);
 *	2. the queue row, then the resource row (alter_queue, alter_resource,
 *	   and their triggers);
 *	3. job rows, by (queue, id): succeed_many sorts its batch, the adopting
 *	   statements of limits.c sort what they lock, claim takes one job at
 *	   a time and never waits (SKIP LOCKED);
 *	4. the rows a job's change touches under its row lock: its slots
 *	   (slot.c, never waited for by claim: SKIP LOCKED), start-rate shards
 *	   (bucket.c, SKIP LOCKED), operation rows (operation.c), history and
 *	   spend rows (inserted, never locked).
 * One known exception: the first job of a queue that names a resource
 * sets the queue's uses_resources under its own row lock (3 before 2),
 * once per queue ever.  Isolation specs hold the pairs that could deadlock
 * to the order (succeed-many-lock-order, succeed-many-vs-raise-limit).
 *
 *-------------------------------------------------------------------------
 */
#ifndef JOB_STATE_H
#define JOB_STATE_H

#include "postgres.h"

#include "access/skey.h"
#include "access/tableam.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/execnodes.h"
#include "utils/acl.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "errcodes.h"

/* PostgreSQL 18 replaced pg_attribute_noreturn() with pg_noreturn */
#ifndef pg_noreturn
#define pg_noreturn pg_attribute_noreturn()
#endif

/* GUCs (job_state.c) */
extern bool js_track_events;
extern int	js_notify;
extern int	js_notify_interval;
extern bool js_restore;
extern bool js_drop_live_jobs;
extern int	js_sweep_interval;
extern char *js_database;
extern bool js_check_statement_names;

/* spi.c: a trigger's statements, as the owner of the table it fires on */
typedef struct JsSavedUser
{
	Oid			userid;
	int			sec_context;
} JsSavedUser;
extern void JsTriggerSpiConnect(Relation rel, JsSavedUser *saved);
extern void JsTriggerSpiFinish(JsSavedUser *saved);

/* namecheck.c: every prepared statement names pg_catalog or job_state only */
extern void JsCheckStatementNames(SPIPlanPtr plan, const char *sql);

/*
 * Job statuses, in the order of the job_state.status enum.
 */
typedef enum JsStatus
{
	JS_ACCEPTED = 0,
	JS_RUNNING,
	JS_SUCCEEDED,
	JS_FAILED,
	JS_UNKNOWN,
	JS_CANCELLED,
	JS_NUM_STATUS
} JsStatus;

extern const char *const js_status_names[JS_NUM_STATUS];

/* fsm.c */
extern bool js_purging;

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
} JsJobColumns;

extern const JsJobColumns *JsJobColumnsFor(Relation rel);
extern bool JsStatusFinished(JsStatus s);
extern JsStatus JsTupleStatus(const JsJobColumns *cols, HeapTuple tuple, TupleDesc tupdesc);
extern int32 JsTupleInt32(HeapTuple tuple, TupleDesc tupdesc, int attnum, bool *isnull);
extern int64 JsTupleJobId(const JsJobColumns *cols, HeapTuple tuple, TupleDesc tupdesc);
extern bool JsSameValue(HeapTuple a, HeapTuple b, TupleDesc tupdesc, int attnum);

extern bool JsTransitionAllowed(JsStatus from, JsStatus to);
extern JsStatus JsStatusFromName(const char *name);

/* event.c: one job_event row */
typedef struct JsEvent
{
	Datum		queue;			/* text */
	Datum		job_id;			/* int8 */
	int			from;			/* a JsStatus, or -1 for a new job */
	JsStatus	to;
	int32		generation;
	Datum		reason;			/* text */
	bool		reason_null;
	Datum		worker;			/* text */
	bool		worker_null;
} JsEvent;

extern void JsWriteEvent(Relation jobrel, const Oid *status_oids, const JsEvent *ev);

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
} JsRowWriter;

/* index_beginscan gained an instrumentation argument in PostgreSQL 18 */
#if PG_VERSION_NUM >= 180000
#define JsIndexBeginScan(heap, index, snapshot, nkeys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), 0)
#else
#define JsIndexBeginScan(heap, index, snapshot, nkeys) \
	index_beginscan((heap), (index), (snapshot), (nkeys), 0)
#endif

extern Oid	JsOwnRelid(const char *name);
extern void JsRowWriterBegin(JsRowWriter *w, Relation rel, bool speculative);
extern void JsRowWriterCopy(TupleTableSlot *newslot, TupleTableSlot *locked);
extern TupleTableSlot *JsRowWriterSlot(JsRowWriter *w, const TupleTableSlotOps *ops);
extern void JsRowWriterEnd(JsRowWriter *w);
extern void JsRowWriterBeginUpdate(JsRowWriter *w, Relation rel,
								   TupleTableSlot **locked, TupleTableSlot **newslot);
extern void JsRowWriterEndUpdate(JsRowWriter *w, TupleTableSlot *locked);
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
extern bool JsLockRow(JsRowWriter *w, ItemPointer tid, TupleTableSlot *slot,
					  LockWaitPolicy wait);
extern bool JsFindJob(Relation rel, Relation pkey, Datum queue, Datum id,
					  TupleTableSlot *slot);
extern bool JsLockJob(JsRowWriter *w, Relation pkey, Datum queue, Datum id,
					  TupleTableSlot *slot);

/*
 * Claim token: fixed 32 bytes, passed by reference.
 */
#define JS_TOKEN_MAC_LEN 16

typedef struct JsClaimToken
{
	int64		job_id;
	int32		generation;
	int32		queue_id;
	uint8		mac[JS_TOKEN_MAC_LEN];
} JsClaimToken;

StaticAssertDecl(sizeof(JsClaimToken) == 32, "claim token must be 32 bytes");

#define DatumGetClaimToken(X)		((JsClaimToken *) DatumGetPointer(X))
#define ClaimTokenGetDatum(X)		PointerGetDatum(X)
#define PG_GETARG_CLAIM_TOKEN(n)	DatumGetClaimToken(PG_GETARG_DATUM(n))
#define PG_RETURN_CLAIM_TOKEN(x)	return ClaimTokenGetDatum(x)

/* token.c (SPI must be connected for the functions that read tables) */
extern JsClaimToken *JsTokenMint(int64 job_id, int32 generation, int32 queue_id);
extern const char *JsTokenCheck(const JsClaimToken *token);
extern const char *JsTokenFence(const JsClaimToken *token, Datum *values);

/* claim_mark.c: where this session's last claim in a queue stopped */
typedef struct JsClaimKey		/* a job's key in the ready index */
{
	int32		priority;
	TimestampTz run_after;
	int64		id;
} JsClaimKey;

extern int	js_claim_rescan_interval;
extern void JsClaimMarkInit(void);
extern bool JsClaimMarkGet(const char *queue, TimestampTz now, JsClaimKey *mark);
extern void JsClaimMarkSet(Oid job_relid, const char *queue, TimestampTz now,
						   bool from_head, const JsClaimKey *last);

/* take.c: claim's walk of the ready index */
typedef struct JsTake
{
	Relation	job;
	Relation	ready;			/* job_ready */
	Relation	lease;			/* job_lease */
	Relation	queuerel;
	Relation	queue_pkey;
	Relation	pkey;			/* job_pkey, opened by JsTakeJob when needed */
	const JsJobColumns *cols;
	TupleTableSlot *scanslot;
} JsTake;

typedef struct JsQueueOptions
{
	int32		id;
	Interval	lease;			/* what a claim gives: asked or the queue's, capped */
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
} JsQueueOptions;

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

typedef struct JsTaken
{
	int64		job_id;
	int32		generation;
	int32		attempts;
	bool		started;		/* false: failed as used up */
	Datum		input;
	Datum		deadline;
	bool		deadline_null;
	JsClaimKey	key;
} JsTaken;

typedef enum JsTakeResult
{
	JS_TAKE_SKIPPED,			/* locked by another claimer, gone, not ready */
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

extern bool js_claim_starting;
extern void JsTakeOpen(JsTake *t);
extern void JsTakeClose(JsTake *t);
extern bool JsTakeReadQueue(JsTake *t, Datum queue, Interval *asked, JsQueueOptions *q);
extern int	JsTakeReady(JsTake *t, const JsTakeArgs *args, JsTaken *out, bool *expiry_due);
extern void JsReturnClaimed(ReturnSetInfo *rsinfo, const JsTaken *taken, int32 queue_id);
extern bool JsLeaseExpiryDue(JsTake *t, Datum queue, TimestampTz now);
extern int	JsReadCandidates(JsTake *t, const JsTakeArgs *args, JsCandidate *out);
extern JsTakeResult JsTakeJob(JsTake *t, const JsTakeArgs *args,
							  const JsCandidate *cand, const int32 *slots,
							  bool (*may_start) (void *arg), void *arg,
							  JsTaken *out);

/* acl.c: per-queue privileges, carried by table privilege bits */
#define JS_QUEUE_SUBMIT		ACL_INSERT
#define JS_QUEUE_CLAIM		ACL_UPDATE	/* claim, and act with its tokens */
#define JS_QUEUE_OPERATE	ACL_DELETE
#define JS_QUEUE_READ		ACL_SELECT
#define JS_QUEUE_ALL \
	(JS_QUEUE_SUBMIT | JS_QUEUE_CLAIM | JS_QUEUE_OPERATE | JS_QUEUE_READ)
extern bool JsQueueAllows(const Acl *acl, Oid role, AclMode mode);
extern void JsRequireQueuePrivilege(const char *queue, const Acl *acl, AclMode mode);
extern bool JsReadQueueAcl(Datum queue, Acl **acl);
extern void JsRequireQueuePrivilegeByName(Datum queue, AclMode mode);

/* queue.c */
extern bool JsReadQueue(Relation queuerel, Relation pkey, Datum queue,
						Interval *asked, JsQueueOptions *q);
extern bool JsReadQueueLatest(Datum queue, JsQueueOptions *q);

/* spi.c: the kept-plan registry */
#define JS_MAX_PLAN_ARGS 16

typedef struct JsPlan
{
	const char *sql;
	int			nargs;
	Oid			argtypes[JS_MAX_PLAN_ARGS];
	SPIPlanPtr	plan;			/* prepared on first use, then kept */
} JsPlan;

extern int	JsExecute(JsPlan *plan, Datum *values, const char *nulls,
					  bool read_only, long count);
extern int	JsExecuteWriteLatest(JsPlan *plan, Datum *values, const char *nulls);
extern int	JsExecuteLatest(JsPlan *plan, Datum *values, const char *nulls,
							long count);
extern bool JsGetBool(int row, int col);
extern int32 JsGetInt32(int row, int col, bool *isnull);
extern int64 JsGetInt64(int row, int col, bool *isnull);
extern Datum JsGetDatumCopy(int row, int col, bool *isnull);
extern char *JsGetText(int row, int col);

/* retry.c */
extern Interval *JsRetryDelay(const Interval *retry_interval, double backoff_rate,
							  const Interval *max_delay, bool full_jitter,
							  int32 retry);

/* fail's outcome (retry.c) */
typedef struct JsFailOutcome
{
	JsStatus	to;
	const char *reason;			/* NULL: none */
	bool		retry;
	TimestampTz run_after;		/* when retry */
} JsFailOutcome;

extern void JsDecideFail(const char *class_name, const JsJobColumns *cols,
						 const Datum *values, const bool *nulls, Datum queue,
						 const char *queue_name, int64 job_id,
						 const Interval *retry_after, JsFailOutcome *out);

/* fence.c */
pg_noreturn extern void JsRefuseToken(const char *queue, const JsClaimToken *token,
									  const char *action);

/* budget.c */
extern bool JsMeterAmountValid(const JsonbValue *v);
extern void JsCheckBudget(Jsonb *budget);
extern void JsCheckMetersKnown(int64 job_id, Jsonb *budget, Jsonb *extra);
extern void JsCheckStartAllowed(int64 job_id, int32 attempts, bool has_max,
								int32 max_attempts, bool has_deadline,
								TimestampTz deadline, Jsonb *budget, Jsonb *spent);
extern char *JsBudgetExhaustedMeter(Jsonb *budget, Jsonb *spent);
extern void JsCheckSpentForward(int64 job_id, Jsonb *oldspent, Jsonb *newspent);

/*
 * slot.c: a concurrency slot row a claim has locked.  A slot taken for a
 * job that then could not start stays locked until the transaction ends,
 * so it is kept as a spare for the next job of the same scope: a claim
 * never holds more than one unused slot per scope.
 */
typedef struct JsSlot
{
	const char *kind;
	char	   *scope;
	char	   *key;
	int32		n;				/* 0: none */
	ItemPointerData tid;		/* the row, as locked */
} JsSlot;

extern bool JsSlotLockFree(JsSlot *slot, const char *kind, const char *scope,
						   const char *key, int32 limit);
extern void JsSlotHold(JsSlot *slot, int64 job_id, const char *queue);
extern void JsReleaseSlots(int64 job_id, const char *queue, const char *resource,
						   const char *key, const int32 *numbers);

/* resource.c */
extern bool JsReadResourceLimits(const char *name, int32 *limit, double *rate);

/* bucket.c */
extern void JsMakeBuckets(const char *name, double per_second);
extern bool JsTakeStartToken(const char *name, double per_second, bool *busy);

/* limits.c */
extern void JsJobNamesLimits(Datum queue, Datum resource, bool has_resource,
							 Datum key, bool has_key);
extern void JsEnsureSlots(const char *kind, const char *scope, const char *key,
						  int32 limit);
extern void JsRawStartSlots(int64 job_id, Datum queue, Datum resource,
							bool has_resource, Datum key, bool has_key,
							int32 numbers[JS_NUM_SLOT_KINDS]);
extern void JsQueueLimitSlots(const char *queue, bool per_key, int32 limit);
extern void JsResourceLimitSlots(const char *resource, bool adopt, int32 limit);
extern int	JsClaimWithLimits(const char *queue, const JsQueueOptions *q,
							  Oid job_relid, Datum worker, int32 max_jobs,
							  ReturnSetInfo *rsinfo);

/* lease.c */
extern int	JsExpireLeases(const char *queue);

/* submit.c */
extern bytea *JsInputHash(Jsonb *input);

/* cron.c: a parsed 5-field cron expression (UTC, minute resolution) */
typedef struct JsCron
{
	uint64		minutes;		/* bit m: minute m, 0-59 */
	uint32		hours;			/* bit h: hour h, 0-23 */
	uint32		days;			/* bit d: day of month d, 1-31 */
	uint32		months;			/* bit m: month m, 1-12 */
	uint32		weekdays;		/* bit d: day of week d, 0-6, 0 = Sunday */
	bool		days_star;		/* day-of-month field starts with '*' */
	bool		weekdays_star;	/* day-of-week field starts with '*' */
} JsCron;

extern void JsCronParse(const char *expr, JsCron *cron);
extern TimestampTz JsCronNext(const JsCron *cron, TimestampTz after);
extern TimestampTz JsCronPrev(const JsCron *cron, TimestampTz at);

/* schedule.c (SPI must be connected) */
extern int	JsRunSchedules(void);

/* sweeper.c */
extern void JsRegisterSweeper(void);

/*
 * job_state.notify: who sends the wake-up of a new job (notify.c).
 */
typedef enum JsNotifyMode
{
	JS_NOTIFY_OFF,
	JS_NOTIFY_ON,				/* the notifier where it serves the database */
	JS_NOTIFY_COMMIT			/* the submitting transaction, at commit */
} JsNotifyMode;

/* bgworker.c: what the background workers share */
extern void JsRegisterWorker(const char *name, const char *function, int restart_secs);
extern void JsWorkerConnect(const char *name);
extern bool JsExtensionInstalled(void);
extern bool JsWorkerExtensionInstalled(const char *name);
extern bool JsWorkerRound(MemoryContext round_context, const char *activity,
						  void (*work) (void *arg), void *arg);

/* notify.c */
extern void JsRegisterNotifier(void);
extern void JsNotifyNewJob(const char *queue);

/* output of set-returning functions */
extern void JsInitMaterialized(FunctionCallInfo fcinfo);

/* small argument helpers */
extern void JsCheckName(const char *what, const char *name);
extern void JsCheckKey(const char *what, const char *key);
extern void JsRefuseNull(FunctionCallInfo fcinfo, int argno, const char *argname);
extern int	JsColumnNumber(Relation rel, const char *name);
extern bool JsIntervalPositive(const Interval *span);
extern void JsCheckNotNegative(const char *what, const Interval *span);
extern char *JsEnumLabel(Datum value);

/* the most jobs one claim returns, and tokens one succeed_many takes */
#define JS_MAX_BATCH 10000

/* the longest span job_state adds to a timestamp: 10 years of 360 days */
#define JS_MAX_SPAN_DAYS INT64CONST(3600)
#define JS_MAX_SPAN_TEXT "10 years"
extern void JsCheckSpanBound(const char *what, const Interval *span);

/* an int4 counter of a job, one step on: 22003 rather than a wrap */
extern int32 JsCounterAdd(int64 job_id, const char *column, int32 value,
						  int32 add, const char *hint);

#endif							/* JOB_STATE_H */
