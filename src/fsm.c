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
 *	  here only, as event.c decides.
 * job_state.restore (superuser only) lets a dump be replayed unchecked.
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
	int			cols[20];
	Datum		vals[20];
	bool		nulls[20];
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
	 * Off running and waiting: no lease, and the slots go back
	 * (job_state_event); not waiting: no callback timeout.
	 */
	if (!JsStatusHoldsClaim(to))
	{
		int			kind;

		(void) slot_getattr(newslot, cols->lease_expires_at, &isnull);
		if (!isnull)
			JsStampSet(&st, cols->lease_expires_at, (Datum) 0, true);
		for (kind = 0; kind < JS_NUM_SLOT_KINDS; kind++)
			if (!slot_attisnull(newslot, cols->slot[kind]))
				JsStampSet(&st, cols->slot[kind], (Datum) 0, true);
	}
	if (to != JS_WAITING && cols->callback_timeout_at != 0)
	{
		if (!slot_attisnull(newslot, cols->callback_timeout_at))
			JsStampSet(&st, cols->callback_timeout_at, (Datum) 0, true);
		if (!slot_attisnull(newslot, cols->heartbeat_interval))
			JsStampSet(&st, cols->heartbeat_interval, (Datum) 0, true);
	}

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

	/* a deleted ready job is ready again if the delete rolls back */
	if (TRIGGER_FIRED_BY_DELETE(event) && JsFrontierEnabled())
		JsNoteReadiness(JsJobColumnsFor(trigdata->tg_relation), trigdata->tg_relation,
						trigdata->tg_trigslot, NULL);

	if (js_restore)
		return PointerGetDatum(TRIGGER_FIRED_BY_DELETE(event) ?
							   trigdata->tg_trigtuple :
							   TRIGGER_FIRED_BY_UPDATE(event) ?
							   trigdata->tg_newtuple : trigdata->tg_trigtuple);

	cols = JsJobColumnsFor(trigdata->tg_relation);

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
