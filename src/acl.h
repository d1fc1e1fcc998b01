/*-------------------------------------------------------------------------
 *
 * acl.h
 *	  Per-queue privileges (acl.c), carried by table privilege bits.
 *
 *-------------------------------------------------------------------------
 */
#ifndef JS_ACL_H
#define JS_ACL_H

#include "utils/acl.h"

#include "job_state.h"

#define JS_QUEUE_SUBMIT		ACL_INSERT
#define JS_QUEUE_CLAIM		ACL_UPDATE	/* claim, and act with its tokens */
#define JS_QUEUE_OPERATE	ACL_DELETE
#define JS_QUEUE_READ		ACL_SELECT
#define JS_QUEUE_CALLBACK	ACL_TRIGGER /* succeed, fail, heartbeat with a token */
#define JS_QUEUE_ALL \
	(JS_QUEUE_SUBMIT | JS_QUEUE_CLAIM | JS_QUEUE_OPERATE | JS_QUEUE_READ | \
	 JS_QUEUE_CALLBACK)
extern PGDLLIMPORT Oid js_acting_role;
extern Oid	JsCallingRole(void);
extern bool JsQueueVisible(const Acl *acl, Oid role);
pg_noreturn extern void JsQueueMissing(const char *queue);
extern bool JsQueueAllows(const Acl *acl, Oid role, AclMode mode);
extern void JsRequireQueuePrivilege(const char *queue, const Acl *acl, AclMode mode);
extern bool JsReadQueueAcl(Datum queue, Acl **acl);
extern void JsRequireQueuePrivilegeByName(Datum queue, AclMode mode);

#endif							/* JS_ACL_H */
