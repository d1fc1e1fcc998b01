/*-------------------------------------------------------------------------
 *
 * ref.c
 *	  add_ref and find_job: references a worker attaches to its job (an
 *	  agent session, an execution id in another system), and the lookup an
 *	  operator makes from such a reference back to the job.
 *
 * add_ref is fenced like begin_operation: the MAC and the claim privilege
 * first (token.c; the callback privilege allows succeed, fail and
 * heartbeat with a token and nothing else), then the job must be at the
 * token's generation and running, waiting (callback.c: the worker attaches
 * the id of the execution it waits for, under its own claim) or unknown (a
 * late worker of an expired lease may still record where its work went:
 * that is what reconcile needs); the row is held FOR
 * SHARE until the transaction ends, so no newer claim commits meanwhile.
 * Adding the same (kind, ref) again is harmless and returns false.  The
 * rows are append-only (the append-only trigger) and leave only with their
 * job (retention.c).  find_job returns the jobs of the queues the caller
 * may read only, so a tenant cannot probe another's references.
 *
 * Locks: FOR SHARE on the job row (add_ref); none (find_job).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

#include "job_state.h"
#include "tables.h"
#include "token.h"
#include "acl.h"

PG_FUNCTION_INFO_V1(js_add_ref);
PG_FUNCTION_INFO_V1(js_find_job);

/* the fence (token.h): $1 queue, $2 job, $3 generation, $4 nonce */
#define JS_SQL_REF_FENCE(nonce) \
	"SELECT 1 FROM job_state.job" \
	" WHERE queue OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2 AND generation OPERATOR(pg_catalog.=) $3" \
	nonce("") \
	"  AND status OPERATOR(pg_catalog.<>) ALL ('{accepted,succeeded,failed,cancelled}'::job_state.status[])" \
	" FOR SHARE"

static JsPlan ref_fence_plans[2] = {
	{JS_SQL_REF_FENCE(JS_FENCE_NONE), 4, {JS_FENCE_ARGTYPES}},
	{JS_SQL_REF_FENCE(JS_FENCE_NONCE), 4, {JS_FENCE_ARGTYPES}},
};

static JsPlan add_ref_plan = {
	"INSERT INTO job_state.job_ref (queue, job_id, kind, ref, generation)"
	" VALUES ($1, $2, $5, $6, $3)"
	" ON CONFLICT (queue, job_id, kind, ref) DO NOTHING",
	6, {JS_FENCE_ARGTYPES, TEXTOID, TEXTOID}
};

static JsPlan find_job_plan = {
	"SELECT r.queue, r.job_id, j.status, q.acl FROM job_state.job_ref r"
	" JOIN job_state.job j ON j.queue OPERATOR(pg_catalog.=) r.queue AND j.id OPERATOR(pg_catalog.=) r.job_id"
	" JOIN job_state.queue q ON q.name OPERATOR(pg_catalog.=) r.queue"
	" WHERE r.kind OPERATOR(pg_catalog.=) $1 AND r.ref OPERATOR(pg_catalog.=) $2"
	" ORDER BY r.job_id",
	2, {TEXTOID, TEXTOID}
};

static void
JsCheckRefArgs(FunctionCallInfo fcinfo, int kind_arg)
{
	JsRefuseNull(fcinfo, kind_arg, "kind");
	JsRefuseNull(fcinfo, kind_arg + 1, "ref");
	JsCheckName("reference kind", text_to_cstring(PG_GETARG_TEXT_PP(kind_arg)));
	JsCheckKey("ref", text_to_cstring(PG_GETARG_TEXT_PP(kind_arg + 1)));
}

Datum
js_add_ref(PG_FUNCTION_ARGS)
{
	JsClaimToken *token;
	const char *queue;
	Datum		values[6];
	bool		added;

	JsRefuseNull(fcinfo, 0, "token");
	JsCheckRefArgs(fcinfo, 1);
	token = PG_GETARG_CLAIM_TOKEN(0);

	SPI_connect();
	queue = JsTokenFence(token, values);
	if (JsExecute(JsFencePlan(ref_fence_plans), values, NULL, false, 0) != 1)
		JsRefuseToken(queue, token, "add_ref");
	values[4] = PG_GETARG_DATUM(1);
	values[5] = PG_GETARG_DATUM(2);
	added = JsExecute(&add_ref_plan, values, NULL, false, 0) == 1;
	SPI_finish();
	PG_RETURN_BOOL(added);
}

Datum
js_find_job(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			role = GetOuterUserId();
	Datum		args[2];
	int			n;
	int			i;

	JsCheckRefArgs(fcinfo, 0);
	JsInitMaterialized(fcinfo);
	SPI_connect();
	args[0] = PG_GETARG_DATUM(0);
	args[1] = PG_GETARG_DATUM(1);
	n = JsExecute(&find_job_plan, args, NULL, true, 0);
	for (i = 0; i < n; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		Datum		out[3];
		bool		outnulls[3] = {false, false, false};
		bool		isnull;
		Datum		acl;

		CHECK_FOR_INTERRUPTS();
		acl = SPI_getbinval(tuple, desc, 4, &isnull);
		if (!isnull && !JsQueueAllows(DatumGetAclP(acl), role, JS_QUEUE_READ))
			continue;
		out[0] = SPI_getbinval(tuple, desc, 1, &outnulls[0]);
		out[1] = SPI_getbinval(tuple, desc, 2, &outnulls[1]);
		out[2] = SPI_getbinval(tuple, desc, 3, &outnulls[2]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnulls);
	}
	SPI_finish();
	return (Datum) 0;
}
