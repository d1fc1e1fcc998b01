/*-------------------------------------------------------------------------
 *
 * job_state.h
 *	  What every file of job_state shares: the job statuses, the GUCs, the
 *	  kept-plan API (spi.c), the argument checks (util.c), the SQLSTATEs
 *	  (errcodes.h) and the global lock order.  Each family of files has its
 *	  own header besides: tables.h, rowwrite.h, rules.h, slots.h,
 *	  take.h, claim_mark.h, frontier.h, token.h, acl.h, cron.h,
 *	  bgworker.h, waiter.h; dispatch.h, below them all, hands out the
 *	  server's per-backend callbacks;
 *	  slots.h is not limits.h so as not to hide <limits.h> where src/ is an
 *	  include path (the fuzz build).
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

#include "access/xact.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/hsearch.h"
#include "utils/relcache.h"
#include "utils/timestamp.h"

#include "errcodes.h"

/*
 * A queue's channel secret (queue.channel): 32 hex digits, 128 random
 * bits; its channels carry new jobs (empty payload, notify.c) and ended
 * jobs (the job id, waiter.c).
 */
#define JS_CHANNEL_KEY_LEN 32
#define JS_WORK_CHANNEL_PREFIX "job_state_"
#define JS_DONE_CHANNEL_PREFIX "job_state_done_"

/* PostgreSQL 18 replaced pg_attribute_noreturn() with pg_noreturn */
#ifndef pg_noreturn
#define pg_noreturn pg_attribute_noreturn()
#endif

/* job_state.c: the GUCs, and the file each one steers */
extern bool js_track_events;	/* job_trigger.c */
extern int	js_notify;			/* notify.c: a JsNotifyMode */
extern int	js_notify_interval;	/* notify.c */
extern bool js_restore;			/* fsm.c */

/* timeline.c */
extern void JsTimelineCheck(void);
extern uint32 JsTimelineLostJob(int64 job_id);
pg_noreturn extern void JsRefuseMissingJob(int64 job_id, const char *hint);
extern bool js_drop_live_jobs;	/* drop_guard.c */
extern int	js_sweep_interval;	/* sweeper.c */
extern char *js_database;		/* bgworker.c */
extern bool js_check_statement_names;	/* namecheck.c */
extern int	js_claim_rescan_interval;	/* claim_mark.c, frontier.c */
extern int	js_claim_frontiers;	/* frontier.c */
extern int	js_wait_poll_interval;	/* wait.c, waiter.c */
extern int	js_min_retention;	/* queue.c: seconds */
extern void JsDefineGucs(bool preloading);

/*
 * job_state.notify: who sends the wake-up of a new job (notify.c).
 */
typedef enum JsNotifyMode
{
	JS_NOTIFY_OFF,
	JS_NOTIFY_ON,				/* the notifier where it serves the database */
	JS_NOTIFY_COMMIT			/* the submitting transaction, at commit */
} JsNotifyMode;

/*
 * fsm.c: set by purge() while it deletes; by take.c while claim starts jobs;
 * by submit.c while the AFTER triggers of its inserts fire (job_trigger.c):
 * the queue and the range of ids the call inserted, so that only those rows
 * pass over the raw-INSERT checks, not a row some other trigger inserts
 * meanwhile
 */
extern bool js_purging;
extern bool js_claim_starting;
typedef struct JsSubmitting
{
	const char *queue;			/* NULL: no submit's triggers are firing */
	int64		min_id;
	int64		max_id;
} JsSubmitting;
extern JsSubmitting js_submitting;

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
	JS_WAITING,					/* for a callback (callback.c); since 0.2.0 */
	JS_SUCCEEDED,
	JS_FAILED,
	JS_UNKNOWN,
	JS_CANCELLED,
	JS_NUM_STATUS
} JsStatus;

/* tables.c: the labels, by JsStatus */
extern const char *const js_status_names[JS_NUM_STATUS];

/*
 * running and waiting hold a claim: a lease (lease_expires_at, the waiting
 * window for waiting), and the slots the job started with unless the wait
 * gave them up.  Every other status has neither.
 */
#define JsStatusHoldsClaim(s) ((s) == JS_RUNNING || (s) == JS_WAITING)

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

/* util.c: output of set-returning functions */
extern void JsInitMaterialized(FunctionCallInfo fcinfo);
extern HTAB *JsHashCreate(const char *name, long nelem, Size keysize,
						  Size entrysize, int keykind, MemoryContext context);

/* util.c: argument checks */
extern void JsCheckName(const char *what, const char *name);
extern void JsCheckKey(const char *what, const char *key);
extern void JsRefuseNull(FunctionCallInfo fcinfo, int argno, const char *argname);
extern bool JsIntervalPositive(const Interval *span);
extern int64 JsIntervalMicroseconds(const Interval *span);
extern void JsCheckNotNegative(const char *what, const Interval *span);
extern char *JsEnumLabel(Datum value);

/* util.c: a transaction callback's event that ends the transaction */
extern bool JsXactEnded(XactEvent event);

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
