/*-------------------------------------------------------------------------
 *
 * waiter.h
 *	  Wake-ups of the jobs that end (waiter.c): the condition variables
 *	  job_state.wait() sleeps on, and NOTIFY job_state_done.
 *
 *-------------------------------------------------------------------------
 */
#ifndef JS_WAITER_H
#define JS_WAITER_H

#include "storage/latch.h"

#include "job_state.h"

extern void JsWaiterRegister(void);
extern void JsWaiterInit(void);
extern void JsWaiterNoteDone(int64 job_id, Datum queue);
extern bool JsWaiterShared(void);
extern uint64 JsWaiterTicket(int64 job_id);
extern void JsWaiterSleep(int64 job_id, uint64 ticket, long timeout_ms);

/* an ended job and its queue's channel key ("": 0.1.0's job_state_done) */
typedef struct JsDoneEntry
{
	int64		id;
	char		key[JS_CHANNEL_KEY_LEN + 1];
} JsDoneEntry;

/* the notifier's side of the done channels (notify.c) */
#define JS_DONE_IDS_PER_ROUND 4096
extern void JsWaiterServe(Oid dbid, Latch *latch);
extern int	JsWaiterTakeDone(JsDoneEntry *done, int max, uint64 *dropped);
extern void JsWaiterGiveBackDone(const JsDoneEntry *done, int n);
extern void JsWaiterNotifyDone(const JsDoneEntry *done);

#endif							/* JS_WAITER_H */
