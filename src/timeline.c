/*-------------------------------------------------------------------------
 *
 * timeline.c
 *	  No id means two things: after a promotion (or a point-in-time
 *	  recovery), the job and history ids jump ahead of any the old
 *	  primary may have handed out.
 *
 * A sequence is WAL-logged 32 values ahead, and an asynchronous standby
 * may lag further: when it is promoted, job_id_seq and job_event_seq
 * resume at their last replicated value, and ids the old primary
 * acknowledged (to submits lost in the failover) would be handed out
 * again, so that a client holding a lost job's id would read, wait for or
 * cancel someone else's job.  Every new WAL timeline (a promotion starts
 * one) is therefore recorded in job_state.timeline the first time a job
 * is written on it: the record holds where job_id_seq stood, and both
 * sequences are advanced by JS_TIMELINE_ID_GAP first, so the ids of the
 * new timeline start above any the old one could have handed out unless
 * it ran more than 2^32 ids ahead of its standby.  An id in a recorded gap
 * (after, up to resumed_at) was never handed out on this timeline: JS008
 * says the job may have been lost in a failover (JsTimelineLostJob).
 *
 * The check runs before the first id a backend draws on a timeline: at
 * the start of the job_state_fsm trigger (every write of a job, raw SQL
 * included; history ids are drawn there and after), and in submit before
 * the job's id is drawn; then the backend remembers the timeline and the
 * check costs a comparison.  Two backends arriving together may both
 * advance (one gap more; ids are plentiful); a transaction that rolls
 * back keeps its advance (sequences are not transactional) but not the
 * record, so the next writer advances again.  Queue numbers are not
 * advanced: queues are named by name, and a token whose queue number
 * names another queue finds no job of its id there.
 *
 * Locks: the record's insert; the sequences' own.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "job_state.h"
#include "tables.h"

/* how far a new timeline's ids start above the last replicated one */
#define JS_TIMELINE_ID_GAP	INT64CONST(4294967296)	/* 2^32 */

/* the timeline this backend last found recorded (0: none yet) */
static TimeLineID js_timeline_checked = 0;

static JsPlan timeline_seen_plan = {
	"SELECT 1 FROM job_state.timeline WHERE timeline OPERATOR(pg_catalog.=) $1",
	1, {INT8OID}
};

/*
 * Advance both sequences by $2 from where they stand and record the
 * timeline $1 with the job ids it skipped.
 */
static JsPlan timeline_advance_plan = {
	"WITH j AS (SELECT last_value AS v FROM job_state.job_id_seq),"
	" e AS (SELECT last_value AS v FROM job_state.job_event_seq),"
	" s AS (SELECT pg_catalog.setval('job_state.job_id_seq'::pg_catalog.regclass,"
	"        j.v OPERATOR(pg_catalog.+) $2) AS job_id,"
	"      pg_catalog.setval('job_state.job_event_seq'::pg_catalog.regclass,"
	"        e.v OPERATOR(pg_catalog.+) $2) AS event_seq"
	"      FROM j, e)"
	" INSERT INTO job_state.timeline (timeline, arrived_at, job_ids_after, job_ids_resume_at)"
	" SELECT $1, pg_catalog.clock_timestamp(), j.v, s.job_id FROM j, s"
	" ON CONFLICT (timeline) DO NOTHING",
	2, {INT8OID, INT8OID}
};

static JsPlan timeline_lost_plan = {
	"SELECT timeline FROM job_state.timeline"
	" WHERE $1 OPERATOR(pg_catalog.>) job_ids_after"
	"   AND $1 OPERATOR(pg_catalog.<=) job_ids_resume_at"
	" ORDER BY timeline DESC LIMIT 1",
	1, {INT8OID}
};

static TimeLineID
JsCurrentTimeline(void)
{
#if PG_VERSION_NUM >= 150000
	return GetWALInsertionTimeLine();
#else
	return ThisTimeLineID;
#endif
}

/*
 * Before a job's id or history seq is drawn: on a timeline not yet
 * recorded, advance the sequences and record it.  The statements run as
 * the owner of job_state (a trigger may run under an operator's role).
 */
void
JsTimelineCheck(void)
{
	TimeLineID	tli;
	Oid			saved_user;
	int			saved_context;
	Datum		values[2];

	if (RecoveryInProgress() || js_restore)
		return;
	tli = JsCurrentTimeline();
	if (tli == js_timeline_checked)
		return;
	/* 0.1.0's schema has no record: nothing to compare with */
	if (!OidIsValid(JsOwnRelidIfAny("timeline")))
		return;

	GetUserIdAndSecContext(&saved_user, &saved_context);
	SetUserIdAndSecContext(JsOwnRelOwner("job"),
						   saved_context | SECURITY_LOCAL_USERID_CHANGE);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "job_state: SPI_connect failed");
	values[0] = Int64GetDatum((int64) tli);
	values[1] = Int64GetDatum(JS_TIMELINE_ID_GAP);
	if (JsExecute(&timeline_seen_plan, values, NULL, false, 1) == 0)
	{
		JsExecute(&timeline_advance_plan, values, NULL, false, 0);
		ereport(LOG,
				(errmsg("job_state: first job write on WAL timeline %u: job and history ids advanced by %lld",
						tli, (long long) JS_TIMELINE_ID_GAP),
				 errdetail("Ids the previous primary may have handed out after its standby's last replicated value are never handed out again.")));
	}
	SPI_finish();
	SetUserIdAndSecContext(saved_user, saved_context);
	js_timeline_checked = tli;
}

/*
 * A job id no job of this server holds: was it skipped by the advance of
 * a timeline (then it may have been handed out by a primary lost in a
 * failover)?  Returns the timeline, or 0.  Needs SPI; error paths only.
 */
uint32
JsTimelineLostJob(int64 job_id)
{
	Datum		value = Int64GetDatum(job_id);
	bool		isnull;
	int64		tli;

	if (!OidIsValid(JsOwnRelidIfAny("timeline")))
		return 0;
	if (JsExecute(&timeline_lost_plan, &value, NULL, true, 1) == 0)
		return 0;
	tli = JsGetInt64(0, 1, &isnull);
	return isnull ? 0 : (uint32) tli;
}

/*
 * JS008 for a job id no job of this server holds, saying so when the id
 * lies in a gap a new timeline skipped (JsTimelineLostJob).  Needs SPI.
 */
pg_noreturn void
JsRefuseMissingJob(int64 job_id, const char *hint)
{
	uint32		tli = JsTimelineLostJob(job_id);

	if (tli != 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
				 errmsg("job %lld does not exist", (long long) job_id),
				 errdetail("No job %lld was ever submitted to this server: its id lies in the ids skipped when this server began WAL timeline %u (a promotion), so it was handed out by a primary lost in a failover, with work this server never received.",
						   (long long) job_id, tli),
				 errhint("Do not retry: the job will not appear.  Submit the work again (with the same idempotency key) if it must still run.")));
	ereport(ERROR,
			(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
			 errmsg("job %lld does not exist", (long long) job_id),
			 hint != NULL ? errhint("%s", hint) : 0));
}

PG_FUNCTION_INFO_V1(js_wal_timeline);

/* wal_timeline(): the WAL timeline this server writes on */
Datum
js_wal_timeline(PG_FUNCTION_ARGS)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a server in recovery writes on no WAL timeline yet"),
				 errhint("Call job_state.wal_timeline() on the primary.")));
	PG_RETURN_INT64((int64) JsCurrentTimeline());
}
