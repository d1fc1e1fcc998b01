/*-------------------------------------------------------------------------
 *
 * lease.c
 *	  Lease expiry, shared by claim (lazily, per queue) and sweep()
 *	  (sweeper.c, also run by the background worker).
 *
 * A running job whose lease_expires_at has passed by the database clock
 * becomes unknown (reason lease_expired): the work may still be going on.
 * A waiting job's lease_expires_at is its waiting window (callback.c):
 * when it passes, the job becomes unknown with reason heartbeat_timeout
 * (the wait asked for heartbeats and one was due before the timeout) or
 * callback_timeout, exactly as a lease ends otherwise.
 * Queues with on_lease_expiry = 'retry' requeue it instead while their
 * retry policy allows, with the policy's backoff (it counts as a retry); a
 * job with a cancel request becomes cancelled.  Used-up attempts, deadline
 * or budget are caught by the next claim.
 *
 * Rows are picked with FOR NO KEY UPDATE SKIP LOCKED, so expiry never
 * waits on a worker inside assert_claim (nor on another sweeper), and the
 * UPDATE re-checks status, generation and expiry in its own WHERE clause:
 * a job completed meanwhile is left alone.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "job_state.h"
#include "rules.h"


/*
 * Lease expiry as CTEs: "expiring" (the running and waiting jobs whose lease ran out,
 * locked SKIP LOCKED) and "expired" (the update, one row per job moved).
 * queue_cond restricts the jobs ("j.queue OPERATOR(pg_catalog.=) $1 AND" or ""); now_param is
 * the parameter holding the database clock (GetCurrentTimestamp()): a
 * parameter, unlike clock_timestamp(), can bound the index scan on
 * lease_expires_at.  The UPDATE finds the jobs by id (an index lookup,
 * whatever the plan's estimates), each by its whole key (queue, id): an id
 * is unique only with its queue (the primary key), and a statement over
 * every queue must not fail on an id another queue uses too (a row
 * restored so).  It re-checks status, generation and
 * expiry in its own WHERE clause (the row lock taken by "expiring" in the
 * same statement already pins them), so a job completed or claimed again
 * meanwhile is left alone.
 */
#define JS_SQL_EXPIRY_BATCH 1000
#define JS_SQL_RETRY_ON_EXPIRY \
	" NOT j.cancel_requested AND q.on_lease_expiry OPERATOR(pg_catalog.=) 'retry'" \
	" AND j.retries OPERATOR(pg_catalog.<) q.max_retries"
/* the statuses that hold a lease, and the reason its end gives */
#define JS_SQL_HOLDING \
	"j.status OPERATOR(pg_catalog.=) ANY ('{running,waiting}'::job_state.status[])"
#define JS_SQL_EXPIRY_REASON \
	"CASE WHEN j.status OPERATOR(pg_catalog.=) 'running' THEN 'lease_expired'" \
	" WHEN j.heartbeat_interval IS NOT NULL" \
	"  AND j.lease_expires_at OPERATOR(pg_catalog.<) j.callback_timeout_at" \
	"  THEN 'heartbeat_timeout' ELSE 'callback_timeout' END"
/* the same for a 0.1.0 schema (the library updated, the extension not yet) */
#define JS_SQL_HOLDING_010 "j.status OPERATOR(pg_catalog.=) 'running'"
#define JS_SQL_EXPIRY_REASON_010 "'lease_expired'"
#define JS_SQL_EXPIRY_CTES(queue_cond, now_param, holding, reason) \
	"expiring AS (" \
	"  SELECT j.queue, j.id, j.generation FROM job_state.job j" \
	"  WHERE " queue_cond " " holding \
	"   AND j.lease_expires_at OPERATOR(pg_catalog.<=) " now_param \
	"  ORDER BY j.lease_expires_at LIMIT " CppAsString2(JS_SQL_EXPIRY_BATCH) \
	"  FOR NO KEY UPDATE OF j SKIP LOCKED)," \
	" expired AS (" \
	"  UPDATE job_state.job j SET" \
	"   status = CASE WHEN j.cancel_requested THEN 'cancelled'" \
	"    WHEN " JS_SQL_RETRY_ON_EXPIRY " THEN 'accepted'" \
	"    ELSE 'unknown' END::job_state.status," \
	"   reason = CASE WHEN j.cancel_requested THEN j.reason" \
	"    ELSE " reason " END," \
	"   run_after = CASE WHEN " JS_SQL_RETRY_ON_EXPIRY \
	"    THEN pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+)" \
	"     job_state.retry_delay(q.retry_interval, q.backoff_rate, q.max_delay," \
	"      q.jitter, j.retries OPERATOR(pg_catalog.+) 1)" \
	"    ELSE j.run_after END," \
	"   retries = CASE WHEN " JS_SQL_RETRY_ON_EXPIRY \
	"    THEN j.retries OPERATOR(pg_catalog.+) 1 ELSE j.retries END" \
	"  FROM job_state.queue q" \
	"  WHERE " queue_cond " j.id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT x.id FROM expiring x))" \
	"   AND j.generation OPERATOR(pg_catalog.=) (SELECT x.generation FROM expiring x" \
	"    WHERE x.queue OPERATOR(pg_catalog.=) j.queue AND x.id OPERATOR(pg_catalog.=) j.id)" \
	"   AND " holding \
	"   AND j.lease_expires_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp()" \
	"   AND q.name OPERATOR(pg_catalog.=) j.queue" \
	"  RETURNING j.id)"

#define JS_SQL_QUEUE_COND "j.queue OPERATOR(pg_catalog.=) $1 AND"

/* [0]: a 0.2.0 schema (running and waiting), [1]: a 0.1.0 schema */
static JsPlan expire_queue_plans[2] = {
	{"WITH " JS_SQL_EXPIRY_CTES(JS_SQL_QUEUE_COND, "$2", JS_SQL_HOLDING, JS_SQL_EXPIRY_REASON)
		" SELECT pg_catalog.count(*)::pg_catalog.int4 FROM expired",
	2, {TEXTOID, TIMESTAMPTZOID}},
	{"WITH " JS_SQL_EXPIRY_CTES(JS_SQL_QUEUE_COND, "$2", JS_SQL_HOLDING_010, JS_SQL_EXPIRY_REASON_010)
		" SELECT pg_catalog.count(*)::pg_catalog.int4 FROM expired",
	2, {TEXTOID, TIMESTAMPTZOID}},
};

static JsPlan expire_all_plans[2] = {
	{"WITH " JS_SQL_EXPIRY_CTES("", "$1", JS_SQL_HOLDING, JS_SQL_EXPIRY_REASON)
		" SELECT pg_catalog.count(*)::pg_catalog.int4 FROM expired",
	1, {TIMESTAMPTZOID}},
	{"WITH " JS_SQL_EXPIRY_CTES("", "$1", JS_SQL_HOLDING_010, JS_SQL_EXPIRY_REASON_010)
		" SELECT pg_catalog.count(*)::pg_catalog.int4 FROM expired",
	1, {TIMESTAMPTZOID}},
};

/*
 * Apply lease expiry in one queue, or in all queues when queue is NULL.
 * Returns how many jobs moved.  Needs SPI.
 */
int
JsExpireLeases(const char *queue)
{
	int			total = 0;
	int			n;
	int			schema = JsSchemaHasWaiting() ? 0 : 1;

	do
	{
		Datum		now = TimestampTzGetDatum(GetCurrentTimestamp());

		if (queue != NULL)
		{
			Datum		args[2];

			args[0] = CStringGetTextDatum(queue);
			args[1] = now;
			JsExecute(&expire_queue_plans[schema], args, NULL, false, 0);
		}
		else
			JsExecute(&expire_all_plans[schema], &now, NULL, false, 0);
		n = JsGetInt32(0, 1, NULL);
		total += n;
	} while (n == JS_SQL_EXPIRY_BATCH);

	return total;
}
