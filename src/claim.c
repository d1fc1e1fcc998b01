/*-------------------------------------------------------------------------
 *
 * claim.c
 *	  claim, heartbeat and assert_claim: taking a job and holding on to it
 *	  (heartbeat also keeps a waiting job's window open, callback.c).
 *
 * claim locks ready jobs like FOR NO KEY UPDATE SKIP LOCKED, so it never
 * waits on rows other claimers hold, and moves them to running (take.c);
 * the job trigger bumps generation and attempts.  A picked job whose
 * attempts, deadline or budget are used up becomes failed instead (reason
 * attempts_exhausted, deadline_exceeded or budget_exhausted) and claim
 * looks for more.  In the same call claim applies lease expiry in the
 * queue (lease.c), so an idle sweeper is never needed for correctness; a
 * job requeued by that expiry is claimable by the next pass.
 * Queues with a concurrency limit, a per-key limit or jobs naming a
 * resource take the slot-taking path of claim_limited.c instead.
 * heartbeat extends the lease of the current claim only (the generation is
 * in its WHERE clause) and may store the attempt's progress with it, so a
 * stale worker can neither extend nor report.
 *
 * Locks: the row locks of the jobs it takes (and of the leases it expires).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"

#include "job_state.h"
#include "tables.h"
#include "rules.h"
#include "take.h"
#include "token.h"
#include "acl.h"

PG_FUNCTION_INFO_V1(js_claim);
PG_FUNCTION_INFO_V1(js_heartbeat);
PG_FUNCTION_INFO_V1(js_assert_claim);

/*
 * claim: check the arguments, the queue and the caller's privilege on it,
 * then take jobs by the path the queue needs: the slot-taking claim
 * (claim_limited.c) when limits apply, else the plain one (take.c).
 */
Datum
js_claim(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *queue;
	int32		max_jobs;
	JsTake		t;
	JsQueueOptions q;
	TimestampTz started = GetCurrentTimestamp();
	Oid			job_relid;

	JsRefuseNull(fcinfo, 0, "queue");
	JsRefuseNull(fcinfo, 1, "worker");
	JsRefuseNull(fcinfo, 3, "max_jobs");
	queue = text_to_cstring(PG_GETARG_TEXT_PP(0));
	max_jobs = PG_GETARG_INT32(3);
	if (max_jobs < 1 || max_jobs > JS_MAX_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_jobs must be between 1 and %d", JS_MAX_BATCH),
				 errdetail("The value given is %d.", max_jobs)));
	if (!PG_ARGISNULL(2) && !JsIntervalPositive(PG_GETARG_INTERVAL_P(2)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease must be positive")));
	if (!PG_ARGISNULL(2))
		JsCheckSpanBound("lease", PG_GETARG_INTERVAL_P(2));

	/* the executor's read-only check, which the writes of take.c bypass */
	PreventCommandIfReadOnly("claim()");

	JsInitMaterialized(fcinfo);
	SPI_connect();
	JsTakeOpen(&t);
	job_relid = RelationGetRelid(t.job);
	if (!JsTakeReadQueue(&t, PG_GETARG_DATUM(0),
						 PG_ARGISNULL(2) ? NULL : PG_GETARG_INTERVAL_P(2), &q))
		ereport(ERROR,
				(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
				 errmsg("queue \"%s\" does not exist", queue),
				 errhint("Create it with job_state.create_queue().")));
	JsRequireQueuePrivilege(queue, q.acl, JS_QUEUE_CLAIM);

	if (q.limited && !q.paused)
	{
		bool		expiry_due;

		/* concurrency or rate limits apply: the slot-taking path */
		PushActiveSnapshot(GetTransactionSnapshot());
		expiry_due = JsLeaseExpiryDue(&t, PG_GETARG_DATUM(0), GetCurrentTimestamp());
		PopActiveSnapshot();
		JsTakeClose(&t);
		if (expiry_due)
			JsExpireLeases(queue);
		JsClaimWithLimits(queue, &q, job_relid, PG_GETARG_DATUM(1),
						  max_jobs, rsinfo);
		SPI_finish();
		return (Datum) 0;		/* it left its own mark */
	}

	JsClaimReady(&t, queue, PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), &q,
				 max_jobs, started, rsinfo);
	SPI_finish();
	return (Datum) 0;
}

/*
 * heartbeat: $1 queue, $2 job, $3 generation, $4 nonce (the fence,
 * token.h), $5 extend (NULL: the queue's
 * lease).  Never past started_at + max_lease; a lease that already ran out
 * is not revived, and one whose max_lease has passed (a max_lease lowered
 * since the claim) is refused rather than given an expiry in the past.
 */
#define JS_SQL_HEARTBEAT_SET \
	"UPDATE job_state.job j SET lease_expires_at = LEAST(" \
	"   pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+)" \
	"    LEAST(COALESCE($5, q.lease), q.max_lease)," \
	"   j.started_at OPERATOR(pg_catalog.+) q.max_lease)"
#define JS_SQL_HEARTBEAT_WHERE(nonce) \
	" FROM job_state.queue q" \
	" WHERE j.queue OPERATOR(pg_catalog.=) $1 AND j.id OPERATOR(pg_catalog.=) $2 AND j.generation OPERATOR(pg_catalog.=) $3" \
	nonce("j.") \
	"  AND j.status OPERATOR(pg_catalog.=) 'running'" \
	"  AND j.lease_expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()" \
	"  AND j.started_at OPERATOR(pg_catalog.+) q.max_lease OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()" \
	"  AND q.name OPERATOR(pg_catalog.=) j.queue" \
	" RETURNING j.lease_expires_at, j.cancel_requested"

/*
 * A waiting job's heartbeat (callback.c) moves its waiting window: to now +
 * extend, or + the wait's heartbeat_interval, never past the callback
 * timeout; a wait without a heartbeat interval has the timeout as its
 * window.  The window must still be open.
 */
#define JS_SQL_HEARTBEAT_WAITING_SET \
	"UPDATE job_state.job j SET lease_expires_at = CASE" \
	"   WHEN COALESCE($5, j.heartbeat_interval) IS NULL THEN j.callback_timeout_at" \
	"   ELSE LEAST(pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+)" \
	"     COALESCE($5, j.heartbeat_interval), j.callback_timeout_at) END"
#define JS_SQL_HEARTBEAT_WAITING_WHERE(nonce) \
	" WHERE j.queue OPERATOR(pg_catalog.=) $1 AND j.id OPERATOR(pg_catalog.=) $2 AND j.generation OPERATOR(pg_catalog.=) $3" \
	nonce("j.") \
	"  AND j.status OPERATOR(pg_catalog.=) 'waiting'" \
	"  AND j.lease_expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()" \
	" RETURNING j.lease_expires_at, j.cancel_requested"

/*
 * With progress, $6 becomes the job's progress, stamped with the
 * generation of the claim that reported it.  Statements of their own, so
 * that heartbeat without progress still works on the 0.1.0 schema (no
 * progress columns, and no progress argument).
 */
#define JS_SQL_HEARTBEAT_PROGRESS \
	", progress = $6, progress_generation = j.generation," \
	"  progress_at = pg_catalog.clock_timestamp()"

#define JS_HEARTBEAT_PLANS(set, where, progress) \
	{{set where(JS_FENCE_NONE), 5, {JS_FENCE_ARGTYPES, INTERVALOID}}, \
	 {set where(JS_FENCE_NONCE), 5, {JS_FENCE_ARGTYPES, INTERVALOID}}}, \
	{{set progress where(JS_FENCE_NONE), 6, {JS_FENCE_ARGTYPES, INTERVALOID, JSONBOID}}, \
	 {set progress where(JS_FENCE_NONCE), 6, {JS_FENCE_ARGTYPES, INTERVALOID, JSONBOID}}}

/* [waiting][with progress][with the nonce: JsFencePlan] */
static JsPlan heartbeat_plans[2][2][2] = {
	{JS_HEARTBEAT_PLANS(JS_SQL_HEARTBEAT_SET, JS_SQL_HEARTBEAT_WHERE,
						JS_SQL_HEARTBEAT_PROGRESS)},
	{JS_HEARTBEAT_PLANS(JS_SQL_HEARTBEAT_WAITING_SET, JS_SQL_HEARTBEAT_WAITING_WHERE,
						JS_SQL_HEARTBEAT_PROGRESS)},
};

/* the largest progress a heartbeat stores, in bytes of its jsonb */
#define JS_MAX_PROGRESS_BYTES 65536

static void
JsCheckProgress(Jsonb *progress)
{
	Size		size = VARSIZE(progress);

	if (size > JS_MAX_PROGRESS_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("progress must be at most %d bytes", JS_MAX_PROGRESS_BYTES),
				 errdetail("The progress given is %zu bytes as jsonb.", size),
				 errhint("Keep large output elsewhere and report a reference to it as progress.")));
}

Datum
js_heartbeat(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	JsClaimToken *token;
	const char *queue;
	Datum		values[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	Datum		out[2];
	bool		outnulls[2] = {false, false};

	/* 0.1.0's heartbeat has no progress argument */
	bool		with_progress = PG_NARGS() > 2 && !PG_ARGISNULL(2);

	JsRefuseNull(fcinfo, 0, "token");
	token = PG_GETARG_CLAIM_TOKEN(0);
	if (!PG_ARGISNULL(1) && !JsIntervalPositive(PG_GETARG_INTERVAL_P(1)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("extend must be positive")));
	if (!PG_ARGISNULL(1))
		JsCheckSpanBound("extend", PG_GETARG_INTERVAL_P(1));
	if (with_progress)
	{
		Jsonb	   *progress = PG_GETARG_JSONB_P(2);

		JsCheckProgress(progress);
		values[5] = JsonbPGetDatum(progress);
	}

	JsInitMaterialized(fcinfo);
	SPI_connect();
	queue = JsTokenFenceCallback(token, values);
	values[4] = PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1);
	nulls[4] = PG_ARGISNULL(1) ? 'n' : ' ';
	if (JsExecute(JsFencePlan(heartbeat_plans[0][with_progress]), values, nulls, false, 0) != 1 &&
		(!JsSchemaHasWaiting() ||
		 JsExecute(JsFencePlan(heartbeat_plans[1][with_progress]), values, nulls, false, 0) != 1))
		JsRefuseToken(queue, token, "heartbeat");

	out[0] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &outnulls[0]);
	out[1] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &outnulls[1]);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnulls);
	SPI_finish();
	return (Datum) 0;
}

/*
 * assert_claim: the token must be the job's current claim (running,
 * waiting for a callback, or unknown after a lease expiry, whose late
 * completion is still accepted).
 * The row lock lasts until the caller's transaction ends: lease expiry and
 * claim skip locked rows, so no newer claim can commit meanwhile.
 */
#define JS_SQL_ASSERT(nonce) \
	"SELECT 1 FROM job_state.job" \
	" WHERE queue OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2 AND generation OPERATOR(pg_catalog.=) $3" \
	nonce("") \
	"  AND status OPERATOR(pg_catalog.<>) ALL ('{accepted,succeeded,failed,cancelled}'::job_state.status[])" \
	" FOR NO KEY UPDATE"

static JsPlan assert_plans[2] = {
	{JS_SQL_ASSERT(JS_FENCE_NONE), 4, {JS_FENCE_ARGTYPES}},
	{JS_SQL_ASSERT(JS_FENCE_NONCE), 4, {JS_FENCE_ARGTYPES}},
};

Datum
js_assert_claim(PG_FUNCTION_ARGS)
{
	JsClaimToken *token;
	const char *queue;
	Datum		values[4];

	JsRefuseNull(fcinfo, 0, "token");
	token = PG_GETARG_CLAIM_TOKEN(0);

	SPI_connect();
	queue = JsTokenFenceCallback(token, values);
	if (JsExecute(JsFencePlan(assert_plans), values, NULL, false, 0) != 1)
		JsRefuseToken(queue, token, "assert_claim");
	SPI_finish();
	PG_RETURN_VOID();
}
