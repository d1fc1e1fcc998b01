/*-------------------------------------------------------------------------
 *
 * bgworker.h
 *	  The background workers: what they share (bgworker.c), the sweeper
 *	  (sweeper.c) and the notifier (notify.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef JS_BGWORKER_H
#define JS_BGWORKER_H

#include "utils/palloc.h"

/* bgworker.c: what the background workers share */
extern void JsRegisterWorker(const char *name, const char *function, int restart_secs);
extern void JsWorkerConnect(const char *name);
extern bool JsExtensionInstalled(void);
extern bool JsWorkerExtensionInstalled(const char *name);
extern bool JsWorkerRound(MemoryContext round_context, const char *activity,
						  void (*work) (void *arg), void *arg);

/* sweeper.c */
extern void JsRegisterSweeper(void);

/* notify.c */
extern void JsRegisterNotifier(void);
extern void JsNotifyNewJob(const char *queue, const char *channel_key);

#endif							/* JS_BGWORKER_H */
