/*-------------------------------------------------------------------------
 *
 * lease_floor.h
 *	  Per session and queue, the lease expiry below which claim's check for
 *	  run-out leases need not look again (lease_floor.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef JS_LEASE_FLOOR_H
#define JS_LEASE_FLOOR_H

#include "datatype/timestamp.h"

/* how long a floor stands before the check walks from the start again */
#define JS_LEASE_FLOOR_RESET_MS 60000

extern TimestampTz JsLeaseFloorGet(Oid job_relid, const char *queue, TimestampTz now);
extern void JsLeaseFloorRaise(Oid job_relid, const char *queue, bool from_start,
							  TimestampTz floor, TimestampTz now);
extern bool JsLeaseFloorMayHide(TimestampTz expiry);
extern void JsLeaseFloorLower(Oid job_relid, const char *queue, TimestampTz expiry);

#endif							/* JS_LEASE_FLOOR_H */
