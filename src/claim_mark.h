/*-------------------------------------------------------------------------
 *
 * claim_mark.h
 *	  Where this session's last claim in a queue stopped (claim_mark.c),
 *	  so the next claim resumes there.  A header of its own because take.c
 *	  calls claim_mark.c: a mark is a floor below the walk that leaves it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef JS_CLAIM_MARK_H
#define JS_CLAIM_MARK_H

#include "datatype/timestamp.h"

#include "job_state.h"
#include "frontier.h"			/* JsClaimKey */

extern void JsClaimMarkInit(void);
extern bool JsClaimMarkGet(const char *queue, TimestampTz now, JsClaimKey *mark);
extern void JsClaimMarkSet(Oid job_relid, const char *queue, TimestampTz now,
						   bool from_head, const JsClaimKey *last);

#endif							/* JS_CLAIM_MARK_H */
