/*-------------------------------------------------------------------------
 *
 * fuzz_cron.c
 *	  libFuzzer target: the cron parser and tick search of src/cron.c
 *	  (JsCronParse, JsCronNext, JsCronPrev).
 *
 * Input: 8 bytes that pick a time t (little-endian; the low 2 bits choose
 * the whole timestamp range or +-200 years around 2000), then the
 * expression (up to the first NUL).  Properties:
 *	- a refusal is SQLSTATE 22023 (invalid_parameter_value);
 *	- accepted, every field has a value and no bit outside its range
 *	  (day-of-week 7 folded onto 0);
 *	- n = JsCronNext(t): n > t, on a whole minute, and a tick by an
 *	  independent check (gmtime_r of n against the masks, with the
 *	  crontab(5) day rule);
 *	- JsCronPrev(n) = n, and JsCronPrev(n - 1 us) <= t: no tick between;
 *	- p = JsCronPrev(t): p <= t, a tick, and JsCronNext(p) = n;
 *	- the only error a search may raise is 22008 (timestamp out of range),
 *	  and only within 401 years of an end of the timestamp range; the
 *	  "no tick within 400 years" internal error is a finding.
 * Each search is bounded by cron.c itself (400 * 366 days), so an input
 * costs at most a few of those.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include "datatype/timestamp.h"
#include "utils/errcodes.h"

#include "job_state.h"
#include "cron.h"
#include "fuzz.h"

#define JS_FUZZ_MARGIN	((TimestampTz) 401 * 366 * USECS_PER_DAY)
#define JS_FUZZ_Y2K_SPAN ((TimestampTz) 200 * 366 * USECS_PER_DAY)

int			LLVMFuzzerTestOneInput(const uint8 *data, size_t size);

static bool
JsFuzzBit(uint64 mask, int bit)
{
	return (mask >> bit) & 1;
}

/* is t a tick of cron, by the C library's calendar */
static bool
JsFuzzIsTick(const JsCron *cron, TimestampTz t)
{
	int64		secs = t / USECS_PER_SEC;
	time_t		unix_secs;
	struct tm	tm;
	bool		dom;
	bool		dow;

	if (t % USECS_PER_MINUTE != 0)
		return false;
	if (t < 0 && t % USECS_PER_SEC != 0)
		secs--;
	unix_secs = (time_t) (secs + (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY);
	if (gmtime_r(&unix_secs, &tm) == NULL)
		JsFuzzFail("gmtime_r failed");
	if (!JsFuzzBit(cron->minutes, tm.tm_min) || !JsFuzzBit(cron->hours, tm.tm_hour) ||
		!JsFuzzBit(cron->months, tm.tm_mon + 1))
		return false;
	dom = JsFuzzBit(cron->days, tm.tm_mday);
	dow = JsFuzzBit(cron->weekdays, tm.tm_wday);
	return (cron->days_star || cron->weekdays_star) ? (dom && dow) : (dom || dow);
}

static void
JsFuzzCheckMasks(const char *expr, const JsCron *cron)
{
	if (cron->minutes == 0 || (cron->minutes >> 60) != 0 ||
		cron->hours == 0 || (cron->hours >> 24) != 0 ||
		(cron->days & ~(((UINT64CONST(1) << 31) - 1) << 1)) != 0 || cron->days == 0 ||
		(cron->months & ~(((UINT64CONST(1) << 12) - 1) << 1)) != 0 || cron->months == 0 ||
		cron->weekdays == 0 || (cron->weekdays >> 7) != 0)
		JsFuzzFail("\"%s\" parsed to masks out of range or empty: "
				   "%llx %x %x %x %x", expr,
				   (unsigned long long) cron->minutes, cron->hours, cron->days,
				   cron->months, cron->weekdays);
}

/* a search's error: only "out of range", only near an end of the range */
static void
JsFuzzSearchError(const char *what, const char *expr, TimestampTz t, int code)
{
	if (code != ERRCODE_DATETIME_VALUE_OUT_OF_RANGE)
		JsFuzzFail("%s of \"%s\" from " INT64_FORMAT " failed with SQLSTATE %s: %s",
				   what, expr, t, JsFuzzSqlState(code), js_fuzz_error.message);
	if (t < END_TIMESTAMP - JS_FUZZ_MARGIN && t >= MIN_TIMESTAMP + JS_FUZZ_MARGIN)
		JsFuzzFail("%s of \"%s\" from " INT64_FORMAT " is out of range far from the ends",
				   what, expr, t);
}

int
LLVMFuzzerTestOneInput(const uint8 *data, size_t size)
{
	uint64		seed = 0;
	TimestampTz t;
	char	   *expr;
	JsCron		cron;
	TimestampTz n = 0;
	TimestampTz p = 0;
	TimestampTz x = 0;
	bool		have_next = false;
	int			code;
	int			i;

	if (size > 512)
		return 0;
	for (i = 0; i < 8 && i < (int) size; i++)
		seed |= (uint64) data[i] << (8 * i);
	if ((seed & 3) == 0)
		t = (TimestampTz) ((uint64) MIN_TIMESTAMP +
						  (seed >> 2) % ((uint64) END_TIMESTAMP - (uint64) MIN_TIMESTAMP));
	else
		t = (TimestampTz) ((seed >> 2) % (uint64) (2 * JS_FUZZ_Y2K_SPAN)) - JS_FUZZ_Y2K_SPAN;
	expr = size > 8 ? pnstrdup((const char *) data + 8, size - 8) : pstrdup("");

	code = JS_FUZZ_TRY(JsCronParse(expr, &cron));
	if (code != 0)
	{
		if (code != ERRCODE_INVALID_PARAMETER_VALUE)
			JsFuzzFail("\"%s\" refused with SQLSTATE %s, not 22023: %s",
					   expr, JsFuzzSqlState(code), js_fuzz_error.message);
		JsFuzzReset();
		return 0;
	}
	JsFuzzCheckMasks(expr, &cron);

	code = JS_FUZZ_TRY(n = JsCronNext(&cron, t));
	if (code != 0)
		JsFuzzSearchError("next", expr, t, code);
	else
	{
		have_next = true;
		if (n <= t)
			JsFuzzFail("next of \"%s\" from " INT64_FORMAT " is " INT64_FORMAT ", not later",
					   expr, t, n);
		if (!JsFuzzIsTick(&cron, n))
			JsFuzzFail("next of \"%s\" from " INT64_FORMAT " is " INT64_FORMAT ", not a tick",
					   expr, t, n);
		code = JS_FUZZ_TRY(x = JsCronPrev(&cron, n));
		if (code != 0)
			JsFuzzSearchError("prev at next", expr, n, code);
		else if (x != n)
			JsFuzzFail("prev(next) of \"%s\" from " INT64_FORMAT ": " INT64_FORMAT " != " INT64_FORMAT,
					   expr, t, x, n);
		code = JS_FUZZ_TRY(x = JsCronPrev(&cron, n - 1));
		if (code != 0)
			JsFuzzSearchError("prev before next", expr, n - 1, code);
		else if (x > t)
			JsFuzzFail("\"%s\" has a tick " INT64_FORMAT " between " INT64_FORMAT
					   " and its next " INT64_FORMAT, expr, x, t, n);
	}

	code = JS_FUZZ_TRY(p = JsCronPrev(&cron, t));
	if (code != 0)
		JsFuzzSearchError("prev", expr, t, code);
	else
	{
		if (p > t || !JsFuzzIsTick(&cron, p))
			JsFuzzFail("prev of \"%s\" at " INT64_FORMAT " is " INT64_FORMAT
					   ", not a tick at or before it", expr, t, p);
		if (have_next)
		{
			code = JS_FUZZ_TRY(x = JsCronNext(&cron, p));
			if (code != 0)
				JsFuzzFail("next of \"%s\" from its tick " INT64_FORMAT " failed: %s",
						   expr, p, js_fuzz_error.message);
			if (x != n)
				JsFuzzFail("next(prev) of \"%s\" at " INT64_FORMAT ": " INT64_FORMAT
						   " != next " INT64_FORMAT, expr, t, x, n);
		}
	}

	JsFuzzReset();
	return 0;
}
