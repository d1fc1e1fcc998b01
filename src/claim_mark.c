/*-------------------------------------------------------------------------
 *
 * claim_mark.c
 *	  Where this session's last claim in a queue stopped: claim resumes its
 *	  index scan there instead of walking the queue's ready index from its
 *	  head.
 *
 * A claimed job leaves its entry in the partial index job_ready until
 * VACUUM removes it, so on a busy queue the head of the index fills with
 * entries of jobs that are already running or finished, and a claim that
 * starts at the head visits all of them (the bare FOR UPDATE SKIP LOCKED
 * queue slows down the same way as they pile up).  The mark is the index
 * key (priority, run_after, id) of the last job this session took; the next
 * claim starts just after it for that priority, and scans higher and lower
 * priorities from their start as before.
 *
 * A job can become ready behind a mark: submitted with an old run_after, or
 * released by a claim that rolled back in another session.  So the mark is
 * only a hint: claim scans from the head again whenever the resumed scan
 * comes back short, after lease expiry, and at least every
 * job_state.claim_rescan_interval; such a job therefore waits at most that
 * long while the queue has other ready work.  A last scan from the head
 * that is ahead of the clock (it stepped back) counts as due, so a step
 * back never makes that wait longer.  A session's own aborted claim
 * forgets its marks (the jobs it took are ready again, behind them).
 *
 * The marks live in backend-local memory (no shared memory is needed, so
 * this works without shared_preload_libraries), one per queue name, and
 * belong to one job table: an invalidation of that table (DROP EXTENSION,
 * but also VACUUM, which removes the entries a mark skips) forgets them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/timestamp.h"

#include "job_state.h"
#include "claim_mark.h"
#include "dispatch.h"

/* queue names have at most 128 characters of at most 4 bytes */
#define JS_MARK_KEY_LEN (128 * 4 + 1)

typedef struct JsClaimMarkEntry
{
	char		queue[JS_MARK_KEY_LEN]; /* hash key */
	bool		valid;			/* mark is set */
	JsClaimKey	mark;
	TimestampTz scanned_at;		/* last scan from the head of the queue */
} JsClaimMarkEntry;

static HTAB *claim_marks = NULL;
static Oid	claim_marks_relid = InvalidOid;	/* the job table they are for */


static JsClaimMarkEntry *
mark_lookup(const char *queue, bool create)
{
	bool		found;
	JsClaimMarkEntry *entry;

	if (strlen(queue) >= JS_MARK_KEY_LEN)
		return NULL;			/* not a queue name: no mark */
	if (claim_marks == NULL)
	{
		if (!create)
			return NULL;
		claim_marks = JsHashCreate("job_state claim marks", 8, JS_MARK_KEY_LEN,
								   sizeof(JsClaimMarkEntry), HASH_STRINGS, NULL);
	}
	entry = hash_search(claim_marks, queue, create ? HASH_ENTER : HASH_FIND,
						&found);
	if (entry != NULL && !found)
	{
		entry->valid = false;
		entry->scanned_at = 0;
	}
	return entry;
}

/*
 * May the next claim in the queue resume at the mark?  If so, fill it in.
 */
bool
JsClaimMarkGet(const char *queue, TimestampTz now, JsClaimKey *mark)
{
	JsClaimMarkEntry *entry;

	if (js_claim_rescan_interval <= 0)
		return false;
	entry = mark_lookup(queue, false);

	/*
	 * A last scan ahead of now means the clock stepped back: the interval
	 * would only run out once the clock had caught up, so scan again now.
	 */
	if (entry == NULL || !entry->valid || entry->scanned_at > now ||
		TimestampDifferenceExceeds(entry->scanned_at, now,
								   js_claim_rescan_interval))
		return false;
	*mark = entry->mark;
	return true;
}

static void forget_marks(void);

/*
 * After a claim call on the job table job_relid: from_head says whether it
 * scanned from the head of the queue, last is the key of the job after
 * which the next claim may resume (NULL: none; after a scan from the head
 * that found nothing the queue has no mark).
 */
void
JsClaimMarkSet(Oid job_relid, const char *queue, TimestampTz now,
			   bool from_head, const JsClaimKey *last)
{
	JsClaimMarkEntry *entry;

	if (js_claim_rescan_interval <= 0)
		return;
	if (job_relid != claim_marks_relid)
	{
		forget_marks();
		claim_marks_relid = job_relid;
	}
	entry = mark_lookup(queue, true);
	if (entry == NULL)
		return;
	if (from_head)
		entry->scanned_at = now;
	if (last != NULL)
	{
		entry->valid = true;
		entry->mark = *last;
	}
	else if (from_head)
		entry->valid = false;	/* the queue had nothing ready */
}

/*
 * The jobs an aborted (sub)transaction took are ready again, behind the
 * marks: forget them all (also on invalidation of the job table).
 */
static void
forget_marks(void)
{
	if (claim_marks != NULL)
	{
		hash_destroy(claim_marks);
		claim_marks = NULL;
	}
}

static void
mark_relcache_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == claim_marks_relid)
		forget_marks();
}

static void
mark_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		forget_marks();
}

static void
mark_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		forget_marks();
}

void
JsClaimMarkInit(void)
{
	JsOnRelcache(mark_relcache_callback);
	JsOnXact(mark_xact_callback);
	JsOnSubXact(mark_subxact_callback);
}
