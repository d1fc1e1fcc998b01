/*-------------------------------------------------------------------------
 *
 * operator.c
 *	  The operator's calls on one job, named by id alone: reconcile
 *	  (resolve an unknown job as succeeded or failed), redrive (run a
 *	  failed, unknown or cancelled job again) and cancel; and the bulk
 *	  redrive of a queue's dead letters (redrive_many).
 *
 * Each is an UPDATE that carries the statuses it acts on in its WHERE
 * clause, after the job is found and locked by id (JsLockJobById); the job
 * triggers check the transition and record it.  A redrive or reconcile
 * makes a new generation, so every older token of the job dies at once.
 *
 * redrive_many picks its jobs in one statement that locks them (FOR NO
 * KEY UPDATE SKIP LOCKED, so it never waits for a job another transaction
 * holds), checks each one's limits as the redrive would leave them in C,
 * and updates the ones that may run with the redrive's own statement.
 *
 * Locks: the job's row lock (FOR NO KEY UPDATE), then the update's;
 * redrive_many locks its batch in one statement and never waits.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/tuplestore.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "job_state.h"
#include "rowwrite.h"
#include "rules.h"
#include "acl.h"

PG_FUNCTION_INFO_V1(js_reconcile);
PG_FUNCTION_INFO_V1(js_redrive);
PG_FUNCTION_INFO_V1(js_cancel);
PG_FUNCTION_INFO_V1(js_redrive_many);

/*
 * The operator calls below name a job by id alone.  The job table has no
 * index on id by itself (every claim and completion would have to write an
 * entry in it), so the job is found by probing the primary key (queue, id)
 * once per queue, a handful of index descents for the usual few queues,
 * and locked; the update that follows names the whole key.  With the row
 * locked and its status allowing the change, an update that changes no row
 * was skipped by a trigger.
 */
#define JS_LOCK_JOB_BY_ID \
	" FROM job_state.job" \
	" WHERE queue OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT name FROM job_state.queue))" \
	"  AND id OPERATOR(pg_catalog.=) $1 FOR NO KEY UPDATE"

static JsPlan job_queue_plan = {
	"SELECT queue FROM job_state.job"
	" WHERE queue OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT name FROM job_state.queue))"
	"  AND id OPERATOR(pg_catalog.=) $1",
	1, {INT8OID}
};

static JsPlan job_lock_plan = {
	"SELECT queue, status::pg_catalog.text" JS_LOCK_JOB_BY_ID,
	1, {INT8OID}
};

/*
 * JS008: the answer for a job that does not exist, or that the caller may
 * not see (the detail of an id a failover lost is given only for ids no
 * job of this server can hold, so it reveals nothing either)
 */
pg_noreturn static void
JsNoSuchJob(int64 job_id)
{
	JsRefuseMissingJob(job_id,
					   "A purged job is gone; the jobs of the queues you may read are in job_state.queue_jobs.");
}

/*
 * Lock job job_id by plan (whose first two columns are queue and status):
 * its status, and its queue into *queue (copied).  JS008 when there is no
 * such job, and alike when the calling role holds no privilege on its
 * queue (acl.c); 42501 when it holds some but not operate.
 */
static char *
JsLockJobById(JsPlan *plan, int64 job_id, Datum *queue)
{
	Datum		id = Int64GetDatum(job_id);
	bool		isnull;
	Datum		job_queue;
	Acl		   *acl;

	/* operate on the job's queue, checked before the job is locked */
	if (JsExecute(&job_queue_plan, &id, NULL, false, 1) == 0)
		JsNoSuchJob(job_id);
	job_queue = JsGetDatumCopy(0, 1, &isnull);
	if (!JsReadQueueAcl(job_queue, &acl) || !JsQueueVisible(acl, JsCallingRole()))
		JsNoSuchJob(job_id);
	JsRequireQueuePrivilege(TextDatumGetCString(job_queue), acl, JS_QUEUE_OPERATE);

	if (JsExecute(plan, &id, NULL, false, 1) == 0)
		JsNoSuchJob(job_id);
	*queue = PointerGetDatum(DatumGetTextPCopy(SPI_getbinval(SPI_tuptable->vals[0],
															 SPI_tuptable->tupdesc,
															 1, &isnull)));
	return JsGetText(0, 2);
}

/*
 * reconcile: an operator resolves an unknown job.
 * $1 id, $2 outcome, $3 detail, $4 queue
 */
static JsPlan reconcile_plan = {
	"UPDATE job_state.job SET status = $2::job_state.status,"
	"  reason = 'reconciled',"
	"  result = CASE WHEN $2 OPERATOR(pg_catalog.=) 'succeeded' THEN COALESCE($3, result)"
	"           ELSE result END,"
	"  last_error = CASE WHEN $2 OPERATOR(pg_catalog.=) 'failed' THEN COALESCE($3, last_error)"
	"               ELSE last_error END,"
	"  run_after = CASE WHEN $2 OPERATOR(pg_catalog.=) 'accepted' THEN pg_catalog.now()"
	"              ELSE run_after END"
	" WHERE queue OPERATOR(pg_catalog.=) $4 AND id OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.=) 'unknown'",
	4, {INT8OID, TEXTOID, JSONBOID, TEXTOID}
};

Datum
js_reconcile(PG_FUNCTION_ARGS)
{
	int64		job_id;
	char	   *outcome;
	char	   *status;
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};

	JsRefuseNull(fcinfo, 0, "job_id");
	JsRefuseNull(fcinfo, 1, "outcome");
	job_id = PG_GETARG_INT64(0);
	outcome = JsEnumLabel(PG_GETARG_DATUM(1));
	if (strcmp(outcome, "succeeded") != 0 && strcmp(outcome, "failed") != 0 &&
		strcmp(outcome, "accepted") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("reconcile outcome must be succeeded, failed or accepted"),
				 errdetail("The outcome given is %s.", outcome)));

	SPI_connect();
	values[0] = Int64GetDatum(job_id);
	values[1] = CStringGetTextDatum(outcome);
	values[2] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	nulls[2] = PG_ARGISNULL(2) ? 'n' : ' ';
	status = JsLockJobById(&job_lock_plan, job_id, &values[3]);
	if (strcmp(status, "unknown") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("job %lld is %s, not unknown", (long long) job_id, status),
				 errdetail("Only a job whose outcome is unknown can be reconciled."),
				 errhint("Use job_state.redrive() to run a failed or cancelled job again.")));
	if (JsExecute(&reconcile_plan, values, nulls, false, 0) == 0)
		JsRefuseSkippedUpdate();
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * redrive: an operator re-runs a failed, unknown or cancelled job.  The
 * retry-policy counter starts again; attempts, deadline and spend carry
 * over and limits rise only by what is passed.  The job trigger bumps the
 * generation, so every older token dies at once.
 */
static JsPlan redrive_lock_plan = {
	"SELECT queue, status::pg_catalog.text, budget, max_attempts" JS_LOCK_JOB_BY_ID,
	1, {INT8OID}
};

/*
 * The budget a redrive leaves: each meter's limit raised by its amount in
 * the extra budget (the parameter named by extra), the others as they are.
 */
#define JS_RAISED_BUDGET(extra) \
	"CASE WHEN " extra " IS NULL THEN budget ELSE" \
	"   (SELECT pg_catalog.jsonb_object_agg(b.key, CASE WHEN e.value IS NULL" \
	"     THEN b.value ELSE pg_catalog.to_jsonb(b.value::pg_catalog.text::pg_catalog.numeric" \
	"      OPERATOR(pg_catalog.+) e.value::pg_catalog.text::pg_catalog.numeric) END)" \
	"    FROM pg_catalog.jsonb_each(budget) b" \
	"    LEFT JOIN pg_catalog.jsonb_each(" extra ") e ON e.key OPERATOR(pg_catalog.=) b.key) END"

/*
 * $1 id, $2 extra attempts, $3 extra budget, $4 new deadline, $5 queue,
 * $6 run_after (NULL: now)
 */
static JsPlan redrive_plan = {
	"UPDATE job_state.job SET status = 'accepted', retries = 0, reason = NULL,"
	"  run_after = COALESCE($6, pg_catalog.now()),"
	"  max_attempts = max_attempts OPERATOR(pg_catalog.+) $2,"
	"  deadline = COALESCE($4, deadline),"
	"  budget = " JS_RAISED_BUDGET("$3")
	" WHERE queue OPERATOR(pg_catalog.=) $5 AND id OPERATOR(pg_catalog.=) $1"
	"  AND status OPERATOR(pg_catalog.=) ANY ('{failed,unknown,cancelled}'::job_state.status[])"
	" RETURNING attempts, max_attempts, deadline, budget, spent",
	6, {INT8OID, INT4OID, JSONBOID, TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID}
};

Datum
js_redrive(PG_FUNCTION_ARGS)
{
	int64		job_id;
	int32		extra_attempts;
	char	   *status;
	Datum		queue;
	Datum		values[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', 'n'};
	bool		isnull;
	bool		no_max;
	int32		attempts;
	int32		max_attempts;
	Datum		deadline;
	bool		no_deadline;
	Datum		budget;
	bool		no_budget;
	Datum		spent;

	JsRefuseNull(fcinfo, 0, "job_id");
	job_id = PG_GETARG_INT64(0);
	extra_attempts = PG_ARGISNULL(1) ? 0 : PG_GETARG_INT32(1);
	if (extra_attempts < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("extra_attempts must not be negative"),
				 errdetail("The value given is %d.", extra_attempts)));
	if (!PG_ARGISNULL(2))
		JsCheckBudget(PG_GETARG_JSONB_P(2));

	SPI_connect();
	status = JsLockJobById(&redrive_lock_plan, job_id, &queue);
	if (strcmp(status, "failed") != 0 && strcmp(status, "unknown") != 0 &&
		strcmp(status, "cancelled") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
				 errmsg("job %lld is %s and cannot be redriven", (long long) job_id, status),
				 errdetail("Only failed, unknown or cancelled jobs can be redriven.")));
	/* max_attempts + extra_attempts must stay an int4 */
	if (extra_attempts > 0)
	{
		bool		no_old_max;
		int32		old_max = JsGetInt32(0, 4, &no_old_max);

		if (!no_old_max)
			(void) JsCounterAdd(job_id, "max_attempts", old_max, extra_attempts,
								"Give a smaller extra_attempts.");
	}
	if (!PG_ARGISNULL(2))
	{
		budget = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);
		JsCheckMetersKnown(job_id, isnull ? NULL : DatumGetJsonbP(budget),
						   PG_GETARG_JSONB_P(2));
	}

	values[0] = Int64GetDatum(job_id);
	values[1] = Int32GetDatum(extra_attempts);
	values[2] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	nulls[2] = PG_ARGISNULL(2) ? 'n' : ' ';
	values[3] = PG_ARGISNULL(3) ? (Datum) 0 : PG_GETARG_DATUM(3);
	nulls[3] = PG_ARGISNULL(3) ? 'n' : ' ';
	values[4] = queue;
	values[5] = (Datum) 0;
	if (JsExecute(&redrive_plan, values, nulls, false, 0) != 1)
		JsRefuseSkippedUpdate();

	/* the limits as they are now must allow one more start */
	attempts = JsGetInt32(0, 1, NULL);
	max_attempts = JsGetInt32(0, 2, &no_max);
	deadline = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &no_deadline);
	budget = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &no_budget);
	spent = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &isnull);
	JsCheckStartAllowed(job_id, attempts, !no_max, max_attempts,
						!no_deadline, no_deadline ? 0 : DatumGetTimestampTz(deadline),
						no_budget ? NULL : DatumGetJsonbP(budget),
						isnull ? NULL : DatumGetJsonbP(spent));
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * cancel: accepted, waiting and unknown jobs are cancelled now (a late
 * callback for a waiting job is then refused); a running job gets
 * cancel_requested (its worker sees it on heartbeat; fail or lease expiry
 * then ends it cancelled, succeed still wins).
 */
static JsPlan cancel_plan = {
	"UPDATE job_state.job SET"
	"  status = CASE WHEN status OPERATOR(pg_catalog.=) 'running' THEN status"
	"           ELSE 'cancelled' END::job_state.status,"
	"  cancel_requested = (status OPERATOR(pg_catalog.=) 'running'),"
	"  reason = COALESCE($2, 'cancelled')"
	" WHERE queue OPERATOR(pg_catalog.=) $3 AND id OPERATOR(pg_catalog.=) $1"
	"  AND status OPERATOR(pg_catalog.<>) ALL ('{succeeded,failed,cancelled}'::job_state.status[])",
	3, {INT8OID, TEXTOID, TEXTOID}
};

Datum
js_cancel(PG_FUNCTION_ARGS)
{
	int64		job_id;
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};
	char	   *status;
	bool		result = true;

	JsRefuseNull(fcinfo, 0, "job_id");
	job_id = PG_GETARG_INT64(0);

	SPI_connect();
	values[0] = Int64GetDatum(job_id);
	values[1] = PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1);
	nulls[1] = PG_ARGISNULL(1) ? 'n' : ' ';
	status = JsLockJobById(&job_lock_plan, job_id, &values[2]);
	if (strcmp(status, "accepted") != 0 && strcmp(status, "running") != 0 &&
		strcmp(status, "waiting") != 0 && strcmp(status, "unknown") != 0)
		result = strcmp(status, "cancelled") == 0;
	else if (JsExecute(&cancel_plan, values, nulls, false, 0) == 0)
		JsRefuseSkippedUpdate();
	SPI_finish();
	PG_RETURN_BOOL(result);
}

/*
 * redrive_many: the dead letters (failed and unknown jobs) of one queue,
 * optionally only those of one reason, oldest first, at most max_jobs a
 * call, each redriven as redrive does.  Cancelled jobs are left out: an
 * operator or client chose to stop them, and a bulk move must not undo
 * that (redrive still runs one again).  Jobs another transaction holds
 * are skipped; a job whose limits the extras would leave used up is
 * reported refused, with its reason, and stays as it is.
 *
 * $1 queue, $2 reason (NULL: any), $3 max jobs, $4 extra budget,
 * $5 new deadline: the job, its limits as the redrive would leave them
 * (max_attempts before the extra), its spend and its budget as it is.
 */
static JsPlan redrive_pick_plan = {
	"SELECT id, attempts, max_attempts, COALESCE($5, deadline),"
	"  " JS_RAISED_BUDGET("$4") ", spent, budget"
	" FROM job_state.job"
	" WHERE queue OPERATOR(pg_catalog.=) $1"
	"  AND status OPERATOR(pg_catalog.=) ANY ('{failed,unknown}'::job_state.status[])"
	"  AND ($2 IS NULL OR reason OPERATOR(pg_catalog.=) $2)"
	" ORDER BY finished_at, id LIMIT $3 FOR NO KEY UPDATE SKIP LOCKED",
	5, {TEXTOID, TEXTOID, INT4OID, JSONBOID, TIMESTAMPTZOID}
};

/* the largest per_second (as for a resource's max_starts_per_second) */
#define JS_MAX_PER_SECOND 1000000.0

Datum
js_redrive_many(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		queue;
	int32		max_jobs;
	bool		rated = !PG_ARGISNULL(3);
	float8		per_second = rated ? PG_GETARG_FLOAT8(3) : 0;
	int32		extra_attempts;
	Jsonb	   *extra_budget = PG_ARGISNULL(5) ? NULL : PG_GETARG_JSONB_P(5);
	Datum		pick[5];
	char		pick_nulls[5] = {' ', ' ', ' ', ' ', ' '};
	SPITupleTable *picked;
	uint64		npicked;
	uint64		i;
	int64		redriven = 0;
	TimestampTz now = GetCurrentTransactionStartTimestamp();

	JsRefuseNull(fcinfo, 0, "queue");
	JsRefuseNull(fcinfo, 2, "max_jobs");
	PreventCommandIfReadOnly("redrive_many()");
	queue = PG_GETARG_DATUM(0);
	max_jobs = PG_GETARG_INT32(2);
	if (max_jobs < 1 || max_jobs > JS_MAX_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_jobs must be between 1 and %d", JS_MAX_BATCH),
				 errdetail("The value given is %d.", max_jobs),
				 errhint("Call redrive_many again for the rest.")));
	if (rated && (isnan(per_second) || per_second <= 0 || per_second > JS_MAX_PER_SECOND))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("per_second must be greater than 0 and at most 1000000"),
				 errdetail("The value given is %g.", per_second),
				 errhint("Pass NULL to start every redriven job now.")));
	/* the last job's wait, (max_jobs - 1) / per_second, within the spans we allow */
	if (rated && (max_jobs - 1) / per_second > (double) (JS_MAX_SPAN_DAYS * SECS_PER_DAY))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("per_second is too small for max_jobs"),
				 errdetail("The last of %d jobs would wait %g seconds; at most %s are allowed.",
						   max_jobs, (max_jobs - 1) / per_second, JS_MAX_SPAN_TEXT),
				 errhint("Raise per_second or lower max_jobs.")));
	extra_attempts = PG_ARGISNULL(4) ? 0 : PG_GETARG_INT32(4);
	if (extra_attempts < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("extra_attempts must not be negative"),
				 errdetail("The value given is %d.", extra_attempts)));
	if (extra_budget != NULL)
		JsCheckBudget(extra_budget);

	JsInitMaterialized(fcinfo);
	SPI_connect();
	JsRequireQueuePrivilegeByName(queue, JS_QUEUE_OPERATE);

	pick[0] = queue;
	pick[1] = PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1);
	pick_nulls[1] = PG_ARGISNULL(1) ? 'n' : ' ';
	pick[2] = Int32GetDatum(max_jobs);
	pick[3] = extra_budget != NULL ? PG_GETARG_DATUM(5) : (Datum) 0;
	pick_nulls[3] = extra_budget != NULL ? ' ' : 'n';
	pick[4] = PG_ARGISNULL(6) ? (Datum) 0 : PG_GETARG_DATUM(6);
	pick_nulls[4] = PG_ARGISNULL(6) ? 'n' : ' ';
	npicked = JsExecute(&redrive_pick_plan, pick, pick_nulls, false, 0);
	picked = SPI_tuptable;

	for (i = 0; i < npicked; i++)
	{
		HeapTuple	tup = picked->vals[i];
		TupleDesc	desc = picked->tupdesc;
		bool		isnull;
		int64		job_id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		int32		attempts = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
		bool		no_max;
		int32		max_attempts = DatumGetInt32(SPI_getbinval(tup, desc, 3, &no_max));
		bool		no_deadline;
		Datum		deadline = SPI_getbinval(tup, desc, 4, &no_deadline);
		bool		no_budget;
		Datum		budget = SPI_getbinval(tup, desc, 5, &no_budget);
		bool		no_spent;
		Datum		spent = SPI_getbinval(tup, desc, 6, &no_spent);
		bool		no_old_budget;
		Datum		old_budget = SPI_getbinval(tup, desc, 7, &no_old_budget);
		const char *refusal = NULL;
		char	   *meter;
		Datum		out[4];
		bool		outnulls[4] = {false, false, false, false};

		CHECK_FOR_INTERRUPTS();
		if (extra_budget != NULL &&
			JsUnknownMeter(no_old_budget ? NULL : DatumGetJsonbP(old_budget),
						   extra_budget) != NULL)
			refusal = "no_such_meter";
		if (refusal == NULL)
		{
			/* max_attempts + extra_attempts must stay an int4 */
			if (!no_max)
				max_attempts = JsCounterAdd(job_id, "max_attempts", max_attempts,
											extra_attempts,
											"Give a smaller extra_attempts.");
			refusal = JsStartRefusal(attempts, !no_max, max_attempts,
									 !no_deadline,
									 no_deadline ? 0 : DatumGetTimestampTz(deadline),
									 no_budget ? NULL : DatumGetJsonbP(budget),
									 no_spent ? NULL : DatumGetJsonbP(spent),
									 &meter);
		}

		out[0] = Int64GetDatum(job_id);
		if (refusal != NULL)
		{
			out[1] = CStringGetTextDatum("refused");
			out[2] = CStringGetTextDatum(refusal);
			outnulls[3] = true;
		}
		else
		{
			Datum		values[6];
			char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
			TimestampTz run_after = now;

			/* the k-th job (from 0) at now + k / per_second */
			if (rated)
				run_after += (int64) rint((double) redriven * USECS_PER_SEC / per_second);
			values[0] = Int64GetDatum(job_id);
			values[1] = Int32GetDatum(extra_attempts);
			values[2] = pick[3];
			nulls[2] = pick_nulls[3];
			values[3] = pick[4];
			nulls[3] = pick_nulls[4];
			values[4] = queue;
			values[5] = TimestampTzGetDatum(run_after);
			if (JsExecute(&redrive_plan, values, nulls, false, 0) != 1)
				JsRefuseSkippedUpdate();
			SPI_freetuptable(SPI_tuptable);
			redriven++;
			out[1] = CStringGetTextDatum("redriven");
			outnulls[2] = true;
			out[3] = TimestampTzGetDatum(run_after);
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnulls);
	}
	SPI_finish();
	return (Datum) 0;
}
