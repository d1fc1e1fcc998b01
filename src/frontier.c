/*-------------------------------------------------------------------------
 *
 * frontier.c
 *	  A queue's claim frontier, shared by every claimer of the cluster:
 *	  the key in the ready index below which the queue has no ready job,
 *	  so that a claim starts there instead of at the head of the index.
 *
 * Why.  A claimed job leaves its entry in the partial index job_ready
 * until VACUUM removes it.  While a long transaction pins the xmin horizon
 * VACUUM removes nothing, and a claim that starts at the head of the index
 * reads every entry that claims made dead since (the bare FOR UPDATE SKIP
 * LOCKED queue does the same).  Per-session marks (claim_mark.c) skip
 * what the session itself took, but every other session's entries, and
 * every scan from the head, still read them.  One frontier per queue,
 * moved by every claim, reads each dead entry about once.
 *
 * What the frontier promises.  For its priority P and key F, no job of the
 * queue with priority P and key (run_after, id) <= F is ready, except jobs
 * that other transactions hold locked (their claims or updates: those
 * become ready again only through an abort, which is published, see below)
 * -- so a claim walks P's entries strictly after F.  Other priorities are
 * walked from their start, as without a frontier.
 *
 * How it moves up.  A claim reads the frontier and the count of events
 * published to it (the ticket), then takes its snapshot, and walks.  The
 * walk notes the key of every index entry it reads, visible or not, as
 * long as none was passed over because another transaction held it: the
 * end of that unbroken run is accounted for, since every entry before it
 * was dead, taken, or not ready under the snapshot.  The claim proposes
 * that key (JsFrontierPropose); the proposal is lowered below every job
 * that an event published since the ticket made ready in that priority
 * (such a job may have been invisible to the snapshot), and the frontier
 * becomes the higher of what it is and the proposal (both are promises
 * that hold).
 *
 * How it moves down: events.  A job becomes ready below a frontier when it
 * is inserted or updated into 'accepted' with an old run_after (a submit
 * that committed after a later one, a retry, a redrive, raw SQL), or when
 * the transaction that took it aborts.  The job triggers note each such
 * key in backend memory (JsFrontierNoteReady for a row that becomes
 * ready, JsFrontierNoteLeft for one that stops being ready), and the
 * transaction publishes them after its commit or abort is visible to
 * every snapshot (XACT_EVENT_COMMIT and XACT_EVENT_ABORT run after
 * ProcArrayEndTransaction): the ready keys at commit, the left keys at
 * abort or savepoint rollback.  Publishing lowers the frontier below the
 * key and appends it to the entry's ring of recent events, which the
 * proposals of claims still walking read.  So a ready job is either
 * visible to a claim's snapshot (taken after the ticket), or its event is
 * published after the ticket: it is never left behind the frontier.  The
 * transaction's own later claims see its jobs before it publishes them:
 * the frontier a claim reads is lowered below what its transaction noted
 * ready (a retry after a claim in one transaction).
 *
 * Where the promise cannot be kept, the frontier is not used:
 *	- a claim under REPEATABLE READ or SERIALIZABLE reads the frontier but
 *	  proposes nothing (its snapshot is older than its ticket);
 *	- a proposal made while more events were published than the ring holds
 *	  is dropped;
 *	- a transaction that noted more queues or priorities than it can carry
 *	  resets the frontiers of its database at its end;
 *	- PREPARE TRANSACTION of a transaction that noted keys turns frontiers
 *	  off until the server restarts: its outcome comes later, in another
 *	  session, and claim falls back to the per-session marks;
 *	- without shared_preload_libraries, or with job_state.claim_frontiers
 *	  = 0, there is no shared memory and claim uses the session marks.
 * A frontier lost (evicted, reset) only costs one walk from the head.
 * Queues with limits (claim_limited.c) keep the session marks: they pass
 * over jobs whose slots are full, which stay ready behind the walk.
 *
 * Memory: job_state.claim_frontiers entries, each for one queue of one job
 * table (database, relation, name), taken over in least-recently-used
 * order; each with its own LWLock, the map with one more.
 *
 * Publishing runs in commit and abort callbacks, where an error would be
 * a PANIC: it allocates nothing and only takes LWLocks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "job_state.h"
#include "frontier.h"
#include "dispatch.h"

#define JS_FRONTIER_NAME "job_state frontiers"
/* events a claim's proposal can look back over */
#define JS_FRONTIER_EVENTS 64
/* a queue name has at most 128 characters (JsCheckName) */
#define JS_FRONTIER_QUEUE_BYTES (128 * MAX_MULTIBYTE_CHAR_LEN + 1)
/* keys one transaction carries to its end before it resets instead */
#define JS_FRONTIER_PENDING 8

typedef struct JsFrontierEvent	/* event n is at events[n % JS_FRONTIER_EVENTS] */
{
	bool		reset;			/* forget the frontier, drop proposals */
	JsClaimKey	key;			/* a job ready at this key */
} JsFrontierEvent;

typedef struct JsFrontierEntry
{
	/* the tag: set and cleared under the map lock and the entry's lock */
	bool		used;
	Oid			dbid;
	Oid			relid;
	uint64		incarnation;
	char		queue[JS_FRONTIER_QUEUE_BYTES];
	/* under the entry's lock */
	TimestampTz used_at;
	bool		valid;
	JsClaimKey	frontier;
	uint64		seq;			/* events published */
	JsFrontierEvent events[JS_FRONTIER_EVENTS];
} JsFrontierEntry;

typedef struct JsFrontierShared
{
	bool		off;			/* a prepared transaction noted keys */
	uint64		incarnations;
	int			n;
	JsFrontierEntry entries[FLEXIBLE_ARRAY_MEMBER];
} JsFrontierShared;

static JsFrontierShared *frontiers = NULL;
static LWLockPadded *frontier_locks = NULL; /* [0] the map, [1 + i] entry i */

#if PG_VERSION_NUM >= 150000
static shmem_request_hook_type prev_shmem_request_hook = NULL;
#endif
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* keys this transaction noted, published at its end */
typedef struct JsPendingKey
{
	Oid			relid;
	char		queue[JS_FRONTIER_QUEUE_BYTES];
	JsClaimKey	key;			/* the lowest noted in its priority */
} JsPendingKey;

typedef struct JsPendingList
{
	int			n;
	bool		overflow;
	JsPendingKey keys[JS_FRONTIER_PENDING];
} JsPendingList;

static JsPendingList pending_ready;	/* published at commit */
static JsPendingList pending_left;	/* published at abort */

/* the entry this backend used last */
static int	cached_slot = -1;

#define EntryLock(i) (&frontier_locks[1 + (i)].lock)
#define MapLock() (&frontier_locks[0].lock)

int
JsClaimKeyCmp(const JsClaimKey *a, const JsClaimKey *b)
{
	/* the index order: priority DESC, run_after, id */
	if (a->priority != b->priority)
		return a->priority > b->priority ? -1 : 1;
	if (a->run_after != b->run_after)
		return a->run_after < b->run_after ? -1 : 1;
	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	return 0;
}

/* the greatest key of its priority below key (a frontier that keeps it) */
static JsClaimKey
JsKeyBefore(const JsClaimKey *key)
{
	JsClaimKey	before = *key;

	if (before.id > PG_INT64_MIN)
		before.id--;
	else
	{
		before.id = PG_INT64_MAX;
		if (before.run_after > DT_NOBEGIN)
			before.run_after--;
	}
	return before;
}

static Size
JsFrontierShmemSize(void)
{
	return add_size(offsetof(JsFrontierShared, entries),
					mul_size(sizeof(JsFrontierEntry), js_claim_frontiers));
}

static void
JsFrontierShmemRequest(void)
{
#if PG_VERSION_NUM >= 150000
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
#endif
	RequestAddinShmemSpace(MAXALIGN(JsFrontierShmemSize()));
	RequestNamedLWLockTranche(JS_FRONTIER_NAME, 1 + js_claim_frontiers);
}

static void
JsFrontierShmemStartup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	frontiers = ShmemInitStruct(JS_FRONTIER_NAME, JsFrontierShmemSize(), &found);
	if (!found)
	{
		memset(frontiers, 0, JsFrontierShmemSize());
		frontiers->n = js_claim_frontiers;
	}
	frontier_locks = GetNamedLWLockTranche(JS_FRONTIER_NAME);
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Called from _PG_init while shared_preload_libraries is processed.
 */
void
JsFrontierRegister(void)
{
	if (js_claim_frontiers <= 0)
		return;
#if PG_VERSION_NUM >= 150000
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = JsFrontierShmemRequest;
#else
	JsFrontierShmemRequest();
#endif
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = JsFrontierShmemStartup;
}

/* Is there a shared frontier table, and are frontiers on? */
bool
JsFrontierEnabled(void)
{
	return frontiers != NULL && frontiers->n > 0 && !frontiers->off;
}

static bool
JsEntryIs(const JsFrontierEntry *e, Oid relid, const char *queue)
{
	return e->used && e->dbid == MyDatabaseId && e->relid == relid &&
		strcmp(e->queue, queue) == 0;
}

/*
 * The entry of (database, relid, queue), under the map lock as given; -1
 * when there is none.
 */
static int
JsEntryFind(Oid relid, const char *queue)
{
	int			i;

	for (i = 0; i < frontiers->n; i++)
		if (JsEntryIs(&frontiers->entries[i], relid, queue))
			return i;
	return -1;
}

/*
 * The slot of the queue's entry, locked exclusively; create says whether
 * a missing entry is made (taking over the least recently used one).  -1,
 * unlocked, when there is none.  Never raises an error.
 */
static int
JsEntryLock(Oid relid, const char *queue, bool create)
{
	int			slot = cached_slot;
	int			i;

	if (strlen(queue) >= JS_FRONTIER_QUEUE_BYTES)
		return -1;
	if (slot >= 0)
	{
		LWLockAcquire(EntryLock(slot), LW_EXCLUSIVE);
		if (JsEntryIs(&frontiers->entries[slot], relid, queue))
			return slot;
		LWLockRelease(EntryLock(slot));
	}

	LWLockAcquire(MapLock(), LW_SHARED);
	slot = JsEntryFind(relid, queue);
	LWLockRelease(MapLock());
	if (slot < 0 && create)
	{
		LWLockAcquire(MapLock(), LW_EXCLUSIVE);
		slot = JsEntryFind(relid, queue);
		if (slot < 0)
		{
			/* a free entry, or the one used longest ago */
			slot = 0;
			for (i = 0; i < frontiers->n; i++)
			{
				JsFrontierEntry *e = &frontiers->entries[i];

				if (!e->used)
				{
					slot = i;
					break;
				}
				if (e->used_at < frontiers->entries[slot].used_at)
					slot = i;
			}
			LWLockAcquire(EntryLock(slot), LW_EXCLUSIVE);
			{
				JsFrontierEntry *e = &frontiers->entries[slot];

				e->used = true;
				e->dbid = MyDatabaseId;
				e->relid = relid;
				e->incarnation = ++frontiers->incarnations;
				strlcpy(e->queue, queue, sizeof(e->queue));
				e->valid = false;
				e->seq = 0;
				e->used_at = GetCurrentTimestamp();
			}
			LWLockRelease(MapLock());
			cached_slot = slot;
			return slot;
		}
		LWLockRelease(MapLock());
	}
	if (slot < 0)
		return -1;
	LWLockAcquire(EntryLock(slot), LW_EXCLUSIVE);
	if (!JsEntryIs(&frontiers->entries[slot], relid, queue))
	{
		/* taken over meanwhile */
		LWLockRelease(EntryLock(slot));
		return -1;
	}
	cached_slot = slot;
	return slot;
}

/*
 * Read the queue's frontier for a claim that is about to take its
 * snapshot: false when there are no shared frontiers (the caller uses the
 * session marks).  ticket->have says whether the queue has a frontier.
 */
bool
JsFrontierBegin(Oid job_relid, const char *queue, JsFrontierTicket *ticket)
{
	JsFrontierEntry *e;
	int			slot;

	if (!JsFrontierEnabled() || js_claim_rescan_interval <= 0)
		return false;
	slot = JsEntryLock(job_relid, queue, true);
	if (slot < 0)
		return false;
	e = &frontiers->entries[slot];
	e->used_at = GetCurrentTimestamp();
	ticket->slot = slot;
	ticket->incarnation = e->incarnation;
	ticket->seq = e->seq;
	ticket->have = e->valid;
	ticket->frontier = e->frontier;
	LWLockRelease(EntryLock(slot));
	ticket->may_propose = !IsolationUsesXactSnapshot();

	/*
	 * Jobs this transaction made ready are published at its commit, but
	 * its own claims see them now (a retry in the same transaction as the
	 * claim it follows, at a key the frontier already passed).
	 */
	if (ticket->have)
	{
		int			i;

		if (pending_ready.overflow)
			ticket->have = false;
		for (i = 0; i < pending_ready.n; i++)
		{
			const JsPendingKey *p = &pending_ready.keys[i];

			if (p->relid == job_relid && strcmp(p->queue, queue) == 0 &&
				p->key.priority == ticket->frontier.priority &&
				JsClaimKeyCmp(&p->key, &ticket->frontier) <= 0)
				ticket->frontier = JsKeyBefore(&p->key);
		}
	}
	return true;
}

/*
 * After the walk: run_end is the end of its unbroken run of accounted-for
 * entries (see the file's header).  The frontier moves up to it, lowered
 * below every job that became ready in its priority since the ticket.
 */
void
JsFrontierPropose(const JsFrontierTicket *ticket, const JsClaimKey *run_end)
{
	JsFrontierEntry *e;
	JsClaimKey	proposal = *run_end;
	uint64		s;

	if (!ticket->may_propose || frontiers == NULL)
		return;
	e = &frontiers->entries[ticket->slot];
	LWLockAcquire(EntryLock(ticket->slot), LW_EXCLUSIVE);
	if (frontiers->off || !e->used || e->incarnation != ticket->incarnation ||
		e->seq - ticket->seq > JS_FRONTIER_EVENTS)
	{
		LWLockRelease(EntryLock(ticket->slot));
		return;
	}
	for (s = ticket->seq + 1; s <= e->seq; s++)
	{
		const JsFrontierEvent *ev = &e->events[s % JS_FRONTIER_EVENTS];

		if (ev->reset)
		{
			LWLockRelease(EntryLock(ticket->slot));
			return;
		}
		if (ev->key.priority == proposal.priority &&
			JsClaimKeyCmp(&ev->key, &proposal) <= 0)
			proposal = JsKeyBefore(&ev->key);
	}
	if (!e->valid || e->frontier.priority != proposal.priority ||
		JsClaimKeyCmp(&e->frontier, &proposal) < 0)
	{
		e->frontier = proposal;
		e->valid = true;
	}
	LWLockRelease(EntryLock(ticket->slot));
}

/* --- events ---------------------------------------------------------------- */

static void
JsPendingAdd(JsPendingList *list, Oid relid, const char *queue,
			 const JsClaimKey *key)
{
	int			i;

	if (!JsFrontierEnabled() || list->overflow)
		return;
	for (i = 0; i < list->n; i++)
	{
		JsPendingKey *p = &list->keys[i];

		if (p->relid == relid && p->key.priority == key->priority &&
			strcmp(p->queue, queue) == 0)
		{
			if (JsClaimKeyCmp(key, &p->key) < 0)
				p->key = *key;
			return;
		}
	}
	if (list->n >= JS_FRONTIER_PENDING || strlen(queue) >= JS_FRONTIER_QUEUE_BYTES)
	{
		list->overflow = true;
		return;
	}
	list->keys[list->n].relid = relid;
	strlcpy(list->keys[list->n].queue, queue, JS_FRONTIER_QUEUE_BYTES);
	list->keys[list->n].key = *key;
	list->n++;
}

/* A job of the queue becomes ready at key (an INSERT or UPDATE of it). */
void
JsFrontierNoteReady(Oid job_relid, const char *queue, const JsClaimKey *key)
{
	JsPendingAdd(&pending_ready, job_relid, queue, key);
}

/*
 * A job of the queue stops being ready at key (its claim, its cancel, any
 * UPDATE or DELETE of it): ready again if the change rolls back.
 */
void
JsFrontierNoteLeft(Oid job_relid, const char *queue, const JsClaimKey *key)
{
	JsPendingAdd(&pending_left, job_relid, queue, key);
}

/* append an event to a locked entry and lower its frontier below it */
static void
JsEntryPublish(JsFrontierEntry *e, const JsClaimKey *key)
{
	JsFrontierEvent *ev;

	e->seq++;
	ev = &e->events[e->seq % JS_FRONTIER_EVENTS];
	ev->reset = key == NULL;
	if (key == NULL)
	{
		e->valid = false;
		return;
	}
	ev->key = *key;
	if (e->valid && e->frontier.priority == key->priority &&
		JsClaimKeyCmp(key, &e->frontier) <= 0)
		e->frontier = JsKeyBefore(key);
}

/* every frontier of this database forgets itself */
static void
JsResetDatabase(void)
{
	int			i;

	for (i = 0; i < frontiers->n; i++)
	{
		JsFrontierEntry *e = &frontiers->entries[i];

		LWLockAcquire(EntryLock(i), LW_EXCLUSIVE);
		if (e->used && e->dbid == MyDatabaseId)
			JsEntryPublish(e, NULL);
		LWLockRelease(EntryLock(i));
	}
}

static void
JsPublish(const JsPendingList *list)
{
	int			i;

	if (frontiers == NULL)
		return;
	if (list->overflow)
	{
		JsResetDatabase();
		return;
	}
	for (i = 0; i < list->n; i++)
	{
		const JsPendingKey *p = &list->keys[i];
		int			slot = JsEntryLock(p->relid, p->queue, false);

		if (slot < 0)
			continue;			/* no frontier to lower */
		JsEntryPublish(&frontiers->entries[slot], &p->key);
		LWLockRelease(EntryLock(slot));
	}
}

static void
JsPendingClear(void)
{
	pending_ready.n = 0;
	pending_ready.overflow = false;
	pending_left.n = 0;
	pending_left.overflow = false;
}

static bool
JsPendingAny(void)
{
	return pending_ready.n > 0 || pending_ready.overflow ||
		pending_left.n > 0 || pending_left.overflow;
}

static void
JsFrontierXactCallback(XactEvent event, void *arg)
{
	if (!JsPendingAny())
		return;
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			JsPublish(&pending_ready);
			JsPendingClear();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			JsPublish(&pending_left);
			JsPendingClear();
			break;
		case XACT_EVENT_PRE_PREPARE:
			/* the outcome comes later, elsewhere: no frontiers from now on */
			if (frontiers != NULL)
			{
				LWLockAcquire(MapLock(), LW_EXCLUSIVE);
				frontiers->off = true;
				LWLockRelease(MapLock());
			}
			break;
		case XACT_EVENT_PREPARE:
			JsPendingClear();
			break;
		default:
			break;
	}
}

/*
 * A rolled-back savepoint makes the jobs it took ready again: publish
 * what left (all of it, the enclosing levels' too, which only lowers the
 * frontier further than needed) and keep the lists for the end.
 */
static void
JsFrontierSubXactCallback(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB &&
		(pending_left.n > 0 || pending_left.overflow))
		JsPublish(&pending_left);
}

void
JsFrontierInit(void)
{
	JsOnXact(JsFrontierXactCallback);
	JsOnSubXact(JsFrontierSubXactCallback);
}
