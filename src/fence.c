/*-------------------------------------------------------------------------
 *
 * fence.c
 *	  Why a token was refused.
 *
 * Every statement that acts on a claim carries the token's generation and
 * the statuses it accepts in its own WHERE clause, so a stale worker never
 * overwrites a newer attempt.  When such a statement touches no row, this
 * file looks at the job once more to say why: it does not exist (JS008),
 * or it moved on (JS001), and then what moved it, so that the worker knows
 * what to do with its work:
 *	- a newer generation: the job's history (job_event, read only here)
 *	  tells a newer worker's claim from an operator's redrive or reconcile;
 *	  without history (track_events off) only the generations are given;
 *	- the token's generation: the lease expired (running or unknown), the
 *	  waiting window closed (waiting, or unknown after a callback or
 *	  heartbeat timeout), the
 *	  worker itself reported the outcome unknown, the job succeeded, failed
 *	  or was reconciled, was cancelled, or waits for a retry; for
 *	  heartbeat, also a lease that still runs but has reached started_at +
 *	  max_lease (max_lease lowered since the claim), which cannot be
 *	  extended without an expiry in the past.
 * A token whose claim this server never recorded (its generation is ahead
 * of the job's, or is the job's with another claim nonce: the claim was
 * lost in a failover to a standby that had not received it, or the token
 * comes from another server) is told so (JS001), whatever the job's
 * status: no call with it will ever be accepted here.
 * A job that is still the token's running claim means a BEFORE UPDATE
 * trigger skipped the change (09000).  Every JS001 has an errdetail with
 * the generations and an errhint; none of this is read on the success path.
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
#include "utils/timestamp.h"

#include "job_state.h"
#include "rowwrite.h"
#include "token.h"

/* [the schema has claim_nonce: JsFencePlan] */
#define JS_SQL_REFUSED_JOB(nonce) \
	"SELECT status::pg_catalog.text, generation," \
	"  lease_expires_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp()," \
	"  reason," \
	"  (SELECT j.started_at OPERATOR(pg_catalog.+) q.max_lease" \
	"    FROM job_state.queue q WHERE q.name OPERATOR(pg_catalog.=) j.queue)," \
	"  pg_catalog.clock_timestamp(), " nonce \
	"  FROM job_state.job j" \
	" WHERE queue OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2"

static JsPlan job_plans[2] = {
	{JS_SQL_REFUSED_JOB("0"), 2, {TEXTOID, INT8OID}},
	{JS_SQL_REFUSED_JOB("j.claim_nonce"), 2, {TEXTOID, INT8OID}},
};

/*
 * The first change after the token's claim that made a newer generation:
 * a claim (accepted -> running), a redrive (failed, unknown or cancelled
 * -> accepted) or a reconcile to accepted (unknown -> accepted, reason
 * reconciled).  Read only on the error path; job_event_job finds the
 * job's rows.
 */
static JsPlan newer_plan = {
	"SELECT from_status::pg_catalog.text, to_status::pg_catalog.text, generation,"
	"  detail OPERATOR(pg_catalog.->>) 'reason',"
	"  detail OPERATOR(pg_catalog.->>) 'worker'"
	"  FROM job_state.job_event"
	" WHERE queue OPERATOR(pg_catalog.=) $1 AND job_id OPERATOR(pg_catalog.=) $2"
	"  AND generation OPERATOR(pg_catalog.>) $3"
	" ORDER BY seq LIMIT 1",
	3, {TEXTOID, INT8OID, INT4OID}
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

/*
 * The job has a generation other than the token's: say what made it, from
 * the job's history (JS001).  Without history (job_state.track_events off,
 * or a job restored without it) only the generations are known.
 */
pg_noreturn static void
JsRefuseNewerGeneration(const char *queue, const JsClaimToken *token,
						const char *action, const char *status, int32 generation)
{
	Datum		values[3];
	char	   *from;
	char	   *to;
	int32		newer;
	char	   *reason;
	char	   *worker;

	values[0] = CStringGetTextDatum(queue);
	values[1] = Int64GetDatum(token->job_id);
	values[2] = Int32GetDatum(token->generation);
	if (JsExecute(&newer_plan, values, NULL, false, 1) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_STALE_CLAIM),
				 errmsg("job %lld has moved on since this token's claim",
						(long long) token->job_id),
				 errdetail("Token generation is %d; current generation is %d (job is %s); job_state.job_event holds no record of the change.",
						   token->generation, generation, status),
				 errhint("Drop the work and write nothing: this %s was not applied.",
						 action)));

	from = JsGetText(0, 1);
	to = JsGetText(0, 2);
	newer = JsGetInt32(0, 3, NULL);
	reason = JsGetText(0, 4);
	worker = JsGetText(0, 5);

	if (from != NULL && strcmp(from, "accepted") == 0 && strcmp(to, "running") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_STALE_CLAIM),
				 errmsg("job %lld was claimed again by a newer worker",
						(long long) token->job_id),
				 worker != NULL ?
				 errdetail("Token generation is %d; worker \"%s\" claimed generation %d; current generation is %d (job is %s).",
						   token->generation, worker, newer, generation, status) :
				 errdetail("Token generation is %d; generation %d was claimed; current generation is %d (job is %s).",
						   token->generation, newer, generation, status),
				 errhint("Stop working on this job and write nothing: a newer attempt owns it and this %s was not applied.",
						 action)));

	if (from != NULL && strcmp(from, "unknown") == 0 && strcmp(to, "accepted") == 0 &&
		reason != NULL && strcmp(reason, "reconciled") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_STALE_CLAIM),
				 errmsg("job %lld was reconciled by an operator to run again",
						(long long) token->job_id),
				 errdetail("Token generation is %d; the reconcile of the unknown job made generation %d; current generation is %d (job is %s).",
						   token->generation, newer, generation, status),
				 errhint("Drop the work and write nothing: this %s was not applied and the job runs again under a new claim.",
						 action)));

	if (from != NULL && strcmp(to, "accepted") == 0 &&
		(strcmp(from, "failed") == 0 || strcmp(from, "unknown") == 0 ||
		 strcmp(from, "cancelled") == 0))
		ereport(ERROR,
				(errcode(ERRCODE_JS_STALE_CLAIM),
				 errmsg("job %lld was redriven by an operator after this token's claim",
						(long long) token->job_id),
				 errdetail("Token generation is %d; the redrive of the %s job made generation %d; current generation is %d (job is %s).",
						   token->generation, from, newer, generation, status),
				 errhint("Drop the work and write nothing: this %s was not applied and the job runs again under a new claim.",
						 action)));

	/* another change that made a generation (raw SQL by an operator) */
	ereport(ERROR,
			(errcode(ERRCODE_JS_STALE_CLAIM),
			 errmsg("job %lld has moved on since this token's claim",
					(long long) token->job_id),
			 errdetail("Token generation is %d; a change from %s to %s made generation %d; current generation is %d (job is %s).",
					   token->generation, from != NULL ? from : "nothing", to,
					   newer, generation, status),
			 errhint("Drop the work and write nothing: this %s was not applied.",
					 action)));
}

/*
 * The token's generation is still the job's: say what ended its attempt
 * (an expired lease, an unknown outcome, a reconcile, a success, a
 * failure, a cancel, a scheduled retry).
 */
pg_noreturn static void
JsRefuseCurrentGeneration(const JsClaimToken *token, const char *action,
						  const char *status, int32 generation, bool expired,
						  const char *reason)
{
	if (strcmp(status, "running") == 0 && expired)
		ereport(ERROR,
				(errcode(ERRCODE_JS_STALE_CLAIM),
				 errmsg("lease of job %lld has expired", (long long) token->job_id),
				 errdetail("Token generation %d is current, but the lease ran out before this %s.",
						   generation, action),
				 errhint("succeed and fail with this token are still accepted.")));

	if (strcmp(status, "waiting") == 0 && expired)
		ereport(ERROR,
				(errcode(ERRCODE_JS_STALE_CLAIM),
				 errmsg("the waiting window of job %lld has closed", (long long) token->job_id),
				 errdetail("Token generation %d is current, but the callback timeout or a heartbeat's due time passed before this %s.",
						   generation, action),
				 errhint("succeed and fail with this token are still accepted.")));

	if (strcmp(status, "unknown") == 0 && reason != NULL &&
		(strcmp(reason, "callback_timeout") == 0 ||
		 strcmp(reason, "heartbeat_timeout") == 0))
		ereport(ERROR,
				(errcode(ERRCODE_JS_STALE_CLAIM),
				 errmsg("job %lld is unknown: no callback came in time (%s)",
						(long long) token->job_id, reason),
				 errdetail("Token generation %d is current; the job stopped waiting before this %s.",
						   generation, action),
				 errhint("succeed and fail with this token are still accepted.")));

	if (strcmp(status, "unknown") == 0 && reason != NULL &&
		strcmp(reason, "outcome_unknown") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_STALE_CLAIM),
				 errmsg("job %lld is unknown: its worker reported the outcome unknown",
						(long long) token->job_id),
				 errdetail("Token generation %d is current; fail with class unknown ended the attempt before this %s.",
						   generation, action),
				 errhint("succeed and fail with this token are still accepted.")));

	if (strcmp(status, "unknown") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_STALE_CLAIM),
				 errmsg("lease of job %lld has expired and its outcome is unknown",
						(long long) token->job_id),
				 errdetail("Token generation %d is current; the job is unknown.", generation),
				 errhint("succeed and fail with this token are still accepted.")));

	if (reason != NULL && strcmp(reason, "reconciled") == 0 &&
		(strcmp(status, "succeeded") == 0 || strcmp(status, "failed") == 0))
		ereport(ERROR,
				(errcode(ERRCODE_JS_STALE_CLAIM),
				 errmsg("job %lld was reconciled as %s by an operator",
						(long long) token->job_id, status),
				 errdetail("Token generation %d is current; the operator resolved the job before this %s.",
						   generation, action),
				 errhint("Drop the work and write nothing: the job's outcome is recorded.")));

	if (strcmp(status, "succeeded") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_STALE_CLAIM),
				 errmsg("job %lld has already succeeded", (long long) token->job_id),
				 errdetail("Token generation %d is current; the job succeeded before this %s.",
						   generation, action),
				 errhint("Drop the work and write nothing: the job's result is recorded.")));

	if (strcmp(status, "failed") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_STALE_CLAIM),
				 errmsg("job %lld has already failed", (long long) token->job_id),
				 errdetail("Token generation %d is current; the job failed (reason \"%s\") before this %s.",
						   generation, reason != NULL ? reason : "none", action),
				 errhint("Drop the work and write nothing; an operator can run the job again with job_state.redrive(%lld).",
						 (long long) token->job_id)));

	if (strcmp(status, "cancelled") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_STALE_CLAIM),
				 errmsg("job %lld was cancelled", (long long) token->job_id),
				 errdetail("Token generation %d is current; the job was cancelled (reason \"%s\") before this %s.",
						   generation, reason != NULL ? reason : "none", action),
				 errhint("Stop working on the job and write nothing.")));

	if (strcmp(status, "accepted") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_STALE_CLAIM),
				 errmsg("job %lld is waiting for its next attempt", (long long) token->job_id),
				 errdetail("Token generation %d is current, but its attempt ended (%s) and a retry is scheduled; this %s needs a running job.",
						   generation,
						   reason != NULL ? reason : "failed with a transient or throttled error",
						   action),
				 errhint("Drop the work and write nothing: the next claim runs the job again with a new token.")));

	ereport(ERROR,
			(errcode(ERRCODE_JS_STALE_CLAIM),
			 errmsg("job %lld is already %s", (long long) token->job_id, status),
			 errdetail("Token generation %d is current, but %s needs a running job.",
					   generation, action)));
}

/*
 * The token's claim is not one this server recorded: its generation is
 * ahead of the job's, or is the job's with another claim nonce (JS001).
 */
pg_noreturn static void
JsRefuseUnknownClaim(const JsClaimToken *token, const char *action,
					 const char *status, int32 generation)
{
	ereport(ERROR,
			(errcode(ERRCODE_JS_STALE_CLAIM),
			 errmsg("the claim of job %lld that issued this token is unknown to this server",
					(long long) token->job_id),
			 token->generation == generation ?
			 errdetail("Token generation %d is the job's current generation, but it was made by another claim (job is %s); the claim that issued this token was lost in a failover to a server that had not received it, or the token comes from another server.",
					   token->generation, status) :
			 errdetail("Token generation is %d; the job's generation here is %d (job is %s); the claim that issued this token was lost in a failover to a server that had not received it, or the token comes from another server.",
					   token->generation, generation, status),
			 errhint("Stop working on the job and write nothing; do not retry: this %s was not applied and no call with this token will be.  The job runs again under claims of this server.",
					 action)));
}

void
JsRefuseToken(const char *queue, const JsClaimToken *token, const char *action)
{
	Datum		values[2];
	char	   *status;
	int32		generation;
	bool		expired;
	char	   *reason;
	bool		known;

	/* first: verifying may run statements (the keys) */
	int32		nonce = JsTokenNonce(token);

	values[0] = CStringGetTextDatum(queue);
	values[1] = Int64GetDatum(token->job_id);
	if (JsExecute(JsFencePlan(job_plans), values, NULL, false, 1) == 0)
	{
		if (JsTimelineLostJob(token->job_id) != 0)
			JsRefuseMissingJob(token->job_id, NULL);
		ereport(ERROR,
				(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
				 errmsg("job %lld does not exist", (long long) token->job_id),
				 errdetail("Queue \"%s\" has no job %lld: it was purged, or its submit was lost in a failover to a server that had not received it.",
						   queue, (long long) token->job_id),
				 errhint("Stop working on the job and write nothing; do not retry: the job will not come back, and no call with this token will be accepted.")));
	}

	status = JsGetText(0, 1);
	generation = JsGetInt32(0, 2, NULL);
	expired = JsGetBool(0, 3);
	reason = JsGetText(0, 4);

	/*
	 * The claim behind the token, if this server recorded it: the job's
	 * generation is at least the token's, and if it is the token's, so is
	 * the nonce.  Of an older generation only the newer ones are known.
	 */
	known = generation > token->generation ||
		(generation == token->generation &&
		 JsGetInt32(0, 7, NULL) == nonce);

	/*
	 * heartbeat also needs started_at + max_lease ahead of now: an expiry
	 * capped there would already have passed.  The lease the job holds
	 * still runs (max_lease was lowered since the claim, or the clock
	 * moved), but it cannot be extended.
	 */
	if (strcmp(action, "heartbeat") == 0 && generation == token->generation &&
		known && !expired && strcmp(status, "running") == 0)
	{
		bool		cap_null;
		bool		now_null;
		TimestampTz cap = DatumGetTimestampTz(JsGetDatumCopy(0, 5, &cap_null));
		TimestampTz now = DatumGetTimestampTz(JsGetDatumCopy(0, 6, &now_null));

		if (!cap_null && !now_null && cap <= now)
		{
			JsCountStaleRefusal(token->queue_id);
			ereport(ERROR,
					(errcode(ERRCODE_JS_STALE_CLAIM),
					 errmsg("lease of job %lld cannot be extended: it has reached its max_lease",
							(long long) token->job_id),
					 errdetail("Token generation %d is current; started_at + max_lease is %s, which has passed, so any expiry heartbeat could give would be in the past.",
							   generation, timestamptz_to_str(cap)),
					 errhint("Finish the work now: succeed and fail with this token are still accepted, also after the lease expires.")));
		}
	}

	/*
	 * The job, read again, is what the call acts on: its statement met the
	 * row and a BEFORE UPDATE trigger skipped the change.  Not a stale token.
	 */
	if (generation == token->generation && known && !expired &&
		(strcmp(status, "running") == 0 || strcmp(status, "waiting") == 0))
		JsRefuseSkippedUpdate();

	JsCountStaleRefusal(token->queue_id);

	if (!known)
		JsRefuseUnknownClaim(token, action, status, generation);

	if (generation != token->generation)
		JsRefuseNewerGeneration(queue, token, action, status, generation);

	JsRefuseCurrentGeneration(token, action, status, generation, expired, reason);
}
