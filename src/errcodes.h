/*-------------------------------------------------------------------------
 *
 * errcodes.h
 *	  The job_state SQLSTATE registry (class JS).  Every JS code the
 *	  extension raises is defined here and nowhere else.
 *
 *-------------------------------------------------------------------------
 */
#ifndef JOB_STATE_ERRCODES_H
#define JOB_STATE_ERRCODES_H

#include "utils/elog.h"

/* token generation is not current, or the job moved on */
#define ERRCODE_JS_STALE_CLAIM				MAKE_SQLSTATE('J','S','0','0','1')
/* same idempotency key, different input */
#define ERRCODE_JS_IDEMPOTENCY_CONFLICT		MAKE_SQLSTATE('J','S','0','0','2')
/* a state change the machine does not allow */
#define ERRCODE_JS_ILLEGAL_TRANSITION		MAKE_SQLSTATE('J','S','0','0','3')
/* reserve beyond a meter's limit */
#define ERRCODE_JS_BUDGET_EXCEEDED			MAKE_SQLSTATE('J','S','0','0','4')
/* a start beyond max_attempts */
#define ERRCODE_JS_ATTEMPTS_EXHAUSTED		MAKE_SQLSTATE('J','S','0','0','5')
/* a start after the deadline */
#define ERRCODE_JS_DEADLINE_EXCEEDED		MAKE_SQLSTATE('J','S','0','0','6')
/* MAC does not verify */
#define ERRCODE_JS_INVALID_TOKEN			MAKE_SQLSTATE('J','S','0','0','7')
/* unknown queue, job, resource, meter, operation or schedule */
#define ERRCODE_JS_NO_SUCH_OBJECT			MAKE_SQLSTATE('J','S','0','0','8')

#endif							/* JOB_STATE_ERRCODES_H */
