/*-------------------------------------------------------------------------
 *
 * claim.c
 *	  claim, heartbeat and assert_claim: taking a job and holding on to it.
 *
 * claim picks ready jobs with FOR NO KEY UPDATE SKIP LOCKED, so it never
 * waits on rows other claimers hold, and moves them to running in the same
 * statement; the job trigger bumps generation and attempts.  A picked job
 * whose attempts, deadline or budget are used up becomes failed instead
 * (reason attempts_exhausted, deadline_exceeded or budget_exhausted) and
 * claim looks for more.  In the same statement claim applies lease expiry
 * in the queue (lease.c), so an idle sweeper is never needed for
 * correctness; a job requeued by that expiry is claimable from the next
 * statement on.
 * Queues with a concurrency limit, a per-key limit or jobs naming a
 * resource take the slot-taking path of limits.c instead.
 *
 * Locks: the row locks of the jobs it takes (and of the leases it expires).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

#include "job_state.h"

PG_FUNCTION_INFO_V1(js_claim);
PG_FUNCTION_INFO_V1(js_heartbeat);
PG_FUNCTION_INFO_V1(js_assert_claim);

/* bound on the statements one claim runs (used-up jobs, expiry rounds) */
#define JS_CLAIM_MAX_PASSES 16

#define JS_SQL_CLAIM_QUEUE \
	"WITH q AS (" \
	"  SELECT id, LEAST(COALESCE($4, lease), max_lease) AS lease, paused," \
	"   concurrency_limit, per_key_limit," \
	"   (concurrency_limit IS NOT NULL OR per_key_limit IS NOT NULL" \
	"    OR uses_resources) AS limited" \
	"  FROM job_state.queue WHERE name = $1),"

/* ready jobs of queue $1 at clock $5 satisfying cond, locked, at most $2 */
#define JS_SQL_CLAIM_READY(cond) \
	"  SELECT j.id FROM job_state.job j" \
	"  WHERE j.queue = $1 AND j.status = 'accepted'" \
	"   AND j.run_after OPERATOR(pg_catalog.<=) $5" \
	"   AND NOT (SELECT q.paused OR q.limited FROM q)" cond \
	"  ORDER BY j.priority DESC, j.run_after, j.id" \
	"  LIMIT $2" \
	"  FOR NO KEY UPDATE OF j SKIP LOCKED"

#define JS_SQL_CLAIM_TAKE \
	" u AS (" \
	"  UPDATE job_state.job j SET" \
	"   status = CASE WHEN " JS_SQL_USED_UP " IS NULL THEN 'running'" \
	"            ELSE 'failed' END::job_state.status," \
	"   reason = " JS_SQL_USED_UP "," \
	"   worker = $3," \
	"   lease_expires_at = CASE WHEN " JS_SQL_USED_UP " IS NULL" \
	"    THEN pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) (SELECT q.lease FROM q) END" \
	"  WHERE j.queue = $1" \
	"   AND j.id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT c.id FROM c))" \
	"   AND j.status = 'accepted'" \
	"  RETURNING j.queue, j.id, j.status, j.generation, j.reason, j.worker," \
	"   j.attempts, j.input, j.deadline," \
	"   j.status OPERATOR(pg_catalog.=) 'running' AS started," \
	"   j.priority, j.run_after)" \
	" SELECT q.id, q.lease, q.paused, q.limited, q.concurrency_limit," \
	"  q.per_key_limit, u.id, u.generation, u.attempts, u.input, u.deadline," \
	"  u.started," \
	"  EXISTS (SELECT FROM job_state.job j WHERE j.queue = $1" \
	"   AND j.status = 'running' AND j.lease_expires_at OPERATOR(pg_catalog.<=) $5)," \
	"  u.priority, u.run_after," \
	"  'job_state.job'::pg_catalog.regclass::pg_catalog.oid" \
	" FROM q LEFT JOIN u ON true" \
	" ORDER BY u.priority DESC, u.run_after, u.id"

/*
 * The whole claim in one statement.  $1 queue, $2 how many, $3 worker,
 * $4 lease asked for (NULL: the queue's), $5 the database clock.
 *
 * q        the queue's options;
 * c        the ready jobs, locked SKIP LOCKED, unless the queue is paused or
 *          limited (limits.c then takes over);
 * u        moves them to running (the job trigger bumps generation and
 *          attempts), or to failed when their attempts, deadline or budget
 *          are used up, judged on the locked (newest) row version.  It finds
 *          them by primary key (queue, id = ANY (...)), so its generic plan
 *          is an index lookup whatever $2 is, and re-checks the status
 *          (the job trigger writes their history).
 *
 * One row per job taken, each carrying the queue's columns, whether a lease
 * in the queue has run out (an index probe; claim then applies the expiry
 * with lease.c's statement and looks again) and the job's index key (for
 * the mark of claim_mark.c); one row with NULL job columns when none was
 * taken; no row when the queue does not exist.  Keeping the expiry out of
 * this statement spares every claim the set-up of two more ModifyTable
 * nodes.
 */
static JsPlan claim_plan = {
	JS_SQL_CLAIM_QUEUE
	" c AS MATERIALIZED (" JS_SQL_CLAIM_READY("") "),"
	JS_SQL_CLAIM_TAKE,
	5, {TEXTOID, INT4OID, TEXTOID, INTERVALOID, TIMESTAMPTZOID}
};

/*
 * The same, resuming after the mark ($6 priority, $7 run_after, $8 id) of
 * claim_mark.c: higher priorities from their start, the mark's priority
 * from just after the mark (the row comparison bounds the index scan, so
 * the entries before it are never visited), then lower priorities.  Each
 * part is a CTE of its own (FOR UPDATE is not allowed in UNION), and as
 * CTEs are read on demand, a part runs only if the ones before it did not
 * fill the claim.
 */
static JsPlan claim_resume_plan = {
	JS_SQL_CLAIM_QUEUE
	" above AS MATERIALIZED ("
	JS_SQL_CLAIM_READY(" AND j.priority OPERATOR(pg_catalog.>) $6") "),"
	" resumed AS MATERIALIZED ("
	JS_SQL_CLAIM_READY(" AND j.priority = $6"
					   " AND (j.run_after, j.id) OPERATOR(pg_catalog.>) ($7, $8)") "),"
	" below AS MATERIALIZED ("
	JS_SQL_CLAIM_READY(" AND j.priority OPERATOR(pg_catalog.<) $6") "),"
	" c AS (SELECT id FROM above UNION ALL SELECT id FROM resumed"
	"  UNION ALL SELECT id FROM below LIMIT $2),"
	JS_SQL_CLAIM_TAKE,
	8, {TEXTOID, INT4OID, TEXTOID, INTERVALOID, TIMESTAMPTZOID,
		INT4OID, TIMESTAMPTZOID, INT8OID}
};

Datum
js_claim(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *queue;
	int32		max_jobs;
	int32		queue_id;
	Datum		values[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	int			claimed = 0;
	int			passes = 0;
	bool		isnull;
	bool		expiry_due;
	bool		from_head = false;
	TimestampTz started = GetCurrentTimestamp();
	Oid			job_relid = InvalidOid;
	JsClaimKey	last;
	bool		have_last = false;

	JsRefuseNull(fcinfo, 0, "queue");
	JsRefuseNull(fcinfo, 1, "worker");
	JsRefuseNull(fcinfo, 3, "max_jobs");
	queue = text_to_cstring(PG_GETARG_TEXT_PP(0));
	max_jobs = PG_GETARG_INT32(3);
	if (max_jobs < 1 || max_jobs > 10000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_jobs must be between 1 and 10000"),
				 errdetail("The value given is %d.", max_jobs)));
	if (!PG_ARGISNULL(2) && !JsIntervalPositive(PG_GETARG_INTERVAL_P(2)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease must be positive")));

	JsInitMaterialized(fcinfo);
	SPI_connect();

	values[0] = PG_GETARG_DATUM(0);
	values[2] = PG_GETARG_DATUM(1);
	values[3] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	nulls[3] = PG_ARGISNULL(2) ? 'n' : ' ';
	for (;;)
	{
		SPITupleTable *tt;
		TimestampTz now = GetCurrentTimestamp();
		int32		asked = max_jobs - claimed;
		JsClaimKey	mark;
		bool		resumed;
		int			n;
		int			i;
		int			taken = 0;
		int			used_up = 0;

		values[1] = Int32GetDatum(asked);
		values[4] = TimestampTzGetDatum(now);

		/*
		 * Resume after this session's mark unless an earlier pass of this
		 * call already looked from the head (it came back short, or leases
		 * were expired, which may requeue jobs behind the mark).
		 */
		resumed = !from_head && JsClaimMarkGet(queue, now, &mark);
		if (resumed)
		{
			values[5] = Int32GetDatum(mark.priority);
			values[6] = TimestampTzGetDatum(mark.run_after);
			values[7] = Int64GetDatum(mark.id);
			n = JsExecute(&claim_resume_plan, values, nulls, false, 0);
		}
		else
		{
			from_head = true;
			n = JsExecute(&claim_plan, values, nulls, false, 0);
		}
		if (n == 0)
			ereport(ERROR,
					(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
					 errmsg("queue \"%s\" does not exist", queue),
					 errhint("Create it with job_state.create_queue().")));
		/* minting may run SPI (first use of the secret): keep our result */
		tt = SPI_tuptable;
		queue_id = JsGetInt32(0, 1, NULL);
		job_relid = DatumGetObjectId(SPI_getbinval(tt->vals[0], tt->tupdesc, 16, &isnull));

		expiry_due = JsGetBool(0, 13);
		if (JsGetBool(0, 4) && !JsGetBool(0, 3))
		{
			bool		no_queue_limit;
			bool		no_key_limit;
			int32		queue_limit = JsGetInt32(0, 5, &no_queue_limit);
			int32		key_limit = JsGetInt32(0, 6, &no_key_limit);
			Datum		lease = JsGetDatumCopy(0, 2, &isnull);

			/* concurrency or rate limits apply: the slot-taking path */
			if (expiry_due)
				JsExpireLeases(queue);
			JsClaimWithLimits(queue, queue_id, job_relid, PG_GETARG_DATUM(1), lease,
							  max_jobs, !no_queue_limit, queue_limit,
							  !no_key_limit, key_limit, rsinfo);
			SPI_finish();
			return (Datum) 0;	/* it left its own mark */
		}

		for (i = 0; i < n; i++)
		{
			HeapTuple	row = tt->vals[i];
			Datum		out[5];
			bool		outnulls[5];
			int64		job_id;
			int32		generation;

			(void) SPI_getbinval(row, tt->tupdesc, 7, &isnull);
			if (isnull)
				continue;		/* the queue's row alone: nothing taken */
			taken++;
			if (!DatumGetBool(SPI_getbinval(row, tt->tupdesc, 12, &isnull)))
			{
				used_up++;
				continue;
			}
			job_id = DatumGetInt64(SPI_getbinval(row, tt->tupdesc, 7, &isnull));
			generation = DatumGetInt32(SPI_getbinval(row, tt->tupdesc, 8, &isnull));
			out[0] = ClaimTokenGetDatum(JsTokenMint(job_id, generation, queue_id));
			outnulls[0] = false;
			out[1] = Int64GetDatum(job_id);
			outnulls[1] = false;
			out[2] = SPI_getbinval(row, tt->tupdesc, 9, &outnulls[2]);
			out[3] = SPI_getbinval(row, tt->tupdesc, 10, &outnulls[3]);
			out[4] = SPI_getbinval(row, tt->tupdesc, 11, &outnulls[4]);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnulls);
			claimed++;
		}

		/*
		 * The next claim resumes after the last job taken, in claim order,
		 * by the last pass that took any: a pass from the head that finds
		 * nothing more leaves the mark of the resumed pass before it.
		 */
		if (taken > 0)
		{
			HeapTuple	row = tt->vals[n - 1];

			last.priority = DatumGetInt32(SPI_getbinval(row, tt->tupdesc, 14, &isnull));
			last.run_after = DatumGetTimestampTz(SPI_getbinval(row, tt->tupdesc, 15, &isnull));
			last.id = DatumGetInt64(SPI_getbinval(row, tt->tupdesc, 7, &isnull));
			have_last = true;
		}

		/*
		 * Leases ran out: apply the expiry (it may requeue jobs, also behind
		 * the mark), then look again from the head, as when the resumed scan
		 * came back short (jobs may be ready behind the mark); look again
		 * too when jobs turned out used up and left room.
		 */
		if (expiry_due)
			JsExpireLeases(queue);
		if (claimed >= max_jobs || ++passes > JS_CLAIM_MAX_PASSES)
			break;
		if (expiry_due || (resumed && taken < asked))
			from_head = true;
		else if (used_up == 0)
			break;
	}

	JsClaimMarkSet(job_relid, queue, started, from_head,
				   have_last ? &last : NULL);
	SPI_finish();
	return (Datum) 0;
}

/*
 * heartbeat: $1 queue, $2 job, $3 generation, $4 extend (NULL: the queue's
 * lease).  Never past started_at + max_lease; a lease that already ran out
 * is not revived.
 */
static JsPlan heartbeat_plan = {
	"UPDATE job_state.job j SET lease_expires_at = LEAST("
	"   pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+)"
	"    LEAST(COALESCE($4, q.lease), q.max_lease),"
	"   j.started_at OPERATOR(pg_catalog.+) q.max_lease)"
	" FROM job_state.queue q"
	" WHERE j.queue = $1 AND j.id = $2 AND j.generation = $3"
	"  AND j.status = 'running'"
	"  AND j.lease_expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()"
	"  AND q.name = j.queue"
	" RETURNING j.lease_expires_at, j.cancel_requested",
	4, {TEXTOID, INT8OID, INT4OID, INTERVALOID}
};

Datum
js_heartbeat(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	JsClaimToken *token;
	const char *queue;
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};
	Datum		out[2];
	bool		outnulls[2] = {false, false};

	JsRefuseNull(fcinfo, 0, "token");
	token = PG_GETARG_CLAIM_TOKEN(0);
	if (!PG_ARGISNULL(1) && !JsIntervalPositive(PG_GETARG_INTERVAL_P(1)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("extend must be positive")));

	JsInitMaterialized(fcinfo);
	SPI_connect();
	queue = JsTokenFence(token, values);
	values[3] = PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1);
	nulls[3] = PG_ARGISNULL(1) ? 'n' : ' ';
	if (JsExecute(&heartbeat_plan, values, nulls, false, 0) != 1)
		JsRefuseToken(queue, token, "heartbeat");

	out[0] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &outnulls[0]);
	out[1] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &outnulls[1]);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnulls);
	SPI_finish();
	return (Datum) 0;
}

/*
 * assert_claim: the token must be the job's current claim (running, or
 * unknown after a lease expiry, whose late completion is still accepted).
 * The row lock lasts until the caller's transaction ends: lease expiry and
 * claim skip locked rows, so no newer claim can commit meanwhile.
 */
static JsPlan assert_plan = {
	"SELECT 1 FROM job_state.job"
	" WHERE queue = $1 AND id = $2 AND generation = $3"
	"  AND status OPERATOR(pg_catalog.=) ANY ('{running,unknown}'::job_state.status[])"
	" FOR NO KEY UPDATE",
	3, {TEXTOID, INT8OID, INT4OID}
};

Datum
js_assert_claim(PG_FUNCTION_ARGS)
{
	JsClaimToken *token;
	const char *queue;
	Datum		values[3];

	JsRefuseNull(fcinfo, 0, "token");
	token = PG_GETARG_CLAIM_TOKEN(0);

	SPI_connect();
	queue = JsTokenFence(token, values);
	if (JsExecute(&assert_plan, values, NULL, false, 0) != 1)
		JsRefuseToken(queue, token, "assert_claim");
	SPI_finish();
	PG_RETURN_VOID();
}
