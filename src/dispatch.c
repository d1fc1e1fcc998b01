/*-------------------------------------------------------------------------
 *
 * dispatch.c
 *	  The callbacks job_state asks the server for, each kind registered
 *	  once per backend and handed on to the files that subscribed.
 *
 * The server keeps some callbacks in fixed arrays per backend, shared by
 * every library loaded into it: 10 relcache callbacks, 64 syscache
 * callbacks (inval.c), 20 entries in each of the on_proc_exit,
 * before_shmem_exit and on_shmem_exit lists (ipc.c).  A backend that runs
 * out ends with FATAL, whichever library asked last.  So job_state takes
 * at most one relcache callback, one syscache callback per cache it
 * watches and one entry of each exit list, however many of its files want
 * one; the transaction and subtransaction callbacks (lists without a
 * limit) go the same way, so that every such registration is in one place.
 * job_state uses no on_proc_exit or on_shmem_exit entry; one that it
 * needs belongs here, beside before_shmem_exit.
 *
 * Invariants.  A kind is registered with the server when its first
 * subscriber comes, never before and never twice: when its array was
 * empty (for syscache, held no subscriber of that cache), and for the
 * exit list when the process is not the one that registered, as a child
 * of the postmaster starts with empty exit lists (on_exit_reset) but a
 * copy of every other array.  Subscribing a function
 * that is already subscribed does nothing, so a file may subscribe on
 * every first use.  The calls are in the order the server would make
 * them had each file registered itself: relcache and syscache callbacks
 * in subscription order, transaction callbacks and exit entries in
 * reverse (the server prepends the former and runs the latter last
 * registered first).  A relcache call with InvalidOid means every
 * relation, as from the server.  Each array holds JS_DISPATCH_MAX
 * subscribers; more is a programming error (elog ERROR, before anything
 * is registered).  Nothing is allocated.
 *
 * Locks: none.  No SPI, no catalog access: a callback runs wherever the
 * server runs it (invalidation processing, commit, abort, exit).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "dispatch.h"

typedef struct JsSyscacheSub
{
	int			cacheid;
	SyscacheCallbackFunction func;
} JsSyscacheSub;

typedef struct JsExitSub
{
	pg_on_exit_callback func;
	Datum		arg;
} JsExitSub;

static RelcacheCallbackFunction relcache_subs[JS_DISPATCH_MAX];
static int	n_relcache = 0;

static JsSyscacheSub syscache_subs[JS_DISPATCH_MAX];
static int	n_syscache = 0;

static XactCallback xact_subs[JS_DISPATCH_MAX];
static int	n_xact = 0;

static SubXactCallback subxact_subs[JS_DISPATCH_MAX];
static int	n_subxact = 0;

static JsExitSub before_shmem_exit_subs[JS_DISPATCH_MAX];
static int	n_before_shmem_exit = 0;
static int	before_shmem_exit_pid = 0;	/* MyProcPid that registered */

/* a subscriber more than the array holds: only a new caller could do it */
static void
JsDispatchFull(int n, const char *kind)
{
	if (n >= JS_DISPATCH_MAX)
		elog(ERROR, "job_state: more than %d %s subscribers", JS_DISPATCH_MAX, kind);
}

static void
JsDispatchRelcache(Datum arg, Oid relid)
{
	int			i;

	for (i = 0; i < n_relcache; i++)
		relcache_subs[i] (arg, relid);
}

void
JsOnRelcache(RelcacheCallbackFunction func)
{
	int			i;

	for (i = 0; i < n_relcache; i++)
		if (relcache_subs[i] == func)
			return;
	JsDispatchFull(n_relcache, "relcache callback");
	if (n_relcache == 0)
		CacheRegisterRelcacheCallback(JsDispatchRelcache, (Datum) 0);
	relcache_subs[n_relcache++] = func;
}

static void
JsDispatchSyscache(Datum arg, int cacheid, uint32 hashvalue)
{
	int			i;

	for (i = 0; i < n_syscache; i++)
		if (syscache_subs[i].cacheid == cacheid)
			syscache_subs[i].func(arg, cacheid, hashvalue);
}

void
JsOnSyscache(int cacheid, SyscacheCallbackFunction func)
{
	bool		registered = false;
	int			i;

	for (i = 0; i < n_syscache; i++)
	{
		if (syscache_subs[i].cacheid != cacheid)
			continue;
		if (syscache_subs[i].func == func)
			return;
		registered = true;
	}
	JsDispatchFull(n_syscache, "syscache callback");
	if (!registered)
		CacheRegisterSyscacheCallback(cacheid, JsDispatchSyscache, (Datum) 0);
	syscache_subs[n_syscache].cacheid = cacheid;
	syscache_subs[n_syscache].func = func;
	n_syscache++;
}

static void
JsDispatchXact(XactEvent event, void *arg)
{
	int			i;

	for (i = n_xact - 1; i >= 0; i--)
		xact_subs[i] (event, arg);
}

void
JsOnXact(XactCallback func)
{
	int			i;

	for (i = 0; i < n_xact; i++)
		if (xact_subs[i] == func)
			return;
	JsDispatchFull(n_xact, "transaction callback");
	if (n_xact == 0)
		RegisterXactCallback(JsDispatchXact, NULL);
	xact_subs[n_xact++] = func;
}

static void
JsDispatchSubXact(SubXactEvent event, SubTransactionId mySubid,
				  SubTransactionId parentSubid, void *arg)
{
	int			i;

	for (i = n_subxact - 1; i >= 0; i--)
		subxact_subs[i] (event, mySubid, parentSubid, arg);
}

void
JsOnSubXact(SubXactCallback func)
{
	int			i;

	for (i = 0; i < n_subxact; i++)
		if (subxact_subs[i] == func)
			return;
	JsDispatchFull(n_subxact, "subtransaction callback");
	if (n_subxact == 0)
		RegisterSubXactCallback(JsDispatchSubXact, NULL);
	subxact_subs[n_subxact++] = func;
}

/* last subscribed first; each is taken off before it runs, as ipc.c does */
static void
JsDispatchBeforeShmemExit(int code, Datum arg)
{
	while (n_before_shmem_exit > 0)
	{
		JsExitSub  *sub = &before_shmem_exit_subs[--n_before_shmem_exit];

		sub->func(code, sub->arg);
	}
}

void
JsOnBeforeShmemExit(pg_on_exit_callback func, Datum arg)
{
	int			i;

	/* a postmaster child: its exit list starts empty, and so does ours */
	if (before_shmem_exit_pid != MyProcPid)
		n_before_shmem_exit = 0;
	for (i = 0; i < n_before_shmem_exit; i++)
		if (before_shmem_exit_subs[i].func == func &&
			before_shmem_exit_subs[i].arg == arg)
			return;
	JsDispatchFull(n_before_shmem_exit, "before_shmem_exit");
	if (before_shmem_exit_pid != MyProcPid)
	{
		before_shmem_exit(JsDispatchBeforeShmemExit, (Datum) 0);
		before_shmem_exit_pid = MyProcPid;
	}
	before_shmem_exit_subs[n_before_shmem_exit].func = func;
	before_shmem_exit_subs[n_before_shmem_exit].arg = arg;
	n_before_shmem_exit++;
}
