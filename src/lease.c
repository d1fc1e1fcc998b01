/*-------------------------------------------------------------------------
 *
 * lease.c
 *	  Lease expiry, shared by claim (lazily, per queue), sweep() and the
 *	  background worker.
 *
 * A running job whose lease_expires_at has passed by the database clock
 * becomes unknown (reason lease_expired): the work may still be going on.
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

PG_FUNCTION_INFO_V1(js_sweep);

#define JS_EXPIRY_BATCH 1000

#define EXPIRY_UPDATE \
	"UPDATE job_state.job j SET" \
	" status = CASE WHEN j.cancel_requested THEN 'cancelled'" \
	"  WHEN q.on_lease_expiry = 'retry'" \
	"   AND j.retries OPERATOR(pg_catalog.<) q.max_retries THEN 'accepted'" \
	"  ELSE 'unknown' END::job_state.status," \
	" reason = CASE WHEN j.cancel_requested THEN j.reason" \
	"  ELSE 'lease_expired' END," \
	" run_after = CASE WHEN NOT j.cancel_requested" \
	"   AND q.on_lease_expiry = 'retry'" \
	"   AND j.retries OPERATOR(pg_catalog.<) q.max_retries" \
	"  THEN pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+)" \
	"   job_state.retry_delay(q.retry_interval, q.backoff_rate, q.max_delay," \
	"    q.jitter, j.retries OPERATOR(pg_catalog.+) 1)" \
	"  ELSE j.run_after END," \
	" retries = CASE WHEN NOT j.cancel_requested" \
	"   AND q.on_lease_expiry = 'retry'" \
	"   AND j.retries OPERATOR(pg_catalog.<) q.max_retries" \
	"  THEN j.retries OPERATOR(pg_catalog.+) 1 ELSE j.retries END" \
	" FROM x, job_state.queue q" \
	" WHERE j.queue = x.queue AND j.id = x.id" \
	"  AND j.generation = x.generation AND j.status = 'running'" \
	"  AND j.lease_expires_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp()" \
	"  AND q.name = j.queue"

static JsPlan expire_queue_plan = {
	"WITH x AS ("
	"  SELECT queue, id, generation FROM job_state.job"
	"  WHERE queue = $1 AND status = 'running'"
	"   AND lease_expires_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp()"
	"  ORDER BY lease_expires_at LIMIT " CppAsString2(JS_EXPIRY_BATCH)
	"  FOR NO KEY UPDATE SKIP LOCKED)"
	EXPIRY_UPDATE,
	1, {TEXTOID}
};

static JsPlan expire_all_plan = {
	"WITH x AS ("
	"  SELECT queue, id, generation FROM job_state.job"
	"  WHERE status = 'running'"
	"   AND lease_expires_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp()"
	"  LIMIT " CppAsString2(JS_EXPIRY_BATCH)
	"  FOR NO KEY UPDATE SKIP LOCKED)"
	EXPIRY_UPDATE,
	0, {0}
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

	do
	{
		if (queue != NULL)
		{
			Datum		arg = CStringGetTextDatum(queue);

			n = JsExecute(&expire_queue_plan, &arg, NULL, false, 0);
		}
		else
			n = JsExecute(&expire_all_plan, NULL, NULL, false, 0);
		total += n;
	} while (n == JS_EXPIRY_BATCH);

	return total;
}

Datum
js_sweep(PG_FUNCTION_ARGS)
{
	int			n;

	SPI_connect();
	n = JsExpireLeases(NULL);
	(void) JsRunSchedules();	/* ticks submitted are not counted in n */
	SPI_finish();
	PG_RETURN_INT32(n);
}
