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
extern void JsWaiterNoteDone(int64 job_id);
extern bool JsWaiterShared(void);
extern uint64 JsWaiterTicket(int64 job_id);
extern void JsWaiterSleep(int64 job_id, uint64 ticket, long timeout_ms);

/* the notifier's side of job_state_done (notify.c) */
#define JS_DONE_IDS_PER_ROUND 4096
extern void JsWaiterServe(Oid dbid, Latch *latch);
extern int	JsWaiterTakeDone(int64 *ids, int max, uint64 *dropped);
extern void JsWaiterGiveBackDone(const int64 *ids, int n);
extern void JsWaiterNotifyDone(int64 job_id);

#endif							/* JS_WAITER_H */
