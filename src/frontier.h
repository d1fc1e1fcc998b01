/*-------------------------------------------------------------------------
 *
 * frontier.h
 *	  A queue's claim frontier shared by all claimers (frontier.c), and the
 *	  key of a job in the ready index that it and the session marks
 *	  (claim_mark.h) are made of.
 *
 *-------------------------------------------------------------------------
 */
#ifndef JS_FRONTIER_H
#define JS_FRONTIER_H

#include "datatype/timestamp.h"

#include "job_state.h"

typedef struct JsClaimKey		/* a job's key in the ready index */
{
	int32		priority;
	TimestampTz run_after;
	int64		id;
} JsClaimKey;

/* What a claim read of its queue's frontier, to propose a new one with. */
typedef struct JsFrontierTicket
{
	int			slot;			/* entry of the shared table */
	uint64		incarnation;	/* of that entry, when read */
	uint64		seq;			/* events published to it, when read */
	bool		have;			/* frontier below is set */
	bool		may_propose;	/* the claim's snapshot is newer than seq */
	JsClaimKey	frontier;		/* resume strictly after it, in its priority */
} JsFrontierTicket;

extern int	JsClaimKeyCmp(const JsClaimKey *a, const JsClaimKey *b);

extern void JsFrontierRegister(void);
extern void JsFrontierInit(void);
extern bool JsFrontierEnabled(void);
extern bool JsFrontierBegin(Oid job_relid, const char *queue,
							JsFrontierTicket *ticket);
extern void JsFrontierPropose(const JsFrontierTicket *ticket,
							  const JsClaimKey *run_end);
extern void JsFrontierNoteReady(Oid job_relid, const char *queue,
								const JsClaimKey *key);
extern void JsFrontierNoteLeft(Oid job_relid, const char *queue,
							   const JsClaimKey *key);

#endif							/* JS_FRONTIER_H */
