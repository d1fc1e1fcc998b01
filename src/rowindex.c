/*-------------------------------------------------------------------------
 *
 * rowindex.c
 *	  The indexes a row writer maintains (rowwrite.c), with each index's
 *	  IndexInfo kept per backend.
 *
 * ExecOpenIndices builds every index's IndexInfo afresh for each writer:
 * BuildIndexInfo copies the index's expressions and predicate out of the
 * relcache, and the first row written compiles each partial index's
 * predicate (ExecPrepareQual).  A claim, a completion and a submit each
 * open a writer for one row of a table with four partial indexes, so that
 * setup cost about as much as the index inserts themselves.
 * JsOpenIndices opens the indexes as ExecOpenIndices does (the same list,
 * order and lock) and hands each writer an IndexInfo built once per
 * backend, its predicate and expressions compiled, in a context of its
 * own under CacheMemoryContext.
 *
 * Only where the kept IndexInfo is what ExecOpenIndices would build and
 * nothing in it carries state from one use to the next: a btree index (it
 * keeps no ii_AmCache and has no insert cleanup) that backs no exclusion
 * constraint, whose expressions and predicate call only built-in
 * functions (JsOnlyBuiltinFunctions: no procedural language runs while a
 * kept expression state is evaluated, so none is evaluated twice at once,
 * not even by a write a trigger nests inside ours).  Any other index gets
 * BuildIndexInfo for the writer alone, as the server does.
 *
 * Invariants.  A relcache invalidation of an index (CREATE INDEX
 * CONCURRENTLY's flips of indisready and indisvalid update pg_index and so
 * invalidate the index; REINDEX; DROP INDEX; the statistics VACUUM writes)
 * or of every relation only marks its entry stale: a writer still open in
 * this transaction may hold the IndexInfo, and invalidations arrive
 * whenever a lock is taken.  The next writer to look retires the stale
 * entry's context into a list and builds a new one; retired contexts are
 * freed when the top-level transaction ends, when no writer can be open.
 * ii_CheckedUnchanged, the one field the executor sets per statement, is
 * cleared at each hand-out.  Entries are never removed from the hash
 * table, so the one of a dropped index stays, empty, until the backend
 * exits.
 *
 * Locks: each index RowExclusiveLock, as ExecOpenIndices; none of our own.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_am_d.h"
#include "executor/executor.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "job_state.h"
#include "rowindex.h"
#include "dispatch.h"

typedef struct JsIndexEntry
{
	Oid			indexoid;		/* hash key */
	uint32		invals;			/* invalidations seen, counted from 1 */
	uint32		built;			/* invals when the entry was last built */
	bool		cacheable;		/* false: built per writer (see header) */
	IndexInfo  *info;			/* NULL until built */
	MemoryContext context;		/* holds info; NULL until built */
} JsIndexEntry;

static HTAB *js_index_cache = NULL;
static List *js_retired = NIL;	/* contexts to free at transaction end */

/* a function of initdb's own catalog has an OID below FirstGenbkiObjectId */
static bool
JsIsUserFunction(Oid funcid, void *context)
{
	return funcid >= FirstGenbkiObjectId;
}

static bool
JsUserFunctionWalker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (check_functions_in_node(node, JsIsUserFunction, context))
		return true;
	return expression_tree_walker(node, JsUserFunctionWalker, context);
}

/*
 * Does the expression (or list of them) call only functions of the
 * server's own catalog, none a user created (or replaced: that needs a
 * superuser)?
 */
bool
JsOnlyBuiltinFunctions(Node *node)
{
	return !JsUserFunctionWalker(node, NULL);
}

static void
JsIndexCacheInvalidate(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	JsIndexEntry *entry;

	if (js_index_cache == NULL)
		return;
	if (OidIsValid(relid))
	{
		entry = hash_search(js_index_cache, &relid, HASH_FIND, NULL);
		if (entry != NULL)
			entry->invals++;
		return;
	}
	hash_seq_init(&status, js_index_cache);
	while ((entry = hash_seq_search(&status)) != NULL)
		entry->invals++;
}

/* no writer outlives its transaction: free what stale caches held */
static void
JsRetiredXactCallback(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (js_retired == NIL || !JsXactEnded(event))
		return;
	foreach(lc, js_retired)
		MemoryContextDelete((MemoryContext) lfirst(lc));
	list_free(js_retired);
	js_retired = NIL;
}

/*
 * Free context, a backend cache's that was invalidated, when the top-level
 * transaction ends: a writer open until then may still point into it.
 */
void
JsRetireContext(MemoryContext context)
{
	MemoryContext oldcontext;

	JsOnXact(JsRetiredXactCallback);
	MemoryContextSetParent(context, TopMemoryContext);
	oldcontext = MemoryContextSwitchTo(TopMemoryContext);
	js_retired = lappend(js_retired, context);
	MemoryContextSwitchTo(oldcontext);
}

static void
JsIndexCacheInit(void)
{
	js_index_cache = JsHashCreate("job_state index info", 16, sizeof(Oid),
								  sizeof(JsIndexEntry), HASH_BLOBS,
								  CacheMemoryContext);
	JsOnRelcache(JsIndexCacheInvalidate);
}

/* ExecPrepareQual and ExecPrepareExprList, in the current context */
static void
JsIndexInfoCompile(IndexInfo *ii)
{
	ListCell   *lc;

	if (ii->ii_Predicate != NIL)
		ii->ii_PredicateState =
			ExecInitQual((List *) expression_planner((Expr *) ii->ii_Predicate),
						 NULL);
	foreach(lc, ii->ii_Expressions)
		ii->ii_ExpressionsState =
			lappend(ii->ii_ExpressionsState,
					ExecInitExpr(expression_planner((Expr *) lfirst(lc)), NULL));
}

/*
 * Build entry's IndexInfo for index, retiring what a stale one held.  The
 * catalog reads of BuildIndexInfo may take locks and so deliver an
 * invalidation of this very index: it then stays stale, is used by this
 * writer (as ExecOpenIndices would use what it built) and rebuilt by the
 * next.  Until the build has ended the entry is not cacheable and stays
 * stale, so one that an error interrupted is built again by the next
 * writer and never handed out half made.
 */
static void
JsIndexEntryBuild(JsIndexEntry *entry, Relation index)
{
	uint32		invals = entry->invals;
	MemoryContext oldcontext;
	IndexInfo  *ii;

	if (entry->context != NULL)
		JsRetireContext(entry->context);
	entry->context = NULL;
	entry->info = NULL;
	entry->cacheable = false;
	if (index->rd_rel->relam != BTREE_AM_OID || index->rd_index->indisexclusion)
	{
		entry->built = invals;
		return;
	}

	entry->context = AllocSetContextCreate(CacheMemoryContext,
										   "job_state index info",
										   ALLOCSET_SMALL_SIZES);
	MemoryContextCopyAndSetIdentifier(entry->context,
									  RelationGetRelationName(index));
	oldcontext = MemoryContextSwitchTo(entry->context);
	ii = BuildIndexInfo(index);
	if (JsOnlyBuiltinFunctions((Node *) ii->ii_Predicate) &&
		JsOnlyBuiltinFunctions((Node *) ii->ii_Expressions))
	{
		/*
		 * ExecOpenIndices adds these for a speculative insert only; only
		 * such an insert's ExecCheckIndexConstraints reads them, so one
		 * IndexInfo serves writers of both kinds.
		 */
		if (ii->ii_Unique)
			BuildSpeculativeIndexInfo(index, ii);
		JsIndexInfoCompile(ii);
		entry->info = ii;
		entry->cacheable = true;
	}
	MemoryContextSwitchTo(oldcontext);
	entry->built = invals;
}

/* the IndexInfo a writer of index uses, kept or its own */
static IndexInfo *
JsIndexInfoFor(Relation index, bool speculative)
{
	Oid			indexoid = RelationGetRelid(index);
	JsIndexEntry *entry;
	bool		found;
	IndexInfo  *ii;

	entry = hash_search(js_index_cache, &indexoid, HASH_ENTER, &found);
	if (!found)
	{
		entry->context = NULL;
		entry->info = NULL;
		entry->cacheable = false;
		entry->invals = 1;
		entry->built = 0;
	}
	if (entry->built != entry->invals)
		JsIndexEntryBuild(entry, index);
	if (!entry->cacheable)
	{
		ii = BuildIndexInfo(index);
		if (speculative && ii->ii_Unique && !index->rd_index->indisexclusion)
			BuildSpeculativeIndexInfo(index, ii);
		return ii;
	}
	ii = entry->info;
	ii->ii_CheckedUnchanged = false;
	ii->ii_IndexUnchanged = false;
	return ii;
}

/*
 * ExecOpenIndices, with kept IndexInfos: open rri's relation's indexes
 * with RowExclusiveLock into rri, their arrays in the current memory
 * context as there; ExecCloseIndices closes them.
 */
void
JsOpenIndices(ResultRelInfo *rri, bool speculative)
{
	Relation	rel = rri->ri_RelationDesc;
	List	   *indexoids;
	ListCell   *lc;
	int			n;
	int			i = 0;

	rri->ri_NumIndices = 0;
	if (!RelationGetForm(rel)->relhasindex)
		return;
	indexoids = RelationGetIndexList(rel);
	n = list_length(indexoids);
	if (n == 0)
		return;
	if (js_index_cache == NULL)
		JsIndexCacheInit();

	rri->ri_IndexRelationDescs = palloc(sizeof(Relation) * n);
	rri->ri_IndexRelationInfo = palloc(sizeof(IndexInfo *) * n);
	rri->ri_NumIndices = n;
	foreach(lc, indexoids)
	{
		Relation	index = index_open(lfirst_oid(lc), RowExclusiveLock);

		rri->ri_IndexRelationDescs[i] = index;
		rri->ri_IndexRelationInfo[i] = JsIndexInfoFor(index, speculative);
		i++;
	}
	list_free(indexoids);
}
