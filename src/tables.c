/*-------------------------------------------------------------------------
 *
 * tables.c
 *	  How job_state's own tables are read: their column numbers, looked up
 *	  once per relation (a table rewritten by an upgrade gets a new map),
 *	  the status names and their enum OIDs, tuple helpers, a queue's
 *	  options and a resource's limits by primary key, and the input hash a
 *	  job row carries.
 *
 * Invariants: every column looked up exists (elog otherwise: the
 * extension's script and this file disagree); a map is rebuilt when the
 * relation's OID changes.  Locks: AccessShareLock on the queue and
 * resource tables and their primary keys while reading them.  No SPI
 * statements.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_enum.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "executor/tuptable.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "job_state.h"
#include "tables.h"
#include "rowwrite.h"

/* a relation of job_state's own schema */
Oid
JsOwnRelid(const char *name)
{
	Oid			relid = get_relname_relid(name, get_namespace_oid("job_state", false));

	if (!OidIsValid(relid))
		elog(ERROR, "job_state: relation job_state.%s is missing", name);
	return relid;
}

/* attribute number of a column of one of our tables; it must be there */
int
JsColumnNumber(Relation rel, const char *name)
{
	int			attnum = SPI_fnumber(RelationGetDescr(rel), name);

	if (attnum <= 0)
		elog(ERROR, "job_state: column %s.%s is missing",
			 RelationGetRelationName(rel), name);
	return attnum;
}

const char *const js_status_names[JS_NUM_STATUS] = {
	"accepted", "running", "succeeded", "failed", "unknown", "cancelled"
};

bool
JsStatusFinished(JsStatus s)
{
	return s == JS_SUCCEEDED || s == JS_FAILED || s == JS_CANCELLED;
}

static JsJobColumns js_cols;

const JsJobColumns *
JsJobColumnsFor(Relation rel)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	Oid			status_type;
	int			i;

	if (js_cols.relid == RelationGetRelid(rel))
		return &js_cols;

	js_cols.queue = JsColumnNumber(rel, "queue");
	js_cols.id = JsColumnNumber(rel, "id");
	js_cols.status = JsColumnNumber(rel, "status");
	js_cols.generation = JsColumnNumber(rel, "generation");
	js_cols.attempts = JsColumnNumber(rel, "attempts");
	js_cols.retries = JsColumnNumber(rel, "retries");
	js_cols.throttles = JsColumnNumber(rel, "throttles");
	js_cols.idempotency_key = JsColumnNumber(rel, "idempotency_key");
	js_cols.concurrency_key = JsColumnNumber(rel, "concurrency_key");
	js_cols.input = JsColumnNumber(rel, "input");
	js_cols.input_hash = JsColumnNumber(rel, "input_hash");
	js_cols.result = JsColumnNumber(rel, "result");
	js_cols.last_error = JsColumnNumber(rel, "last_error");
	js_cols.error_class = JsColumnNumber(rel, "error_class");
	js_cols.reason = JsColumnNumber(rel, "reason");
	js_cols.deadline = JsColumnNumber(rel, "deadline");
	js_cols.max_attempts = JsColumnNumber(rel, "max_attempts");
	js_cols.budget = JsColumnNumber(rel, "budget");
	js_cols.slot[JS_SLOT_QUEUE] = JsColumnNumber(rel, "queue_slot");
	js_cols.slot[JS_SLOT_RESOURCE] = JsColumnNumber(rel, "resource_slot");
	js_cols.slot[JS_SLOT_KEY] = JsColumnNumber(rel, "key_slot");
	js_cols.spent = JsColumnNumber(rel, "spent");
	js_cols.cancel_requested = JsColumnNumber(rel, "cancel_requested");
	js_cols.lease_expires_at = JsColumnNumber(rel, "lease_expires_at");
	js_cols.worker = JsColumnNumber(rel, "worker");
	js_cols.started_at = JsColumnNumber(rel, "started_at");
	js_cols.finished_at = JsColumnNumber(rel, "finished_at");
	js_cols.priority = JsColumnNumber(rel, "priority");
	js_cols.resource = JsColumnNumber(rel, "resource");
	js_cols.submitted_by = JsColumnNumber(rel, "submitted_by");
	js_cols.run_after = JsColumnNumber(rel, "run_after");
	js_cols.submitted_by_oid =
		TupleDescAttr(tupdesc, js_cols.submitted_by - 1)->atttypid == REGROLEOID;

	status_type = TupleDescAttr(tupdesc, js_cols.status - 1)->atttypid;
	for (i = 0; i < JS_NUM_STATUS; i++)
	{
		js_cols.status_oids[i] =
			GetSysCacheOid2(ENUMTYPOIDNAME, Anum_pg_enum_oid,
							ObjectIdGetDatum(status_type),
							CStringGetDatum(js_status_names[i]));
		if (!OidIsValid(js_cols.status_oids[i]))
			elog(ERROR, "job_state: status \"%s\" is missing", js_status_names[i]);
	}
	js_cols.relid = RelationGetRelid(rel);
	return &js_cols;
}

JsStatus
JsTupleStatus(const JsJobColumns *cols, HeapTuple tuple, TupleDesc tupdesc)
{
	bool		isnull;
	Oid			label;
	int			i;

	label = DatumGetObjectId(heap_getattr(tuple, cols->status, tupdesc, &isnull));
	for (i = 0; i < JS_NUM_STATUS; i++)
		if (cols->status_oids[i] == label)
			return (JsStatus) i;
	elog(ERROR, "job_state: unexpected status label %u", label);
	pg_unreachable();
}

int32
JsTupleInt32(HeapTuple tuple, TupleDesc tupdesc, int attnum, bool *isnull)
{
	Datum		d = heap_getattr(tuple, attnum, tupdesc, isnull);

	return *isnull ? 0 : DatumGetInt32(d);
}

int64
JsTupleJobId(const JsJobColumns *cols, HeapTuple tuple, TupleDesc tupdesc)
{
	bool		isnull;

	return DatumGetInt64(heap_getattr(tuple, cols->id, tupdesc, &isnull));
}

/* same value, looking through TOAST when the raw datums differ */
bool
JsSameValue(HeapTuple a, HeapTuple b, TupleDesc tupdesc, int attnum)
{
	Form_pg_attribute att = TupleDescAttr(tupdesc, attnum - 1);
	bool		null_a;
	bool		null_b;
	Datum		da = heap_getattr(a, attnum, tupdesc, &null_a);
	Datum		db = heap_getattr(b, attnum, tupdesc, &null_b);

	if (null_a || null_b)
		return null_a == null_b;
	if (datumIsEqual(da, db, att->attbyval, att->attlen))
		return true;
	if (att->attlen == -1)
	{
		struct varlena *va = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(da));
		struct varlena *vb = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(db));

		return VARSIZE_ANY_EXHDR(va) == VARSIZE_ANY_EXHDR(vb) &&
			memcmp(VARDATA_ANY(va), VARDATA_ANY(vb), VARSIZE_ANY_EXHDR(va)) == 0;
	}
	return false;
}

/* attribute numbers of job_state.queue, looked up once per relation */
typedef struct JsQueueColumns
{
	Oid			relid;
	int			id;
	int			lease;
	int			max_lease;
	int			max_attempts;
	int			paused;
	int			concurrency_limit;
	int			per_key_limit;
	int			uses_resources;
	int			retry_interval;
	int			backoff_rate;
	int			max_retries;
	int			max_delay;
	int			jitter;
	int			acl;
} JsQueueColumns;

static JsQueueColumns js_queue_cols;

static const JsQueueColumns *
JsQueueColumnsFor(Relation rel)
{
	if (js_queue_cols.relid == RelationGetRelid(rel))
		return &js_queue_cols;
	js_queue_cols.id = JsColumnNumber(rel, "id");
	js_queue_cols.lease = JsColumnNumber(rel, "lease");
	js_queue_cols.max_lease = JsColumnNumber(rel, "max_lease");
	js_queue_cols.max_attempts = JsColumnNumber(rel, "max_attempts");
	js_queue_cols.paused = JsColumnNumber(rel, "paused");
	js_queue_cols.concurrency_limit = JsColumnNumber(rel, "concurrency_limit");
	js_queue_cols.per_key_limit = JsColumnNumber(rel, "per_key_limit");
	js_queue_cols.uses_resources = JsColumnNumber(rel, "uses_resources");
	js_queue_cols.retry_interval = JsColumnNumber(rel, "retry_interval");
	js_queue_cols.backoff_rate = JsColumnNumber(rel, "backoff_rate");
	js_queue_cols.max_retries = JsColumnNumber(rel, "max_retries");
	js_queue_cols.max_delay = JsColumnNumber(rel, "max_delay");
	js_queue_cols.jitter = JsColumnNumber(rel, "jitter");
	/* 0.2.0 added it; under 0.1.0's table every queue is open */
	js_queue_cols.acl = Max(SPI_fnumber(RelationGetDescr(rel), "acl"), 0);
	js_queue_cols.relid = RelationGetRelid(rel);
	return &js_queue_cols;
}

/*
 * The row of queue (text) by the queue table's primary key, under the
 * active snapshot: false when there is none.  The lease a claim gives is
 * LEAST(COALESCE(asked, lease), max_lease).
 */
bool
JsReadQueue(Relation queuerel, Relation pkey, Datum queue, Interval *asked,
			JsQueueOptions *q)
{
	ScanKeyData key;
	IndexScanDesc scan;
	TupleTableSlot *slot = table_slot_create(queuerel, NULL);
	bool		found;

	JsScanKey(&key, pkey, 1, BTEqualStrategyNumber, F_TEXTEQ,
			  queue);
	scan = JsIndexBeginScan(queuerel, pkey, GetActiveSnapshot(), 1);
	index_rescan(scan, &key, 1, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	if (found)
	{
		const JsQueueColumns *qc = JsQueueColumnsFor(queuerel);
		bool		isnull;
		Interval   *lease;
		Interval   *max_lease;
		bool		uses_resources;
		text	   *jitter;
		Datum		acl;

		q->id = DatumGetInt32(slot_getattr(slot, qc->id, &isnull));
		lease = DatumGetIntervalP(slot_getattr(slot, qc->lease, &isnull));
		max_lease = DatumGetIntervalP(slot_getattr(slot, qc->max_lease, &isnull));
		if (asked != NULL)
			lease = asked;
		q->lease = *DatumGetIntervalP(DirectFunctionCall2(interval_smaller,
														  IntervalPGetDatum(lease),
														  IntervalPGetDatum(max_lease)));
		q->max_attempts = DatumGetInt32(slot_getattr(slot, qc->max_attempts, &isnull));
		q->has_max_attempts = !isnull;
		q->paused = DatumGetBool(slot_getattr(slot, qc->paused, &isnull));
		q->queue_limit = DatumGetInt32(slot_getattr(slot, qc->concurrency_limit, &isnull));
		q->has_queue_limit = !isnull;
		q->key_limit = DatumGetInt32(slot_getattr(slot, qc->per_key_limit, &isnull));
		q->has_key_limit = !isnull;
		uses_resources = DatumGetBool(slot_getattr(slot, qc->uses_resources, &isnull));
		q->limited = q->has_queue_limit || q->has_key_limit || uses_resources;
		/* NOT NULL columns */
		q->retry_interval = *DatumGetIntervalP(slot_getattr(slot, qc->retry_interval, &isnull));
		q->backoff_rate = DatumGetFloat8(slot_getattr(slot, qc->backoff_rate, &isnull));
		q->max_retries = DatumGetInt32(slot_getattr(slot, qc->max_retries, &isnull));
		q->max_delay = *DatumGetIntervalP(slot_getattr(slot, qc->max_delay, &isnull));
		jitter = DatumGetTextPP(slot_getattr(slot, qc->jitter, &isnull));
		q->full_jitter = VARSIZE_ANY_EXHDR(jitter) == 4 &&
			memcmp(VARDATA_ANY(jitter), "full", 4) == 0;
		q->acl = NULL;
		if (qc->acl > 0)
		{
			acl = slot_getattr(slot, qc->acl, &isnull);
			if (!isnull)
				q->acl = DatumGetAclPCopy(acl);
		}
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	return found;
}

/*
 * JsReadQueue under the latest snapshot, opening the relations itself: for
 * privilege checks (acl.c) and a raw-SQL start's limits (limits.c).
 */
bool
JsReadQueueLatest(Datum queue, JsQueueOptions *q)
{
	Relation	queuerel = table_open(JsOwnRelid("queue"), AccessShareLock);
	Relation	pkey = index_open(JsOwnRelid("queue_pkey"), AccessShareLock);
	bool		found;

	PushActiveSnapshot(GetLatestSnapshot());
	found = JsReadQueue(queuerel, pkey, queue, NULL, q);
	PopActiveSnapshot();
	index_close(pkey, AccessShareLock);
	table_close(queuerel, AccessShareLock);
	return found;
}

/*
 * The limits of resource name, for claim (limits.c): false when there is
 * no such resource.  *limit is 0 when it has no concurrency_limit, *rate
 * when it has no max_starts_per_second.  Read like a statement, after a
 * command-counter step under a fresh snapshot, by the primary key.
 */
bool
JsReadResourceLimits(const char *name, int32 *limit, double *rate)
{
	Relation	rel = table_open(JsOwnRelid("resource"), AccessShareLock);
	Relation	pkey = index_open(JsOwnRelid("resource_pkey"), AccessShareLock);
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	ScanKeyData key;
	IndexScanDesc scan;
	bool		found;

	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	JsScanKey(&key, pkey, 1, BTEqualStrategyNumber, F_TEXTEQ,
			  CStringGetTextDatum(name));
	scan = JsIndexBeginScan(rel, pkey, GetActiveSnapshot(), 1);
	index_rescan(scan, &key, 1, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	index_endscan(scan);
	if (found)
	{
		bool		isnull;
		Datum		value;

		value = slot_getattr(slot, JsColumnNumber(rel, "concurrency_limit"), &isnull);
		*limit = isnull ? 0 : DatumGetInt32(value);
		value = slot_getattr(slot, JsColumnNumber(rel, "max_starts_per_second"), &isnull);
		*rate = isnull ? 0 : DatumGetFloat8(value);
	}
	PopActiveSnapshot();
	ExecDropSingleTupleTableSlot(slot);
	index_close(pkey, NoLock);
	table_close(rel, NoLock);
	return found;
}

bytea *
JsInputHash(Jsonb *input)
{
	char	   *text = JsonbToCString(NULL, &input->root, VARSIZE(input));
	bytea	   *hash = palloc(VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);

	if (ctx == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (uint8 *) text, strlen(text)) < 0 ||
		pg_cryptohash_final(ctx, (uint8 *) VARDATA(hash), PG_SHA256_DIGEST_LENGTH) < 0)
	{
		pg_cryptohash_free(ctx);
		elog(ERROR, "job_state: could not hash the job input");
	}
	pg_cryptohash_free(ctx);
	SET_VARSIZE(hash, VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	pfree(text);
	return hash;
}
