/*-------------------------------------------------------------------------
 *
 * acl.c
 *	  Per-queue privileges: who may submit to a queue, claim from it and act
 *	  with its tokens, operate it (reconcile, redrive, cancel, purge, pause,
 *	  resume), and read its jobs.  grant_queue, revoke_queue and
 *	  has_queue_privilege, and the checks the API functions make.
 *
 * A queue's privileges are PostgreSQL's own: an aclitem[] in queue.acl,
 * checked with aclmask(), so role membership, PUBLIC, renames and dropped
 * roles behave as they do for tables.  Five of the table privilege bits
 * carry our five privileges (the letters are what aclitem prints):
 *	submit  = INSERT (a)     claim    = UPDATE (w)
 *	operate = DELETE (d)     read     = SELECT (r)
 *	callback = TRIGGER (t): succeed, fail and heartbeat with a token the
 *	caller was handed (an external system answering a waiting job), and
 *	nothing else a claim's holder may do.
 * A queue whose acl is NULL has never been granted on and is open: every
 * role that may execute a function may use it on the queue, as before
 * there were per-queue privileges.  The first grant or revoke makes the
 * default explicit (the owner of job_state's tables and PUBLIC have every
 * privilege) and changes that, as GRANT does for a function.  Superusers
 * pass every check.
 *
 * The calling role is the outer user (GetOuterUserId(): the role that
 * called our SECURITY DEFINER function, following SET ROLE), or, while a
 * deferred action runs (a schedule's tick, schedule.c), the role that owns
 * it: js_acting_role, so that the tick is authorised and recorded as its
 * owner and never as whoever runs sweep().
 *
 * A role that holds no privilege at all on a queue is answered as if the
 * queue did not exist: every lookup by queue name, by job id or by token
 * gives such a role exactly the error of a missing queue or job (JS008),
 * and has_queue_privilege gives it NULL.  A role that holds some privilege
 * on the queue knows it exists and gets 42501 for the others.
 * has_queue_privilege() is not SECURITY DEFINER and checks the current
 * user, as has_table_privilege() does; the views that filter by it run it
 * as the role that queries them.
 *
 * Only the API functions check.  A role given table privileges on our
 * tables (an operator of the whole installation) is not held to per-queue
 * privileges; the multi-tenant recipe in the README gives tenants none.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "job_state.h"
#include "tables.h"
#include "rowwrite.h"
#include "acl.h"

PG_FUNCTION_INFO_V1(js_grant_queue);
PG_FUNCTION_INFO_V1(js_revoke_queue);
PG_FUNCTION_INFO_V1(js_has_queue_privilege);
PG_FUNCTION_INFO_V1(js_has_queue_privilege_role);
PG_FUNCTION_INFO_V1(js_stale_refusals);
PG_FUNCTION_INFO_V1(js_queue_channel);

/* the owner of the deferred action that runs now (schedule.c), or invalid */
Oid			js_acting_role = InvalidOid;

typedef struct JsQueuePrivName
{
	const char *name;
	AclMode		mode;
} JsQueuePrivName;

static const JsQueuePrivName js_queue_privs[] = {
	{"submit", JS_QUEUE_SUBMIT},
	{"claim", JS_QUEUE_CLAIM},
	{"operate", JS_QUEUE_OPERATE},
	{"read", JS_QUEUE_READ},
	{"callback", JS_QUEUE_CALLBACK},
	{"all", JS_QUEUE_ALL},
};

static JsPlan lock_queue_plan = {
	"SELECT acl FROM job_state.queue WHERE name OPERATOR(pg_catalog.=) $1 FOR UPDATE",
	1, {TEXTOID}
};

static JsPlan set_acl_plan = {
	"UPDATE job_state.queue SET acl = $2 WHERE name OPERATOR(pg_catalog.=) $1",
	2, {TEXTOID, ACLITEMARRAYOID}
};

/* the name of one privilege bit, for messages */
static const char *
JsQueuePrivilegeName(AclMode mode)
{
	int			i;

	for (i = 0; i < lengthof(js_queue_privs); i++)
		if (js_queue_privs[i].mode == mode)
			return js_queue_privs[i].name;
	return "?";
}

/* a privilege named by the caller: 22023 for anything else */
static AclMode
JsParseQueuePrivilege(const char *name)
{
	int			i;

	for (i = 0; i < lengthof(js_queue_privs); i++)
		if (pg_strcasecmp(name, js_queue_privs[i].name) == 0)
			return js_queue_privs[i].mode;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unrecognized queue privilege \"%s\"", name),
			 errhint("A queue's privileges are submit, claim, operate, read, callback and all.")));
	return 0;					/* keep the compiler quiet */
}

/*
 * Whether role holds every privilege of mode on a queue with this acl
 * (NULL: never granted on, open to all).
 */
bool
JsQueueAllows(const Acl *acl, Oid role, AclMode mode)
{
	if (acl == NULL || superuser_arg(role))
		return true;
	/* '{}' written by raw SQL has no dimensions: nobody holds anything */
	if (ARR_NDIM(acl) == 0)
		return false;
	/* no grant-option bits are asked for, so the owner argument is unused */
	return aclmask(acl, role, InvalidOid, mode, ACLMASK_ALL) == mode;
}

/*
 * Whether role holds any privilege on a queue with this acl: a role that
 * holds none is answered as if the queue did not exist.
 */
bool
JsQueueVisible(const Acl *acl, Oid role)
{
	if (acl == NULL || superuser_arg(role))
		return true;
	if (ARR_NDIM(acl) == 0)
		return false;
	return aclmask(acl, role, InvalidOid, JS_QUEUE_ALL, ACLMASK_ANY) != 0;
}

/* the role API calls act as: a deferred action's owner, else the caller */
Oid
JsCallingRole(void)
{
	return OidIsValid(js_acting_role) ? js_acting_role : GetOuterUserId();
}

/* JS008 for a queue by name: the answer for a missing or invisible queue */
pg_noreturn void
JsQueueMissing(const char *queue)
{
	ereport(ERROR,
			(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
			 errmsg("queue \"%s\" does not exist", queue),
			 errhint("Create it with job_state.create_queue().")));
}

/*
 * 42501 unless the calling role holds mode on queue; JS008 as for a queue
 * that does not exist when it holds no privilege on it at all.  Every API
 * function checks before it reads or writes a job of the queue, so a role
 * that may not use a queue learns nothing about its jobs or keys, and a
 * role that holds nothing on it not even that it exists.
 */
void
JsRequireQueuePrivilege(const char *queue, const Acl *acl, AclMode mode)
{
	Oid			role = JsCallingRole();

	if (JsQueueAllows(acl, role, mode))
		return;
	if (!JsQueueVisible(acl, role))
		JsQueueMissing(queue);
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for queue \"%s\"", queue),
			 errdetail("Role \"%s\" does not hold the %s privilege on the queue.",
					   GetUserNameFromId(role, false),
					   JsQueuePrivilegeName(mode)),
			 errhint("A queue's privileges are granted with job_state.grant_queue().")));
}

/*
 * The acl of queue by its name, under the latest snapshot (privileges are
 * checked against what is committed, as the catalogs are): false when
 * there is no such queue.  *acl is NULL for an open queue.
 */
bool
JsReadQueueAcl(Datum queue, Acl **acl)
{
	JsQueueOptions q;
	bool		found = JsReadQueueLatest(queue, &q);

	*acl = found ? q.acl : NULL;
	return found;
}

/* JsRequireQueuePrivilege for a queue named by text; JS008 if there is none */
void
JsRequireQueuePrivilegeByName(Datum queue, AclMode mode)
{
	Acl		   *acl;

	if (!JsReadQueueAcl(queue, &acl))
		JsQueueMissing(TextDatumGetCString(queue));
	JsRequireQueuePrivilege(TextDatumGetCString(queue), acl, mode);
}

/* the privilege bits of a VARIADIC text[] argument */
static AclMode
JsPrivilegesArg(FunctionCallInfo fcinfo, int argno)
{
	ArrayType  *array = PG_GETARG_ARRAYTYPE_P(argno);
	Datum	   *names;
	bool	   *nulls;
	int			n;
	int			i;
	AclMode		mode = 0;

	deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &names, &nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no queue privilege given"),
				 errhint("Name one or more of submit, claim, operate, read, callback and all.")));
	/* at most as many elements as the caller sent: a bounded loop */
	for (i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("a queue privilege must not be null")));
		mode |= JsParseQueuePrivilege(TextDatumGetCString(names[i]));
	}
	return mode;
}

/* the role named by argument argno ("public" for PUBLIC): 42704 if none */
static Oid
JsRoleArg(FunctionCallInfo fcinfo, int argno)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(argno));

	if (strcmp(name, "public") == 0)
		return ACL_ID_PUBLIC;
	return get_role_oid(name, false);
}

/*
 * grant_queue and revoke_queue: change one grantee's privileges on a queue.
 * The queue row is locked, so concurrent changes of one queue apply one
 * after the other; the queue table's trigger tells every backend (token
 * checks cache a queue's acl) once the change commits.
 */
static Datum
JsChangeQueueAcl(FunctionCallInfo fcinfo, bool grant)
{
	Datum		queue;
	Oid			grantee;
	AclMode		mode;
	Oid			owner;
	Acl		   *acl;
	AclItem		item;
	Datum		values[2];
	Datum		stored;
	bool		isnull;

	JsRefuseNull(fcinfo, 0, "queue");
	JsRefuseNull(fcinfo, 1, "grantee");
	JsRefuseNull(fcinfo, 2, "privileges");
	PreventCommandIfReadOnly(grant ? "grant_queue()" : "revoke_queue()");
	queue = PG_GETARG_DATUM(0);
	grantee = JsRoleArg(fcinfo, 1);
	mode = JsPrivilegesArg(fcinfo, 2);
	/* the owner of job_state's tables: the grantor of every queue privilege */
	owner = JsOwnRelOwner("queue");

	SPI_connect();
	if (JsExecute(&lock_queue_plan, &queue, NULL, false, 1) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
				 errmsg("queue \"%s\" does not exist", TextDatumGetCString(queue)),
				 errhint("Create it with job_state.create_queue().")));
	stored = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
		acl = DatumGetAclPCopy(stored);
	else
	{
		/* the default made explicit: PUBLIC and the owner hold everything */
		AclItem		all;

		acl = make_empty_acl();
		all.ai_grantor = owner;
		ACLITEM_SET_PRIVS_GOPTIONS(all, JS_QUEUE_ALL, ACL_NO_RIGHTS);
		all.ai_grantee = ACL_ID_PUBLIC;
		acl = aclupdate(acl, &all, ACL_MODECHG_ADD, owner, DROP_RESTRICT);
		all.ai_grantee = owner;
		acl = aclupdate(acl, &all, ACL_MODECHG_ADD, owner, DROP_RESTRICT);
	}
	item.ai_grantee = grantee;
	item.ai_grantor = owner;
	ACLITEM_SET_PRIVS_GOPTIONS(item, mode, ACL_NO_RIGHTS);
	acl = aclupdate(acl, &item, grant ? ACL_MODECHG_ADD : ACL_MODECHG_DEL,
					owner, DROP_RESTRICT);

	values[0] = queue;
	values[1] = PointerGetDatum(acl);
	if (JsExecute(&set_acl_plan, values, NULL, false, 0) != 1)
		JsRefuseSkippedUpdate();
	SPI_finish();
	PG_RETURN_VOID();
}

Datum
js_grant_queue(PG_FUNCTION_ARGS)
{
	return JsChangeQueueAcl(fcinfo, true);
}

Datum
js_revoke_queue(PG_FUNCTION_ARGS)
{
	return JsChangeQueueAcl(fcinfo, false);
}

/*
 * has_queue_privilege for role; NULL when there is no such queue, or when
 * the current user holds no privilege on it (as if there were none).
 */
static Datum
JsHasQueuePrivilege(FunctionCallInfo fcinfo, Oid role, int queue_arg)
{
	Acl		   *acl;
	AclMode		mode;

	mode = JsParseQueuePrivilege(text_to_cstring(PG_GETARG_TEXT_PP(queue_arg + 1)));
	if (!JsReadQueueAcl(PG_GETARG_DATUM(queue_arg), &acl) ||
		!JsQueueVisible(acl, GetUserId()))
		PG_RETURN_NULL();
	PG_RETURN_BOOL(JsQueueAllows(acl, role, mode));
}

/* has_queue_privilege(queue, privilege): the current user */
Datum
js_has_queue_privilege(PG_FUNCTION_ARGS)
{
	return JsHasQueuePrivilege(fcinfo, GetUserId(), 0);
}

/* has_queue_privilege(role, queue, privilege) */
Datum
js_has_queue_privilege_role(PG_FUNCTION_ARGS)
{
	return JsHasQueuePrivilege(fcinfo, JsRoleArg(fcinfo, 0), 1);
}

static JsPlan stale_refusals_plan = {
	"SELECT q.acl, COALESCE(pg_catalog.pg_sequence_last_value(pg_catalog.to_regclass("
	"  'job_state.stale_refusals_' OPERATOR(pg_catalog.||) q.id)), 0)"
	" FROM job_state.queue q WHERE q.id OPERATOR(pg_catalog.=) $1",
	1, {INT4OID}
};

/*
 * stale_refusals(queue_id): the stale-token refusals counted for a queue
 * the calling role may read; NULL when there is no such queue and, alike,
 * when the role may not read it (as queue_stats leaves its row out).
 */
Datum
js_stale_refusals(PG_FUNCTION_ARGS)
{
	Datum		id = PG_GETARG_DATUM(0);
	bool		isnull;
	bool		allowed;
	Datum		acl;
	int64		n = 0;

	SPI_connect();
	allowed = JsExecute(&stale_refusals_plan, &id, NULL, true, 1) == 1;
	if (allowed)
	{
		acl = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		allowed = JsQueueAllows(isnull ? NULL : DatumGetAclP(acl), JsCallingRole(),
								JS_QUEUE_READ);
		n = JsGetInt64(0, 2, NULL);
	}
	SPI_finish();
	if (!allowed)
		PG_RETURN_NULL();
	PG_RETURN_INT64(n);
}

/*
 * queue_channel(queue, kind): the name of the queue's channel of kind
 * work (new jobs; for roles that may claim) or done (ended jobs' ids; for
 * roles that may read the queue or submit to it).  The name carries the
 * queue's secret (queue.channel), so it is the whole of what keeps the
 * wake-ups from other roles: PostgreSQL lets any role LISTEN.
 */
Datum
js_queue_channel(PG_FUNCTION_ARGS)
{
	char	   *queue = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *kind = text_to_cstring(PG_GETARG_TEXT_PP(1));
	bool		work = strcmp(kind, "work") == 0;
	Oid			role = JsCallingRole();
	JsQueueOptions q;

	if (!work && strcmp(kind, "done") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unrecognized channel kind \"%s\"", kind),
				 errhint("A queue's channels are work and done.")));
	if (!JsReadQueueLatest(PG_GETARG_DATUM(0), &q))
		JsQueueMissing(queue);
	if (work)
		JsRequireQueuePrivilege(queue, q.acl, JS_QUEUE_CLAIM);
	else if (!JsQueueAllows(q.acl, role, JS_QUEUE_SUBMIT))
		JsRequireQueuePrivilege(queue, q.acl, JS_QUEUE_READ);
	if (q.channel[0] == '\0')
		elog(ERROR, "job_state: queue \"%s\" has no channel", queue);
	PG_RETURN_TEXT_P(cstring_to_text(psprintf("%s%s",
											  work ? JS_WORK_CHANNEL_PREFIX : JS_DONE_CHANNEL_PREFIX,
											  q.channel)));
}
