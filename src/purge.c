/*-------------------------------------------------------------------------
 *
 * purge.c
 *	  purge(older_than): the only way finished jobs leave the database.
 *
 * Deletes succeeded, failed and cancelled jobs that finished before
 * now() - older_than, together with their history, spend and operation
 * records, in one statement run by retention.c (the one deletion path,
 * shared with the queues' retention).  Unknown jobs are never purged:
 * they wait for reconcile.  Once a job is purged its idempotency key can
 * be used again.  A role purges only the queues it may operate (acl.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/array.h"
#include "catalog/namespace.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "job_state.h"
#include "tables.h"
#include "rules.h"
#include "acl.h"

PG_FUNCTION_INFO_V1(js_purge);

/* the finished jobs purge deletes: $1 older_than, $2 the queues (NULL: all) */
#define JS_SQL_PURGE_JOBS \
	"WITH d AS (" \
	"  DELETE FROM job_state.job" \
	"  WHERE status OPERATOR(pg_catalog.=) ANY ('{succeeded,failed,cancelled}'::job_state.status[])" \
	"   AND finished_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) $1)" \
	"   AND ($2::pg_catalog.text[] IS NULL OR queue OPERATOR(pg_catalog.=) ANY ($2))" \
	"  RETURNING queue, id),"

static JsPlan purge_plan = {
	JS_SQL_PURGE_JOBS
	JS_DELETE_JOB_ROWS,
	2, {INTERVALOID, TEXTARRAYOID}
};

/* on the 0.1.0 schema, which has no job_ref */
static JsPlan purge_plan_010 = {
	JS_SQL_PURGE_JOBS
	JS_DELETE_JOB_ROWS_010,
	2, {INTERVALOID, TEXTARRAYOID}
};

static JsPlan queue_acls_plan = {
	"SELECT name, acl FROM job_state.queue",
	0, {0}
};

/*
 * The queues the calling role may operate, as a text[]; NULL when it may
 * operate them all (the statement then needs no filter).  One entry per
 * queue: a bounded loop.  Needs SPI.
 */
static Datum
JsOperableQueues(void)
{
	Oid			role = GetOuterUserId();
	int			n;
	int			i;
	int			allowed = 0;
	Datum	   *names;
	ArrayType  *array;

	/* before ALTER EXTENSION UPDATE to 0.2.0 there are no privileges */
	if (superuser_arg(role) || !JsQueueHasAcl())
		return (Datum) 0;
	n = JsExecuteLatest(&queue_acls_plan, NULL, NULL, 0);
	names = palloc(sizeof(Datum) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		bool		isnull;
		Datum		acl = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull);

		CHECK_FOR_INTERRUPTS();
		if (isnull || JsQueueAllows(DatumGetAclP(acl), role, JS_QUEUE_OPERATE))
			names[allowed++] = SPI_getbinval(SPI_tuptable->vals[i],
											 SPI_tuptable->tupdesc, 1, &isnull);
	}
	if (allowed == n)
		return (Datum) 0;
	array = construct_array(names, allowed, TEXTOID, -1, false, TYPALIGN_INT);
	return PointerGetDatum(array);
}

Datum
js_purge(PG_FUNCTION_ARGS)
{
	Interval   *older_than;
	int64		n = 0;
	Datum		args[2];
	char		nulls[2] = {' ', ' '};

	JsRefuseNull(fcinfo, 0, "older_than");
	older_than = PG_GETARG_INTERVAL_P(0);
	JsCheckNotNegative("older_than", older_than);
	JsCheckSpanBound("older_than", older_than);

	SPI_connect();
	args[0] = PG_GETARG_DATUM(0);
	args[1] = JsOperableQueues();
	nulls[1] = args[1] == (Datum) 0 ? 'n' : ' ';
	n = JsDeleteJobs(OidIsValid(get_relname_relid("job_ref", get_namespace_oid("job_state", false))) ?
					 &purge_plan : &purge_plan_010, args, nulls);
	SPI_finish();
	PG_RETURN_INT64(n);
}
