/*-------------------------------------------------------------------------
 *
 * lease_floor.c
 *	  Per session and queue, the lease expiry below which claim's check for
 *	  run-out leases need not look again.
 *
 * Why.  Every claim asks whether a lease of its queue has run out
 * (JsLeaseExpiryDue, take.c): the first visible entry of the partial
 * index job_lease at or below the clock.  A job that ends leaves the
 * entry of its running version in that index until VACUUM removes it.
 * While a long transaction pins the xmin horizon VACUUM removes nothing,
 * and once the pin is older than the queue's lease every such entry lies
 * at or below the clock: each check read all of them, about 1,500 more
 * per second at 1,500 jobs/s, until claims took tens of milliseconds and
 * the queue fell behind (bench/README.md, the 30-minute run).
 *
 * The floor.  The check notes, from where it starts, the unbroken run of
 * entries that no snapshot taken from now on can see: an entry whose
 * version was inserted by a transaction that had ended when the check's
 * snapshot was taken (committed or aborted: the pinning transaction does
 * not change that) and which that snapshot does not see, so its deletion
 * was committed and visible to it, and so to every later snapshot
 * (JsRowGoneForGood, rowwrite.c).  The expiry of the last
 * entry of that run (at most the check's clock) is the floor, and the
 * session's next checks in the queue start there, so each such entry is
 * read about once per session.
 *
 * What can hide behind a floor.  A new entry is the expiry of a lease
 * written now: claim, heartbeat and a callback's wait write the clock
 * plus a positive span, and the entry is in the index as soon as the row
 * is written, so a new entry lies above every floor unless the write gave
 * a lease in the past (raw SQL, a restore) or one shorter than the time
 * from its clock reading to its index entry (claim(lease => '1 us') on a
 * busy machine).  The job triggers note every lease
 * written, and a session's own writes lower its floors below them
 * (JsLeaseFloorLower).  Another session's floors are not told: they start
 * from the beginning again at least every JS_LEASE_FLOOR_RESET_MS.  The
 * sweeper worker checks each queue from floors of its own (sweeper.c); a
 * user's sweep() uses none.  So such a lease runs out at most that much
 * later in another session's claims and in the sweeper than in sweep().
 *
 * The floors live in backend-local memory, one per queue name, for one job
 * table (its OID: a new table after DROP EXTENSION starts without them).
 * VACUUM removing entries below a floor changes nothing it promises, so
 * invalidations of the table do not reset them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "job_state.h"
#include "lease_floor.h"

/* queue names have at most 128 characters of at most 4 bytes */
#define JS_FLOOR_KEY_LEN (128 * 4 + 1)

typedef struct JsLeaseFloorEntry
{
	char		queue[JS_FLOOR_KEY_LEN];	/* hash key */
	TimestampTz floor;			/* DT_NOBEGIN: none */
	TimestampTz started_at;		/* clock of the last check from the start */
} JsLeaseFloorEntry;

static HTAB *lease_floors = NULL;
static Oid	lease_floors_relid = InvalidOid;	/* the job table they are for */
/* no floor of this session is above it: a lease at or above hides nowhere */
static TimestampTz lease_floors_max = DT_NOBEGIN;


static JsLeaseFloorEntry *
floor_lookup(Oid job_relid, const char *queue, bool create)
{
	bool		found;
	JsLeaseFloorEntry *entry;

	if (strlen(queue) >= JS_FLOOR_KEY_LEN)
		return NULL;			/* not a queue name: no floor */
	if (lease_floors != NULL && job_relid != lease_floors_relid)
	{
		hash_destroy(lease_floors);
		lease_floors = NULL;
		lease_floors_max = DT_NOBEGIN;
	}
	if (lease_floors == NULL)
	{
		if (!create)
			return NULL;
		lease_floors = JsHashCreate("job_state lease floors", 8, JS_FLOOR_KEY_LEN,
									sizeof(JsLeaseFloorEntry), HASH_STRINGS, NULL);
		lease_floors_relid = job_relid;
	}
	entry = hash_search(lease_floors, queue, create ? HASH_ENTER : HASH_FIND,
						&found);
	if (entry != NULL && !found)
	{
		entry->floor = DT_NOBEGIN;
		entry->started_at = 0;
	}
	return entry;
}

/*
 * Where the next check of the queue's leases starts: the floor, or
 * DT_NOBEGIN (from the start) when there is none or it is due for a walk
 * from the start.
 */
TimestampTz
JsLeaseFloorGet(Oid job_relid, const char *queue, TimestampTz now)
{
	JsLeaseFloorEntry *entry = floor_lookup(job_relid, queue, false);

	/* a last walk from the start ahead of now: the clock stepped back */
	if (entry == NULL || entry->floor == DT_NOBEGIN || entry->started_at > now ||
		TimestampDifferenceExceeds(entry->started_at, now, JS_LEASE_FLOOR_RESET_MS))
		return DT_NOBEGIN;
	return entry->floor;
}

/*
 * After a check of the queue's leases at clock now that started at the
 * beginning (from_start) or at the floor: no snapshot from now on sees an
 * entry below floor (DT_NOBEGIN: the check accounted for none).  The
 * check read no entry above now, so the floor stays at or below it.
 */
void
JsLeaseFloorRaise(Oid job_relid, const char *queue, bool from_start,
				  TimestampTz floor, TimestampTz now)
{
	JsLeaseFloorEntry *entry;

	if (floor == DT_NOBEGIN && !from_start)
		return;
	entry = floor_lookup(job_relid, queue, true);
	if (entry == NULL)
		return;
	if (from_start)
	{
		entry->started_at = now;
		entry->floor = DT_NOBEGIN;
	}
	if (floor > now)
		floor = now;
	if (floor > entry->floor)
		entry->floor = floor;
	if (entry->floor > lease_floors_max)
		lease_floors_max = entry->floor;
}

/*
 * Could a lease running out at expiry lie below a floor of this session?
 * A cheap test for the job triggers, which note every lease written.
 */
bool
JsLeaseFloorMayHide(TimestampTz expiry)
{
	return lease_floors != NULL && expiry < lease_floors_max;
}

/* this session wrote a lease of the queue running out at expiry */
void
JsLeaseFloorLower(Oid job_relid, const char *queue, TimestampTz expiry)
{
	JsLeaseFloorEntry *entry = floor_lookup(job_relid, queue, false);

	/* a check starts at the floor itself: the lease is read again */
	if (entry != NULL && expiry < entry->floor)
		entry->floor = expiry;
}
