/*-------------------------------------------------------------------------
 *
 * dispatch.h
 *	  One registration with the server per kind of per-backend callback,
 *	  shared by every file that wants one (dispatch.c).  The ground floor:
 *	  it calls only the functions handed to it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef JS_DISPATCH_H
#define JS_DISPATCH_H

#include "access/xact.h"
#include "storage/ipc.h"
#include "utils/inval.h"

/* how many functions may subscribe to one kind (a can't-happen limit) */
#define JS_DISPATCH_MAX 16

extern void JsOnRelcache(RelcacheCallbackFunction func);
extern void JsOnSyscache(int cacheid, SyscacheCallbackFunction func);
extern void JsOnXact(XactCallback func);
extern void JsOnSubXact(SubXactCallback func);
extern void JsOnBeforeShmemExit(pg_on_exit_callback func, Datum arg);

#endif							/* JS_DISPATCH_H */
