/*-------------------------------------------------------------------------
 *
 * durability.c
 *	  A queue's durability floor: its option min_synchronous_commit raises
 *	  synchronous_commit, for the rest of the transaction, in every submit
 *	  to the queue and every call acting under a claim of one of its jobs.
 *
 * A session that sets synchronous_commit to local or off (or a driver
 * that does) is acknowledged before its commit reached a synchronous
 * standby, or the disk: a failover or crash may lose a submit the client
 * was told is accepted, or a completion or operation record a worker was
 * told is written.  A queue whose promises must survive that sets a
 * floor; the call raises the setting as SET LOCAL would (it lasts until
 * the transaction ends, also after the SECURITY DEFINER function returns:
 * only a setting the function itself declares is restored at its exit),
 * and never lowers it.  The floor is only as strong as the server's
 * replication: on and remote_* wait for the standbys that
 * synchronous_standby_names names, and for none when it is empty.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/guc.h"

#include "job_state.h"
#include "tables.h"

static const char *const js_sync_names[] = {
	[SYNCHRONOUS_COMMIT_OFF] = "off",
	[SYNCHRONOUS_COMMIT_LOCAL_FLUSH] = "local",
	[SYNCHRONOUS_COMMIT_REMOTE_WRITE] = "remote_write",
	[SYNCHRONOUS_COMMIT_REMOTE_FLUSH] = "on",
	[SYNCHRONOUS_COMMIT_REMOTE_APPLY] = "remote_apply",
};

/* the level of a floor's name, weakest first; -1 for an unknown name */
int
JsSyncCommitLevel(const char *name)
{
	int			i;

	for (i = 0; i < lengthof(js_sync_names); i++)
		if (strcmp(name, js_sync_names[i]) == 0)
			return i;
	return -1;
}

/* refuse a floor create_queue or alter_queue is given that is no level */
void
JsCheckSyncCommitFloor(const char *name)
{
	if (JsSyncCommitLevel(name) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("queue option min_synchronous_commit must be off, local, remote_write, on or remote_apply"),
				 errdetail("The value given is \"%s\".", name),
				 errhint("off removes the floor; the others are synchronous_commit's levels, weakest first.")));
}

/*
 * Raise synchronous_commit to level for the rest of the transaction, if
 * it is below (level < 0: the queue has no floor).
 */
void
JsRaiseSynchronousCommit(int level)
{
	if (level <= SYNCHRONOUS_COMMIT_OFF || synchronous_commit >= level)
		return;
	(void) set_config_option("synchronous_commit", js_sync_names[level],
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
							 true, 0, false);
}
