/*-------------------------------------------------------------------------
 *
 * rules.h
 *	  The rules a job's row follows, below the SQL-callable functions: the
 *	  transition table (fsm.c), the history row (event.c), the retry
 *	  decision (retry.c), the cost meters (meter.c) and lease expiry
 *	  (lease.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef JS_RULES_H
#define JS_RULES_H

#include "datatype/timestamp.h"
#include "utils/jsonb.h"
#include "utils/relcache.h"

#include "job_state.h"
#include "tables.h"

/* fsm.c: the transition table */
extern bool JsTransitionAllowed(JsStatus from, JsStatus to);
extern JsStatus JsStatusFromName(const char *name);

/* event.c: one job_event_log row */
typedef struct JsEvent
{
	Datum		queue;			/* text */
	Datum		job_id;			/* int8 */
	JsStatus	from;			/* a submit writes no event */
	JsStatus	to;
	int32		generation;
	Datum		reason;			/* text */
	bool		reason_null;
	Datum		worker;			/* text */
	bool		worker_null;
	int64		seq;			/* 0: the next of job_event_seq */
	bool		has_at;			/* false: now */
	TimestampTz at;
} JsEvent;

/*
 * What the BEFORE trigger stamps on a job row for the history it holds
 * (JsHoldEvents): the new held_claim_seq and held_end_seq.
 */
typedef struct JsHeldSeqs
{
	int64		claim_seq;
	bool		claim_null;
	int64		end_seq;
	bool		end_null;
} JsHeldSeqs;

extern void JsWriteEvent(const Oid *status_oids, const JsEvent *ev);
extern bool JsHoldEvents(const JsJobColumns *cols,
						 TupleTableSlot *oldslot, TupleTableSlot *newslot,
						 JsStatus from, JsStatus to, JsHeldSeqs *held);
extern bool JsWriteOutHeld(const JsJobColumns *cols,
						   TupleTableSlot *oldslot, TupleTableSlot *newslot);

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

/* meter.c */
extern bool JsMeterAmountValid(const JsonbValue *v);
extern void JsCheckBudget(Jsonb *budget);
extern void JsCheckMetersKnown(int64 job_id, Jsonb *budget, Jsonb *extra);
extern char *JsUnknownMeter(Jsonb *budget, Jsonb *extra);
extern const char *JsStartRefusal(int32 attempts, bool has_max, int32 max_attempts,
								  bool has_deadline, TimestampTz deadline,
								  Jsonb *budget, Jsonb *spent, char **meter);
extern void JsCheckStartAllowed(int64 job_id, int32 attempts, bool has_max,
								int32 max_attempts, bool has_deadline,
								TimestampTz deadline, Jsonb *budget, Jsonb *spent);
extern char *JsBudgetExhaustedMeter(Jsonb *budget, Jsonb *spent);
extern void JsCheckSpentForward(int64 job_id, Jsonb *oldspent, Jsonb *newspent);

/* lease.c */
extern int	JsExpireLeases(const char *queue);

/*
 * retention.c: the tail of every statement that deletes jobs (its CTE d
 * returns the queue and id of each job deleted): the job's rows in the
 * other per-job tables (job_event_log, spend, operation, job_ref) go with it,
 * and the statement returns the count.
 */
#define JS_DELETE_JOB_ROWS \
	" e AS (DELETE FROM job_state.job_event_log v USING d" \
	"  WHERE v.queue OPERATOR(pg_catalog.=) d.queue AND v.job_id OPERATOR(pg_catalog.=) d.id)," \
	" s AS (DELETE FROM job_state.spend v USING d" \
	"  WHERE v.queue OPERATOR(pg_catalog.=) d.queue AND v.job_id OPERATOR(pg_catalog.=) d.id)," \
	" o AS (DELETE FROM job_state.operation v USING d" \
	"  WHERE v.queue OPERATOR(pg_catalog.=) d.queue AND v.job_id OPERATOR(pg_catalog.=) d.id)," \
	" r AS (DELETE FROM job_state.job_ref v USING d" \
	"  WHERE v.queue OPERATOR(pg_catalog.=) d.queue AND v.job_id OPERATOR(pg_catalog.=) d.id)" \
	" SELECT pg_catalog.count(*) FROM d"

/*
 * the same, on the 0.1.0 schema (before ALTER EXTENSION UPDATE): no job_ref,
 * and the history is the table job_event
 */
#define JS_DELETE_JOB_ROWS_010 \
	" e AS (DELETE FROM job_state.job_event v USING d" \
	"  WHERE v.queue OPERATOR(pg_catalog.=) d.queue AND v.job_id OPERATOR(pg_catalog.=) d.id)," \
	" s AS (DELETE FROM job_state.spend v USING d" \
	"  WHERE v.queue OPERATOR(pg_catalog.=) d.queue AND v.job_id OPERATOR(pg_catalog.=) d.id)," \
	" o AS (DELETE FROM job_state.operation v USING d" \
	"  WHERE v.queue OPERATOR(pg_catalog.=) d.queue AND v.job_id OPERATOR(pg_catalog.=) d.id)" \
	" SELECT pg_catalog.count(*) FROM d"

/* jobs one retention step deletes at most */
#define JS_RETENTION_BATCH 1000

extern bool js_retention_more;
extern int64 JsDeleteJobs(JsPlan *plan, Datum *args, const char *nulls);
extern int	JsApplyRetention(void);

#endif							/* JS_RULES_H */
