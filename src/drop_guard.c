/*-------------------------------------------------------------------------
 *
 * drop_guard.c
 *	  The job_state_drop_guard event trigger (ddl_command_start): a command
 *	  that would drop the extension job_state -- DROP EXTENSION naming it,
 *	  with or without CASCADE or IF EXISTS, alone or among other names, and
 *	  DROP OWNED BY the role that owns it -- is refused (JS003) while jobs
 *	  that are not finished (accepted, running, waiting, unknown) exist, unless
 *	  job_state.drop_live_jobs is on.  Dropping the extension deletes every
 *	  job without a trace; no accepted job is lost by accident.
 *
 * The trigger is a member of the extension (created by the 0.1.0 -> 0.2.0
 * script), so it goes with it, after it has had its say.  Its function is
 * SECURITY DEFINER, so it reads the job table whoever drops.  It works without
 * shared_preload_libraries: the library is loaded when it first fires.
 * Commands that do not name job_state return at once, before any catalog
 * or table access, so DROP EXTENSION and DROP OWNED of anything else
 * behave as without the trigger.  DROP SCHEMA job_state needs no check:
 * the schema belongs to the extension, and PostgreSQL refuses to drop it
 * on its own, with or without CASCADE.
 *
 * Invariants: job_state.job exists in schema job_state while the trigger
 * does (both belong to the extension); if it is missing, there is nothing
 * to protect and the drop goes on.  The statuses that count as finished
 * are those purge() deletes: succeeded, failed, cancelled.
 *
 * Only a command its user may run gets checked: DROP EXTENSION by the
 * extension's owner (or a superuser), DROP OWNED by a user with the
 * privileges of the owner.  Anyone else's command fails on its own, and
 * the trigger does not lock the job table for them.
 *
 * Locks: when the command would drop the extension and the setting is off,
 * AccessExclusiveLock on job_state.job before counting -- the lock the drop
 * takes anyway, taken earlier -- so that no submit can commit a job between
 * the count and the drop; the count then reads the latest snapshot, which
 * sees every job committed while the lock was awaited.
 *
 * Limits: event triggers do not fire in single-user mode, nor (PostgreSQL
 * 17 and later) while event_triggers = off, nor with session_replication_role
 * = replica; a superuser may also disable the trigger
 * (ALTER EVENT TRIGGER job_state_drop_guard DISABLE).  DROP DATABASE is not
 * an event-trigger command.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "commands/event_trigger.h"
#include "commands/extension.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "job_state.h"

PG_FUNCTION_INFO_V1(js_drop_guard);

#define JS_EXTENSION_NAME "job_state"

/* PostgreSQL 16 folded the per-catalog owner checks into one */
#if PG_VERSION_NUM >= 160000
#define JsExtensionOwnercheck(extoid, roleid) \
	object_ownercheck(ExtensionRelationId, (extoid), (roleid))
#else
#define JsExtensionOwnercheck(extoid, roleid) \
	pg_extension_ownercheck((extoid), (roleid))
#endif

static JsPlan owner_plan = {
	"SELECT extowner FROM pg_catalog.pg_extension"
	" WHERE extname OPERATOR(pg_catalog.=) 'job_state'",
	0, {0}
};

/* the jobs that are not finished, per status, in the enum's order */
static JsPlan live_jobs_plan = {
	"SELECT status::pg_catalog.text, pg_catalog.count(*) FROM job_state.job"
	" WHERE status OPERATOR(pg_catalog.<>) ALL"
	"  ('{succeeded,failed,cancelled}'::job_state.status[])"
	" GROUP BY status ORDER BY status",
	0, {0}
};

/* DROP EXTENSION naming job_state */
static bool
JsDropsExtension(DropStmt *stmt)
{
	ListCell   *lc;

	if (stmt->removeType != OBJECT_EXTENSION)
		return false;
	foreach(lc, stmt->objects)
	{
		Node	   *name = (Node *) lfirst(lc);

		if (IsA(name, String) && strcmp(strVal(name), JS_EXTENSION_NAME) == 0)
			return true;
	}
	return false;
}

/* DROP OWNED BY a list that names job_state's owner (SPI connected) */
static bool
JsDropsOwner(DropOwnedStmt *stmt)
{
	Oid			owner;
	bool		isnull;
	ListCell   *lc;

	if (JsExecute(&owner_plan, NULL, NULL, true, 1) != 1)
		return false;
	owner = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
										   SPI_tuptable->tupdesc, 1, &isnull));
	if (isnull)
		return false;
	foreach(lc, stmt->roles)
	{
		RoleSpec   *role = (RoleSpec *) lfirst(lc);
		Oid			roleid;

		/*
		 * The trigger runs as the extension's owner (SECURITY DEFINER):
		 * CURRENT_USER of the command is the outer user.
		 */
		if (role->roletype == ROLESPEC_CURRENT_USER ||
			role->roletype == ROLESPEC_CURRENT_ROLE)
			roleid = GetOuterUserId();
		else
			roleid = get_rolespec_oid(role, true);
		if (roleid == owner)
		{
			/* DROP OWNED refuses roles whose privileges the user lacks */
			return has_privs_of_role(GetOuterUserId(), owner);
		}
	}
	return false;
}

Datum
js_drop_guard(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	Node	   *parsetree;
	bool		drops;
	Oid			extoid;
	Oid			nsp;
	Oid			jobrelid;
	int			nstatus;
	int			i;
	int64		total = 0;
	StringInfoData counts;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		elog(ERROR, "job_state_drop_guard: not fired by event trigger manager");
	trigdata = (EventTriggerData *) fcinfo->context;
	if (strcmp(trigdata->event, "ddl_command_start") != 0)
		elog(ERROR, "job_state_drop_guard: must be fired on ddl_command_start");
	parsetree = trigdata->parsetree;

	/* not about job_state, or dropping its jobs on purpose: nothing to do */
	if (js_drop_live_jobs)
		PG_RETURN_VOID();
	if (IsA(parsetree, DropStmt))
	{
		if (!JsDropsExtension((DropStmt *) parsetree))
			PG_RETURN_VOID();
	}
	else if (!IsA(parsetree, DropOwnedStmt))
		PG_RETURN_VOID();

	nsp = get_namespace_oid(JS_EXTENSION_NAME, true);
	jobrelid = OidIsValid(nsp) ? get_relname_relid("job", nsp) : InvalidOid;
	if (!OidIsValid(jobrelid))
		PG_RETURN_VOID();

	/*
	 * Only a role that may drop the extension gets this far: for anyone
	 * else the command fails on its own, and the trigger (running as the
	 * extension's owner) must not lock the job table on their behalf.
	 */
	extoid = get_extension_oid(JS_EXTENSION_NAME, true);
	if (!OidIsValid(extoid) ||
		(IsA(parsetree, DropStmt) &&
		 !JsExtensionOwnercheck(extoid, GetOuterUserId())))
		PG_RETURN_VOID();

	SPI_connect();
	drops = IsA(parsetree, DropStmt) || JsDropsOwner((DropOwnedStmt *) parsetree);
	if (!drops)
	{
		SPI_finish();
		PG_RETURN_VOID();
	}

	LockRelationOid(jobrelid, AccessExclusiveLock);
	nstatus = JsExecuteLatest(&live_jobs_plan, NULL, NULL, 0);
	if (nstatus == 0)
	{
		SPI_finish();
		PG_RETURN_VOID();
	}

	initStringInfo(&counts);
	for (i = 0; i < nstatus; i++)
	{
		int64		n = JsGetInt64(i, 2, NULL);

		total += n;
		appendStringInfo(&counts, "%s%lld %s", i > 0 ? ", " : "",
						 (long long) n, JsGetText(i, 1));
	}
	ereport(ERROR,
			(errcode(ERRCODE_JS_ILLEGAL_TRANSITION),
			 errmsg_plural("extension job_state cannot be dropped while it has %lld unfinished job",
						   "extension job_state cannot be dropped while it has %lld unfinished jobs",
						   (unsigned long) total, (long long) total),
			 errdetail("%s would delete them: %s.",
					   GetCommandTagName(trigdata->tag), counts.data),
			 errhint("Let the jobs finish, or cancel them with job_state.cancel(); to delete them with the extension on purpose, run SET job_state.drop_live_jobs = on in this session and drop again.")));
	pg_unreachable();
}
