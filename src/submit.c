/*-------------------------------------------------------------------------
 *
 * submit.c
 *	  Idempotent submit, of one job (submit) or of a batch (submit_many).
 *
 * (queue, idempotency_key) is unique (partial unique index).  A new job is
 * inserted as INSERT ... ON CONFLICT (queue, idempotency_key) DO NOTHING
 * would insert it, without starting a statement (JsRowWriterInsert,
 * rowwrite.c): two sessions submitting the same key at once get one job,
 * the second waits for the first to commit and then finds its row.  The
 * columns submit does not set take their defaults; the job triggers check
 * the row and compute the input hash of a keyed job (a job without a key
 * has none; the submit writes no history row).  The input hash
 * is SHA-256 over the canonical text of the jsonb (jsonb already orders and
 * de-duplicates keys); submit computes it again only when it meets an
 * existing key.
 *
 * Both calls go through the same steps (JsSubmitBegin, JsSubmitRow,
 * JsSubmitEnd): one queue read and privilege check, one row writer (one
 * insert "statement" whose AFTER triggers fire at its end) and at most one
 * notification per call.  A batch draws its job ids in input order (so its
 * jobs are claimed in that order) and then inserts the rows without a key
 * first, then the keyed rows in key order: two batches that share keys
 * wait for each other's keys in the same order and cannot deadlock.  A
 * key given twice in one batch finds the job its first row made.
 *
 * Locks: RowExclusiveLock on job, AccessShareLock on queue; the
 * speculative insertion lock of each new row, and the wait for a
 * concurrent insert of the same key (keyed rows in key order).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"

#include "job_state.h"
#include "tables.h"
#include "rowwrite.h"
#include "rules.h"
#include "acl.h"
#include "bgworker.h"

PG_FUNCTION_INFO_V1(js_submit);
PG_FUNCTION_INFO_V1(js_submit_many);

static JsPlan existing_plan = {
	"SELECT id, status, input_hash FROM job_state.job"
	" WHERE queue OPERATOR(pg_catalog.=) $1 AND idempotency_key OPERATOR(pg_catalog.=) $2",
	2, {TEXTOID, TEXTOID}
};

/* submit's arguments, in order; submit_many's arrays follow the same order */
enum
{
	ARG_QUEUE = 0,
	ARG_INPUT,
	ARG_KEY,
	ARG_RUN_AFTER,
	ARG_PRIORITY,
	ARG_MAX_ATTEMPTS,
	ARG_DEADLINE,
	ARG_BUDGET,
	ARG_RESOURCE,
	ARG_CONCURRENCY_KEY,
	JS_SUBMIT_NARGS
};

/* one job to submit: its values by ARG_* (ARG_QUEUE unused) */
typedef struct JsSubmitJob
{
	Datum		args[JS_SUBMIT_NARGS];
	bool		nulls[JS_SUBMIT_NARGS];
	char	   *key;			/* the idempotency key, or NULL */
	Datum		id;				/* int8 drawn by JsSubmitDrawId */
	int			ord;			/* 1-based position in the call */
} JsSubmitJob;

typedef enum JsSubmitOutcome
{
	JS_SUBMIT_CREATED,
	JS_SUBMIT_EXISTING,			/* same key, same input */
	JS_SUBMIT_CONFLICT			/* same key, other input (submit_many only) */
} JsSubmitOutcome;

static const char *const js_submit_outcome_names[] = {"created", "existing", "conflict"};

/* one call's open tables, writer and queue */
typedef struct JsSubmitter
{
	Relation	job;
	const JsJobColumns *cols;
	JsQueueOptions q;
	Datum		queue;			/* text */
	char	   *queue_name;
	Datum		submitter;		/* the calling role (regrole), or its name */
	List	   *arbiters;		/* the key index, when a job has a key */
	JsRowWriter w;
	TupleTableSlot *slot;
	bool	   *set;
	bool	   *only_id;		/* every column set but id */
	bool		spi;			/* connected for key lookups */
	bool		created;		/* a job was created: notify */
	int64		min_id;			/* the ids of the jobs created, if any */
	int64		max_id;
} JsSubmitter;

static void
JsSetColumn(JsSubmitter *s, int attno, Datum value, bool isnull)
{
	s->slot->tts_values[attno - 1] = value;
	s->slot->tts_isnull[attno - 1] = isnull;
	s->set[attno - 1] = true;
}

static void
JsSetArg(JsSubmitter *s, const JsSubmitJob *job, int attno, int arg)
{
	JsSetColumn(s, attno, job->nulls[arg] ? (Datum) 0 : job->args[arg],
				job->nulls[arg]);
}

/*
 * The argument checks of one job (its input is not null).
 */
static void
JsSubmitCheck(JsSubmitJob *job)
{
	if (!job->nulls[ARG_KEY])
	{
		job->key = TextDatumGetCString(job->args[ARG_KEY]);
		JsCheckKey("idempotency key", job->key);
	}
	else
		job->key = NULL;
	if (!job->nulls[ARG_MAX_ATTEMPTS] && DatumGetInt32(job->args[ARG_MAX_ATTEMPTS]) < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_attempts must be at least 1"),
				 errdetail("The value given is %d.", DatumGetInt32(job->args[ARG_MAX_ATTEMPTS]))));
	if (!job->nulls[ARG_BUDGET])
		JsCheckBudget(DatumGetJsonbP(job->args[ARG_BUDGET]));
	if (!job->nulls[ARG_RESOURCE])
		JsCheckName("resource", TextDatumGetCString(job->args[ARG_RESOURCE]));
	if (!job->nulls[ARG_CONCURRENCY_KEY])
		JsCheckKey("concurrency key", TextDatumGetCString(job->args[ARG_CONCURRENCY_KEY]));
}

/*
 * Open the tables, read the queue (JS008 when there is none) and check the
 * caller's submit privilege on it, before any key is looked at (no answer
 * about another's keys), and begin the writer.  Runs like a statement:
 * after a command-counter step, under a fresh snapshot, until
 * JsSubmitEnd.
 */
static void
JsSubmitBegin(JsSubmitter *s, Datum queue, bool any_key)
{
	MemSet(s, 0, sizeof(JsSubmitter));
	s->job = table_open(JsOwnRelid("job"), RowExclusiveLock);
	s->cols = JsJobColumnsFor(s->job);
	s->queue = queue;
	s->queue_name = TextDatumGetCString(queue);

	JsStatementBegin();
	if (!JsReadQueueCached(queue, NULL, &s->q))
		ereport(ERROR,
				(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
				 errmsg("queue \"%s\" does not exist", s->queue_name),
				 errhint("Create it with job_state.create_queue().")));
	JsRequireQueuePrivilege(s->queue_name, s->q.acl, JS_QUEUE_SUBMIT);
	/* the queue's durability floor (durability.c) */
	JsRaiseSynchronousCommit(s->q.min_sync);

	/* the caller, not the definer (follows SET ROLE), or a tick's owner */
	s->submitter = ObjectIdGetDatum(JsCallingRole());
	/* until ALTER EXTENSION UPDATE, a 0.1.0 table stores the role's name */
	if (!s->cols->submitted_by_oid)
		s->submitter = CStringGetTextDatum(GetUserNameFromId(DatumGetObjectId(s->submitter),
															 false));
	if (any_key)
		s->arbiters = list_make1_oid(JsOwnRelid("job_idempotency_key"));

	JsRowWriterBegin(&s->w, s->job, any_key);
	s->slot = JsRowWriterSlot(&s->w, &TTSOpsVirtual);
	s->set = palloc(sizeof(bool) * s->slot->tts_tupleDescriptor->natts);
	s->only_id = palloc(sizeof(bool) * s->slot->tts_tupleDescriptor->natts);
	memset(s->only_id, true, sizeof(bool) * s->slot->tts_tupleDescriptor->natts);
	s->only_id[s->cols->id - 1] = false;
}

/* the job's id, from the column's default (the job id sequence) */
static void
JsSubmitDrawId(JsSubmitter *s, JsSubmitJob *job)
{
	ExecClearTuple(s->slot);
	JsRowWriterDefaults(&s->w, s->slot, s->only_id);
	job->id = s->slot->tts_values[s->cols->id - 1];
}

/*
 * Submit one job whose id is drawn: created, or the job holding its key
 * (existing, or conflict with another input: JS002 when raise_conflict).
 * *job_id and *status are the job's.
 */
static JsSubmitOutcome
JsSubmitRow(JsSubmitter *s, JsSubmitJob *job, bool raise_conflict,
			int64 *job_id, Datum *status)
{
	const JsJobColumns *cols = s->cols;

	for (;;)
	{
		JsInsertResult result;
		Datum		key_values[2];
		bool		isnull;

		ExecClearTuple(s->slot);
		memset(s->set, false, sizeof(bool) * s->slot->tts_tupleDescriptor->natts);
		JsSetColumn(s, cols->id, job->id, false);
		JsSetColumn(s, cols->queue, s->queue, false);
		JsSetArg(s, job, cols->idempotency_key, ARG_KEY);
		JsSetArg(s, job, cols->input, ARG_INPUT);
		/* NULL: the job trigger computes it (for a job with a key) */
		JsSetColumn(s, cols->input_hash, (Datum) 0, true);
		JsSetColumn(s, cols->priority,
					job->nulls[ARG_PRIORITY] ? Int32GetDatum(0) : job->args[ARG_PRIORITY],
					false);
		/* run_after: the column's default, now(), unless given */
		if (!job->nulls[ARG_RUN_AFTER])
			JsSetArg(s, job, cols->run_after, ARG_RUN_AFTER);
		if (!job->nulls[ARG_MAX_ATTEMPTS])
			JsSetArg(s, job, cols->max_attempts, ARG_MAX_ATTEMPTS);
		else
			JsSetColumn(s, cols->max_attempts, Int32GetDatum(s->q.max_attempts),
						!s->q.has_max_attempts);
		JsSetArg(s, job, cols->deadline, ARG_DEADLINE);
		JsSetArg(s, job, cols->budget, ARG_BUDGET);
		JsSetArg(s, job, cols->resource, ARG_RESOURCE);
		JsSetArg(s, job, cols->concurrency_key, ARG_CONCURRENCY_KEY);
		JsSetColumn(s, cols->submitted_by, s->submitter, false);
		JsRowWriterDefaults(&s->w, s->slot, s->set);
		ExecStoreVirtualTuple(s->slot);

		result = JsRowWriterInsert(&s->w, s->slot, job->key != NULL ? s->arbiters : NIL);
		if (result == JS_INSERT_SKIPPED)
			ereport(ERROR,
					(errcode(ERRCODE_TRIGGERED_ACTION_EXCEPTION),
					 errmsg("submit stored no job"),
					 errdetail("A BEFORE INSERT trigger on job_state.job returned NULL for the new job."),
					 errhint("A trigger on job_state.job must not skip the rows job_state writes; raise an error to refuse a job.")));
		if (result == JS_INSERTED)
		{
			*job_id = DatumGetInt64(slot_getattr(s->slot, cols->id, &isnull));
			*status = slot_getattr(s->slot, cols->status, &isnull);
			if (!s->created || *job_id < s->min_id)
				s->min_id = *job_id;
			if (!s->created || *job_id > s->max_id)
				s->max_id = *job_id;
			s->created = true;
			return JS_SUBMIT_CREATED;
		}

		/* the key is held: the job holding it, if it is still there */
		Assert(job->key != NULL);
		if (!s->spi)
		{
			SPI_connect();
			s->spi = true;
		}
		key_values[0] = s->queue;
		key_values[1] = job->args[ARG_KEY];
		if (JsExecute(&existing_plan, key_values, NULL, false, 1) == 1)
		{
			JsSubmitOutcome outcome = JS_SUBMIT_EXISTING;
			Datum		stored_datum = SPI_getbinval(SPI_tuptable->vals[0],
													 SPI_tuptable->tupdesc, 3, &isnull);
			bytea	   *stored = isnull ? NULL : DatumGetByteaPP(stored_datum);
			bytea	   *mine = JsInputHash(DatumGetJsonbP(job->args[ARG_INPUT]));

			*job_id = JsGetInt64(0, 1, NULL);
			/* an enum: by value */
			*status = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
			/* no stored hash (a row restored so): nothing shows the input is the same */
			if (stored == NULL ||
				VARSIZE_ANY_EXHDR(stored) != VARSIZE_ANY_EXHDR(mine) ||
				memcmp(VARDATA_ANY(stored), VARDATA_ANY(mine),
					   VARSIZE_ANY_EXHDR(mine)) != 0)
			{
				if (raise_conflict)
					ereport(ERROR,
							(errcode(ERRCODE_JS_IDEMPOTENCY_CONFLICT),
							 errmsg("idempotency key \"%s\" of queue \"%s\" was used with a different input",
									job->key, s->queue_name),
							 errdetail("Job %lld holds this key; its input hash differs from this input's.",
									   (long long) *job_id),
							 errhint("Use a new idempotency key for a different input, or resend the original input.")));
				outcome = JS_SUBMIT_CONFLICT;
			}
			SPI_freetuptable(SPI_tuptable);
			return outcome;
		}
		SPI_freetuptable(SPI_tuptable);
		/* the job holding the key was purged meanwhile: insert again */
	}
}

/*
 * End the call: the writer's AFTER triggers fire, and one notification
 * goes out when a job was created.
 */
static void
JsSubmitEnd(JsSubmitter *s)
{
	if (s->spi)
		SPI_finish();
	/* its rows' AFTER triggers fire: the queue was read, the ids drawn */
	if (s->created)
	{
		js_submitting.queue = s->queue_name;
		js_submitting.min_id = s->min_id;
		js_submitting.max_id = s->max_id;
	}
	PG_TRY();
	{
		JsRowWriterEnd(&s->w);
	}
	PG_FINALLY();
	{
		js_submitting.queue = NULL;
	}
	PG_END_TRY();
	PopActiveSnapshot();
	table_close(s->job, NoLock);
	if (s->created)
		JsNotifyNewJob(s->queue_name, s->q.channel);
}

Datum
js_submit(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	JsSubmitJob job;
	JsSubmitter s;
	int64		job_id;
	Datum		status;
	Datum		out[3];
	bool		outnulls[3] = {false, false, false};
	int			i;

	JsRefuseNull(fcinfo, ARG_QUEUE, "queue");
	JsRefuseNull(fcinfo, ARG_INPUT, "input");
	PreventCommandIfReadOnly("submit()");
	JsTimelineCheck();			/* before the job's id is drawn */
	for (i = 0; i < JS_SUBMIT_NARGS; i++)
	{
		job.nulls[i] = PG_ARGISNULL(i);
		job.args[i] = job.nulls[i] ? (Datum) 0 : PG_GETARG_DATUM(i);
	}
	job.ord = 1;
	JsSubmitCheck(&job);

	JsInitMaterialized(fcinfo);

	JsSubmitBegin(&s, PG_GETARG_DATUM(ARG_QUEUE), job.key != NULL);
	JsSubmitDrawId(&s, &job);
	out[1] = BoolGetDatum(JsSubmitRow(&s, &job, true, &job_id, &status) ==
						  JS_SUBMIT_CREATED);
	JsSubmitEnd(&s);

	out[0] = Int64GetDatum(job_id);
	out[2] = status;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnulls);
	return (Datum) 0;
}

/* "row N of submit_many" in the context of an error about one row */
static void
JsSubmitManyContext(void *arg)
{
	const int  *ord = arg;

	if (*ord > 0)
		errcontext("row %d of submit_many", *ord);
}

/* the names of submit_many's array arguments, by ARG_* */
static const char *const js_many_names[JS_SUBMIT_NARGS] = {
	"queue", "inputs", "idempotency_keys", "run_afters", "priorities",
	"max_attempts", "deadlines", "budgets", "resources", "concurrency_keys"
};

/*
 * Deconstruct array argument arg (one dimension, NULL: not given) into
 * *elems and *nulls; its length must be n unless n < 0.
 */
static int
JsManyArray(FunctionCallInfo fcinfo, int arg, int n, Datum **elems, bool **nulls)
{
	ArrayType  *array;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			count;

	*elems = NULL;
	*nulls = NULL;
	if (PG_ARGISNULL(arg))
		return -1;
	array = PG_GETARG_ARRAYTYPE_P(arg);
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a one-dimensional array", js_many_names[arg]),
				 errdetail("It has %d dimensions.", ARR_NDIM(array))));
	count = ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array));
	if (n < 0 && count > JS_MAX_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("submit_many takes at most %d jobs", JS_MAX_BATCH),
				 errdetail("There are %d inputs.", count),
				 errhint("Split the batch into calls of at most %d jobs.", JS_MAX_BATCH)));
	if (n >= 0 && count != n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must have one element per input", js_many_names[arg]),
				 errdetail("Array %s has length %d; inputs has length %d.",
						   js_many_names[arg], count, n),
				 errhint("Pass NULL elements for the jobs that take the default, or omit the array.")));
	get_typlenbyvalalign(ARR_ELEMTYPE(array), &typlen, &typbyval, &typalign);
	deconstruct_array(array, ARR_ELEMTYPE(array), typlen, typbyval, typalign,
					  elems, nulls, &count);
	return count;
}

/* the unkeyed jobs first, then by key; by position among equals */
static int
JsCompareKeyOrder(const void *a, const void *b)
{
	const JsSubmitJob *x = *(JsSubmitJob *const *) a;
	const JsSubmitJob *y = *(JsSubmitJob *const *) b;

	if ((x->key == NULL) != (y->key == NULL))
		return x->key == NULL ? -1 : 1;
	if (x->key != NULL)
	{
		int			c = strcmp(x->key, y->key);

		if (c != 0)
			return c;
	}
	return x->ord - y->ord;
}

/*
 * submit_many: a batch of jobs to one queue in one call, each with the
 * guarantees of submit; a key held with another input is reported per row
 * (conflict) instead of failing the batch.
 */
Datum
js_submit_many(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum	   *elems[JS_SUBMIT_NARGS];
	bool	   *elem_nulls[JS_SUBMIT_NARGS];
	int			n;
	int			i;
	int			arg;
	JsSubmitJob *jobs;
	JsSubmitJob **order;
	int64	   *job_ids;
	Datum	   *statuses;
	JsSubmitOutcome *outcomes;
	bool		any_key = false;
	JsSubmitter s;
	int			ord = 0;
	ErrorContextCallback errcallback;

	JsRefuseNull(fcinfo, ARG_QUEUE, "queue");
	JsRefuseNull(fcinfo, ARG_INPUT, "inputs");
	PreventCommandIfReadOnly("submit_many()");
	JsTimelineCheck();			/* before the jobs' ids are drawn */
	n = JsManyArray(fcinfo, ARG_INPUT, -1, &elems[ARG_INPUT], &elem_nulls[ARG_INPUT]);
	for (arg = ARG_KEY; arg < JS_SUBMIT_NARGS; arg++)
		(void) JsManyArray(fcinfo, arg, n, &elems[arg], &elem_nulls[arg]);

	jobs = palloc(sizeof(JsSubmitJob) * Max(n, 1));
	order = palloc(sizeof(JsSubmitJob *) * Max(n, 1));
	errcallback.callback = JsSubmitManyContext;
	errcallback.arg = &ord;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	for (i = 0; i < n; i++)
	{
		JsSubmitJob *job = &jobs[i];

		CHECK_FOR_INTERRUPTS();
		ord = i + 1;
		if (elem_nulls[ARG_INPUT][i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("inputs must not contain nulls"),
					 errdetail("Element %d is null.", i + 1),
					 errhint("Pass '{}' for a job without input.")));
		job->ord = i + 1;
		job->args[ARG_QUEUE] = (Datum) 0;
		job->nulls[ARG_QUEUE] = true;
		for (arg = ARG_INPUT; arg < JS_SUBMIT_NARGS; arg++)
		{
			job->nulls[arg] = elems[arg] == NULL || elem_nulls[arg][i];
			job->args[arg] = job->nulls[arg] ? (Datum) 0 : elems[arg][i];
		}
		JsSubmitCheck(job);
		any_key |= job->key != NULL;
		order[i] = job;
	}
	ord = 0;

	JsInitMaterialized(fcinfo);
	job_ids = palloc(sizeof(int64) * Max(n, 1));
	statuses = palloc(sizeof(Datum) * Max(n, 1));
	outcomes = palloc(sizeof(JsSubmitOutcome) * Max(n, 1));

	JsSubmitBegin(&s, PG_GETARG_DATUM(ARG_QUEUE), any_key);
	/* ids in input order, so the batch is claimed in that order */
	for (i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		JsSubmitDrawId(&s, &jobs[i]);
	}
	/* keys in one order for every batch: no deadlock between batches */
	if (any_key)
		qsort(order, n, sizeof(JsSubmitJob *), JsCompareKeyOrder);
	for (i = 0; i < n; i++)
	{
		JsSubmitJob *job = order[i];

		CHECK_FOR_INTERRUPTS();
		ord = job->ord;
		outcomes[job->ord - 1] = JsSubmitRow(&s, job, false, &job_ids[job->ord - 1],
											 &statuses[job->ord - 1]);
	}
	ord = 0;
	JsSubmitEnd(&s);
	error_context_stack = errcallback.previous;

	for (i = 0; i < n; i++)
	{
		Datum		out[4];
		bool		outnulls[4] = {false, false, false, false};

		out[0] = Int32GetDatum(i + 1);
		out[1] = Int64GetDatum(job_ids[i]);
		out[2] = CStringGetTextDatum(js_submit_outcome_names[outcomes[i]]);
		out[3] = statuses[i];
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnulls);
	}
	return (Datum) 0;
}
