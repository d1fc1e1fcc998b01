/*-------------------------------------------------------------------------
 *
 * job_state.c
 *	  The library's magic block and its GUCs: their variables, defaults,
 *	  ranges and contexts (job_state.h says which file each one steers).
 *
 * Knows nothing of jobs; _PG_init (init.c) calls JsDefineGucs first.
 * job_state.* is reserved, so a misspelt setting is reported.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "utils/guc.h"

#include "job_state.h"

PG_MODULE_MAGIC;

bool		js_track_events = true;
int			js_notify = JS_NOTIFY_ON;
int			js_notify_interval = 10;
bool		js_restore = false;
bool		js_drop_live_jobs = false;
int			js_sweep_interval = 1000;
char	   *js_database = NULL;
bool		js_check_statement_names = false;
int			js_claim_rescan_interval = 1000;
int			js_claim_frontiers = 64;
int			js_wait_poll_interval = 100;
int			js_min_retention = 60;

static const struct config_enum_entry js_notify_options[] = {
	{"on", JS_NOTIFY_ON, false},
	{"off", JS_NOTIFY_OFF, false},
	{"commit", JS_NOTIFY_COMMIT, false},
	{"true", JS_NOTIFY_ON, true},
	{"false", JS_NOTIFY_OFF, true},
	{"yes", JS_NOTIFY_ON, true},
	{"no", JS_NOTIFY_OFF, true},
	{"1", JS_NOTIFY_ON, true},
	{"0", JS_NOTIFY_OFF, true},
	{NULL, 0, false}
};

/*
 * Define every GUC of job_state, in every process that loads the library.
 *
 * The workers' and the shared memory's settings (job_state.database,
 * job_state.claim_frontiers) are read only by the postmaster while
 * shared_preload_libraries is processed, and are PGC_POSTMASTER there.
 * PostgreSQL refuses to define a PGC_POSTMASTER setting later (FATAL), yet
 * they must exist in a session that merely loaded the library: the prefix
 * job_state is reserved (MarkGUCPrefixReserved), so a name it does not
 * define is refused, and ALTER SYSTEM checks names against the session's
 * settings.  Without them, `ALTER SYSTEM SET job_state.database` was
 * refused until the library was preloaded, and turning the workers on took
 * two restarts.  Such a session defines them PGC_SIGHUP: settable in the
 * configuration files and by ALTER SYSTEM, never by SET, and read by
 * nothing until the restart that preloads the library.
 */
void
JsDefineGucs(bool preloading)
{
	GucContext	startup_context = preloading ? PGC_POSTMASTER : PGC_SIGHUP;

	DefineCustomBoolVariable("job_state.track_events",
							 "Records every job state change in job_state.job_event.",
							 NULL,
							 &js_track_events,
							 true,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("job_state.notify",
							 "Sends NOTIFY job_state with the queue name after submit creates a job.",
							 "on: the notifier worker sends it where it serves this database, else the submitting transaction; commit: always the submitting transaction; off: nobody.",
							 &js_notify,
							 JS_NOTIFY_ON,
							 js_notify_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("job_state.restore",
							 "Lets a restore write job rows as they were dumped.",
							 "Only for pg_restore or psql replaying a dump; the state machine is not checked while it is on.",
							 &js_restore,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("job_state.check_statement_names",
							 "Refuses any statement of job_state that resolves a name outside pg_catalog and job_state.",
							 "A testing aid: the test suites run with it on under a hostile search_path.",
							 &js_check_statement_names,
							 false,
							 PGC_SUSET,
							 GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("job_state.drop_live_jobs",
							 "Lets DROP EXTENSION job_state delete jobs that are not finished.",
							 "Off: the drop is refused while accepted, running or unknown jobs exist (drop_guard.c).  Set it only in the session that drops the extension on purpose.",
							 &js_drop_live_jobs,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("job_state.sweep_interval",
							"Time between two rounds of the background worker (lease expiry and schedules).",
							"Used only when job_state is in shared_preload_libraries.",
							&js_sweep_interval,
							1000, 10, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("job_state.min_retention",
							"Shortest retention create_queue and alter_queue accept.",
							"For tests that must see retention at work within seconds; only a superuser can lower it below the default of one minute.",
							&js_min_retention,
							60, 1, 60,
							PGC_SUSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("job_state.claim_rescan_interval",
							"Longest time claim resumes after this session's last claim in a queue before it scans the queue from its start again.",
							"Resuming skips the index entries of jobs already taken; a job that becomes ready behind the resume point waits at most this long while the queue has other ready jobs.  0 scans from the start every time (strict claim order).",
							&js_claim_rescan_interval,
							1000, 0, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("job_state.wait_poll_interval",
							"Longest time job_state.wait() sleeps before it reads the job again.",
							"Without shared_preload_libraries wait() polls at this interval; with it, a completing commit wakes the waiter at once and this is a safety net.",
							&js_wait_poll_interval,
							100, 10, 10000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	/* read by the workers and the postmaster (see above) */
	DefineCustomStringVariable("job_state.database",
							   "Database the background worker sweeps.",
							   "The job_state extension must be installed there; until it is, the worker waits.",
							   &js_database,
							   "postgres",
							   startup_context,
							   0,
							   NULL, NULL, NULL);
	DefineCustomIntVariable("job_state.claim_frontiers",
							"Queues whose claim frontier is kept in shared memory.",
							"A queue's frontier lets every claim start where the last claims stopped instead of at the head of its ready index (dead entries a pinned xmin horizon keeps).  Queues beyond this many take over the frontier used longest ago.  0: no shared memory; claims resume at per-session marks.",
							&js_claim_frontiers,
							64, 0, 10000,
							startup_context,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("job_state.notify_interval",
							"Shortest time between two rounds of the notifier worker.",
							"Wake-ups of new jobs that come during it are sent together after it, one NOTIFY per queue.  0 sends each round at once.",
							&js_notify_interval,
							10, 0, 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

#if PG_VERSION_NUM >= 150000
	MarkGUCPrefixReserved("job_state");
#else
	EmitWarningsOnPlaceholders("job_state");
#endif
}
