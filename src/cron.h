/*-------------------------------------------------------------------------
 *
 * cron.h
 *	  Cron expressions (cron.c) and the schedules they drive (schedule.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef JS_CRON_H
#define JS_CRON_H

#include "datatype/timestamp.h"

/* cron.c: a parsed 5-field cron expression (UTC, minute resolution) */
typedef struct JsCron
{
	uint64		minutes;		/* bit m: minute m, 0-59 */
	uint32		hours;			/* bit h: hour h, 0-23 */
	uint32		days;			/* bit d: day of month d, 1-31 */
	uint32		months;			/* bit m: month m, 1-12 */
	uint32		weekdays;		/* bit d: day of week d, 0-6, 0 = Sunday */
	bool		days_star;		/* day-of-month field starts with '*' */
	bool		weekdays_star;	/* day-of-week field starts with '*' */
} JsCron;

extern void JsCronParse(const char *expr, JsCron *cron);
extern TimestampTz JsCronNext(const JsCron *cron, TimestampTz after);
extern TimestampTz JsCronPrev(const JsCron *cron, TimestampTz at);

/* schedule.c (SPI must be connected) */
extern int	JsRunSchedules(void);

#endif							/* JS_CRON_H */
