/*-------------------------------------------------------------------------
 *
 * tables.c
 *	  How job_state's own tables are read: their column numbers, looked up
 *	  once per relation (a table rewritten by an upgrade gets a new map),
 *	  the status names and their enum OIDs, tuple helpers, a queue's
 *	  options and a resource's limits by primary key, and the input hash a
 *	  job row carries.
 *
 * Also the OIDs of our relations by name, kept per backend until an
 * invalidation (JsOwnRelid).
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
#include "catalog/pg_class.h"
#include "catalog/pg_enum.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "executor/tuptable.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "job_state.h"
#include "tables.h"
#include "token.h"
#include "lease_floor.h"
#include "frontier.h"
#include "rowwrite.h"
#include "dispatch.h"

/*
 * Whether job_state.queue has its acl column (0.2.0 added it): until
 * ALTER EXTENSION UPDATE runs, the library serves 0.1.0's tables, where
 * every queue is open.
 */
bool
JsQueueHasAcl(void)
{
	return get_attnum(JsOwnRelid("queue"), "acl") != InvalidAttrNumber;
}

/*
 * Whether the schema knows waiting jobs (0.2.0 added the status and the
 * job's callback_timeout_at): statements that name them are not run on
 * 0.1.0's tables.
 */
bool
JsSchemaHasWaiting(void)
{
	return get_attnum(JsOwnRelid("job"), "callback_timeout_at") != InvalidAttrNumber;
}

/*
 * Whether the job table has claim_nonce (0.2.0 added it): the fences of
 * 0.1.0's tables compare the generation only (token.h).
 */
bool
JsSchemaHasNonce(void)
{
	return get_attnum(JsOwnRelid("job"), "claim_nonce") != InvalidAttrNumber;
}

/* the owner of one of our relations (the owner of the extension's tables) */
Oid
JsOwnRelOwner(const char *name)
{
	Oid			relid = JsOwnRelid(name);
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	return owner;
}

/*
 * The OIDs of our relations by name, looked up in the catalog once per
 * backend (claim, submit and succeed each name several).  All are
 * forgotten on an invalidation of any of them (DROP, a rename, ALTER
 * TABLE, SET SCHEMA) or of every relation, and on any change to a schema
 * (a renamed job_state schema no longer holds them).  A lookup during
 * which an invalidation arrived is not kept; a missing name is looked up
 * again each time.
 */
typedef struct JsOwnRel
{
	char		name[NAMEDATALEN];
	Oid			relid;
} JsOwnRel;

#define JS_MAX_OWN_RELS 32

static JsOwnRel js_own_rels[JS_MAX_OWN_RELS];
static int	js_n_own_rels = 0;
static uint64 js_own_rels_resets = 0;

static void
JsOwnRelsReset(void)
{
	js_n_own_rels = 0;
	js_own_rels_resets++;
}

/*
 * The options of the queues this backend claimed from, submitted to or
 * failed a job of, as JsReadQueue read them, so that those calls do not
 * read the queue's row each time.  The queue trigger invalidates the queue
 * table's relcache entry on every UPDATE, DELETE and TRUNCATE of it, by
 * job_state's functions and raw SQL alike (queue_trigger.c): that empties
 * this cache in every backend once the change commits, and in the changing
 * transaction at its next command.  Only READ COMMITTED reads use it: a
 * transaction snapshot may be older than what the cache holds, and what
 * such a snapshot reads is not kept.  A read during which an invalidation
 * arrived is not kept either; at most JS_QUEUE_CACHE_SIZE queues are kept.
 */
typedef struct JsCachedQueue
{
	int			len;
	char	   *name;			/* len bytes, in js_queue_cache_cxt */
	JsQueueOptions q;			/* its lease without asked; acl in the context */
} JsCachedQueue;

#define JS_QUEUE_CACHE_SIZE 32

static JsCachedQueue js_queue_cache[JS_QUEUE_CACHE_SIZE];
static int	js_queue_cache_n = 0;
static Oid	js_queue_cache_relid = InvalidOid;	/* the table they came from */
static uint64 js_queue_cache_resets = 0;
static MemoryContext js_queue_cache_cxt = NULL;

static void
JsQueueCacheReset(void)
{
	js_queue_cache_n = 0;
	js_queue_cache_relid = InvalidOid;
	js_queue_cache_resets++;
	if (js_queue_cache_cxt != NULL)
		MemoryContextReset(js_queue_cache_cxt);
}

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
	int			channel;		/* 0: a schema without it */
	int			min_synchronous_commit;	/* 0: a schema without it */
} JsQueueColumns;

static JsQueueColumns js_queue_cols;	/* JsQueueColumnsFor */

/*
 * The job table's column map (JsJobColumnsFor), looked up again after any
 * invalidation of the table: ALTER EXTENSION UPDATE adds columns under
 * backends that stay connected.
 */
static JsJobColumns js_cols;

/* relation relid (InvalidOid: every relation) changed: forget what it was */
static void
JsTablesRelcacheCallback(Datum arg, Oid relid)
{
	int			i;

	if (relid == InvalidOid || relid == js_queue_cache_relid)
		JsQueueCacheReset();
	if (relid == InvalidOid || relid == js_cols.relid)
		js_cols.relid = InvalidOid;
	if (relid == InvalidOid || relid == js_queue_cols.relid)
		js_queue_cols.relid = InvalidOid;
	for (i = 0; i < js_n_own_rels; i++)
	{
		if (relid == InvalidOid || js_own_rels[i].relid == relid)
		{
			JsOwnRelsReset();
			break;
		}
	}
}

static void
JsTablesNamespaceCallback(Datum arg, int cacheid, uint32 hashvalue)
{
	JsOwnRelsReset();
}

/*
 * The per-backend caches of this file, their memory and their callbacks
 * (one relcache callback for both, subscribed through dispatch.c).
 */
static void
JsTablesCallbacks(void)
{
	static bool registered = false;

	if (registered)
		return;
	js_queue_cache_cxt = AllocSetContextCreate(CacheMemoryContext,
											   "job_state queue options",
											   ALLOCSET_SMALL_SIZES);
	JsOnRelcache(JsTablesRelcacheCallback);
	JsOnSyscache(NAMESPACEOID, JsTablesNamespaceCallback);
	registered = true;
}

/* a relation of job_state's own schema, or InvalidOid if there is none */
Oid
JsOwnRelidIfAny(const char *name)
{
	uint64		resets;
	Oid			nsp;
	Oid			relid;
	int			i;

	for (i = 0; i < js_n_own_rels; i++)
	{
		if (strcmp(js_own_rels[i].name, name) == 0)
			return js_own_rels[i].relid;
	}

	JsTablesCallbacks();
	resets = js_own_rels_resets;
	nsp = get_namespace_oid("job_state", true);
	relid = OidIsValid(nsp) ? get_relname_relid(name, nsp) : InvalidOid;
	if (OidIsValid(relid) && resets == js_own_rels_resets &&
		js_n_own_rels < JS_MAX_OWN_RELS && strlen(name) < NAMEDATALEN)
	{
		strlcpy(js_own_rels[js_n_own_rels].name, name, NAMEDATALEN);
		js_own_rels[js_n_own_rels].relid = relid;
		js_n_own_rels++;
	}
	return relid;
}

/* a relation of job_state's own schema; it must be there */
Oid
JsOwnRelid(const char *name)
{
	Oid			relid = JsOwnRelidIfAny(name);

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
	"accepted", "running", "waiting", "succeeded", "failed", "unknown", "cancelled"
};

bool
JsStatusFinished(JsStatus s)
{
	return s == JS_SUCCEEDED || s == JS_FAILED || s == JS_CANCELLED;
}

/* one column of a map: its name, and where its number goes in the map */
typedef struct JsColumnName
{
	const char *name;
	size_t		offset;
} JsColumnName;

/* the numbers of names (n of them) into the int fields of map */
static void
JsFillColumns(Relation rel, const JsColumnName *names, int n, void *map)
{
	int			i;

	for (i = 0; i < n; i++)
		*(int *) ((char *) map + names[i].offset) = JsColumnNumber(rel, names[i].name);
}

#define JS_JOB_COLUMN(field, name) {name, offsetof(JsJobColumns, field)}

static const JsColumnName js_job_column_names[] = {
	JS_JOB_COLUMN(queue, "queue"),
	JS_JOB_COLUMN(id, "id"),
	JS_JOB_COLUMN(status, "status"),
	JS_JOB_COLUMN(generation, "generation"),
	JS_JOB_COLUMN(attempts, "attempts"),
	JS_JOB_COLUMN(retries, "retries"),
	JS_JOB_COLUMN(throttles, "throttles"),
	JS_JOB_COLUMN(idempotency_key, "idempotency_key"),
	JS_JOB_COLUMN(concurrency_key, "concurrency_key"),
	JS_JOB_COLUMN(input, "input"),
	JS_JOB_COLUMN(input_hash, "input_hash"),
	JS_JOB_COLUMN(result, "result"),
	JS_JOB_COLUMN(last_error, "last_error"),
	JS_JOB_COLUMN(error_class, "error_class"),
	JS_JOB_COLUMN(reason, "reason"),
	JS_JOB_COLUMN(deadline, "deadline"),
	JS_JOB_COLUMN(max_attempts, "max_attempts"),
	JS_JOB_COLUMN(budget, "budget"),
	JS_JOB_COLUMN(slot[JS_SLOT_QUEUE], "queue_slot"),
	JS_JOB_COLUMN(slot[JS_SLOT_RESOURCE], "resource_slot"),
	JS_JOB_COLUMN(slot[JS_SLOT_KEY], "key_slot"),
	JS_JOB_COLUMN(spent, "spent"),
	JS_JOB_COLUMN(cancel_requested, "cancel_requested"),
	JS_JOB_COLUMN(lease_expires_at, "lease_expires_at"),
	JS_JOB_COLUMN(worker, "worker"),
	JS_JOB_COLUMN(started_at, "started_at"),
	JS_JOB_COLUMN(finished_at, "finished_at"),
	JS_JOB_COLUMN(priority, "priority"),
	JS_JOB_COLUMN(resource, "resource"),
	JS_JOB_COLUMN(submitted_by, "submitted_by"),
	JS_JOB_COLUMN(accepted_at, "accepted_at"),
	JS_JOB_COLUMN(run_after, "run_after"),
};


const JsJobColumns *
JsJobColumnsFor(Relation rel)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	Oid			status_type;
	int			i;

	if (js_cols.relid == RelationGetRelid(rel))
		return &js_cols;
	JsTablesCallbacks();

	JsFillColumns(rel, js_job_column_names, lengthof(js_job_column_names), &js_cols);
	js_cols.submitted_by_oid =
		TupleDescAttr(tupdesc, js_cols.submitted_by - 1)->atttypid == REGROLEOID;

	status_type = TupleDescAttr(tupdesc, js_cols.status - 1)->atttypid;
	for (i = 0; i < JS_NUM_STATUS; i++)
	{
		js_cols.status_oids[i] =
			GetSysCacheOid2(ENUMTYPOIDNAME, Anum_pg_enum_oid,
							ObjectIdGetDatum(status_type),
							CStringGetDatum(js_status_names[i]));
		/* waiting came with 0.2.0: a 0.1.0 schema has no job in it */
		if (!OidIsValid(js_cols.status_oids[i]) && i != JS_WAITING)
			elog(ERROR, "job_state: status \"%s\" is missing", js_status_names[i]);
	}
	/* the waiting window's columns came with 0.2.0 too (0: missing) */
	js_cols.callback_timeout_at = SPI_fnumber(tupdesc, "callback_timeout_at");
	js_cols.heartbeat_interval = SPI_fnumber(tupdesc, "heartbeat_interval");
	if (js_cols.callback_timeout_at <= 0 || js_cols.heartbeat_interval <= 0)
		js_cols.callback_timeout_at = js_cols.heartbeat_interval = 0;
	/* and the history a job row holds (event.c; 0: missing) */
	js_cols.held_claim_seq = SPI_fnumber(tupdesc, "held_claim_seq");
	js_cols.held_end_seq = SPI_fnumber(tupdesc, "held_end_seq");
	if (js_cols.held_claim_seq <= 0 || js_cols.held_end_seq <= 0)
		js_cols.held_claim_seq = js_cols.held_end_seq = 0;
	/* and the progress a heartbeat reports (fsm.c's table; 0: missing) */
	js_cols.progress = Max(SPI_fnumber(tupdesc, "progress"), 0);
	js_cols.progress_generation = Max(SPI_fnumber(tupdesc, "progress_generation"), 0);
	js_cols.progress_at = Max(SPI_fnumber(tupdesc, "progress_at"), 0);
	js_cols.claim_nonce = Max(SPI_fnumber(tupdesc, "claim_nonce"), 0);
	js_cols.relid = RelationGetRelid(rel);
	return &js_cols;
}

/*
 * The readers below take the trigger's slots (tg_trigslot, tg_newslot),
 * not its tuples: a slot deforms its tuple once, as far as the columns
 * asked for, where heap_getattr walks a job row (which always has NULLs)
 * from its first column again for every column it returns.
 */
JsStatus
JsTupleStatus(const JsJobColumns *cols, TupleTableSlot *slot)
{
	bool		isnull;

	return JsStatusOfLabel(cols, slot_getattr(slot, cols->status, &isnull));
}

/* the JsStatus of a label (an OID of job_state.status) */
JsStatus
JsStatusOfLabel(const JsJobColumns *cols, Datum label)
{
	int			i;

	for (i = 0; i < JS_NUM_STATUS; i++)
		if (cols->status_oids[i] == DatumGetObjectId(label))
			return (JsStatus) i;
	elog(ERROR, "job_state: unexpected status label %u", DatumGetObjectId(label));
	pg_unreachable();
}

int32
JsTupleInt32(TupleTableSlot *slot, int attnum, bool *isnull)
{
	Datum		d = slot_getattr(slot, attnum, isnull);

	return *isnull ? 0 : DatumGetInt32(d);
}

int64
JsTupleJobId(const JsJobColumns *cols, TupleTableSlot *slot)
{
	bool		isnull;

	return DatumGetInt64(slot_getattr(slot, cols->id, &isnull));
}

/*
 * Is the job of slot ready to be claimed (accepted; its run_after may
 * still lie ahead), and at which key of the ready index?  The frontiers'
 * events are made of this (frontier.c).
 */
bool
JsTupleReadyKey(const JsJobColumns *cols, TupleTableSlot *slot, JsClaimKey *key)
{
	bool		isnull;

	if (JsTupleStatus(cols, slot) != JS_ACCEPTED)
		return false;
	key->priority = JsTupleInt32(slot, cols->priority, &isnull);
	key->run_after = DatumGetTimestampTz(slot_getattr(slot, cols->run_after, &isnull));
	key->id = JsTupleJobId(cols, slot);
	return true;
}

/*
 * Note the changes of a job's readiness for the queue's frontier: oldslot
 * (NULL for an insert) stops being ready, newslot (NULL for a delete)
 * becomes ready, unless both are ready at the same key.
 */
void
JsNoteReadiness(const JsJobColumns *cols, Relation rel, TupleTableSlot *oldslot,
				TupleTableSlot *newslot)
{
	JsClaimKey	oldkey;
	JsClaimKey	newkey;
	bool		old_ready;
	bool		new_ready;
	bool		isnull;

	if (!JsFrontierEnabled())
		return;
	old_ready = oldslot != NULL && JsTupleReadyKey(cols, oldslot, &oldkey);
	new_ready = newslot != NULL && JsTupleReadyKey(cols, newslot, &newkey);
	if (old_ready && new_ready && JsClaimKeyCmp(&oldkey, &newkey) == 0 &&
		JsSameValue(oldslot, newslot, cols->queue))
		return;
	if (old_ready)
	{
		char	   *queue = TextDatumGetCString(slot_getattr(oldslot, cols->queue, &isnull));

		JsFrontierNoteLeft(RelationGetRelid(rel), queue, &oldkey);
		pfree(queue);
	}
	if (new_ready)
	{
		char	   *queue = TextDatumGetCString(slot_getattr(newslot, cols->queue, &isnull));

		JsFrontierNoteReady(RelationGetRelid(rel), queue, &newkey);
		pfree(queue);
	}
}

/*
 * Note the lease newslot carries for this session's lease floors
 * (lease_floor.c): one that could lie below a floor lowers it, so the
 * session's next check for run-out leases reads it.
 */
void
JsNoteLease(const JsJobColumns *cols, Relation rel, TupleTableSlot *newslot)
{
	bool		isnull;
	Datum		expiry = slot_getattr(newslot, cols->lease_expires_at, &isnull);
	char	   *queue;

	if (isnull || !JsLeaseFloorMayHide(DatumGetTimestampTz(expiry)))
		return;
	queue = TextDatumGetCString(slot_getattr(newslot, cols->queue, &isnull));
	JsLeaseFloorLower(RelationGetRelid(rel), queue, DatumGetTimestampTz(expiry));
	pfree(queue);
}

/* same value, looking through TOAST when the raw datums differ */
bool
JsSameValue(TupleTableSlot *a, TupleTableSlot *b, int attnum)
{
	Form_pg_attribute att = TupleDescAttr(a->tts_tupleDescriptor, attnum - 1);
	bool		null_a;
	bool		null_b;
	Datum		da = slot_getattr(a, attnum, &null_a);
	Datum		db = slot_getattr(b, attnum, &null_b);

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

#define JS_QUEUE_COLUMN(field) {#field, offsetof(JsQueueColumns, field)}

static const JsColumnName js_queue_column_names[] = {
	JS_QUEUE_COLUMN(id),
	JS_QUEUE_COLUMN(lease),
	JS_QUEUE_COLUMN(max_lease),
	JS_QUEUE_COLUMN(max_attempts),
	JS_QUEUE_COLUMN(paused),
	JS_QUEUE_COLUMN(concurrency_limit),
	JS_QUEUE_COLUMN(per_key_limit),
	JS_QUEUE_COLUMN(uses_resources),
	JS_QUEUE_COLUMN(retry_interval),
	JS_QUEUE_COLUMN(backoff_rate),
	JS_QUEUE_COLUMN(max_retries),
	JS_QUEUE_COLUMN(max_delay),
	JS_QUEUE_COLUMN(jitter),
};

static const JsQueueColumns *
JsQueueColumnsFor(Relation rel)
{
	if (js_queue_cols.relid == RelationGetRelid(rel))
		return &js_queue_cols;
	JsFillColumns(rel, js_queue_column_names, lengthof(js_queue_column_names),
				  &js_queue_cols);
	/* 0.2.0 added it; under 0.1.0's table every queue is open */
	js_queue_cols.acl = Max(SPI_fnumber(RelationGetDescr(rel), "acl"), 0);
	/* 0.2.0 added it too; under 0.1.0's table wake-ups name the queue */
	js_queue_cols.channel = Max(SPI_fnumber(RelationGetDescr(rel), "channel"), 0);
	js_queue_cols.min_synchronous_commit =
		Max(SPI_fnumber(RelationGetDescr(rel), "min_synchronous_commit"), 0);
	js_queue_cols.relid = RelationGetRelid(rel);
	return &js_queue_cols;
}

/* the lease a claim gives: LEAST(lease, max_lease) */
static void
JsQueueLease(JsQueueOptions *q, Interval *lease)
{
	q->lease = *DatumGetIntervalP(DirectFunctionCall2(interval_smaller,
													  IntervalPGetDatum(lease),
													  IntervalPGetDatum(&q->max_lease)));
}

/*
 * The row of queue (text) by the queue table's primary key, under the
 * active snapshot: false when there is none.  q->acl is allocated in the
 * current memory context.
 */
static bool
JsReadQueue(Relation queuerel, Relation pkey, Datum queue, JsQueueOptions *q)
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
		bool		uses_resources;
		text	   *jitter;
		Datum		acl;

		q->id = DatumGetInt32(slot_getattr(slot, qc->id, &isnull));
		lease = DatumGetIntervalP(slot_getattr(slot, qc->lease, &isnull));
		q->max_lease = *DatumGetIntervalP(slot_getattr(slot, qc->max_lease, &isnull));
		JsQueueLease(q, lease);
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
		q->channel[0] = '\0';
		if (qc->channel > 0)
		{
			Datum		channel = slot_getattr(slot, qc->channel, &isnull);

			if (!isnull)
				text_to_cstring_buffer(DatumGetTextPP(channel), q->channel,
									   sizeof(q->channel));
		}
		q->min_sync = -1;
		if (qc->min_synchronous_commit > 0)
		{
			Datum		floor = slot_getattr(slot, qc->min_synchronous_commit, &isnull);

			if (!isnull)
				q->min_sync = JsSyncCommitLevel(TextDatumGetCString(floor));
		}
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

/* keep q as the options of the queue name */
static void
JsQueueCacheStore(Oid relid, text *name, const JsQueueOptions *q)
{
	JsCachedQueue *e;
	MemoryContext oldcontext;

	if (js_queue_cache_relid != relid || js_queue_cache_n >= JS_QUEUE_CACHE_SIZE)
		JsQueueCacheReset();
	oldcontext = MemoryContextSwitchTo(js_queue_cache_cxt);
	e = &js_queue_cache[js_queue_cache_n];
	e->len = VARSIZE_ANY_EXHDR(name);
	e->name = palloc(e->len);
	memcpy(e->name, VARDATA_ANY(name), e->len);
	e->q = *q;
	if (q->acl != NULL)
		e->q.acl = DatumGetAclPCopy(PointerGetDatum(q->acl));
	MemoryContextSwitchTo(oldcontext);
	js_queue_cache_relid = relid;
	js_queue_cache_n++;
}

/*
 * The options of queue (text), as JsReadQueue reads them under the active
 * snapshot, from the cache when it has them: false when there is no such
 * queue.  A lease a claim asks for replaces the queue's, capped as it is.
 * q->acl is allocated in the current memory context.
 */
bool
JsReadQueueCached(Datum queue, Interval *asked, JsQueueOptions *q)
{
	text	   *name = DatumGetTextPP(queue);
	int			len = VARSIZE_ANY_EXHDR(name);
	bool		cacheable = !IsolationUsesXactSnapshot();
	bool		found;
	int			i;

	JsTablesCallbacks();

	/* a change committed since this transaction's last lock is seen now */
	AcceptInvalidationMessages();
	found = false;
	for (i = 0; cacheable && i < js_queue_cache_n && !found; i++)
	{
		JsCachedQueue *e = &js_queue_cache[i];

		if (e->len == len && memcmp(e->name, VARDATA_ANY(name), len) == 0)
		{
			*q = e->q;
			if (e->q.acl != NULL)
				q->acl = DatumGetAclPCopy(PointerGetDatum(e->q.acl));
			found = true;
		}
	}

	if (!found)
	{
		uint64		resets = js_queue_cache_resets;
		Relation	queuerel = table_open(JsOwnRelid("queue"), AccessShareLock);
		Relation	pkey = index_open(JsOwnRelid("queue_pkey"), AccessShareLock);

		found = JsReadQueue(queuerel, pkey, queue, q);
		if (found && cacheable && resets == js_queue_cache_resets)
			JsQueueCacheStore(RelationGetRelid(queuerel), name, q);
		index_close(pkey, NoLock);
		table_close(queuerel, NoLock);
	}
	if (found && asked != NULL)
		JsQueueLease(q, asked);
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
	found = JsReadQueue(queuerel, pkey, queue, q);
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

	JsStatementBegin();
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

#define JS_EVENT_COLUMN(field) {#field, offsetof(JsEventColumns, field)}

static const JsColumnName js_event_column_names[] = {
	JS_EVENT_COLUMN(queue),
	JS_EVENT_COLUMN(job_id),
	JS_EVENT_COLUMN(seq),
	JS_EVENT_COLUMN(from_status),
	JS_EVENT_COLUMN(to_status),
	JS_EVENT_COLUMN(generation),
	JS_EVENT_COLUMN(at),
	JS_EVENT_COLUMN(detail),
};

static JsEventColumns js_event_cols;

const JsEventColumns *
JsEventColumnsFor(Relation rel)
{
	if (js_event_cols.relid == RelationGetRelid(rel))
		return &js_event_cols;
	JsFillColumns(rel, js_event_column_names, lengthof(js_event_column_names),
				  &js_event_cols);
	js_event_cols.relid = RelationGetRelid(rel);
	return &js_event_cols;
}
