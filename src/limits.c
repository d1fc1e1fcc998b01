/*-------------------------------------------------------------------------
 *
 * limits.c
 *	  Concurrency slots and start-rate limits, shared by all claimers.
 *
 * A limit of N running jobs is N rows of job_state.slot: (kind, scope, key,
 * n) with kind 'queue' (queue option concurrency_limit), 'resource'
 * (create_resource's concurrency_limit, shared by every queue whose jobs
 * name it) or 'key' (queue option per_key_limit, one set per concurrency
 * key, created with the first job of the key).  A job may start only holding
 * one free slot of each limit that applies to it; claim takes slots as
 * FOR NO KEY UPDATE SKIP LOCKED does (slot.c), so claimers never wait for
 * one another and never serialise on a single hot row: a slot another
 * claimer is taking or a finishing job is freeing is simply skipped, and a
 * slot is taken only as its newest, free version, so never twice.  The
 * number of running jobs of a scope therefore never exceeds its N.
 *
 * A job that starts records the numbers of its slots in the job row
 * (queue_slot, resource_slot, key_slot).  They are freed by the job trigger
 * when it leaves running (succeed, fail, retry, cancel, lease expiry, raw
 * SQL alike): the BEFORE trigger clears the numbers and the AFTER trigger
 * (job_trigger.c) frees those rows by primary key (slot.c).
 *
 * max_starts_per_second is a token bucket split into shards (bucket.c):
 * a start takes a token from any shard that has one, SKIP LOCKED.
 *
 * This file keeps the slot rows in step with the limits (a limit raised
 * or lowered, a new key, a resource named by a job, running jobs adopted
 * by a new limit) and takes the slots of a start by raw SQL
 * (JsRawStartSlots, for the job trigger).  Claim's own walk is
 * claim_limited.c's.
 *
 * Locks: the slot rows it creates, adopts or takes, in the order queue,
 * resource, key (job_state.h); the adopting statements sort the jobs they
 * lock; the queue row the first job naming a resource marks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "commands/trigger.h"
#include "funcapi.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"

#include "job_state.h"
#include "tables.h"
#include "slots.h"

/* ensure rows 1..n of a slot scope exist */
static JsPlan ensure_plan = {
	"INSERT INTO job_state.slot (kind, scope, key, n)"
	" SELECT $1, $2, $3, g FROM pg_catalog.generate_series(1, $4) g"
	" ON CONFLICT (kind, scope, key, n) DO NOTHING",
	4, {TEXTOID, TEXTOID, TEXTOID, INT4OID}
};

void
JsEnsureSlots(const char *kind, const char *scope, const char *key, int32 limit)
{
	Datum		values[4];

	values[0] = CStringGetTextDatum(kind);
	values[1] = CStringGetTextDatum(scope);
	values[2] = CStringGetTextDatum(key ? key : "");
	values[3] = Int32GetDatum(limit);
	JsExecute(&ensure_plan, values, NULL, false, 0);
}

/*
 * rows 1..$2 of every key set of queue $1: the keys that have slots, and
 * those of its waiting and running jobs (the limit may be new)
 */
static JsPlan ensure_keys_plan = {
	"INSERT INTO job_state.slot (kind, scope, key, n)"
	" SELECT 'key', $1, k.key, g"
	"  FROM (SELECT s.key FROM job_state.slot s"
	"         WHERE s.kind OPERATOR(pg_catalog.=) 'key'"
	"          AND s.scope OPERATOR(pg_catalog.=) $1"
	"        UNION"
	"        SELECT j.concurrency_key FROM job_state.job j"
	"         WHERE j.queue OPERATOR(pg_catalog.=) $1"
	"          AND j.status OPERATOR(pg_catalog.<>) ALL"
	"           ('{succeeded,failed,unknown,cancelled}'::job_state.status[])"
	"          AND j.concurrency_key IS NOT NULL) k,"
	"   pg_catalog.generate_series(1, $2) g"
	" ON CONFLICT (kind, scope, key, n) DO NOTHING",
	2, {TEXTOID, INT4OID}
};

/*
 * Running jobs of queue $1 that hold no slot of kind $3 (they started
 * before the limit existed) take free slots numbered up to $2, the n-th
 * such job of a key the n-th free slot of that key (one key, '', for kind
 * 'queue'), and record its number, so that leaving running frees it.  The
 * jobs are locked first, in the global lock order (job_state.h: by queue,
 * then id, as succeed_many does), so one that leaves running meanwhile is left out
 * rather than holding a slot it will never free; a slot a claimer takes
 * meanwhile is left to it.
 */
static JsPlan adopt_plan = {
	"WITH running AS ("
	"  SELECT j.id,"
	"   CASE WHEN $3 OPERATOR(pg_catalog.=) 'queue' THEN '' ELSE j.concurrency_key END AS key"
	"   FROM job_state.job j"
	"   WHERE j.queue OPERATOR(pg_catalog.=) $1"
	"    AND j.status OPERATOR(pg_catalog.=) 'running'::job_state.status"
	"    AND CASE WHEN $3 OPERATOR(pg_catalog.=) 'queue' THEN j.queue_slot IS NULL"
	"     ELSE j.key_slot IS NULL AND j.concurrency_key IS NOT NULL END"
	"   ORDER BY j.id FOR NO KEY UPDATE OF j),"
	" jobs AS (SELECT id, key,"
	"   pg_catalog.row_number() OVER (PARTITION BY key ORDER BY id) AS r FROM running),"
	" free AS (SELECT key, n,"
	"   pg_catalog.row_number() OVER (PARTITION BY key ORDER BY n) AS r"
	"   FROM job_state.slot"
	"   WHERE kind OPERATOR(pg_catalog.=) $3 AND scope OPERATOR(pg_catalog.=) $1"
	"    AND n OPERATOR(pg_catalog.>=) 1 AND n OPERATOR(pg_catalog.<=) $2 AND job_id IS NULL),"
	" took AS ("
	"  UPDATE job_state.slot s SET job_id = jobs.id, queue = $1"
	"   FROM jobs JOIN free ON free.key OPERATOR(pg_catalog.=) jobs.key"
	"    AND free.r OPERATOR(pg_catalog.=) jobs.r"
	"   WHERE s.kind OPERATOR(pg_catalog.=) $3 AND s.scope OPERATOR(pg_catalog.=) $1"
	"    AND s.key OPERATOR(pg_catalog.=) free.key AND s.n OPERATOR(pg_catalog.=) free.n"
	"    AND s.job_id IS NULL"
	"  RETURNING s.job_id, s.n)"
	" UPDATE job_state.job j"
	"  SET queue_slot = CASE WHEN $3 OPERATOR(pg_catalog.=) 'queue' THEN took.n ELSE j.queue_slot END,"
	"   key_slot = CASE WHEN $3 OPERATOR(pg_catalog.=) 'key' THEN took.n ELSE j.key_slot END"
	"  FROM took"
	"  WHERE j.queue OPERATOR(pg_catalog.=) $1 AND j.id OPERATOR(pg_catalog.=) took.job_id",
	3, {TEXTOID, INT4OID, TEXTOID}
};

static JsPlan resource_exists_plan = {
	"SELECT 1 FROM job_state.resource WHERE name OPERATOR(pg_catalog.=) $1",
	1, {TEXTOID}
};

/* claim takes the slot path in queues with jobs that name a resource */
static JsPlan uses_resources_plan = {
	"UPDATE job_state.queue SET uses_resources = true"
	" WHERE name OPERATOR(pg_catalog.=) $1 AND NOT uses_resources",
	1, {TEXTOID}
};

static JsPlan per_key_limit_plan = {
	"SELECT per_key_limit FROM job_state.queue"
	" WHERE name OPERATOR(pg_catalog.=) $1 AND per_key_limit IS NOT NULL",
	1, {TEXTOID}
};

/*
 * A job of queue was written naming a resource or a concurrency key it did
 * not name before (the job's AFTER trigger, job_trigger.c: submit and raw
 * SQL alike).  The resource must exist, claim must take the slot path in the
 * queue, and a key of a queue with a per-key limit needs its slots; a job
 * that named a resource without being counted, or a key without slots,
 * would start past the limit or never.
 *
 * The resource is looked for under the latest snapshot, not the
 * statement's: a DELETE of it that committed while this write waited for
 * the job table is seen, and one that comes later waits for this
 * transaction and then finds the job (resource.c).  Needs SPI.
 */
void
JsJobNamesLimits(Datum queue, Datum resource, bool has_resource,
				 Datum key, bool has_key)
{
	if (has_resource)
	{
		if (JsExecuteLatest(&resource_exists_plan, &resource, NULL, 1) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
					 errmsg("resource \"%s\" does not exist",
							TextDatumGetCString(resource)),
					 errhint("Create it with job_state.create_resource().")));
		JsExecute(&uses_resources_plan, &queue, NULL, false, 0);
	}
	/* the latest snapshot: a limit set while this write waited (limits.c) */
	if (has_key &&
		JsExecuteLatest(&per_key_limit_plan, &queue, NULL, 1) == 1)
		JsEnsureSlots("key", TextDatumGetCString(queue),
					  TextDatumGetCString(key), JsGetInt32(0, 1, NULL));
}

/*
 * A queue's concurrency_limit (per_key = false) or per_key_limit was set
 * or raised to limit: the slots it needs, and slots for the jobs already
 * running, so that the limit counts them.
 */
void
JsQueueLimitSlots(const char *queue, bool per_key, int32 limit)
{
	Datum		values[3];

	values[0] = CStringGetTextDatum(queue);
	values[1] = Int32GetDatum(limit);
	values[2] = CStringGetTextDatum(per_key ? "key" : "queue");
	/*
	 * The keys of every job: the SHARE lock on the job table waits for the
	 * transactions writing jobs (a submit of a new key that read no
	 * per-key limit yet) and holds new ones off until this one commits
	 * (they then read the limit under the latest snapshot,
	 * JsJobNamesLimits), and the latest snapshot sees the jobs of the ones
	 * waited for.  Without it a key first named while the limit was set
	 * got no slots from either side, and its jobs were never claimed.
	 */
	if (per_key)
	{
		LockRelationOid(JsOwnRelid("job"), ShareLock);
		JsExecuteWriteLatest(&ensure_keys_plan, values, NULL);
	}
	else
		JsEnsureSlots("queue", queue, NULL, limit);
	JsExecute(&adopt_plan, values, NULL, false, 0);
}

/*
 * Running jobs naming resource $1 that hold no slot of it (they started
 * before the limit existed or was raised) take free slots numbered up to
 * $2 and record their numbers, as adopt_plan does for a queue's limits.
 */
static JsPlan adopt_resource_plan = {
	"WITH running AS ("
	"  SELECT j.queue, j.id FROM job_state.job j"
	"   WHERE j.resource OPERATOR(pg_catalog.=) $1"
	"    AND j.status OPERATOR(pg_catalog.=) 'running'::job_state.status"
	"    AND j.resource_slot IS NULL"
	"   ORDER BY j.queue, j.id FOR NO KEY UPDATE OF j),"
	" jobs AS (SELECT queue, id, pg_catalog.row_number() OVER (ORDER BY id) AS r FROM running),"
	" free AS (SELECT n, pg_catalog.row_number() OVER (ORDER BY n) AS r"
	"   FROM job_state.slot"
	"   WHERE kind OPERATOR(pg_catalog.=) 'resource' AND scope OPERATOR(pg_catalog.=) $1"
	"    AND key OPERATOR(pg_catalog.=) '' AND n OPERATOR(pg_catalog.>=) 1"
	"    AND n OPERATOR(pg_catalog.<=) $2 AND job_id IS NULL),"
	" took AS ("
	"  UPDATE job_state.slot s SET job_id = jobs.id, queue = jobs.queue"
	"   FROM jobs JOIN free ON free.r OPERATOR(pg_catalog.=) jobs.r"
	"   WHERE s.kind OPERATOR(pg_catalog.=) 'resource' AND s.scope OPERATOR(pg_catalog.=) $1"
	"    AND s.key OPERATOR(pg_catalog.=) '' AND s.n OPERATOR(pg_catalog.=) free.n"
	"    AND s.job_id IS NULL"
	"  RETURNING s.queue, s.job_id, s.n)"
	" UPDATE job_state.job j SET resource_slot = took.n"
	"  FROM took"
	"  WHERE j.queue OPERATOR(pg_catalog.=) took.queue"
	"   AND j.id OPERATOR(pg_catalog.=) took.job_id",
	2, {TEXTOID, INT4OID}
};

/*
 * A resource's concurrency_limit was set or raised to limit (resource.c):
 * its slots, and with adopt slots for the jobs naming it that already run
 * (a new resource has none).  Needs SPI.
 */
void
JsResourceLimitSlots(const char *resource, bool adopt, int32 limit)
{
	Datum		values[2];

	JsEnsureSlots("resource", resource, NULL, limit);
	if (!adopt)
		return;
	values[0] = CStringGetTextDatum(resource);
	values[1] = Int32GetDatum(limit);
	JsExecute(&adopt_resource_plan, values, NULL, false, 0);
}

/* JS003 for a raw-SQL start that finds every slot of a limit held */
static void
JsRefuseRawStart(int64 job_id, const char *what, const char *scope, int32 limit)
{
	ereport(ERROR,
			(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
			 errmsg("job %lld cannot start: %s \"%s\" runs as many jobs as it may",
					(long long) job_id, what, scope),
			 errdetail("Its concurrency limit is %d, and every slot of it is held or being taken.",
					   limit),
			 errhint("A start by raw SQL takes a slot as claim does; wait for a job to finish, or use job_state.claim().")));
}

/*
 * A start by raw SQL (an operator's UPDATE ... SET status = 'running'):
 * claim holds the slots of the jobs it starts before it writes them, and
 * the job trigger calls this for every other start, so that a concurrency
 * limit and a start rate hold for every start.  numbers[kind] gets the
 * slot taken for each limit the job falls under (0 for none); JS003 when
 * a limit has no free slot or the rate no token.  Needs no SPI.
 */
void
JsRawStartSlots(int64 job_id, Datum queue, Datum resource, bool has_resource,
				Datum key, bool has_key, int32 numbers[JS_NUM_SLOT_KINDS])
{
	JsQueueOptions q;
	char	   *qname = TextDatumGetCString(queue);
	char	   *rname = has_resource ? TextDatumGetCString(resource) : NULL;
	char	   *kname = has_key ? TextDatumGetCString(key) : NULL;
	JsSlot		slots[JS_NUM_SLOT_KINDS];
	int32		rlimit = 0;
	double		rate = 0;
	int			kind;

	memset(numbers, 0, sizeof(int32) * JS_NUM_SLOT_KINDS);
	memset(slots, 0, sizeof(slots));
	if (!JsReadQueueLatest(queue, &q) || !q.limited)
		return;
	if (has_resource && !JsReadResourceLimits(rname, &rlimit, &rate))
		ereport(ERROR,
				(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
				 errmsg("resource \"%s\" does not exist", rname)));

	/* the order of the claim path: queue, resource, key (job_state.h) */
	if (q.has_queue_limit &&
		!JsSlotLockFree(&slots[JS_SLOT_QUEUE], "queue", qname, NULL, q.queue_limit))
		JsRefuseRawStart(job_id, "queue", qname, q.queue_limit);
	if (rlimit > 0 &&
		!JsSlotLockFree(&slots[JS_SLOT_RESOURCE], "resource", rname, NULL, rlimit))
		JsRefuseRawStart(job_id, "resource", rname, rlimit);
	if (q.has_key_limit && has_key &&
		!JsSlotLockFree(&slots[JS_SLOT_KEY], "key", qname, kname, q.key_limit))
		JsRefuseRawStart(job_id, "concurrency key", kname, q.key_limit);
	if (rate > 0)
	{
		bool		busy;

		if (!JsTakeStartToken(rname, rate, &busy))
			ereport(ERROR,
					(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
					 errmsg("job %lld cannot start: resource \"%s\" has used up its start rate",
							(long long) job_id, rname),
					 errdetail("Its max_starts_per_second is %g.", rate),
					 errhint("A start by raw SQL takes a start token as claim does; try again in a moment, or use job_state.claim().")));
	}
	for (kind = 0; kind < JS_NUM_SLOT_KINDS; kind++)
	{
		numbers[kind] = slots[kind].n;
		if (slots[kind].n != 0)
			JsSlotHold(&slots[kind], job_id, qname);
	}
}
