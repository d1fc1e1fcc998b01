/*-------------------------------------------------------------------------
 *
 * retention.c
 *	  Deleting finished jobs with every row that belongs to them: the one
 *	  deletion path, used by purge() (purge.c) and by the retention step of
 *	  sweep() and of the sweeper (sweeper.c).
 *
 * A job leaves with its history (job_event), its spend and its operation
 * records, in the statement that deletes it (JS_DELETE_JOB_ROWS, the tail
 * both statements share).  The job trigger refuses every other DELETE of a
 * job, and the append-only triggers every other DELETE of its rows; they
 * let these statements through while js_purging is set, and only these.
 *
 * Retention: a queue whose retention option is set keeps a succeeded,
 * failed or cancelled job for that long after finished_at.  Jobs in any
 * other status are never selected (an unknown job still needs reconcile
 * and may still get a late completion).  One call deletes at most
 * JS_RETENTION_BATCH jobs over all queues, oldest first per queue, and
 * skips jobs another transaction holds (SKIP LOCKED), so it never waits
 * on a worker or an operator; js_retention_more tells the sweeper that
 * the batch was full and another should follow soon.
 *
 * The batch size is a constant of the statement, not a parameter, so that
 * the planner knows the statement touches at most that many jobs, and the
 * statement is planned (and re-planned, when the plan cache must) with
 * hash and merge joins off: a batch then reaches the rows of its jobs in
 * job_event, spend and operation through their (queue, job_id) indexes,
 * whose cost stays the same however large those tables grow, where a hash
 * join would read a whole table for a thousand jobs.
 *
 * Locks: row locks on the jobs it deletes (FOR UPDATE SKIP LOCKED), then
 * the rows of their children, in that order.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "job_state.h"
#include "tables.h"
#include "rules.h"

bool		js_retention_more = false;

static JsPlan retention_plan = {
	"WITH d AS ("
	"  DELETE FROM job_state.job j USING ("
	"   SELECT k.queue, k.id FROM job_state.queue q"
	"   CROSS JOIN LATERAL ("
	"    SELECT v.queue, v.id FROM job_state.job v"
	"     WHERE v.queue OPERATOR(pg_catalog.=) q.name"
	"      AND v.status OPERATOR(pg_catalog.=) ANY ('{succeeded,failed,cancelled}'::job_state.status[])"
	"      AND v.finished_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) q.retention)"
	"     ORDER BY v.finished_at LIMIT " CppAsString2(JS_RETENTION_BATCH)
	"     FOR UPDATE OF v SKIP LOCKED) k"
	"   WHERE q.retention IS NOT NULL"
	"   LIMIT " CppAsString2(JS_RETENTION_BATCH) ") k"
	"  WHERE j.queue OPERATOR(pg_catalog.=) k.queue AND j.id OPERATOR(pg_catalog.=) k.id"
	"  RETURNING j.queue, j.id),"
	JS_DELETE_JOB_ROWS,
	0, {0}
};

/*
 * Run a statement that deletes jobs (its CTE d) and their rows
 * (JS_DELETE_JOB_ROWS), with the triggers letting it through; returns
 * how many jobs it deleted.  Needs SPI.
 */
int64
JsDeleteJobs(JsPlan *plan, Datum *args, const char *nulls)
{
	int64		n = 0;

	js_purging = true;
	PG_TRY();
	{
		JsExecute(plan, args, nulls, false, 0);
		n = JsGetInt64(0, 1, NULL);
	}
	PG_FINALLY();
	{
		js_purging = false;
	}
	PG_END_TRY();
	return n;
}

/*
 * One batch of retention over every queue that has it; returns how many
 * jobs it deleted.  Before ALTER EXTENSION UPDATE to 0.2.0 the queue
 * table has no retention column and there is nothing to do.  Needs SPI.
 */
int
JsApplyRetention(void)
{
	int64		n;
	int			nestlevel;

	js_retention_more = false;
	if (get_attnum(JsOwnRelid("queue"), "retention") == InvalidAttrNumber)
		return 0;
	nestlevel = NewGUCNestLevel();
	(void) set_config_option("enable_hashjoin", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("enable_mergejoin", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	n = JsDeleteJobs(&retention_plan, NULL, NULL);
	AtEOXact_GUC(true, nestlevel);
	js_retention_more = (n >= JS_RETENTION_BATCH);
	return (int) n;
}
