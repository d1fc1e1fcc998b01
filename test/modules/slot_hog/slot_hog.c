/*-------------------------------------------------------------------------
 *
 * slot_hog.c
 *	  A neighbour that leaves job_state one slot of each fixed per-backend
 *	  callback array: loaded with session_preload_libraries = slot_hog,
 *	  it registers, in each backend it is loaded into, as many relcache
 *	  callbacks, syscache callbacks and on_proc_exit, before_shmem_exit and
 *	  on_shmem_exit entries as leave one free for job_state once the
 *	  server itself has taken what it takes during the regression suites.
 *	  A job_state that registers two of a kind ends the backend with
 *	  FATAL (out of relcache_callback_list slots, out of
 *	  before_shmem_exit slots, ...), and the suite fails.
 *
 * The server's arrays (MAX_RELCACHE_CALLBACKS and MAX_SYSCACHE_CALLBACKS in
 * utils/cache/inval.c, MAX_ON_EXITS in storage/ipc/ipc.c) are not exported
 * and neither are their counts, so the sizes are written here, the same on
 * PostgreSQL 15 to 18, and so is what the server takes in a backend: what
 * it holds when session_preload_libraries is processed (after
 * InitPostgres) plus what it registers later, on first use (the type
 * cache's relcache and syscache callbacks, the temporary namespace's
 * before_shmem_exit entry, the caches of the planner, text search, ...).
 *
 * How the server's share was measured, on PostgreSQL 15.20 (Debian 12):
 * the counts (relcache_callback_count, syscache_callback_count,
 * on_proc_exit_index, before_shmem_exit_index, on_shmem_exit_index) were
 * read by gdb from a backend stopped at process_session_preload_libraries
 * (their addresses found by disassembling CacheRegisterRelcacheCallback,
 * CacheRegisterSyscacheCallback, on_proc_exit, before_shmem_exit and
 * on_shmem_exit): 1, 16, 2, 4, 6; and then a throwaway library loaded
 * the same way logged the counts after every statement of job_state's
 * regress and isolation suites, with and without job_state in
 * shared_preload_libraries: at most 3, 26, 2, 5, 6, of which job_state's
 * dispatcher took 1 relcache and 1 syscache callback.  So the server takes
 * up to 2, 25, 2, 5, 6.  Checked the other way: with one relcache or
 * syscache callback more (slot_hog.relcache_callbacks = 8,
 * slot_hog.syscache_callbacks = 39) the regress suite fails on 15 with
 * "out of ... slots"; with one before_shmem_exit entry more (15) it still
 * passes, as job_state takes none in a backend.
 *
 * PostgreSQL 17 and 18 were not measured.  Their relcache callbacks are
 * 15's (the plan cache's and the type cache's), so there too job_state
 * gets exactly one; for the other kinds the server's share is 15's plus a
 * margin of 6 syscache callbacks and 2 entries of each exit list (18 adds
 * the AIO subsystem's before_shmem_exit entry and the postmaster child
 * slot's on_shmem_exit entry), so job_state gets at least one.  A suite
 * that dies with "out of ... slots" on a major, or after a change that
 * makes the server register more (a test that uses a new kind of object),
 * needs these numbers measured again; every count can be overridden with
 * the slot_hog.* settings to find them.
 *
 * The relcache and syscache arrays are inherited from the postmaster and
 * filled by whoever registers first; only their total counts, so it does
 * not matter whether job_state (shared_preload_libraries) registered
 * before this library or (loaded on first use) after it.  The exit lists
 * are emptied in every child of the postmaster (on_exit_reset), so they
 * are filled only in a backend (IsUnderPostmaster), never in the
 * postmaster.  Background workers do not process
 * session_preload_libraries: job_state's workers run unhogged.
 *
 * The callbacks do nothing.  No locks, no catalog access.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/syscache.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* the server's array sizes: inval.c and ipc.c, PostgreSQL 15 to 18 */
#define HOG_RELCACHE_SLOTS	10
#define HOG_SYSCACHE_SLOTS	64
#define HOG_EXIT_SLOTS		20

/* what the server takes in a backend during the suites (see above) */
#if PG_VERSION_NUM < 160000
#define HOG_SERVER_RELCACHE		2
#define HOG_SERVER_SYSCACHE		25
#define HOG_SERVER_ON_PROC_EXIT	2
#define HOG_SERVER_BEFORE_SHMEM 5
#define HOG_SERVER_ON_SHMEM		6
#else
#define HOG_SERVER_RELCACHE		2
#define HOG_SERVER_SYSCACHE		(25 + 6)
#define HOG_SERVER_ON_PROC_EXIT	(2 + 2)
#define HOG_SERVER_BEFORE_SHMEM (5 + 2)
#define HOG_SERVER_ON_SHMEM		(6 + 2)
#endif

/* how many of each this library registers: all but one */
static int	hog_relcache = HOG_RELCACHE_SLOTS - HOG_SERVER_RELCACHE - 1;
static int	hog_syscache = HOG_SYSCACHE_SLOTS - HOG_SERVER_SYSCACHE - 1;
static int	hog_on_proc_exit = HOG_EXIT_SLOTS - HOG_SERVER_ON_PROC_EXIT - 1;
static int	hog_before_shmem_exit = HOG_EXIT_SLOTS - HOG_SERVER_BEFORE_SHMEM - 1;
static int	hog_on_shmem_exit = HOG_EXIT_SLOTS - HOG_SERVER_ON_SHMEM - 1;

static void
hog_relcache_callback(Datum arg, Oid relid)
{
}

static void
hog_syscache_callback(Datum arg, int cacheid, uint32 hashvalue)
{
}

static void
hog_exit_callback(int code, Datum arg)
{
}

/* the server keeps desc, not a copy: a string constant */
static void
hog_define(const char *name, const char *desc, int *value, int max)
{
	DefineCustomIntVariable(name, desc, NULL, value, *value, 0, max,
							PGC_SUSET, 0, NULL, NULL, NULL);
}

void
_PG_init(void)
{
	int			i;

	hog_define("slot_hog.relcache_callbacks",
			   "How many relcache callbacks slot_hog registers.",
			   &hog_relcache, HOG_RELCACHE_SLOTS);
	hog_define("slot_hog.syscache_callbacks",
			   "How many syscache callbacks slot_hog registers.",
			   &hog_syscache, HOG_SYSCACHE_SLOTS);
	hog_define("slot_hog.on_proc_exit",
			   "How many on_proc_exit entries slot_hog registers.",
			   &hog_on_proc_exit, HOG_EXIT_SLOTS);
	hog_define("slot_hog.before_shmem_exit",
			   "How many before_shmem_exit entries slot_hog registers.",
			   &hog_before_shmem_exit, HOG_EXIT_SLOTS);
	hog_define("slot_hog.on_shmem_exit",
			   "How many on_shmem_exit entries slot_hog registers.",
			   &hog_on_shmem_exit, HOG_EXIT_SLOTS);
	MarkGUCPrefixReserved("slot_hog");

	for (i = 0; i < hog_relcache; i++)
		CacheRegisterRelcacheCallback(hog_relcache_callback, (Datum) i);
	for (i = 0; i < hog_syscache; i++)
		CacheRegisterSyscacheCallback(FOREIGNSERVEROID, hog_syscache_callback,
									  (Datum) i);
	if (!IsUnderPostmaster)
		return;
	for (i = 0; i < hog_on_proc_exit; i++)
		on_proc_exit(hog_exit_callback, (Datum) i);
	for (i = 0; i < hog_before_shmem_exit; i++)
		before_shmem_exit(hog_exit_callback, (Datum) i);
	for (i = 0; i < hog_on_shmem_exit; i++)
		on_shmem_exit(hog_exit_callback, (Datum) i);
}
