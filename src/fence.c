/*-------------------------------------------------------------------------
 *
 * fence.c
 *	  Why a token was refused.
 *
 * Every statement that acts on a claim carries the token's generation and
 * the statuses it accepts in its own WHERE clause, so a stale worker never
 * overwrites a newer attempt.  When such a statement touches no row, this
 * file looks at the job once more to say why: it does not exist (JS008), a
 * newer claim owns it (JS001), or it has moved on to a state this call does
 * not act on (JS001).  A job that is still the token's running claim means
 * a BEFORE UPDATE trigger skipped the change (09000).
 *
 * Refusals are counted per queue in the sequence stale_refusals_<queue id>
 * (created by create_queue, owned by job_state.queue.id): nextval is not
 * rolled back with the refused transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "commands/sequence.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "job_state.h"

static JsPlan job_plan = {
	"SELECT status::pg_catalog.text, generation,"
	"  lease_expires_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp()"
	"  FROM job_state.job WHERE queue OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2",
	2, {TEXTOID, INT8OID}
};

/*
 * Count one stale-token refusal for a queue.  A missing sequence (a queue
 * inserted by raw SQL) is skipped.
 */
static void
JsCountStaleRefusal(int32 queue_id)
{
	char		name[NAMEDATALEN];
	Oid			nsp = get_namespace_oid("job_state", true);
	Oid			relid;

	if (!OidIsValid(nsp))
		return;
	snprintf(name, sizeof(name), "stale_refusals_%d", queue_id);
	relid = get_relname_relid(name, nsp);
	if (OidIsValid(relid))
		(void) DirectFunctionCall1(nextval_oid, ObjectIdGetDatum(relid));
}

void
JsRefuseToken(const char *queue, const JsClaimToken *token, const char *action)
{
	Datum		values[2];
	char	   *status;
	int32		generation;
	bool		expired;

	values[0] = CStringGetTextDatum(queue);
	values[1] = Int64GetDatum(token->job_id);
	if (JsExecute(&job_plan, values, NULL, false, 1) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
				 errmsg("job %lld does not exist", (long long) token->job_id),
				 errdetail("Queue \"%s\" has no job %lld; it may have been purged.",
						   queue, (long long) token->job_id)));

	status = JsGetText(0, 1);
	generation = JsGetInt32(0, 2, NULL);
	expired = JsGetBool(0, 3);

	/*
	 * The job, read again, is what the call acts on: its statement met the
	 * row and a BEFORE UPDATE trigger skipped the change.  Not a stale token.
	 */
	if (generation == token->generation && !expired &&
		strcmp(status, "running") == 0)
		JsRefuseSkippedUpdate();

	JsCountStaleRefusal(token->queue_id);

	if (generation != token->generation)
		ereport(ERROR,
				(errcode(ERRCODE_JS_STALE_CLAIM),
				 errmsg("job %lld was claimed again by a newer worker",
						(long long) token->job_id),
				 errdetail("Token generation is %d; current generation is %d (job is %s).",
						   token->generation, generation, status),
				 errhint("Stop working on this job: a newer attempt owns it and this %s was not applied.",
						 action)));

	if (strcmp(status, "running") == 0 && expired)
		ereport(ERROR,
				(errcode(ERRCODE_JS_STALE_CLAIM),
				 errmsg("lease of job %lld has expired", (long long) token->job_id),
				 errdetail("Token generation %d is current, but the lease ran out before this %s.",
						   generation, action),
				 errhint("succeed and fail with this token are still accepted.")));

	if (strcmp(status, "unknown") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_STALE_CLAIM),
				 errmsg("lease of job %lld has expired and its outcome is unknown",
						(long long) token->job_id),
				 errdetail("Token generation %d is current; the job is unknown.", generation),
				 errhint("succeed and fail with this token are still accepted.")));

	ereport(ERROR,
			(errcode(ERRCODE_JS_STALE_CLAIM),
			 errmsg("job %lld is already %s", (long long) token->job_id, status),
			 errdetail("Token generation %d is current, but %s needs a running job.",
					   generation, action)));
}
