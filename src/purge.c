/*-------------------------------------------------------------------------
 *
 * purge.c
 *	  purge(older_than): the only way finished jobs leave the database.
 *
 * Deletes succeeded, failed and cancelled jobs that finished before
 * now() - older_than, together with their history, spend and operation
 * records, in
 * one statement.  The job trigger refuses every other DELETE; it lets this
 * one through while js_purging is set.  Unknown jobs are never purged:
 * they wait for reconcile.  Once a job is purged its idempotency key can
 * be used again.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "job_state.h"

PG_FUNCTION_INFO_V1(js_purge);

static JsPlan purge_plan = {
	"WITH d AS ("
	"  DELETE FROM job_state.job"
	"  WHERE status OPERATOR(pg_catalog.=) ANY ('{succeeded,failed,cancelled}'::job_state.status[])"
	"   AND finished_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) $1)"
	"  RETURNING queue, id),"
	" e AS (DELETE FROM job_state.job_event v USING d"
	"  WHERE v.queue OPERATOR(pg_catalog.=) d.queue AND v.job_id OPERATOR(pg_catalog.=) d.id),"
	" s AS (DELETE FROM job_state.spend v USING d"
	"  WHERE v.queue OPERATOR(pg_catalog.=) d.queue AND v.job_id OPERATOR(pg_catalog.=) d.id),"
	" o AS (DELETE FROM job_state.operation v USING d"
	"  WHERE v.queue OPERATOR(pg_catalog.=) d.queue AND v.job_id OPERATOR(pg_catalog.=) d.id)"
	" SELECT pg_catalog.count(*) FROM d",
	1, {INTERVALOID}
};

Datum
js_purge(PG_FUNCTION_ARGS)
{
	Interval   *older_than;
	int64		n = 0;
	Datum		arg;

	JsRefuseNull(fcinfo, 0, "older_than");
	older_than = PG_GETARG_INTERVAL_P(0);
	if (JsIntervalNegative(older_than))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("older_than must not be negative")));
	JsCheckSpanBound("older_than", older_than);

	SPI_connect();
	arg = PG_GETARG_DATUM(0);
	js_purging = true;
	PG_TRY();
	{
		JsExecute(&purge_plan, &arg, NULL, false, 0);
		n = JsGetInt64(0, 1, NULL);
	}
	PG_FINALLY();
	{
		js_purging = false;
	}
	PG_END_TRY();
	SPI_finish();
	PG_RETURN_INT64(n);
}
