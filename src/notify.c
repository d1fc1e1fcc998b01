/*-------------------------------------------------------------------------
 *
 * notify.c
 *	  Wake-ups for new jobs: NOTIFY job_state_<channel key>, ''.
 *
 * Each queue has its own channel, named by a secret of 128 random bits
 * (queue.channel), with an empty payload: PostgreSQL lets any role LISTEN
 * to any channel, so a wake-up must tell a role that may not see the queue
 * nothing, neither the queue's name nor that it exists.  A worker learns
 * the channel from queue_channel(), which checks its claim privilege
 * (acl.c).  Under 0.1.0's queue table (no channel, before ALTER EXTENSION
 * UPDATE) the wake-up is 0.1.0's, NOTIFY job_state, '<queue>'.
 *
 * PostgreSQL serialises the commits of all transactions that NOTIFY: one
 * lock, taken before the commit record is written and released after it is
 * flushed.  A submit that notified in its own transaction therefore made
 * every submitting commit of the cluster wait for the one before it, and
 * with synchronous_commit on it lost group commit entirely.
 *
 * With job_state in shared_preload_libraries, a second background worker,
 * the notifier, sends the notifications instead.  submit() remembers the
 * queue in backend memory; once the transaction has committed -- after
 * ProcArrayEndTransaction, so the new job is visible to every snapshot taken
 * from then on -- the commit callback adds the queue to a small set in
 * shared memory and sets the notifier's latch.  The notifier takes the whole
 * set and sends one NOTIFY per queue in one transaction of its own; at most
 * once per job_state.notify_interval, so a burst of submits becomes one
 * notification per queue.  A listener woken by it finds the job: the
 * notification is sent only after the job became visible.
 *
 * What can be lost, and what covers it:
 *	- the set is full (JS_NOTIFY_SLOTS queues): the notifier wakes every
 *	  queue of the database;
 *	- the notifier is not running when a transaction commits (it died or
 *	  is restarting): when it starts it wakes every queue once;
 *	- a round fails (the notification queue is full because a listener
 *	  stopped reading): the failure is logged, the round's queues are woken
 *	  again in the next round.
 * A rolled-back transaction or subtransaction wakes nobody.  submit()
 * notifies in its own transaction, as NOTIFY does, where the notifier
 * does not serve this database (not preloaded, or job_state.database is
 * another database) and where job_state.notify = commit.
 *
 * The notifier also sends NOTIFY job_state_done_<channel key>, '<job id>'
 * for the jobs that ended in the transactions of its database (waiter.c hands them
 * over after their commits), in the same rounds.
 *
 * Locks: the notifier set's LWLock, held only to copy queue names in or
 * out; never while waiting and never with any other lock of ours.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/async.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "job_state.h"
#include "bgworker.h"
#include "tables.h"
#include "waiter.h"
#include "dispatch.h"

#define JS_NOTIFIER_NAME "job_state notifier"
#define JS_NOTIFIER_RESTART_SECS 5
#define JS_NOTIFIER_RETRY_MS 1000

/* queues remembered between two rounds; more wake every queue */
#define JS_NOTIFY_SLOTS 64
/*
 * What one wake-up sends: 'c' and the queue's channel (payload ''), or,
 * on 0.1.0's table, 'q' and the queue's name (NOTIFY job_state, name); a
 * queue name has at most 128 characters (JsCheckName).
 */
#define JS_QUEUE_NAME_BYTES (128 * MAX_MULTIBYTE_CHAR_LEN + 2)

typedef struct JsNotifyShared
{
	LWLock	   *lock;
	Oid			dbid;			/* database the notifier serves, or invalid */
	Latch	   *latch;			/* the notifier's latch while it runs */
	bool		all;			/* wake every queue of dbid */
	int			npending;
	char		pending[JS_NOTIFY_SLOTS][JS_QUEUE_NAME_BYTES];
} JsNotifyShared;

static JsNotifyShared *notify_shared = NULL;

#if PG_VERSION_NUM >= 150000
static shmem_request_hook_type prev_shmem_request_hook = NULL;
#endif
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/*
 * Queues of this backend's transaction that wait for its commit, with the
 * (sub)transaction level that named them.  Allocated in
 * TopTransactionContext; forgotten at the end of every transaction.
 */
typedef struct JsPendingQueue
{
	int			level;
	char		name[FLEXIBLE_ARRAY_MEMBER];
} JsPendingQueue;

static List *xact_queues = NIL;

PGDLLEXPORT void js_notifier_main(Datum main_arg);

static JsPlan queues_plan = {
	"SELECT 'c' OPERATOR(pg_catalog.||) '" JS_WORK_CHANNEL_PREFIX "' OPERATOR(pg_catalog.||) channel"
	" FROM job_state.queue ORDER BY name",
	0, {0}
};

static JsPlan queues_plan_010 = {
	"SELECT 'q' OPERATOR(pg_catalog.||) name FROM job_state.queue ORDER BY name",
	0, {0}
};

/* send one wake-up as the set holds it (JS_QUEUE_NAME_BYTES) */
static void
JsNotifySend(const char *wake)
{
	if (wake[0] == 'c')
		Async_Notify(wake + 1, "");
	else
		Async_Notify("job_state", wake + 1);
}

/* --- shared memory -------------------------------------------------------- */

static void
JsNotifyShmemRequest(void)
{
#if PG_VERSION_NUM >= 150000
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
#endif
	RequestAddinShmemSpace(MAXALIGN(sizeof(JsNotifyShared)));
	RequestNamedLWLockTranche(JS_NOTIFIER_NAME, 1);
}

static void
JsNotifyShmemStartup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	notify_shared = ShmemInitStruct(JS_NOTIFIER_NAME, sizeof(JsNotifyShared),
									&found);
	if (!found)
	{
		notify_shared->lock = &(GetNamedLWLockTranche(JS_NOTIFIER_NAME))->lock;
		notify_shared->dbid = InvalidOid;
		notify_shared->latch = NULL;
		notify_shared->all = false;
		notify_shared->npending = 0;
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Called from _PG_init while shared_preload_libraries is processed: the
 * shared set and the notifier worker.
 */
void
JsRegisterNotifier(void)
{
#if PG_VERSION_NUM >= 150000
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = JsNotifyShmemRequest;
#else
	JsNotifyShmemRequest();
#endif
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = JsNotifyShmemStartup;

	JsRegisterWorker(JS_NOTIFIER_NAME, "js_notifier_main", JS_NOTIFIER_RESTART_SECS);
}

/* Adds one queue to the shared set; the caller holds the lock exclusively. */
static void
JsNotifySharedAdd(const char *name)
{
	int			i;

	if (notify_shared->all)
		return;
	if (strlen(name) >= JS_QUEUE_NAME_BYTES)
	{
		notify_shared->all = true;
		return;
	}
	for (i = 0; i < notify_shared->npending; i++)
		if (strcmp(notify_shared->pending[i], name) == 0)
			return;
	if (notify_shared->npending == JS_NOTIFY_SLOTS)
	{
		notify_shared->all = true;
		return;
	}
	strcpy(notify_shared->pending[notify_shared->npending++], name);
}

/* --- the submitting backend ----------------------------------------------- */

static void
JsNotifyXactCallback(XactEvent event, void *arg)
{
	ListCell   *lc;
	Latch	   *latch;

	if (xact_queues == NIL)
		return;

	switch (event)
	{
		case XACT_EVENT_COMMIT:
			/* committed and visible: hand the queues to the notifier */
			LWLockAcquire(notify_shared->lock, LW_EXCLUSIVE);
			foreach(lc, xact_queues)
				JsNotifySharedAdd(((JsPendingQueue *) lfirst(lc))->name);
			latch = notify_shared->latch;
			LWLockRelease(notify_shared->lock);
			if (latch != NULL)
				SetLatch(latch);
			xact_queues = NIL;
			break;

		case XACT_EVENT_PRE_PREPARE:
			/* as PostgreSQL refuses to PREPARE a transaction that notifies */
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot PREPARE a transaction that submitted jobs with job_state.notify on"),
					 errdetail("The wake-up of a new job is sent after its transaction commits, which a prepared transaction does not do in this session."),
					 errhint("SET LOCAL job_state.notify = off in the transaction, and let workers poll.")));
			break;

		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_PARALLEL_COMMIT:
			/* the memory goes with TopTransactionContext */
			xact_queues = NIL;
			break;

		default:
			break;
	}
}

static void
JsNotifySubXactCallback(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	ListCell   *lc;

	if (xact_queues == NIL)
		return;

	switch (event)
	{
		case SUBXACT_EVENT_COMMIT_SUB:
			/* the parent now owns what this subtransaction named */
			foreach(lc, xact_queues)
			{
				JsPendingQueue *q = lfirst(lc);

				if (q->level >= level)
					q->level = level - 1;
			}
			break;

		case SUBXACT_EVENT_ABORT_SUB:
			foreach(lc, xact_queues)
			{
				JsPendingQueue *q = lfirst(lc);

				if (q->level >= level)
					xact_queues = foreach_delete_current(xact_queues, lc);
			}
			break;

		default:
			break;
	}
}

/*
 * A job was created in queue, whose channel key is channel_key ("" on
 * 0.1.0's table): wake the workers of that queue once this transaction
 * commits (job_state.notify).
 */
void
JsNotifyNewJob(const char *queue, const char *channel_key)
{
	int			level;
	ListCell   *lc;
	JsPendingQueue *q;
	MemoryContext oldcontext;
	char		wake[JS_QUEUE_NAME_BYTES];

	if (js_notify == JS_NOTIFY_OFF)
		return;

	if (channel_key[0] != '\0')
		snprintf(wake, sizeof(wake), "c%s%s", JS_WORK_CHANNEL_PREFIX, channel_key);
	else
		snprintf(wake, sizeof(wake), "q%s", queue);

	/* without a notifier for this database, notify as NOTIFY does */
	if (js_notify == JS_NOTIFY_COMMIT || notify_shared == NULL ||
		notify_shared->dbid != MyDatabaseId)
	{
		JsNotifySend(wake);
		return;
	}

	JsOnXact(JsNotifyXactCallback);
	JsOnSubXact(JsNotifySubXactCallback);

	level = GetCurrentTransactionNestLevel();
	foreach(lc, xact_queues)
	{
		q = lfirst(lc);
		if (strcmp(q->name, wake) == 0)
		{
			/* kept at the outermost level that named it */
			q->level = Min(q->level, level);
			return;
		}
	}

	oldcontext = MemoryContextSwitchTo(TopTransactionContext);
	q = palloc(offsetof(JsPendingQueue, name) + strlen(wake) + 1);
	q->level = level;
	strcpy(q->name, wake);
	xact_queues = lappend(xact_queues, q);
	MemoryContextSwitchTo(oldcontext);
}

/* --- the notifier --------------------------------------------------------- */

static void
JsNotifierDetach(int code, Datum arg)
{
	LWLockAcquire(notify_shared->lock, LW_EXCLUSIVE);
	if (notify_shared->latch == MyLatch)
	{
		notify_shared->latch = NULL;
		notify_shared->dbid = InvalidOid;
	}
	LWLockRelease(notify_shared->lock);
	JsWaiterServe(InvalidOid, NULL);
}

/*
 * Takes the shared set: returns the number of queues copied to names, or
 * -1 for every queue.
 */
static int
JsNotifierTake(char (*names)[JS_QUEUE_NAME_BYTES])
{
	int			n;

	LWLockAcquire(notify_shared->lock, LW_EXCLUSIVE);
	if (notify_shared->all)
		n = -1;
	else
	{
		n = notify_shared->npending;
		memcpy(names, notify_shared->pending, n * JS_QUEUE_NAME_BYTES);
	}
	notify_shared->all = false;
	notify_shared->npending = 0;
	LWLockRelease(notify_shared->lock);
	return n;
}

/* Puts queues back after a failed round. */
static void
JsNotifierGiveBack(char (*names)[JS_QUEUE_NAME_BYTES], int n)
{
	int			i;

	LWLockAcquire(notify_shared->lock, LW_EXCLUSIVE);
	if (n < 0)
		notify_shared->all = true;
	for (i = 0; i < n; i++)
		JsNotifySharedAdd(names[i]);
	LWLockRelease(notify_shared->lock);
}

/* what a round sends: names[0..n-1], or every queue (n = -1) */
typedef struct JsNotifyRound
{
	char		(*names)[JS_QUEUE_NAME_BYTES];
	int			n;
	JsDoneEntry *done;			/* ended jobs: their done channels */
	int			ndone;
} JsNotifyRound;

/* One round: NOTIFY for each queue, in one transaction. */
static void
JsNotifyQueues(void *arg)
{
	JsNotifyRound *round = arg;
	int			i;

	if (round->n >= 0)
	{
		for (i = 0; i < round->n; i++)
			JsNotifySend(round->names[i]);
	}
	else if (JsExtensionInstalled())
	{
		bool		keyed = get_attnum(JsOwnRelid("queue"), "channel") != InvalidAttrNumber;
		int			queues = JsExecute(keyed ? &queues_plan : &queues_plan_010,
									   NULL, NULL, true, 0);

		for (i = 0; i < queues; i++)
			JsNotifySend(JsGetText(i, 1));
	}
	for (i = 0; i < round->ndone; i++)
		JsWaiterNotifyDone(&round->done[i]);
}

void
js_notifier_main(Datum main_arg)
{
	MemoryContext round_context;
	char		(*names)[JS_QUEUE_NAME_BYTES];
	JsDoneEntry *done;

	JsWorkerConnect(JS_NOTIFIER_NAME);

	/* serve this database; wake every queue once for what was missed */
	JsOnBeforeShmemExit(JsNotifierDetach, (Datum) 0);
	LWLockAcquire(notify_shared->lock, LW_EXCLUSIVE);
	notify_shared->dbid = MyDatabaseId;
	notify_shared->latch = MyLatch;
	notify_shared->all = true;
	LWLockRelease(notify_shared->lock);
	JsWaiterServe(MyDatabaseId, MyLatch);

	ereport(LOG,
			(errmsg("job_state notifier started in database \"%s\"", js_database),
			 errdetail("It sends the wake-ups of new jobs at most every %d ms.",
					   js_notify_interval)));

	round_context = AllocSetContextCreate(TopMemoryContext,
										  JS_NOTIFIER_NAME,
										  ALLOCSET_DEFAULT_SIZES);
	names = MemoryContextAlloc(TopMemoryContext,
							   JS_NOTIFY_SLOTS * JS_QUEUE_NAME_BYTES);
	done = MemoryContextAlloc(TopMemoryContext,
							  JS_DONE_IDS_PER_ROUND * sizeof(JsDoneEntry));

	for (;;)
	{
		JsNotifyRound round;
		int			n;
		int			ndone;
		uint64		dropped;
		bool		ok;

		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		n = JsNotifierTake(names);
		ndone = JsWaiterTakeDone(done, JS_DONE_IDS_PER_ROUND, &dropped);
		if (dropped > 0)
			ereport(LOG,
					(errmsg("job_state notifier: %llu notifications of ended jobs were dropped",
							(unsigned long long) dropped),
					 errdetail("More jobs ended between two rounds than the notifier keeps."),
					 errhint("Listeners of job_state_done should also poll, or lower job_state.notify_interval.")));
		if (n == 0 && ndone == 0)
		{
			(void) WaitLatch(MyLatch,
							 WL_LATCH_SET | WL_EXIT_ON_PM_DEATH,
							 -1L,
							 PG_WAIT_EXTENSION);
			continue;
		}

		round.names = names;
		round.n = n;
		round.done = done;
		round.ndone = ndone;
		ok = JsWorkerRound(round_context, "NOTIFY job_state", JsNotifyQueues, &round);
		MemoryContextSwitchTo(TopMemoryContext);
		MemoryContextReset(round_context);
		if (!ok)
		{
			JsNotifierGiveBack(names, n);
			JsWaiterGiveBackDone(done, ndone);
		}

		/*
		 * What comes during the interval goes out together after it.  A
		 * failed round is retried after a second, so that a persistent
		 * error (a full notification queue) is not logged in a tight loop.
		 */
		if (!ok || js_notify_interval > 0)
			(void) WaitLatch(NULL,
							 WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 ok ? js_notify_interval : JS_NOTIFIER_RETRY_MS,
							 PG_WAIT_EXTENSION);
	}
}
