/*-------------------------------------------------------------------------
 *
 * waiter.c
 *	  Announcing that a job ended: the wake-ups job_state.wait() sleeps on,
 *	  and NOTIFY job_state_done_<channel key>, '<job id>' for clients that
 *	  LISTEN.
 *
 * A job ends, for this file, when it becomes succeeded, failed, cancelled
 * or unknown: the job table's AFTER trigger (job_trigger.c) calls
 * JsWaiterNoteDone for every such row.
 *
 * NOTIFY job_state_done_<key> is delivered when (and only when) the
 * completing transaction commits; job_state.notify = off sends none.  Its
 * payload is the job id alone, on the channel of the job's queue, named by
 * the queue's secret channel key (notify.c): only a role that obtained the
 * name from queue_channel(queue, 'done'), which checks its privileges,
 * hears it (0.1.0's table, before ALTER EXTENSION UPDATE: job_state_done,
 * as 0.1.0 did).  The trigger reads the key from the per-backend queue
 * cache (tables.c), which the completing call has filled.  Who sends it follows job_state.notify as for submit
 * (notify.c): where the notifier worker serves the database (preloaded,
 * job_state.notify = on), the ids go to it after the commit, so that
 * completing commits are not serialised by NOTIFY's commit lock; they are
 * kept in a ring of JS_DONE_IDS in shared memory until its next round, and
 * what does not fit is dropped and counted (the notifier logs it).
 * Elsewhere the completing transaction notifies itself, as NOTIFY does
 * (and, as with submit, cannot then be prepared).  A rolled-back
 * subtransaction's ids are forgotten.
 *
 * With job_state in shared_preload_libraries there is a small array of
 * JS_WAIT_SLOTS wake-up slots in shared memory, each a counter and a
 * condition variable; a job id hashes to one slot.  The trigger marks the
 * job's slot in a per-transaction bitmap (no allocation); the commit
 * callback, which runs after ProcArrayEndTransaction (the change is
 * visible to every snapshot taken from then on), bumps the counter of
 * every marked slot and broadcasts its condition variable.  An abort,
 * and a PREPARE, forget the marks (a prepared transaction committed later
 * is found by the waiter's poll).  A savepoint rolled back keeps its marks:
 * a waiter woken for nothing only reads the job once more.
 *
 * A waiter (wait.c) takes the slot's counter as its ticket before it reads
 * the job, and sleeps only while the counter still equals the ticket: a
 * commit visible to the read cannot have been missed, and one that was not
 * visible to it bumps the counter afterwards.  It sleeps at most
 * job_state.wait_poll_interval, as a safety net; without shared memory it
 * polls at that interval.  Several jobs share a slot: a waiter may wake for
 * another job and read its own once more.
 *
 * Locks: the ring's spinlock, held only to copy ids in or out; the
 * condition variables' spinlocks inside PostgreSQL.  The commit callback
 * allocates nothing and raises no error.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/async.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "job_state.h"
#include "tables.h"
#include "waiter.h"
#include "dispatch.h"

#define JS_WAITER_NAME "job_state waiters"
#define JS_WAIT_SLOTS 128		/* a power of two */
#define JS_WAIT_SLOT_BITS 7
#define JS_DONE_CHANNEL "job_state_done"	/* 0.1.0's table */

typedef struct JsWaitSlot
{
	pg_atomic_uint64 seq;		/* commits that ended a job of this slot */
	ConditionVariable cv;
} JsWaitSlot;

static JsWaitSlot *wait_slots = NULL;

/* ids of ended jobs for the notifier to send as job_state_done */
#define JS_DONE_IDS JS_DONE_IDS_PER_ROUND

typedef struct JsDoneRing
{
	slock_t		mutex;
	Oid			dbid;			/* database the notifier serves, or invalid */
	Latch	   *latch;			/* the notifier's latch while it serves */
	int			n;
	uint64		dropped;		/* ids that did not fit since the last take */
	JsDoneEntry ids[JS_DONE_IDS];
} JsDoneRing;

static JsDoneRing *done_ring = NULL;

/* ended jobs of this transaction for the notifier, with their level */
typedef struct JsPendingDone
{
	int			level;
	JsDoneEntry done;
} JsPendingDone;

static List *xact_done = NIL;

#if PG_VERSION_NUM >= 150000
static shmem_request_hook_type prev_shmem_request_hook = NULL;
#endif
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* slots marked by this transaction, broadcast at its commit */
static uint64 pending[JS_WAIT_SLOTS / 64];
static bool pending_any = false;

StaticAssertDecl(JS_WAIT_SLOTS == (1 << JS_WAIT_SLOT_BITS),
				 "JS_WAIT_SLOTS must be 2 ^ JS_WAIT_SLOT_BITS");

static int
JsWaitSlotOf(int64 job_id)
{
	/* Fibonacci hashing: consecutive ids spread over the slots */
	return (int) (((uint64) job_id * UINT64CONST(0x9E3779B97F4A7C15)) >>
				  (64 - JS_WAIT_SLOT_BITS));
}

static Size
JsWaiterShmemSize(void)
{
	return add_size(MAXALIGN(mul_size(sizeof(JsWaitSlot), JS_WAIT_SLOTS)),
					sizeof(JsDoneRing));
}

static void
JsWaiterShmemRequest(void)
{
#if PG_VERSION_NUM >= 150000
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
#endif
	RequestAddinShmemSpace(MAXALIGN(JsWaiterShmemSize()));
}

static void
JsWaiterShmemStartup(void)
{
	bool		found;
	int			i;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	wait_slots = ShmemInitStruct(JS_WAITER_NAME, JsWaiterShmemSize(), &found);
	done_ring = (JsDoneRing *) ((char *) wait_slots +
								MAXALIGN(mul_size(sizeof(JsWaitSlot), JS_WAIT_SLOTS)));
	if (!found)
	{
		for (i = 0; i < JS_WAIT_SLOTS; i++)
		{
			pg_atomic_init_u64(&wait_slots[i].seq, 0);
			ConditionVariableInit(&wait_slots[i].cv);
		}
		SpinLockInit(&done_ring->mutex);
		done_ring->dbid = InvalidOid;
		done_ring->latch = NULL;
		done_ring->n = 0;
		done_ring->dropped = 0;
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Called from _PG_init while shared_preload_libraries is processed.
 */
void
JsWaiterRegister(void)
{
#if PG_VERSION_NUM >= 150000
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = JsWaiterShmemRequest;
#else
	JsWaiterShmemRequest();
#endif
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = JsWaiterShmemStartup;
}

/* Hands this transaction's ended jobs to the notifier (commit callback). */
static void
JsWaiterHandOver(void)
{
	ListCell   *lc;
	Latch	   *latch;

	SpinLockAcquire(&done_ring->mutex);
	foreach(lc, xact_done)
	{
		if (done_ring->n < JS_DONE_IDS)
			done_ring->ids[done_ring->n++] = ((JsPendingDone *) lfirst(lc))->done;
		else
			done_ring->dropped++;
	}
	latch = done_ring->latch;
	SpinLockRelease(&done_ring->mutex);
	if (latch != NULL)
		SetLatch(latch);
}

static void
JsWaiterXactCallback(XactEvent event, void *arg)
{
	int			i;

	if (!pending_any && xact_done == NIL)
		return;

	if (event == XACT_EVENT_PRE_PREPARE && xact_done != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that ended jobs with job_state.notify on"),
				 errdetail("NOTIFY job_state_done is sent after its transaction commits, which a prepared transaction does not do in this session."),
				 errhint("SET LOCAL job_state.notify = off in the transaction.")));

	if (event == XACT_EVENT_COMMIT)
	{
		/* committed and visible to every new snapshot: wake the waiters */
		for (i = 0; pending_any && wait_slots != NULL && i < JS_WAIT_SLOTS; i++)
		{
			if ((pending[i / 64] & (UINT64CONST(1) << (i % 64))) == 0)
				continue;
			pg_atomic_fetch_add_u64(&wait_slots[i].seq, 1);
			ConditionVariableBroadcast(&wait_slots[i].cv);
		}
		if (xact_done != NIL && done_ring != NULL)
			JsWaiterHandOver();
	}
	if (JsXactEnded(event))
	{
		memset(pending, 0, sizeof(pending));
		pending_any = false;
		/* the memory goes with TopTransactionContext */
		xact_done = NIL;
	}
}

static void
JsWaiterSubXactCallback(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	ListCell   *lc;

	if (xact_done == NIL)
		return;

	switch (event)
	{
		case SUBXACT_EVENT_COMMIT_SUB:
			/* the parent now owns what this subtransaction ended */
			foreach(lc, xact_done)
			{
				JsPendingDone *d = lfirst(lc);

				if (d->level >= level)
					d->level = level - 1;
			}
			break;

		case SUBXACT_EVENT_ABORT_SUB:
			foreach(lc, xact_done)
			{
				JsPendingDone *d = lfirst(lc);

				if (d->level >= level)
					xact_done = foreach_delete_current(xact_done, lc);
			}
			break;

		default:
			break;
	}
}

/* Called from _PG_init, preloaded or not. */
void
JsWaiterInit(void)
{
	JsOnXact(JsWaiterXactCallback);
	JsOnSubXact(JsWaiterSubXactCallback);
}

/*
 * The job became succeeded, failed, cancelled or unknown in this
 * transaction: wake its waiters and notify its queue's done channel once
 * it commits.
 */
void
JsWaiterNoteDone(int64 job_id, Datum queue)
{
	bool		served;
	JsQueueOptions q;

	/* no queue row (raw SQL), no channel: nobody is told */
	if (js_notify != JS_NOTIFY_OFF && JsReadQueueCached(queue, NULL, &q))
	{
		JsDoneEntry done;

		done.id = job_id;
		strlcpy(done.key, q.channel, sizeof(done.key));

		served = false;
		if (js_notify == JS_NOTIFY_ON && done_ring != NULL)
		{
			SpinLockAcquire(&done_ring->mutex);
			served = done_ring->dbid == MyDatabaseId;
			SpinLockRelease(&done_ring->mutex);
		}
		if (served)
		{
			MemoryContext oldcontext = MemoryContextSwitchTo(TopTransactionContext);
			JsPendingDone *d = palloc(sizeof(JsPendingDone));

			d->level = GetCurrentTransactionNestLevel();
			d->done = done;
			xact_done = lappend(xact_done, d);
			MemoryContextSwitchTo(oldcontext);
		}
		else
			JsWaiterNotifyDone(&done);
	}
	if (wait_slots != NULL)
	{
		int			slot = JsWaitSlotOf(job_id);

		pending[slot / 64] |= UINT64CONST(1) << (slot % 64);
		pending_any = true;
	}
}

/*
 * The notifier: serve database dbid from now on with latch (InvalidOid and
 * NULL when it stops).
 */
void
JsWaiterServe(Oid dbid, Latch *latch)
{
	if (done_ring == NULL)
		return;
	SpinLockAcquire(&done_ring->mutex);
	done_ring->dbid = dbid;
	done_ring->latch = latch;
	SpinLockRelease(&done_ring->mutex);
}

/*
 * The notifier: takes up to max ended jobs into done; *dropped is the
 * number that did not fit since the last take.
 */
int
JsWaiterTakeDone(JsDoneEntry *done, int max, uint64 *dropped)
{
	int			n;

	*dropped = 0;
	if (done_ring == NULL)
		return 0;
	SpinLockAcquire(&done_ring->mutex);
	n = Min(done_ring->n, max);
	memcpy(done, done_ring->ids, n * sizeof(JsDoneEntry));
	memmove(done_ring->ids, done_ring->ids + n, (done_ring->n - n) * sizeof(JsDoneEntry));
	done_ring->n -= n;
	*dropped = done_ring->dropped;
	done_ring->dropped = 0;
	SpinLockRelease(&done_ring->mutex);
	return n;
}

/* The notifier: puts ended jobs back after a failed round (what fits). */
void
JsWaiterGiveBackDone(const JsDoneEntry *done, int n)
{
	int			i;

	if (done_ring == NULL)
		return;
	SpinLockAcquire(&done_ring->mutex);
	for (i = 0; i < n; i++)
	{
		if (done_ring->n < JS_DONE_IDS)
			done_ring->ids[done_ring->n++] = done[i];
		else
			done_ring->dropped++;
	}
	SpinLockRelease(&done_ring->mutex);
}

/*
 * NOTIFY the done channel of one ended job's queue (0.1.0's table:
 * job_state_done): in the notifier's round, or in the completing
 * transaction.
 */
void
JsWaiterNotifyDone(const JsDoneEntry *done)
{
	char		payload[32];
	char		channel[sizeof(JS_DONE_CHANNEL_PREFIX) + JS_CHANNEL_KEY_LEN];

	snprintf(payload, sizeof(payload), INT64_FORMAT, done->id);
	if (done->key[0] == '\0')
		Async_Notify(JS_DONE_CHANNEL, payload);
	else
	{
		snprintf(channel, sizeof(channel), "%s%s", JS_DONE_CHANNEL_PREFIX, done->key);
		Async_Notify(channel, payload);
	}
}

/* Is there shared memory to sleep on (else wait() polls)? */
bool
JsWaiterShared(void)
{
	return wait_slots != NULL;
}

/*
 * The ticket of job_id's slot: taken before the job is read, handed to
 * JsWaiterSleep after.
 */
uint64
JsWaiterTicket(int64 job_id)
{
	uint64		seq;

	if (wait_slots == NULL)
		return 0;
	seq = pg_atomic_read_u64(&wait_slots[JsWaitSlotOf(job_id)].seq);
	/* read before the snapshot the job is read with */
	pg_memory_barrier();
	return seq;
}

/*
 * Sleep until a commit ends a job of job_id's slot after ticket was taken,
 * or timeout_ms pass; answers interrupts (query cancel, termination).
 * Uses no CPU while asleep.
 */
void
JsWaiterSleep(int64 job_id, uint64 ticket, long timeout_ms)
{
	JsWaitSlot *slot;
	TimestampTz end;

	if (wait_slots == NULL)
	{
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		return;
	}

	slot = &wait_slots[JsWaitSlotOf(job_id)];
	end = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	ConditionVariablePrepareToSleep(&slot->cv);
	while (pg_atomic_read_u64(&slot->seq) == ticket)
	{
		long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), end);

		if (left <= 0 ||
			ConditionVariableTimedSleep(&slot->cv, left, PG_WAIT_EXTENSION))
			break;
	}
	ConditionVariableCancelSleep();
	CHECK_FOR_INTERRUPTS();
}
