/*-------------------------------------------------------------------------
 *
 * fsm.c
 *	  The job state machine: the transition table and the BEFORE ROW
 *	  trigger (job_state_fsm, ENABLE ALWAYS) that enforces it on every
 *	  write to job_state.job, raw SQL included.
 *
 * Invariants (SPEC section 1), checked without SPI statements:
 *	- INSERT only as 'accepted' with zeroed counters and no slot; input_hash
 *	  is computed here from the input, so it can never disagree with it,
 *	  and only for a job with an idempotency key (the one use of the hash:
 *	  a key given again with other input); a job without a key gets NULL,
 *	  unless the column is still NOT NULL (a 0.1.0 schema);
 *	- UPDATE only along the transition table below; queue, id, key, input,
 *	  input_hash, submitted_by and accepted_at never change (the job row is
 *	  the record of its submit: job_event has no row for it); generation, attempts, throttles and spent
 *	  amounts never decrease; retries fall back to 0 only on a re-run out of
 *	  failed/unknown/cancelled; a succeeded job is final (late spend aside);
 *	- entering 'running' bumps generation and attempts, stamps started_at and
 *	  refuses a start beyond max_attempts (JS005), after the deadline (JS006)
 *	  or over budget (JS004), all judged by the database clock; a start by
 *	  raw SQL takes its slots as claim does (limits.c);
 *	- re-running a failed, unknown or cancelled job bumps the generation, so
 *	  every older token dies at once;
 *	- every new generation (a claim, a redrive, a reconcile, raw SQL) gets a
 *	  new random claim_nonce, drawn here, which the tokens of that
 *	  generation carry (token.c): a claim this server never saw cannot
 *	  have it; the nonce changes with the generation only, and a job is
 *	  inserted with nonce 0;
 *	- a job's resource and concurrency key change only while it is
 *	  accepted, and the slot numbers of a running job never change;
 *	- waiting (for a callback) is entered only from running, keeps the
 *	  generation, needs callback_timeout_at and a waiting window
 *	  (lease_expires_at) that never reaches past it; the job keeps its
 *	  slots or gives them up as the wait begins; leaving waiting clears
 *	  the timeout columns, leaving running and waiting the lease and slots;
 *	- DELETE only of finished jobs (succeeded, failed, cancelled), and only
 *	  through purge();
 *	- held_claim_seq and held_end_seq, the history the row holds, are set
 *	  here only, as event.c decides;
 *	- the columns only transitions set (the lease, the callback timeout,
 *	  start and finish, worker, result, errors, progress) hold what the
 *	  row's status allows, by one table (js_transition_columns) for INSERT,
 *	  restore and UPDATE alike.
 * job_state.restore (superuser only) lets a dump be replayed unchecked but
 * for that table; a raw INSERT's queue and id are checked by the AFTER
 * trigger (job_trigger.c), which may run statements.
 *
 * Locks: none beyond the statement's, except the slot rows and start
 * token a raw-SQL start takes (limits.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/htup_details.h"
#include "catalog/pg_enum.h"
#include "commands/trigger.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "job_state.h"
#include "tables.h"
#include "rules.h"
#include "slots.h"
#include "token.h"

/*
 * The hint of a job row inserted as it could not have been submitted: a
 * dump replayed without job_state.restore is the usual cause.
 */
#define JS_INSERT_HINT \
	"Use job_state.submit() to add a job.  To replay a dump as it was, restore as a superuser with job_state.restore on in the restoring session: PGOPTIONS='-c job_state.restore=on' pg_restore ..., or SET job_state.restore = on before psql replays a plain dump."

PG_FUNCTION_INFO_V1(js_job_fsm_trigger);

bool		js_purging = false;
/* set by take.c while claim starts the jobs whose slots it holds */
bool		js_claim_starting = false;
/* set by submit.c while the AFTER triggers of its rows fire */
JsSubmitting js_submitting = {NULL, 0, 0};

#define A JS_ACCEPTED
#define R JS_RUNNING
#define W JS_WAITING
#define S JS_SUCCEEDED
#define F JS_FAILED
#define U JS_UNKNOWN
#define C JS_CANCELLED

/* allowed[from][to]; a status may always stay what it is */
static const bool js_transitions[JS_NUM_STATUS][JS_NUM_STATUS] = {
	/* to:          A      R      W      S      F      U      C */
	[A] = {true, true, false, false, true, false, true},
	[R] = {true, true, true, true, true, true, true},
	[W] = {true, false, true, true, true, true, true},
	[S] = {false, false, false, true, false, false, false},
	[F] = {true, false, false, false, true, false, false},
	[U] = {true, false, false, true, true, true, true},
	[C] = {true, false, false, false, false, false, true},
};

#undef A
#undef R
#undef W
#undef S
#undef F
#undef U
#undef C

bool
JsTransitionAllowed(JsStatus from, JsStatus to)
{
	return js_transitions[from][to];
}

JsStatus
JsStatusFromName(const char *name)
{
	int			i;

	for (i = 0; i < JS_NUM_STATUS; i++)
		if (strcmp(js_status_names[i], name) == 0)
			return (JsStatus) i;
	elog(ERROR, "job_state: unknown status \"%s\"", name);
	pg_unreachable();
}

/*
 * What CHECK constraints would say, checked only where a value is new: a
 * key of 1 to 255 bytes, max_attempts of at least 1.
 */
static void
JsCheckValues(const JsJobColumns *cols, TupleTableSlot *newslot,
			  TupleTableSlot *oldslot)
{
	TupleDesc	tupdesc = newslot->tts_tupleDescriptor;
	int			keys[2] = {cols->idempotency_key, cols->concurrency_key};
	int			i;
	bool		isnull;
	int32		max_attempts;

	for (i = 0; i < 2; i++)
	{
		Datum		key;

		if (oldslot != NULL && JsSameValue(oldslot, newslot, keys[i]))
			continue;
		key = slot_getattr(newslot, keys[i], &isnull);
		/* the value's own size: raw SQL may bring it compressed or toasted */
		if (!isnull &&
			(toast_raw_datum_size(key) - VARHDRSZ < 1 ||
			 toast_raw_datum_size(key) - VARHDRSZ > 255))
			ereport(ERROR,
					(errcode(ERRCODE_CHECK_VIOLATION),
					 errmsg("%s of a job must have 1 to 255 bytes",
							NameStr(TupleDescAttr(tupdesc, keys[i] - 1)->attname))));
	}
	max_attempts = JsTupleInt32(newslot, cols->max_attempts, &isnull);
	if (!isnull && max_attempts < 1)
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("max_attempts of a job must be at least 1"),
				 errdetail("The value given is %d.", max_attempts)));
}

static void
JsRefuseChange(int64 job_id, const char *column)
{
	ereport(ERROR,
			(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
			 errmsg("column \"%s\" of job %lld cannot change", column,
					(long long) job_id),
			 errdetail("A job's queue, id, idempotency key, input, submitter and acceptance time are fixed at submit."),
			 errhint("Submit a new job instead.")));
}

/* the held seqs are the history's (event.c): no write names them */
static void
JsRefuseHeldSeqs(const JsJobColumns *cols, TupleTableSlot *oldslot,
				 TupleTableSlot *newslot, int64 job_id)
{
	TupleDesc	tupdesc = newslot->tts_tupleDescriptor;
	int			attnums[2] = {cols->held_claim_seq, cols->held_end_seq};
	int			i;

	if (cols->held_claim_seq == 0)
		return;					/* a 0.1.0 schema */
	for (i = 0; i < 2; i++)
		if (oldslot == NULL ? !slot_attisnull(newslot, attnums[i]) :
			!JsSameValue(oldslot, newslot, attnums[i]))
			ereport(ERROR,
					(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
					 errmsg("column \"%s\" of job %lld is set only by job_state",
							NameStr(TupleDescAttr(tupdesc, attnums[i] - 1)->attname),
							(long long) job_id),
					 errdetail("It holds the seq of a history event that the job row stands for (job_state.job_event)."),
					 errhint("Leave the column out of the statement.")));
}

static void
JsRefuseLimitChange(int64 job_id, const char *column, JsStatus to)
{
	ereport(ERROR,
			(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
			 errmsg("column \"%s\" of job %lld cannot change when the job is %s",
					column, (long long) job_id, js_status_names[to]),
			 errdetail("A job's resource and concurrency key can change only while it waits (accepted), because the slots of a running job are those it started with."),
			 errhint("Change them on a waiting job, or in the same update that re-runs it.")));
}

/*
 * The numbers of the slots a job holds are written by claim and by a limit
 * that adopts running jobs (limits.c), and cleared when the job leaves
 * running.  A running job's numbers never change: the slots would no
 * longer be freed when it stops, and the limit would shrink for good.
 */
static void
JsCheckSlotColumns(const JsJobColumns *cols, TupleTableSlot *newslot,
				   TupleTableSlot *oldslot, int64 job_id, JsStatus from, JsStatus to)
{
	TupleDesc	tupdesc = newslot->tts_tupleDescriptor;
	int			kind;

	for (kind = 0; kind < JS_NUM_SLOT_KINDS; kind++)
	{
		int			attnum = cols->slot[kind];
		const char *column = NameStr(TupleDescAttr(tupdesc, attnum - 1)->attname);

		if (oldslot == NULL)
		{
			if (!slot_attisnull(newslot, attnum))
				ereport(ERROR,
						(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
						 errmsg("job %lld cannot be inserted holding a slot", (long long) job_id),
						 errdetail("Column \"%s\" is set; a waiting job holds no slot.", column),
						 errhint(JS_INSERT_HINT)));
		}
		else if (to == JS_WAITING)
		{
			/*
			 * A wait keeps its slots or gives them up as it begins
			 * (release_slots); it never takes one, and a waiting job's
			 * numbers never change.
			 */
			bool		released = from == JS_RUNNING &&
				slot_attisnull(newslot, attnum);

			if (!JsSameValue(oldslot, newslot, attnum) && !released)
				ereport(ERROR,
						(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
						 errmsg("column \"%s\" of waiting job %lld cannot change", column,
								(long long) job_id),
						 errdetail("A job keeps the slots it started with while it waits for a callback, or gives them up when the wait begins; it takes none."),
						 errhint("Leave the slot columns out of the UPDATE.")));
		}
		else if (!slot_attisnull(oldslot, attnum) &&
				 !JsSameValue(oldslot, newslot, attnum))
			ereport(ERROR,
					(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
					 errmsg("column \"%s\" of running job %lld cannot change", column,
							(long long) job_id),
					 errdetail("It is the number of a slot the job holds until it stops running."),
					 errhint("Complete, fail or cancel the job; its slots are freed then.")));
	}
}

/*
 * A waiting job (callback.c) has a callback timeout, and its waiting
 * window (lease_expires_at) never reaches past it; heartbeat_interval, if
 * set, is positive.  The timeout and the interval are fixed while it waits:
 * a heartbeat extends the window, never the timeout.
 */
static void
JsCheckWaiting(const JsJobColumns *cols, TupleTableSlot *oldslot,
			   TupleTableSlot *newslot, int64 job_id, JsStatus from)
{
	bool		no_timeout;
	bool		no_lease;
	bool		no_interval;
	Datum		timeout = slot_getattr(newslot, cols->callback_timeout_at, &no_timeout);
	Datum		lease = slot_getattr(newslot, cols->lease_expires_at, &no_lease);
	Datum		interval = slot_getattr(newslot, cols->heartbeat_interval, &no_interval);

	if (from == JS_WAITING &&
		(!JsSameValue(oldslot, newslot, cols->callback_timeout_at) ||
		 !JsSameValue(oldslot, newslot, cols->heartbeat_interval)))
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("the callback timeout of waiting job %lld cannot change",
						(long long) job_id),
				 errdetail("callback_timeout_at and heartbeat_interval are fixed when the wait begins."),
				 errhint("A heartbeat extends the waiting window up to the timeout; to wait longer, let the job time out and run it again.")));
	if (no_timeout || no_lease)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("a waiting job needs callback_timeout_at and lease_expires_at"),
				 errdetail("Job %lld would wait without a timeout.", (long long) job_id),
				 errhint("Use job_state.wait_for_callback().")));
	if (DatumGetTimestampTz(lease) > DatumGetTimestampTz(timeout))
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("the waiting window of job %lld cannot reach past its callback timeout",
						(long long) job_id),
				 errdetail("lease_expires_at would be %s; callback_timeout_at is %s.",
						   timestamptz_to_str(DatumGetTimestampTz(lease)),
						   timestamptz_to_str(DatumGetTimestampTz(timeout)))));
	if (!no_interval && !JsIntervalPositive(DatumGetIntervalP(interval)))
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("heartbeat_interval of a job must be positive"),
				 errdetail("Job %lld.", (long long) job_id)));
}

/*
 * The columns a BEFORE UPDATE sets on the new version: generation,
 * attempts and the time stamps a change of status brings, the lease and
 * the slot numbers a job leaves running with.
 */
typedef struct JsStamp
{
	int			cols[24];
	Datum		vals[24];
	bool		nulls[24];
	int			n;
} JsStamp;

static void
JsStampSet(JsStamp *st, int attnum, Datum value, bool isnull)
{
	Assert(st->n < lengthof(st->cols));
	st->cols[st->n] = attnum;
	st->vals[st->n] = value;
	st->nulls[st->n] = isnull;
	st->n++;
}

/*
 * The columns only a change of status (or a call acting under a claim:
 * heartbeat, wait_for_callback, succeed, fail) may set, and what a row of
 * each status holds in them: N must be NULL, M may hold a value, S must
 * hold one.  One table for every write (INSERT and UPDATE alike):
 *	- an INSERT (submit, raw SQL) writes a job no transition has touched
 *	  yet: the "inserted" rule, NULL everywhere;
 *	- a row restored with job_state.restore (pg_dump, any status) must be
 *	  one that transitions could have written: its status's rule;
 *	- an UPDATE leaves a row its new status's rule allows: a value the old
 *	  row carried into a status that must not hold it is cleared (the lease
 *	  of a job that stopped running), one the statement itself writes there
 *	  is refused (JS003), and a value the status needs must be there
 *	  (23502), after the stamps of the change (started_at, finished_at).
 * The slot columns have rules of their own (JsCheckSlotColumns); the held
 * seqs are the trigger's alone (JsRefuseHeldSeqs).  A 0.1.0 schema lacks
 * some columns: their attnum is 0 and they are skipped.
 */
typedef enum JsColumnRule
{
	JS_COL_NULL,
	JS_COL_MAY,
	JS_COL_SET
} JsColumnRule;

typedef struct JsTransitionColumn
{
	size_t		attnum_offset;	/* of the column's attnum in JsJobColumns */
	JsColumnRule inserted;		/* a row an INSERT writes */
	JsColumnRule in[JS_NUM_STATUS]; /* a row of each status */
} JsTransitionColumn;

#define N JS_COL_NULL
#define M JS_COL_MAY
#define S JS_COL_SET
#define JS_COLUMN(name) offsetof(JsJobColumns, name)

static const JsTransitionColumn js_transition_columns[] = {
	/* status:                           ins    A  R  W  S  F  U  C */
	{JS_COLUMN(lease_expires_at), N, {N, S, S, N, N, N, N}},
	{JS_COLUMN(callback_timeout_at), N, {N, N, S, N, N, N, N}},
	{JS_COLUMN(heartbeat_interval), N, {N, N, M, N, N, N, N}},
	{JS_COLUMN(started_at), N, {M, S, S, M, M, M, M}},
	{JS_COLUMN(finished_at), N, {N, N, N, S, S, S, S}},
	{JS_COLUMN(worker), N, {M, M, M, M, M, M, M}},
	{JS_COLUMN(result), N, {N, N, N, M, M, M, M}},
	{JS_COLUMN(last_error), N, {M, M, M, M, M, M, M}},
	{JS_COLUMN(error_class), N, {M, M, M, M, M, M, M}},
	{JS_COLUMN(reason), N, {M, M, M, M, M, M, M}},
	{JS_COLUMN(progress), N, {M, M, M, M, M, M, M}},
	{JS_COLUMN(progress_generation), N, {M, M, M, M, M, M, M}},
	{JS_COLUMN(progress_at), N, {M, M, M, M, M, M, M}},
};

#undef N
#undef M
#undef S
#undef JS_COLUMN

static inline int
JsTransitionColumnAttnum(const JsJobColumns *cols, const JsTransitionColumn *tc)
{
	return *(const int *) ((const char *) cols + tc->attnum_offset);
}

/* "running and waiting": the statuses whose rows may hold the column */
static char *
JsStatusesHolding(const JsTransitionColumn *tc)
{
	StringInfoData buf;
	int			i;
	int			n = 0;
	int			seen = 0;

	for (i = 0; i < JS_NUM_STATUS; i++)
		n += tc->in[i] != JS_COL_NULL;
	initStringInfo(&buf);
	for (i = 0; i < JS_NUM_STATUS; i++)
	{
		if (tc->in[i] == JS_COL_NULL)
			continue;
		seen++;
		if (seen > 1)
			appendStringInfoString(&buf, seen == n ? " and " : ", ");
		appendStringInfoString(&buf, js_status_names[i]);
	}
	return buf.data;
}

/*
 * An INSERT: the row of a job no transition has touched (submit, raw SQL),
 * or, restoring, a row its status allows.  No SPI.
 */
static void
JsCheckInsertedColumns(const JsJobColumns *cols, TupleTableSlot *slot,
					   int64 job_id, JsStatus status, bool restoring)
{
	TupleDesc	tupdesc = slot->tts_tupleDescriptor;
	int			i;

	for (i = 0; i < lengthof(js_transition_columns); i++)
	{
		const JsTransitionColumn *tc = &js_transition_columns[i];
		int			attnum = JsTransitionColumnAttnum(cols, tc);
		JsColumnRule rule = restoring ? tc->in[status] : tc->inserted;
		const char *column;
		bool		isnull;

		if (attnum == 0)
			continue;			/* a 0.1.0 schema */
		isnull = slot_attisnull(slot, attnum);
		if (rule == JS_COL_MAY || isnull == (rule == JS_COL_NULL))
			continue;
		column = NameStr(TupleDescAttr(tupdesc, attnum - 1)->attname);
		if (!restoring)
			ereport(ERROR,
					(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
					 errmsg("job %lld cannot be inserted with column \"%s\" set",
							(long long) job_id, column),
					 errdetail("A new job is accepted and has not run: only a change of status or a call under its claim sets \"%s\".",
							   column),
					 errhint(JS_INSERT_HINT)));
		if (rule == JS_COL_SET)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("a %s job needs %s", js_status_names[status], column),
					 errdetail("Restored job %lld is %s and has no %s.", (long long) job_id,
							   js_status_names[status], column),
					 errhint("Restore the row as the dump holds it, or fix the row in the dumped database first.")));
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("restored job %lld is %s and cannot hold column \"%s\"",
						(long long) job_id, js_status_names[status], column),
				 errdetail("Only %s jobs hold \"%s\".", JsStatusesHolding(tc), column),
				 errhint("Restore the row as the dump holds it, or fix the row in the dumped database first.")));
	}
}

/* the stamp st sets on attnum, if any: its index, or -1 */
static int
JsStampFind(const JsStamp *st, int attnum)
{
	int			i;

	for (i = 0; i < st->n; i++)
		if (st->cols[i] == attnum)
			return i;
	return -1;
}

/*
 * An UPDATE to status to: each column as the new status's rule has it,
 * after the stamps in st (a value carried from the old row into a status
 * that must not hold it is cleared by a further stamp).  No SPI.
 */
static void
JsCheckUpdatedColumns(const JsJobColumns *cols, TupleTableSlot *oldslot,
					  TupleTableSlot *newslot, int64 job_id, JsStatus to,
					  JsStamp *st)
{
	TupleDesc	tupdesc = newslot->tts_tupleDescriptor;
	int			i;

	for (i = 0; i < lengthof(js_transition_columns); i++)
	{
		const JsTransitionColumn *tc = &js_transition_columns[i];
		int			attnum = JsTransitionColumnAttnum(cols, tc);
		JsColumnRule rule = tc->in[to];
		int			stamp;
		bool		isnull;
		const char *column;

		if (attnum == 0 || rule == JS_COL_MAY)
			continue;
		stamp = JsStampFind(st, attnum);
		isnull = stamp >= 0 ? st->nulls[stamp] : slot_attisnull(newslot, attnum);
		if (isnull == (rule == JS_COL_NULL))
			continue;
		column = NameStr(TupleDescAttr(tupdesc, attnum - 1)->attname);
		if (rule == JS_COL_SET)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("a %s job needs %s", js_status_names[to], column),
					 errdetail("Job %lld would be %s without it.", (long long) job_id,
							   js_status_names[to]),
					 errhint("Use the job_state functions, which set it.")));
		/* a value the old row held: the change of status clears it */
		if (stamp < 0 && JsSameValue(oldslot, newslot, attnum))
		{
			JsStampSet(st, attnum, (Datum) 0, true);
			continue;
		}
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("column \"%s\" of job %lld cannot be set when the job is %s",
						column, (long long) job_id, js_status_names[to]),
				 errdetail("Only %s jobs hold \"%s\".", JsStatusesHolding(tc), column),
				 errhint("Leave the column out of the UPDATE; the job_state functions set it.")));
	}
}

/*
 * A start by raw SQL: the slots of the limits the job falls under are taken
 * as claim takes them (limits.c) and recorded in its slot columns, so that
 * every start counts against its limits.  The numbers are job_state's to
 * write: set by hand, they would name a slot the job does not hold.
 */
static void
JsRawStart(const JsJobColumns *cols, TupleTableSlot *newslot, int64 job_id,
		   JsStamp *st)
{
	TupleDesc	tupdesc = newslot->tts_tupleDescriptor;
	int32		numbers[JS_NUM_SLOT_KINDS];
	bool		no_resource;
	bool		no_key;
	bool		isnull;
	Datum		queue = slot_getattr(newslot, cols->queue, &isnull);
	Datum		resource = slot_getattr(newslot, cols->resource, &no_resource);
	Datum		key = slot_getattr(newslot, cols->concurrency_key, &no_key);
	int			kind;

	for (kind = 0; kind < JS_NUM_SLOT_KINDS; kind++)
		if (!slot_attisnull(newslot, cols->slot[kind]))
			ereport(ERROR,
					(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
					 errmsg("job %lld cannot start holding a slot named by hand",
							(long long) job_id),
					 errdetail("Column \"%s\" is set; the start takes the slots of its limits itself.",
							   NameStr(TupleDescAttr(tupdesc, cols->slot[kind] - 1)->attname)),
					 errhint("Leave the slot columns out of the UPDATE.")));

	JsRawStartSlots(job_id, queue, resource, !no_resource, key, !no_key, numbers);
	for (kind = 0; kind < JS_NUM_SLOT_KINDS; kind++)
		if (numbers[kind] != 0)
			JsStampSet(st, cols->slot[kind], Int32GetDatum(numbers[kind]), false);
}

static void
JsRefuseDecrease(int64 job_id, const char *column, int64 oldval, int64 newval)
{
	ereport(ERROR,
			(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
			 errmsg("%s of job %lld cannot go back", column, (long long) job_id),
			 errdetail("It is %lld; the update would make it %lld.",
					   (long long) oldval, (long long) newval)));
}

static HeapTuple
JsCheckInsert(const JsJobColumns *cols, Relation rel, TupleTableSlot *slot,
			  HeapTuple tuple)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	JsStatus	status = JsTupleStatus(cols, slot);
	int64		job_id = JsTupleJobId(cols, slot);
	bool		isnull;
	int			col;
	Datum		hash;
	bool		hash_null = false;
	Datum		input;

	if (status != JS_ACCEPTED)
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("job %lld cannot be inserted as %s", (long long) job_id,
						js_status_names[status]),
				 errdetail("Every job starts as accepted."),
				 errhint(JS_INSERT_HINT)));

	for (col = 0; col < 4; col++)
	{
		int			attnum = col == 0 ? cols->generation :
			col == 1 ? cols->attempts :
			col == 2 ? cols->retries : cols->throttles;

		if (JsTupleInt32(slot, attnum, &isnull) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
					 errmsg("job %lld must be inserted with %s 0", (long long) job_id,
							NameStr(TupleDescAttr(tupdesc, attnum - 1)->attname)),
					 errhint(JS_INSERT_HINT)));
	}

	if (cols->claim_nonce != 0 && JsTupleInt32(slot, cols->claim_nonce, &isnull) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("job %lld must be inserted with claim_nonce 0", (long long) job_id),
				 errdetail("A job that was never claimed has no claim nonce; each new generation draws one."),
				 errhint(JS_INSERT_HINT)));

	if (DatumGetBool(slot_getattr(slot, cols->cancel_requested, &isnull)))
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("job %lld cannot be inserted with cancel_requested set",
						(long long) job_id),
				 errdetail("Only job_state.cancel() asks a running job to stop."),
				 errhint(JS_INSERT_HINT)));
	JsCheckInsertedColumns(cols, slot, job_id, JS_ACCEPTED, false);
	JsCheckValues(cols, slot, NULL);
	JsCheckSlotColumns(cols, slot, NULL, job_id, JS_ACCEPTED, JS_ACCEPTED);
	JsRefuseHeldSeqs(cols, NULL, slot, job_id);

	input = slot_getattr(slot, cols->input, &isnull);
	if (isnull)
		return tuple;			/* the NOT NULL constraint will object */
	if (slot_attisnull(slot, cols->idempotency_key) &&
		!TupleDescAttr(tupdesc, cols->input_hash - 1)->attnotnull)
	{
		/* what submit writes: the row needs no copy */
		if (slot_attisnull(slot, cols->input_hash))
			return tuple;
		hash = (Datum) 0;
		hash_null = true;
	}
	else
		hash = PointerGetDatum(JsInputHash(DatumGetJsonbP(input)));
	return heap_modify_tuple_by_cols(tuple, tupdesc, 1, (int *) &cols->input_hash,
									 &hash, &hash_null);
}

/*
 * A row restored with job_state.restore: the columns its status may hold
 * (the table), and a waiting row's window within its timeout.
 */
static void
JsCheckRestored(const JsJobColumns *cols, TupleTableSlot *slot)
{
	JsStatus	status = JsTupleStatus(cols, slot);
	int64		job_id = JsTupleJobId(cols, slot);

	JsCheckInsertedColumns(cols, slot, job_id, status, true);
	if (status == JS_WAITING)
		JsCheckWaiting(cols, NULL, slot, job_id, JS_ACCEPTED);
}

static void
JsCheckDelete(const JsJobColumns *cols, TupleTableSlot *slot)
{
	JsStatus	status = JsTupleStatus(cols, slot);
	int64		job_id = JsTupleJobId(cols, slot);

	if (!JsStatusFinished(status))
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("job %lld is %s and cannot be deleted", (long long) job_id,
						js_status_names[status]),
				 errdetail("Only succeeded, failed or cancelled jobs can be deleted."),
				 errhint("Cancel or reconcile the job first, then use job_state.purge().")));
	if (!js_purging)
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("job %lld can only be deleted by job_state.purge()",
						(long long) job_id),
				 errhint("Use job_state.purge(older_than).")));
}

/* what to do with a job whose generation cannot grow */
#define JS_GENERATION_HINT \
	"Every claim, redrive and reconcile makes a new generation and this job has no more; cancel it, or submit the work again as a new job."

/*
 * The columns fixed at submit, those fixed once the job may run, a
 * succeeded job's (all but late spend), and the transition table.
 */
static void
JsCheckFixedColumns(const JsJobColumns *cols, TupleDesc tupdesc,
					TupleTableSlot *oldslot, TupleTableSlot *newslot, int64 job_id,
					JsStatus from, JsStatus to)
{
	if (!JsSameValue(oldslot, newslot, cols->queue))
		JsRefuseChange(job_id, "queue");
	if (!JsSameValue(oldslot, newslot, cols->id))
		JsRefuseChange(job_id, "id");
	if (!JsSameValue(oldslot, newslot, cols->idempotency_key))
		JsRefuseChange(job_id, "idempotency_key");
	if (!JsSameValue(oldslot, newslot, cols->input))
		JsRefuseChange(job_id, "input");
	if (!JsSameValue(oldslot, newslot, cols->input_hash))
		JsRefuseChange(job_id, "input_hash");
	if (!JsSameValue(oldslot, newslot, cols->submitted_by))
		JsRefuseChange(job_id, "submitted_by");
	if (!JsSameValue(oldslot, newslot, cols->accepted_at))
		JsRefuseChange(job_id, "accepted_at");

	/* what a start needs from the limits is fixed once the job may run */
	if (to != JS_ACCEPTED)
	{
		if (!JsSameValue(oldslot, newslot, cols->resource))
			JsRefuseLimitChange(job_id, "resource", to);
		if (!JsSameValue(oldslot, newslot, cols->concurrency_key))
			JsRefuseLimitChange(job_id, "concurrency_key", to);
	}

	/* succeeded is final: only late spend may still be recorded */
	if (from == JS_SUCCEEDED)
	{
		int			attnum;

		for (attnum = 1; attnum <= tupdesc->natts; attnum++)
			if (attnum != cols->spent &&
				!TupleDescAttr(tupdesc, attnum - 1)->attisdropped &&
				!JsSameValue(oldslot, newslot, attnum))
				ereport(ERROR,
						(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
						 errmsg("job %lld has succeeded and cannot change", (long long) job_id),
						 errdetail("succeeded is a final state; the update changes column \"%s\".",
								   NameStr(TupleDescAttr(tupdesc, attnum - 1)->attname))));
	}

	if (!js_transitions[from][to])
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("job %lld cannot go from %s to %s", (long long) job_id,
						js_status_names[from], js_status_names[to]),
				 errdetail("The job is %s; the update asks for %s.",
						   js_status_names[from], js_status_names[to]),
				 errhint("See the state diagram in the job_state README.")));
}

/*
 * Forward-only counters: generation, attempts and throttles never
 * decrease; retries fall back to 0 only on a re-run; spent amounts never
 * go back.
 */
static void
JsCheckCounters(const JsJobColumns *cols, TupleTableSlot *oldslot,
				TupleTableSlot *newslot, int64 job_id, bool rerun)
{
	static const char *const names[3] = {"generation", "attempts", "throttles"};
	int			attnums[3] = {cols->generation, cols->attempts, cols->throttles};
	bool		isnull;
	int32		v_old;
	int32		v_new;
	int			i;

	for (i = 0; i < 3; i++)
	{
		v_old = JsTupleInt32(oldslot, attnums[i], &isnull);
		v_new = JsTupleInt32(newslot, attnums[i], &isnull);
		if (v_new < v_old)
			JsRefuseDecrease(job_id, names[i], v_old, v_new);
	}

	v_old = JsTupleInt32(oldslot, cols->retries, &isnull);
	v_new = JsTupleInt32(newslot, cols->retries, &isnull);
	if (v_new < v_old && !(rerun && v_new == 0))
		JsRefuseDecrease(job_id, "retries", v_old, v_new);

	if (!JsSameValue(oldslot, newslot, cols->spent))
	{
		Datum		olds = slot_getattr(oldslot, cols->spent, &isnull);
		Datum		news;

		if (!isnull)
		{
			news = slot_getattr(newslot, cols->spent, &isnull);
			if (!isnull)
				JsCheckSpentForward(job_id, DatumGetJsonbP(olds), DatumGetJsonbP(news));
		}
	}
}

/*
 * Entering running: the start must be allowed (attempts, deadline,
 * budget) and carry a lease; generation and attempts go up by one, the
 * slots are taken for a raw-SQL start, started_at is stamped.
 */
static void
JsStampStart(const JsJobColumns *cols, TupleTableSlot *newslot,
			 int64 job_id, int32 old_gen, int32 old_attempts, TimestampTz now,
			 JsStamp *st)
{
	int32		max_attempts;
	Datum		deadline;
	Datum		budget;
	Datum		spent;
	bool		no_max;
	bool		no_deadline;
	bool		no_budget;
	bool		no_spent;
	bool		isnull;

	max_attempts = JsTupleInt32(newslot, cols->max_attempts, &no_max);
	deadline = slot_getattr(newslot, cols->deadline, &no_deadline);
	budget = slot_getattr(newslot, cols->budget, &no_budget);
	spent = slot_getattr(newslot, cols->spent, &no_spent);
	JsCheckStartAllowed(job_id, old_attempts, !no_max, max_attempts,
						!no_deadline, no_deadline ? 0 : DatumGetTimestampTz(deadline),
						no_budget ? NULL : DatumGetJsonbP(budget),
						no_spent ? NULL : DatumGetJsonbP(spent));
	(void) slot_getattr(newslot, cols->lease_expires_at, &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("a running job needs lease_expires_at"),
				 errdetail("Job %lld would start without a lease.", (long long) job_id),
				 errhint("Use job_state.claim().")));

	JsStampSet(st, cols->generation,
			   Int32GetDatum(JsCounterAdd(job_id, "generation", old_gen, 1,
										  JS_GENERATION_HINT)),
			   false);
	JsStampSet(st, cols->attempts,
			   Int32GetDatum(JsCounterAdd(job_id, "attempts", old_attempts, 1,
										  "The job cannot start again; cancel it, or submit the work again as a new job.")),
			   false);

	/* claim holds the slots of its starts; raw SQL takes them here */
	if (!js_claim_starting)
		JsRawStart(cols, newslot, job_id, st);

	JsStampSet(st, cols->started_at, TimestampTzGetDatum(now), false);
	JsStampSet(st, cols->finished_at, (Datum) 0, true);
	JsStampSet(st, cols->cancel_requested, BoolGetDatum(false), false);
}

/*
 * A new generation, however it came (a stamp of this trigger, or raw SQL
 * raising the column), gets a new random claim nonce, whatever the
 * statement wrote there: a token of a claim this server never saw cannot
 * carry it.  Within a generation the nonce stays: its tokens must keep
 * verifying.
 */
static void
JsStampNonce(const JsJobColumns *cols, TupleTableSlot *oldslot,
			 TupleTableSlot *newslot, int64 job_id, int32 old_gen, JsStamp *st)
{
	int			stamp = JsStampFind(st, cols->generation);
	bool		isnull;
	int32		new_gen = stamp >= 0 ? DatumGetInt32(st->vals[stamp]) :
		JsTupleInt32(newslot, cols->generation, &isnull);

	if (new_gen != old_gen)
		JsStampSet(st, cols->claim_nonce, Int32GetDatum(JsNewClaimNonce()), false);
	else if (!JsSameValue(oldslot, newslot, cols->claim_nonce))
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("column \"claim_nonce\" of job %lld cannot change within a generation",
						(long long) job_id),
				 errdetail("The claim nonce is drawn by the job_state_fsm trigger with each new generation; the tokens of generation %d carry it.",
						   old_gen),
				 errhint("Leave claim_nonce out of the UPDATE.")));
}

/*
 * oldslot and newslot are the trigger's slots of the old row and of newtup,
 * the new one: every check reads them, and the stamps modify newtup.
 */
static HeapTuple
JsCheckUpdate(const JsJobColumns *cols, Relation rel, TupleTableSlot *oldslot,
			  TupleTableSlot *newslot, HeapTuple newtup)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	JsStatus	from = JsTupleStatus(cols, oldslot);
	JsStatus	to = JsTupleStatus(cols, newslot);
	int64		job_id = JsTupleJobId(cols, oldslot);
	TimestampTz now = GetCurrentTimestamp();
	JsStamp		st;
	JsHeldSeqs	held;
	bool		isnull;
	int32		old_gen;
	bool		rerun;

	st.n = 0;
	JsCheckFixedColumns(cols, tupdesc, oldslot, newslot, job_id, from, to);
	JsCheckValues(cols, newslot, oldslot);
	if (JsStatusHoldsClaim(to))
		JsCheckSlotColumns(cols, newslot, oldslot, job_id, from, to);
	if (to == JS_WAITING)
		JsCheckWaiting(cols, oldslot, newslot, job_id, from);

	/* a re-run out of failed, unknown or cancelled: reconcile or redrive */
	rerun = to == JS_ACCEPTED &&
		(from == JS_FAILED || from == JS_UNKNOWN || from == JS_CANCELLED);
	JsCheckCounters(cols, oldslot, newslot, job_id, rerun);
	JsRefuseHeldSeqs(cols, oldslot, newslot, job_id);

	/* the history the row holds, decided on the row as written (event.c) */
	if (JsHoldEvents(cols, oldslot, newslot, from, to, &held))
	{
		JsStampSet(&st, cols->held_claim_seq, Int64GetDatum(held.claim_seq),
				   held.claim_null);
		JsStampSet(&st, cols->held_end_seq, Int64GetDatum(held.end_seq),
				   held.end_null);
	}

	old_gen = JsTupleInt32(oldslot, cols->generation, &isnull);
	if (from != to && to == JS_RUNNING)
		JsStampStart(cols, newslot, job_id, old_gen,
					 JsTupleInt32(oldslot, cols->attempts, &isnull),
					 now, &st);
	else if (from != to && rerun)
	{
		JsStampSet(&st, cols->generation,
				   Int32GetDatum(JsCounterAdd(job_id, "generation", old_gen, 1,
											  JS_GENERATION_HINT)),
				   false);
		JsStampSet(&st, cols->finished_at, (Datum) 0, true);
		JsStampSet(&st, cols->cancel_requested, BoolGetDatum(false), false);
	}
	else if (from != to && to != JS_ACCEPTED && to != JS_WAITING)
		JsStampSet(&st, cols->finished_at, TimestampTzGetDatum(now), false);

	/*
	 * Off running and waiting the slots go back (job_state_event); the
	 * lease, the callback timeout and every other column the new status
	 * must not hold are cleared by the table (JsCheckUpdatedColumns).
	 */
	if (!JsStatusHoldsClaim(to))
	{
		int			kind;

		for (kind = 0; kind < JS_NUM_SLOT_KINDS; kind++)
			if (!slot_attisnull(newslot, cols->slot[kind]))
				JsStampSet(&st, cols->slot[kind], (Datum) 0, true);
	}
	JsCheckUpdatedColumns(cols, oldslot, newslot, job_id, to, &st);
	if (cols->claim_nonce != 0)
		JsStampNonce(cols, oldslot, newslot, job_id, old_gen, &st);

	if (st.n == 0)
		return newtup;
	return heap_modify_tuple_by_cols(newtup, tupdesc, st.n, st.cols,
									 st.vals, st.nulls);
}

Datum
js_job_fsm_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	const JsJobColumns *cols;
	TriggerEvent event;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "job_state_fsm: not called by trigger manager");
	event = trigdata->tg_event;
	if (!TRIGGER_FIRED_BEFORE(event) || !TRIGGER_FIRED_FOR_ROW(event))
		elog(ERROR, "job_state_fsm: must be fired before row");

	/* before any history id is drawn on a new timeline (timeline.c) */
	if (!TRIGGER_FIRED_BY_DELETE(event))
		JsTimelineCheck();

	/* a deleted ready job is ready again if the delete rolls back */
	if (TRIGGER_FIRED_BY_DELETE(event) && JsFrontierEnabled())
		JsNoteReadiness(JsJobColumnsFor(trigdata->tg_relation), trigdata->tg_relation,
						trigdata->tg_trigslot, NULL);

	cols = js_restore && !TRIGGER_FIRED_BY_INSERT(event) ? NULL :
		JsJobColumnsFor(trigdata->tg_relation);

	/*
	 * A restore replays rows as they were, in any status, unchecked but for
	 * the columns the status may hold (the row could not be worked on
	 * otherwise: an accepted job's lease would be due for ever); an UPDATE
	 * or DELETE in restore mode repairs by hand.
	 */
	if (js_restore)
	{
		if (TRIGGER_FIRED_BY_INSERT(event))
			JsCheckRestored(cols, trigdata->tg_trigslot);
		return PointerGetDatum(TRIGGER_FIRED_BY_DELETE(event) ?
							   trigdata->tg_trigtuple :
							   TRIGGER_FIRED_BY_UPDATE(event) ?
							   trigdata->tg_newtuple : trigdata->tg_trigtuple);
	}

	if (TRIGGER_FIRED_BY_INSERT(event))
		return PointerGetDatum(JsCheckInsert(cols, trigdata->tg_relation,
											 trigdata->tg_trigslot,
											 trigdata->tg_trigtuple));
	if (TRIGGER_FIRED_BY_DELETE(event))
	{
		JsCheckDelete(cols, trigdata->tg_trigslot);
		return PointerGetDatum(trigdata->tg_trigtuple);
	}
	if (TRIGGER_FIRED_BY_UPDATE(event))
		return PointerGetDatum(JsCheckUpdate(cols, trigdata->tg_relation,
											 trigdata->tg_trigslot,
											 trigdata->tg_newslot,
											 trigdata->tg_newtuple));
	elog(ERROR, "job_state_fsm: unexpected event");
	pg_unreachable();
}
