/*-------------------------------------------------------------------------
 *
 * slots.h
 *	  Concurrency slots (slot.c), start-rate buckets (bucket.c) and the
 *	  bookkeeping that keeps the slot rows in step with the limits
 *	  (limits.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef JS_SLOTS_H
#define JS_SLOTS_H

#include "storage/itemptr.h"

#include "job_state.h"
#include "tables.h"

/*
 * slot.c: a concurrency slot row a claim has locked.  A slot taken for a
 * job that then could not start stays locked until the transaction ends,
 * so it is kept as a spare for the next job of the same scope: a claim
 * never holds more than one unused slot per scope.
 */
typedef struct JsSlot
{
	const char *kind;
	char	   *scope;
	char	   *key;
	int32		n;				/* 0: none */
	ItemPointerData tid;		/* the row, as locked */
} JsSlot;

extern bool JsSlotLockFree(JsSlot *slot, const char *kind, const char *scope,
						   const char *key, int32 limit);
extern void JsSlotHold(JsSlot *slot, int64 job_id, const char *queue);
extern void JsReleaseSlots(int64 job_id, const char *queue, const char *resource,
						   const char *key, const int32 *numbers);

/* bucket.c */
extern void JsMakeBuckets(const char *name, double per_second);
extern bool JsTakeStartToken(const char *name, double per_second, bool *busy);

/* limits.c */
extern void JsJobNamesLimits(Datum queue, Datum resource, bool has_resource,
							 Datum key, bool has_key);
extern void JsEnsureSlots(const char *kind, const char *scope, const char *key,
						  int32 limit);
extern void JsRawStartSlots(int64 job_id, Datum queue, Datum resource,
							bool has_resource, Datum key, bool has_key,
							int32 numbers[JS_NUM_SLOT_KINDS]);
extern void JsQueueLimitSlots(const char *queue, bool per_key, int32 limit);
extern void JsResourceLimitSlots(const char *resource, bool adopt, int32 limit);

#endif							/* JS_SLOTS_H */
