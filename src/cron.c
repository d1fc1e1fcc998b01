/*-------------------------------------------------------------------------
 *
 * cron.c
 *	  The 5-field cron parser and the next / previous tick computation,
 *	  with their SQL helpers job_state.cron_next() and cron_prev().
 *
 * Fields: minute (0-59), hour (0-23), day-of-month (1-31), month (1-12),
 * day-of-week (0-7, 0 and 7 are Sunday), separated by spaces or tabs.
 * Each field is a comma-separated list of elements: "*", a number "a", a
 * range "a-b", or a step "*" "/n" or "a-b/n".  "a/n", names (jan, mon) and
 * macros (@hourly) are refused.  Times are UTC, at minute resolution.
 *
 * Day matching follows crontab(5): when both day-of-month and day-of-week
 * are restricted (neither field starts with "*"), a day matches if either
 * matches; otherwise both must (a "*" field matches every day, but a
 * "*" "/n" field keeps its restriction, as in Vixie cron and pg_cron).
 *
 * Invariants: a parsed expression has at least one value in every field,
 * and the parser refuses expressions that never match (day-of-month 30 in
 * February only), so a search over 400 years (one Gregorian cycle, after
 * which every weekday/date combination repeats) always finds a tick; not
 * finding one is a can't-happen error.  No SPI, no locks: this file is
 * pure computation.
 *
 * Bounds: parsing is one pass over the text (any length a text can have:
 * each element is read once and sets at most 60 bits), checking for
 * interrupts at each field and element; a search looks at most 400 years
 * of days and 1440 minutes of each matching day.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "datatype/timestamp.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"

#include "job_state.h"
#include "cron.h"

PG_FUNCTION_INFO_V1(js_cron_next);
PG_FUNCTION_INFO_V1(js_cron_prev);

#define JS_CRON_NFIELDS 5
#define JS_MINUTES_PER_DAY (24 * 60)
#define JS_CRON_SEARCH_DAYS (400 * 366)

static const struct
{
	const char *name;
	int			min;
	int			max;
}			js_cron_fields[JS_CRON_NFIELDS] =
{
	{"minute", 0, 59},
	{"hour", 0, 23},
	{"day-of-month", 1, 31},
	{"month", 1, 12},
	{"day-of-week", 0, 7}
};

/* days per month, February counted as 29: what can ever match */
static const int js_month_days[13] = {0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

static void
JsCronFieldError(const char *expr, int field, const char *text,
				 const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid %s field \"%s\" in cron expression \"%s\"",
					js_cron_fields[field].name, text, expr),
			 errdetail_internal("%s", detail),
			 errhint("A cron expression has 5 fields, minute hour day-of-month month day-of-week, in UTC; each is a list of *, n, a-b, */n or a-b/n.")));
}

/*
 * Read a number at *p and advance *p past it; values above 999999 are
 * kept as 999999 (out of range for every field).  Returns -1 when there is
 * no digit at *p.
 */
static int
JsCronNumber(const char **p)
{
	int			value = 0;
	bool		any = false;

	while (**p >= '0' && **p <= '9')
	{
		value = Min(value * 10 + (**p - '0'), 999999);
		any = true;
		(*p)++;
	}
	return any ? value : -1;
}

/*
 * Parse one field (text is NUL-terminated, no blanks) into a bit mask.
 * Day-of-week 7 is folded onto 0 (Sunday).
 */
static uint64
JsCronParseField(const char *expr, int field, const char *text)
{
	int			min = js_cron_fields[field].min;
	int			max = js_cron_fields[field].max;
	uint64		mask = 0;
	const char *p = text;

	for (;;)
	{
		const char *start = p;
		int			lo;
		int			hi;
		int			step = 1;
		bool		single = false;
		int			v;

		CHECK_FOR_INTERRUPTS();

		if (*p == ',' || *p == '\0')
			JsCronFieldError(expr, field, text, "A list element is empty.");

		if (*p == '*')
		{
			lo = min;
			hi = max;
			p++;
		}
		else
		{
			lo = JsCronNumber(&p);
			if (lo < 0)
				JsCronFieldError(expr, field, text,
								 psprintf("Expected *, a number, a range a-b or a step */n or a-b/n at \"%s\".", p));
			hi = lo;
			single = true;
			if (*p == '-')
			{
				p++;
				hi = JsCronNumber(&p);
				if (hi < 0)
					JsCronFieldError(expr, field, text,
									 psprintf("A range needs a number after \"-\", found \"%s\".", p));
				single = false;
			}
			if (lo < min || lo > max || hi < min || hi > max)
				JsCronFieldError(expr, field, text,
								 psprintf("\"%.*s\" is out of range: %s values are %d to %d.",
										  (int) (p - start), start,
										  js_cron_fields[field].name, min, max));
			if (hi < lo)
				JsCronFieldError(expr, field, text,
								 psprintf("Range %d-%d goes backwards.", lo, hi));
		}

		if (*p == '/')
		{
			if (single)
				JsCronFieldError(expr, field, text,
								 "A step needs * or a range before it, as in */5 or 0-30/5.");
			p++;
			step = JsCronNumber(&p);
			if (step < 1 || step > max - min + 1)
				JsCronFieldError(expr, field, text,
								 psprintf("A step must be a number from 1 to %d.",
										  max - min + 1));
		}

		if (*p != ',' && *p != '\0')
			JsCronFieldError(expr, field, text,
							 psprintf("Unexpected \"%s\" after an element.", p));

		for (v = lo; v <= hi; v += step)
			mask |= UINT64CONST(1) << v;

		if (*p == '\0')
			break;
		p++;					/* the comma */
	}

	if (field == 4 && (mask & (UINT64CONST(1) << 7)) != 0)
		mask = (mask & ~(UINT64CONST(1) << 7)) | UINT64CONST(1);
	return mask;
}

/*
 * Parse a cron expression; errors are 22023 naming the field.
 */
void
JsCronParse(const char *expr, JsCron *cron)
{
	char	   *copy = pstrdup(expr);
	char	   *fields[JS_CRON_NFIELDS];
	int			nfields = 0;
	char	   *p = copy;
	uint64		masks[JS_CRON_NFIELDS];
	int			i;

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			break;
		if (nfields < JS_CRON_NFIELDS)
			fields[nfields] = p;
		nfields++;
		while (*p != '\0' && *p != ' ' && *p != '\t')
			p++;
		if (*p != '\0')
			*p++ = '\0';
	}
	if (nfields != JS_CRON_NFIELDS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cron expression \"%s\" must have 5 fields", expr),
				 errdetail("It has %d.", nfields),
				 errhint("The fields are minute hour day-of-month month day-of-week, in UTC, as in \"*/5 * * * *\".")));

	for (i = 0; i < JS_CRON_NFIELDS; i++)
		masks[i] = JsCronParseField(expr, i, fields[i]);

	cron->minutes = masks[0];
	cron->hours = (uint32) masks[1];
	cron->days = (uint32) masks[2];
	cron->months = (uint32) masks[3];
	cron->weekdays = (uint32) masks[4];
	cron->days_star = (fields[2][0] == '*');
	cron->weekdays_star = (fields[4][0] == '*');

	/*
	 * When the day fields are ANDed, some month must have one of the days.
	 * (ORed, the weekdays alone always match some day.)
	 */
	if (cron->days_star || cron->weekdays_star)
	{
		bool		possible = false;
		int			m;
		int			d;

		for (m = 1; m <= 12 && !possible; m++)
			if (cron->months & (1U << m))
				for (d = 1; d <= js_month_days[m] && !possible; d++)
					if (cron->days & (1U << d))
						possible = true;
		if (!possible)
			JsCronFieldError(expr, 2, fields[2],
							 "No month of the month field has any of these days, so the expression never matches.");
	}
	pfree(copy);
}

static bool
JsCronDayMatches(const JsCron *cron, int jd)
{
	int			year;
	int			month;
	int			day;
	bool		dom;
	bool		dow;

	j2date(jd, &year, &month, &day);
	if ((cron->months & (1U << month)) == 0)
		return false;
	dom = (cron->days & (1U << day)) != 0;
	dow = (cron->weekdays & (1U << j2day(jd))) != 0;
	if (cron->days_star || cron->weekdays_star)
		return dom && dow;
	return dom || dow;
}

static bool
JsCronMinuteMatches(const JsCron *cron, int minute_of_day)
{
	return (cron->hours & (1U << (minute_of_day / 60))) != 0 &&
		(cron->minutes & (UINT64CONST(1) << (minute_of_day % 60))) != 0;
}

static void
JsOutOfRange(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
			 errmsg("timestamp out of range")));
}

/* split a finite timestamp into its UTC Julian day and minute of the day */
static void
JsSplitMinute(TimestampTz t, int *jd, int *minute_of_day)
{
	int64		days = t / USECS_PER_DAY;
	int64		rest = t % USECS_PER_DAY;

	if (TIMESTAMP_NOT_FINITE(t))
		JsOutOfRange();
	if (rest < 0)
	{
		rest += USECS_PER_DAY;
		days--;
	}
	*jd = (int) (days + POSTGRES_EPOCH_JDATE);
	*minute_of_day = (int) (rest / USECS_PER_MINUTE);
}

static TimestampTz
JsJoinMinute(int jd, int minute_of_day)
{
	TimestampTz t = (TimestampTz) (jd - POSTGRES_EPOCH_JDATE) * USECS_PER_DAY +
		(TimestampTz) minute_of_day * USECS_PER_MINUTE;

	if (!IS_VALID_TIMESTAMP(t))
		JsOutOfRange();
	return t;
}

/*
 * The first tick strictly after the given time.
 */
TimestampTz
JsCronNext(const JsCron *cron, TimestampTz after)
{
	int			jd;
	int			minute;
	int			i;

	JsSplitMinute(after, &jd, &minute);
	minute++;
	for (i = 0; i < JS_CRON_SEARCH_DAYS; i++, jd++, minute = 0)
	{
		if (jd >= TIMESTAMP_END_JULIAN)
			JsOutOfRange();
		if (!JsCronDayMatches(cron, jd))
			continue;
		for (; minute < JS_MINUTES_PER_DAY; minute++)
			if (JsCronMinuteMatches(cron, minute))
				return JsJoinMinute(jd, minute);
	}
	elog(ERROR, "job_state: cron expression has no tick within 400 years");
	return 0;					/* keep compiler quiet */
}

/*
 * The latest tick at or before the given time.
 */
TimestampTz
JsCronPrev(const JsCron *cron, TimestampTz at)
{
	int			jd;
	int			minute;
	int			i;

	JsSplitMinute(at, &jd, &minute);
	for (i = 0; i < JS_CRON_SEARCH_DAYS; i++, jd--, minute = JS_MINUTES_PER_DAY - 1)
	{
		if (jd < DATETIME_MIN_JULIAN)
			JsOutOfRange();
		if (!JsCronDayMatches(cron, jd))
			continue;
		for (; minute >= 0; minute--)
			if (JsCronMinuteMatches(cron, minute))
				return JsJoinMinute(jd, minute);
	}
	elog(ERROR, "job_state: cron expression has no tick within 400 years");
	return 0;					/* keep compiler quiet */
}

Datum
js_cron_next(PG_FUNCTION_ARGS)
{
	JsCron		cron;

	JsCronParse(text_to_cstring(PG_GETARG_TEXT_PP(0)), &cron);
	PG_RETURN_TIMESTAMPTZ(JsCronNext(&cron, PG_GETARG_TIMESTAMPTZ(1)));
}

Datum
js_cron_prev(PG_FUNCTION_ARGS)
{
	JsCron		cron;

	JsCronParse(text_to_cstring(PG_GETARG_TEXT_PP(0)), &cron);
	PG_RETURN_TIMESTAMPTZ(JsCronPrev(&cron, PG_GETARG_TIMESTAMPTZ(1)));
}
