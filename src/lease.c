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

static JsPlan expire_queue_plan = {
	"WITH " JS_SQL_EXPIRY_CTES("j.queue OPERATOR(pg_catalog.=) $1 AND", "$2")
	" SELECT pg_catalog.count(*)::pg_catalog.int4 FROM expired",
	2, {TEXTOID, TIMESTAMPTZOID}
};

static JsPlan expire_all_plan = {
	"WITH " JS_SQL_EXPIRY_CTES("", "$1")
	" SELECT pg_catalog.count(*)::pg_catalog.int4 FROM expired",
	1, {TIMESTAMPTZOID}
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
		Datum		now = TimestampTzGetDatum(GetCurrentTimestamp());

		if (queue != NULL)
		{
			Datum		args[2];

			args[0] = CStringGetTextDatum(queue);
			args[1] = now;
			JsExecute(&expire_queue_plan, args, NULL, false, 0);
		}
		else
			JsExecute(&expire_all_plan, &now, NULL, false, 0);
		n = JsGetInt32(0, 1, NULL);
		total += n;
	} while (n == JS_SQL_EXPIRY_BATCH);

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
