/*-------------------------------------------------------------------------
 *
 * fsm.c
 *	  The job state machine and the triggers that enforce it on every
 *	  write to job_state.job, raw SQL included.
 *
 * job_state_fsm (BEFORE ROW, ENABLE ALWAYS) validates without SPI:
 *	- INSERT only as 'accepted' with zeroed counters; input_hash is computed
 *	  here from the input, so it can never disagree with it;
 *	- UPDATE only along the transition table below; queue, id, key, input
 *	  and input_hash never change; generation, attempts, throttles and spent
 *	  amounts never decrease; retries fall back to 0 only on a re-run out of
 *	  failed/unknown/cancelled; a succeeded job is final;
 *	- entering 'running' bumps generation and attempts, stamps started_at and
 *	  refuses a start beyond max_attempts (JS005) or after the deadline
 *	  (JS006), both judged by the database clock;
 *	- re-running a failed, unknown or cancelled job bumps the generation, so
 *	  every older token dies at once;
 *	- DELETE only of finished jobs (succeeded, failed, cancelled), and only
 *	  through purge().
 * A job's resource and concurrency key change only while it waits.
 * job_state_event (AFTER ROW) appends to job_state.job_event whenever the
 * status or the generation changes, frees the concurrency slots of a job
 * that left running, and has a job that names a resource or a concurrency
 * key counted by its limits (limits.c: the resource must exist, the queue
 * is marked for the slot-taking claim, a new key gets its slots).  TRUNCATE
 * is refused while live jobs exist.  job_state.restore (superuser only)
 * lets a dump be replayed.
 *
 * The triggers take no locks beyond those of the statement that fires them,
 * except the queue row the first job naming a resource marks.
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

/*
 * The hint of a job row inserted as it could not have been submitted: a
 * dump replayed without job_state.restore is the usual cause.
 */
#define JS_INSERT_HINT \
	"Use job_state.submit() to add a job.  To replay a dump as it was, restore as a superuser with job_state.restore on in the restoring session: PGOPTIONS='-c job_state.restore=on' pg_restore ..., or SET job_state.restore = on before psql replays a plain dump."

PG_FUNCTION_INFO_V1(js_job_fsm_trigger);
PG_FUNCTION_INFO_V1(js_job_event_trigger);
PG_FUNCTION_INFO_V1(js_job_truncate_trigger);
PG_FUNCTION_INFO_V1(js_append_only_trigger);

bool		js_purging = false;

#define A JS_ACCEPTED
#define R JS_RUNNING
#define S JS_SUCCEEDED
#define F JS_FAILED
#define U JS_UNKNOWN
#define C JS_CANCELLED

/* allowed[from][to]; a status may always stay what it is */
static const bool js_transitions[JS_NUM_STATUS][JS_NUM_STATUS] = {
	/* to:          A      R      S      F      U      C */
	[A] = {true, true, false, true, false, true},
	[R] = {true, true, true, true, true, true},
	[S] = {false, false, true, false, false, false},
	[F] = {true, false, false, true, false, false},
	[U] = {true, false, true, true, true, true},
	[C] = {true, false, false, false, false, true},
};

#undef A
#undef R
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
JsCheckValues(const JsJobColumns *cols, TupleDesc tupdesc, HeapTuple newtup,
			  HeapTuple oldtup)
{
	int			keys[2] = {cols->idempotency_key, cols->concurrency_key};
	int			i;
	bool		isnull;
	int32		max_attempts;

	for (i = 0; i < 2; i++)
	{
		Datum		key;

		if (oldtup != NULL && JsSameValue(oldtup, newtup, tupdesc, keys[i]))
			continue;
		key = heap_getattr(newtup, keys[i], tupdesc, &isnull);
		/* the value's own size: raw SQL may bring it compressed or toasted */
		if (!isnull &&
			(toast_raw_datum_size(key) - VARHDRSZ < 1 ||
			 toast_raw_datum_size(key) - VARHDRSZ > 255))
			ereport(ERROR,
					(errcode(ERRCODE_CHECK_VIOLATION),
					 errmsg("%s of a job must have 1 to 255 bytes",
							NameStr(TupleDescAttr(tupdesc, keys[i] - 1)->attname))));
	}
	max_attempts = JsTupleInt32(newtup, tupdesc, cols->max_attempts, &isnull);
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
			 errdetail("A job's queue, id, idempotency key and input are fixed at submit."),
			 errhint("Submit a new job instead.")));
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
JsCheckSlotColumns(const JsJobColumns *cols, TupleDesc tupdesc, HeapTuple newtup,
				   HeapTuple oldtup, int64 job_id)
{
	int			kind;

	for (kind = 0; kind < JS_NUM_SLOT_KINDS; kind++)
	{
		int			attnum = cols->slot[kind];
		const char *column = NameStr(TupleDescAttr(tupdesc, attnum - 1)->attname);

		if (oldtup == NULL)
		{
			if (!heap_attisnull(newtup, attnum, tupdesc))
				ereport(ERROR,
						(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
						 errmsg("job %lld cannot be inserted holding a slot", (long long) job_id),
						 errdetail("Column \"%s\" is set; a waiting job holds no slot.", column),
						 errhint(JS_INSERT_HINT)));
		}
		else if (!heap_attisnull(oldtup, attnum, tupdesc) &&
				 !JsSameValue(oldtup, newtup, tupdesc, attnum))
			ereport(ERROR,
					(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
					 errmsg("column \"%s\" of running job %lld cannot change", column,
							(long long) job_id),
					 errdetail("It is the number of a slot the job holds until it stops running."),
					 errhint("Complete, fail or cancel the job; its slots are freed then.")));
	}
}

/*
 * A start by raw SQL: the slots of the limits the job falls under are taken
 * as claim takes them (limits.c) and recorded in its slot columns, so that
 * every start counts against its limits.  The numbers are job_state's to
 * write: set by hand, they would name a slot the job does not hold.
 */
static void
JsRawStart(const JsJobColumns *cols, TupleDesc tupdesc, HeapTuple newtup,
		   int64 job_id, int *setcols, Datum *setvals, bool *setnulls, int *nset)
{
	int32		numbers[JS_NUM_SLOT_KINDS];
	bool		no_resource;
	bool		no_key;
	bool		isnull;
	Datum		queue = heap_getattr(newtup, cols->queue, tupdesc, &isnull);
	Datum		resource = heap_getattr(newtup, cols->resource, tupdesc, &no_resource);
	Datum		key = heap_getattr(newtup, cols->concurrency_key, tupdesc, &no_key);
	int			kind;

	for (kind = 0; kind < JS_NUM_SLOT_KINDS; kind++)
		if (!heap_attisnull(newtup, cols->slot[kind], tupdesc))
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
		{
			setcols[*nset] = cols->slot[kind];
			setvals[*nset] = Int32GetDatum(numbers[kind]);
			setnulls[*nset] = false;
			(*nset)++;
		}
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

/*
 * Every amount of a new spent object is a number of at least 0: the budget
 * checks compare numbers, and a string such as "Infinity" would slip past
 * them.
 */
static void
JsCheckSpentNumbers(int64 job_id, Jsonb *newspent)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	JsonbValue	key = {0};

	it = JsonbIteratorInit(&newspent->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		CHECK_FOR_INTERRUPTS();
		if (tok == WJB_KEY)
		{
			key = v;
			continue;
		}
		if (tok != WJB_VALUE)
			continue;
		if (!JsMeterAmountValid(&v))
			ereport(ERROR,
					(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
					 errmsg("spent amount \"%.*s\" of job %lld must be a number of at least 0",
							key.val.string.len, key.val.string.val,
							(long long) job_id)));
	}
}

/*
 * Every meter in the old spent object must be in the new one with an
 * amount that is not smaller, and every new amount a number.
 */
static void
JsCheckSpentForward(int64 job_id, Jsonb *oldspent, Jsonb *newspent)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	if (!JB_ROOT_IS_OBJECT(newspent) || JB_ROOT_IS_SCALAR(newspent))
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("spent of job %lld must be a JSON object", (long long) job_id)));
	JsCheckSpentNumbers(job_id, newspent);
	if (!JB_ROOT_IS_OBJECT(oldspent) || JB_ROOT_IS_SCALAR(oldspent))
		return;

	it = JsonbIteratorInit(&oldspent->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		JsonbValue	key;
		JsonbValue *newval;

		CHECK_FOR_INTERRUPTS();
		if (tok != WJB_KEY)
			continue;
		key = v;
		tok = JsonbIteratorNext(&it, &v, true);
		if (v.type != jbvNumeric)
			continue;
		newval = getKeyJsonValueFromContainer(&newspent->root, key.val.string.val,
											  key.val.string.len, NULL);
		if (newval == NULL || newval->type != jbvNumeric ||
			DatumGetInt32(DirectFunctionCall2(numeric_cmp,
											  NumericGetDatum(newval->val.numeric),
											  NumericGetDatum(v.val.numeric))) < 0)
			ereport(ERROR,
					(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
					 errmsg("spent amount \"%.*s\" of job %lld cannot go back",
							key.val.string.len, key.val.string.val,
							(long long) job_id),
					 errdetail("It is %s.",
							   DatumGetCString(DirectFunctionCall1(numeric_out,
																   NumericGetDatum(v.val.numeric))))));
	}
}

static HeapTuple
JsCheckInsert(const JsJobColumns *cols, Relation rel, HeapTuple tuple)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	JsStatus	status = JsTupleStatus(cols, tuple, tupdesc);
	int64		job_id = JsTupleJobId(cols, tuple, tupdesc);
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

		if (JsTupleInt32(tuple, tupdesc, attnum, &isnull) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
					 errmsg("job %lld must be inserted with %s 0", (long long) job_id,
							NameStr(TupleDescAttr(tupdesc, attnum - 1)->attname)),
					 errhint(JS_INSERT_HINT)));
	}

	JsCheckValues(cols, tupdesc, tuple, NULL);
	JsCheckSlotColumns(cols, tupdesc, tuple, NULL, job_id);

	input = heap_getattr(tuple, cols->input, tupdesc, &isnull);
	if (isnull)
		return tuple;			/* the NOT NULL constraint will object */
	hash = PointerGetDatum(JsInputHash(DatumGetJsonbP(input)));
	return heap_modify_tuple_by_cols(tuple, tupdesc, 1, (int *) &cols->input_hash,
									 &hash, &hash_null);
}

static void
JsCheckDelete(const JsJobColumns *cols, Relation rel, HeapTuple tuple)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	JsStatus	status = JsTupleStatus(cols, tuple, tupdesc);
	int64		job_id = JsTupleJobId(cols, tuple, tupdesc);

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

static HeapTuple
JsCheckUpdate(const JsJobColumns *cols, Relation rel, HeapTuple oldtup,
			  HeapTuple newtup)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	JsStatus	from = JsTupleStatus(cols, oldtup, tupdesc);
	JsStatus	to = JsTupleStatus(cols, newtup, tupdesc);
	int64		job_id = JsTupleJobId(cols, oldtup, tupdesc);
	TimestampTz now = GetCurrentTimestamp();
	int			setcols[16];
	Datum		setvals[16];
	bool		setnulls[16];
	int			nset = 0;
	bool		isnull;
	int32		old_gen;
	int32		new_gen;
	int32		old_attempts;
	int32		new_attempts;
	int32		v_old;
	int32		v_new;
	bool		rerun;

#define SET_COLUMN(attnum, value, isnull_) \
	do { setcols[nset] = (attnum); setvals[nset] = (value); \
		 setnulls[nset] = (isnull_); nset++; } while (0)

	/* fixed columns */
	if (!JsSameValue(oldtup, newtup, tupdesc, cols->queue))
		JsRefuseChange(job_id, "queue");
	if (!JsSameValue(oldtup, newtup, tupdesc, cols->id))
		JsRefuseChange(job_id, "id");
	if (!JsSameValue(oldtup, newtup, tupdesc, cols->idempotency_key))
		JsRefuseChange(job_id, "idempotency_key");
	if (!JsSameValue(oldtup, newtup, tupdesc, cols->input))
		JsRefuseChange(job_id, "input");
	if (!JsSameValue(oldtup, newtup, tupdesc, cols->input_hash))
		JsRefuseChange(job_id, "input_hash");

	/* what a start needs from the limits is fixed once the job may run */
	if (to != JS_ACCEPTED)
	{
		if (!JsSameValue(oldtup, newtup, tupdesc, cols->resource))
			JsRefuseLimitChange(job_id, "resource", to);
		if (!JsSameValue(oldtup, newtup, tupdesc, cols->concurrency_key))
			JsRefuseLimitChange(job_id, "concurrency_key", to);
	}

	/* succeeded is final: only late spend may still be recorded */
	if (from == JS_SUCCEEDED)
	{
		int			attnum;

		for (attnum = 1; attnum <= tupdesc->natts; attnum++)
			if (attnum != cols->spent &&
				!TupleDescAttr(tupdesc, attnum - 1)->attisdropped &&
				!JsSameValue(oldtup, newtup, tupdesc, attnum))
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

	JsCheckValues(cols, tupdesc, newtup, oldtup);
	if (to == JS_RUNNING)
		JsCheckSlotColumns(cols, tupdesc, newtup, oldtup, job_id);

	/* forward-only counters */
	old_gen = JsTupleInt32(oldtup, tupdesc, cols->generation, &isnull);
	new_gen = JsTupleInt32(newtup, tupdesc, cols->generation, &isnull);
	if (new_gen < old_gen)
		JsRefuseDecrease(job_id, "generation", old_gen, new_gen);
	old_attempts = JsTupleInt32(oldtup, tupdesc, cols->attempts, &isnull);
	new_attempts = JsTupleInt32(newtup, tupdesc, cols->attempts, &isnull);
	if (new_attempts < old_attempts)
		JsRefuseDecrease(job_id, "attempts", old_attempts, new_attempts);
	v_old = JsTupleInt32(oldtup, tupdesc, cols->throttles, &isnull);
	v_new = JsTupleInt32(newtup, tupdesc, cols->throttles, &isnull);
	if (v_new < v_old)
		JsRefuseDecrease(job_id, "throttles", v_old, v_new);

	/* a re-run out of failed, unknown or cancelled: reconcile or redrive */
	rerun = to == JS_ACCEPTED &&
		(from == JS_FAILED || from == JS_UNKNOWN || from == JS_CANCELLED);
	v_old = JsTupleInt32(oldtup, tupdesc, cols->retries, &isnull);
	v_new = JsTupleInt32(newtup, tupdesc, cols->retries, &isnull);
	if (v_new < v_old && !(rerun && v_new == 0))
		JsRefuseDecrease(job_id, "retries", v_old, v_new);

	if (!JsSameValue(oldtup, newtup, tupdesc, cols->spent))
	{
		Datum		olds = heap_getattr(oldtup, cols->spent, tupdesc, &isnull);
		Datum		news;

		if (!isnull)
		{
			news = heap_getattr(newtup, cols->spent, tupdesc, &isnull);
			if (!isnull)
				JsCheckSpentForward(job_id, DatumGetJsonbP(olds), DatumGetJsonbP(news));
		}
	}

	if (from != to && to == JS_RUNNING)
	{
		int32		max_attempts;
		Datum		deadline;
		Datum		budget;

		bool		no_max;
		bool		no_deadline;
		bool		no_budget;
		bool		no_spent;
		Datum		spent;

		max_attempts = JsTupleInt32(newtup, tupdesc, cols->max_attempts, &no_max);
		deadline = heap_getattr(newtup, cols->deadline, tupdesc, &no_deadline);
		budget = heap_getattr(newtup, cols->budget, tupdesc, &no_budget);
		spent = heap_getattr(newtup, cols->spent, tupdesc, &no_spent);
		JsCheckStartAllowed(job_id, old_attempts, !no_max, max_attempts,
							!no_deadline, no_deadline ? 0 : DatumGetTimestampTz(deadline),
							no_budget ? NULL : DatumGetJsonbP(budget),
							no_spent ? NULL : DatumGetJsonbP(spent));
		(void) heap_getattr(newtup, cols->lease_expires_at, tupdesc, &isnull);
		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("a running job needs lease_expires_at"),
					 errdetail("Job %lld would start without a lease.", (long long) job_id),
					 errhint("Use job_state.claim().")));

		SET_COLUMN(cols->generation,
				   Int32GetDatum(JsCounterAdd(job_id, "generation", old_gen, 1,
											  JS_GENERATION_HINT)),
				   false);
		SET_COLUMN(cols->attempts,
				   Int32GetDatum(JsCounterAdd(job_id, "attempts", old_attempts, 1,
											  "The job cannot start again; cancel it, or submit the work again as a new job.")),
				   false);

		/* claim holds the slots of its starts; raw SQL takes them here */
		if (!js_claim_starting)
			JsRawStart(cols, tupdesc, newtup, job_id, setcols, setvals,
					   setnulls, &nset);

		SET_COLUMN(cols->started_at, TimestampTzGetDatum(now), false);
		SET_COLUMN(cols->finished_at, (Datum) 0, true);
		SET_COLUMN(cols->cancel_requested, BoolGetDatum(false), false);
	}
	else if (from != to && rerun)
	{
		SET_COLUMN(cols->generation,
				   Int32GetDatum(JsCounterAdd(job_id, "generation", old_gen, 1,
											  JS_GENERATION_HINT)),
				   false);
		SET_COLUMN(cols->finished_at, (Datum) 0, true);
		SET_COLUMN(cols->cancel_requested, BoolGetDatum(false), false);
	}
	else if (from != to && to != JS_ACCEPTED)
		SET_COLUMN(cols->finished_at, TimestampTzGetDatum(now), false);

	/* off running: no lease, and the slots go back (job_state_event) */
	if (to != JS_RUNNING)
	{
		int			kind;

		(void) heap_getattr(newtup, cols->lease_expires_at, tupdesc, &isnull);
		if (!isnull)
			SET_COLUMN(cols->lease_expires_at, (Datum) 0, true);
		for (kind = 0; kind < JS_NUM_SLOT_KINDS; kind++)
			if (!heap_attisnull(newtup, cols->slot[kind], tupdesc))
				SET_COLUMN(cols->slot[kind], (Datum) 0, true);
	}

#undef SET_COLUMN

	if (nset == 0)
		return newtup;
	return heap_modify_tuple_by_cols(newtup, tupdesc, nset, setcols,
									 setvals, setnulls);
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

	if (js_restore)
		return PointerGetDatum(TRIGGER_FIRED_BY_DELETE(event) ?
							   trigdata->tg_trigtuple :
							   TRIGGER_FIRED_BY_UPDATE(event) ?
							   trigdata->tg_newtuple : trigdata->tg_trigtuple);

	cols = JsJobColumnsFor(trigdata->tg_relation);

	if (TRIGGER_FIRED_BY_INSERT(event))
		return PointerGetDatum(JsCheckInsert(cols, trigdata->tg_relation,
											 trigdata->tg_trigtuple));
	if (TRIGGER_FIRED_BY_DELETE(event))
	{
		JsCheckDelete(cols, trigdata->tg_relation, trigdata->tg_trigtuple);
		return PointerGetDatum(trigdata->tg_trigtuple);
	}
	if (TRIGGER_FIRED_BY_UPDATE(event))
		return PointerGetDatum(JsCheckUpdate(cols, trigdata->tg_relation,
											 trigdata->tg_trigtuple,
											 trigdata->tg_newtuple));
	elog(ERROR, "job_state_fsm: unexpected event");
	pg_unreachable();
}

/*
 * Whether newtup names a resource or a concurrency key that oldtup (NULL
 * for an insert) did not.
 */
static bool
JsNamesNewLimit(const JsJobColumns *cols, TupleDesc tupdesc, HeapTuple newtup,
				HeapTuple oldtup)
{
	int			attnums[2] = {cols->resource, cols->concurrency_key};
	int			i;

	for (i = 0; i < 2; i++)
		if (!heap_attisnull(newtup, attnums[i], tupdesc) &&
			(oldtup == NULL || !JsSameValue(oldtup, newtup, tupdesc, attnums[i])))
			return true;
	return false;
}

/*
 * Free the slots whose numbers oldtup records (slot.c).  A resource's or a
 * key's slot is found by the job's resource or key, which cannot change
 * while it runs.
 */
static void
JsReleaseJobSlots(const JsJobColumns *cols, TupleDesc tupdesc, HeapTuple oldtup)
{
	int32		numbers[JS_NUM_SLOT_KINDS];
	char	   *scopes[JS_NUM_SLOT_KINDS] = {NULL, NULL, NULL};
	bool		held = false;
	bool		isnull;
	int			kind;

	for (kind = 0; kind < JS_NUM_SLOT_KINDS; kind++)
	{
		int			scope_col = kind == JS_SLOT_RESOURCE ? cols->resource :
			kind == JS_SLOT_KEY ? cols->concurrency_key : cols->queue;
		Datum		scope;

		numbers[kind] = JsTupleInt32(oldtup, tupdesc, cols->slot[kind], &isnull);
		if (numbers[kind] == 0)
			continue;
		scope = heap_getattr(oldtup, scope_col, tupdesc, &isnull);
		if (isnull)
			numbers[kind] = 0;	/* set by hand on a job without a resource or key */
		else
		{
			scopes[kind] = TextDatumGetCString(scope);
			held = true;
		}
	}
	if (held)
		JsReleaseSlots(JsTupleJobId(cols, oldtup, tupdesc),
					   TextDatumGetCString(heap_getattr(oldtup, cols->queue, tupdesc, &isnull)),
					   scopes[JS_SLOT_RESOURCE], scopes[JS_SLOT_KEY], numbers);
}

/*
 * job_state_event (AFTER ROW): one job_event row per change of status or
 * generation (event.c), and the concurrency slots of a job that left
 * running go back (slot.c).
 */
Datum
js_job_event_trigger(PG_FUNCTION_ARGS)
{
	JsSavedUser saved_user;
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TriggerEvent event;
	const JsJobColumns *cols;
	TupleDesc	tupdesc;
	HeapTuple	newtup;
	JsStatus	to;
	JsEvent		ev;
	bool		isnull;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "job_state_event: not called by trigger manager");
	event = trigdata->tg_event;
	if (!TRIGGER_FIRED_AFTER(event) || !TRIGGER_FIRED_FOR_ROW(event) ||
		TRIGGER_FIRED_BY_DELETE(event) || TRIGGER_FIRED_BY_TRUNCATE(event))
		elog(ERROR, "job_state_event: must be fired after insert or update, for each row");

	cols = JsJobColumnsFor(trigdata->tg_relation);
	tupdesc = RelationGetDescr(trigdata->tg_relation);
	newtup = TRIGGER_FIRED_BY_UPDATE(event) ? trigdata->tg_newtuple : trigdata->tg_trigtuple;
	to = JsTupleStatus(cols, newtup, tupdesc);

	/* the BEFORE trigger cleared the slot numbers when the job left running */
	if (TRIGGER_FIRED_BY_UPDATE(event) && to != JS_RUNNING && !js_restore)
		JsReleaseJobSlots(cols, tupdesc, trigdata->tg_trigtuple);

	/* a restore brings the slots and the queue's flag with it */
	if (!js_restore &&
		JsNamesNewLimit(cols, tupdesc, newtup,
						TRIGGER_FIRED_BY_UPDATE(event) ? trigdata->tg_trigtuple : NULL))
	{
		Datum		queue = heap_getattr(newtup, cols->queue, tupdesc, &isnull);
		bool		no_resource;
		bool		no_key;
		Datum		resource = heap_getattr(newtup, cols->resource, tupdesc, &no_resource);
		Datum		key = heap_getattr(newtup, cols->concurrency_key, tupdesc, &no_key);

		JsTriggerSpiConnect(trigdata->tg_relation, &saved_user);
		JsJobNamesLimits(queue, resource, !no_resource, key, !no_key);
		JsTriggerSpiFinish(&saved_user);
	}

	/* a restore brings the history with it */
	if (!js_track_events || js_restore)
		return PointerGetDatum(NULL);

	ev.generation = JsTupleInt32(newtup, tupdesc, cols->generation, &isnull);
	ev.from = -1;
	if (TRIGGER_FIRED_BY_UPDATE(event))
	{
		HeapTuple	oldtup = trigdata->tg_trigtuple;

		ev.from = JsTupleStatus(cols, oldtup, tupdesc);
		if (ev.from == (int) to &&
			JsTupleInt32(oldtup, tupdesc, cols->generation, &isnull) == ev.generation)
			return PointerGetDatum(NULL);
	}
	ev.to = to;
	ev.queue = heap_getattr(newtup, cols->queue, tupdesc, &isnull);
	ev.job_id = heap_getattr(newtup, cols->id, tupdesc, &isnull);
	ev.reason = heap_getattr(newtup, cols->reason, tupdesc, &ev.reason_null);
	ev.worker = heap_getattr(newtup, cols->worker, tupdesc, &ev.worker_null);
	JsWriteEvent(trigdata->tg_relation, cols->status_oids, &ev);

	return PointerGetDatum(NULL);
}

/*
 * TRUNCATE of job or job_event: only when no job is live.
 */
static JsPlan live_job_plan = {
	"SELECT id FROM job_state.job"
	" WHERE status OPERATOR(pg_catalog.<>) ALL"
	"  ('{succeeded,failed,cancelled}'::job_state.status[]) LIMIT 1",
	0, {0}
};

Datum
js_job_truncate_trigger(PG_FUNCTION_ARGS)
{
	JsSavedUser saved_user;
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "job_state_truncate: not called by trigger manager");
	if (!TRIGGER_FIRED_BY_TRUNCATE(trigdata->tg_event))
		elog(ERROR, "job_state_truncate: must be fired by TRUNCATE");

	if (js_restore)
		return PointerGetDatum(NULL);

	/*
	 * TRUNCATE holds its ACCESS EXCLUSIVE lock by now, so every transaction
	 * that wrote jobs has ended; the statement's snapshot is older than that
	 * wait and would miss a job committed during it.
	 */
	JsTriggerSpiConnect(trigdata->tg_relation, &saved_user);
	if (JsExecuteLatest(&live_job_plan, NULL, NULL, 1) > 0)
	{
		int64		job_id = JsGetInt64(0, 1, NULL);

		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("cannot truncate %s while jobs are live",
						RelationGetRelationName(trigdata->tg_relation)),
				 errdetail("Job %lld is not finished.", (long long) job_id),
				 errhint("Finished jobs are removed with job_state.purge().")));
	}
	JsTriggerSpiFinish(&saved_user);
	return PointerGetDatum(NULL);
}

/*
 * job_event is append-only: no UPDATE; DELETE only inside purge(); TRUNCATE
 * only when no job is live.
 */
Datum
js_append_only_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TriggerEvent event;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "job_state_append_only: not called by trigger manager");
	event = trigdata->tg_event;
	if (!TRIGGER_FIRED_BEFORE(event))
		elog(ERROR, "job_state_append_only: must be fired before the event");

	if (js_restore)
		return PointerGetDatum(TRIGGER_FIRED_FOR_ROW(event) ? trigdata->tg_trigtuple : NULL);

	if (TRIGGER_FIRED_BY_TRUNCATE(event))
		return js_job_truncate_trigger(fcinfo);
	if (TRIGGER_FIRED_BY_DELETE(event) && js_purging)
		return PointerGetDatum(trigdata->tg_trigtuple);

	ereport(ERROR,
			(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
			 errmsg("%s is append-only",
					RelationGetRelationName(trigdata->tg_relation)),
			 errdetail("History rows are removed only with their job, by job_state.purge().")));
	pg_unreachable();
}
