/*-------------------------------------------------------------------------
 *
 * stubs.c
 *	  The small backend runtime the fuzz harnesses link the real
 *	  src/token.c and src/cron.c against.
 *
 * Why this approach: a fuzzer cannot link the postgres executable, and
 * starting a server per input would run a few hundred inputs a second.
 * So each harness compiles job_state's own source files unchanged (never
 * copies) with clang's -fsanitize=fuzzer,address,undefined and links them
 * with this file, libpgcommon.a and libpgport.a of the installed
 * PostgreSQL (base64, StringInfo, psprintf, snprintf: the very code the
 * server runs).  What remains of the backend is provided here, each piece
 * to the contract its header documents:
 *
 *	- memory: palloc and friends on malloc; every chunk is on one list and
 *	  JsFuzzReset frees them all after each input, as a per-call memory
 *	  context would.  pfree frees at once, so AddressSanitizer sees any use
 *	  after pfree.  There is one context; MemoryContext calls of the code
 *	  under test are unreachable from the harnesses (unreachable.c).
 *	- errors: errstart/errfinish record elevel, SQLSTATE and message (the
 *	  format is expanded, so a bad format argument is caught) and, for
 *	  ERROR, siglongjmp to the harness (JS_FUZZ_TRY), as PG_TRY would catch
 *	  it.  FATAL and PANIC abort.
 *	- the four pqformat.c routines token I/O uses, over StringInfo.
 *	- j2date / j2day (backend datetime.c) on the C library's gmtime_r:
 *	  the proleptic Gregorian calendar, as PostgreSQL's.
 *	- InterruptPending, which CHECK_FOR_INTERRUPTS reads: never set, as
 *	  the harness receives no signals (ProcessInterrupts is unreachable).
 *
 * Everything else token.c and cron.c reference (SPI, caches, locks, the
 * MAC) is reached only through paths the harnesses do not call;
 * unreachable.c defines those symbols to abort naming themselves.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include "datatype/timestamp.h"
#include "lib/stringinfo.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "utils/datetime.h"
#include "utils/memutils.h"

#include "fuzz.h"

sigjmp_buf *js_fuzz_catch = NULL;
JsFuzzError js_fuzz_error;

/* --- memory ---------------------------------------------------------- */

typedef struct JsChunk
{
	struct JsChunk *prev;
	struct JsChunk *next;
	Size		size;
	/* 16-byte alignment of what follows, as MAXALIGN or better */
	char		pad[8];
} JsChunk;

StaticAssertDecl(sizeof(JsChunk) % 16 == 0, "chunk header keeps 16-byte alignment");

static JsChunk js_chunks = {&js_chunks, &js_chunks, 0, {0}};

static void *
JsAlloc(Size size, bool zero)
{
	JsChunk    *c;

	if (!AllocSizeIsValid(size))
		elog(ERROR, "invalid memory alloc request size %zu", size);
	c = malloc(sizeof(JsChunk) + size);
	if (c == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	if (zero)
		memset(c + 1, 0, size);
	c->size = size;
	c->next = &js_chunks;
	c->prev = js_chunks.prev;
	js_chunks.prev->next = c;
	js_chunks.prev = c;
	return c + 1;
}

static JsChunk *
JsChunkOf(void *pointer)
{
	return ((JsChunk *) pointer) - 1;
}

void *
palloc(Size size)
{
	return JsAlloc(size, false);
}

void *
palloc0(Size size)
{
	return JsAlloc(size, true);
}

void *
palloc_extended(Size size, int flags)
{
	return JsAlloc(size, (flags & MCXT_ALLOC_ZERO) != 0);
}

void
pfree(void *pointer)
{
	JsChunk    *c = JsChunkOf(pointer);

	c->prev->next = c->next;
	c->next->prev = c->prev;
	free(c);
}

void *
repalloc(void *pointer, Size size)
{
	JsChunk    *c = JsChunkOf(pointer);
	void	   *copy = JsAlloc(size, false);

	memcpy(copy, pointer, Min(size, c->size));
	pfree(pointer);
	return copy;
}

char *
pstrdup(const char *in)
{
	return pnstrdup(in, strlen(in));
}

char *
pnstrdup(const char *in, Size len)
{
	char	   *out;

	len = strnlen(in, len);
	out = palloc(len + 1);
	memcpy(out, in, len);
	out[len] = '\0';
	return out;
}

void
JsFuzzReset(void)
{
	while (js_chunks.next != &js_chunks)
		pfree(js_chunks.next + 1);
}

/* --- errors ---------------------------------------------------------- */

static int	js_elevel;

bool
errstart(int elevel, const char *domain)
{
	if (elevel < ERROR)
		return false;			/* NOTICE, WARNING: not reported */
	js_elevel = elevel;
	js_fuzz_error.sqlerrcode = ERRCODE_INTERNAL_ERROR;	/* elog's default */
	js_fuzz_error.message[0] = '\0';
	return true;
}

bool
errstart_cold(int elevel, const char *domain)
{
	return errstart(elevel, domain);
}

void
errfinish(const char *filename, int lineno, const char *funcname)
{
	js_fuzz_error.filename = filename;
	js_fuzz_error.lineno = lineno;
	if (js_elevel > ERROR || js_fuzz_catch == NULL)
	{
		fprintf(stderr, "fuzz: uncaught error at %s:%d: %s\n",
				filename, lineno, js_fuzz_error.message);
		abort();
	}
	siglongjmp(*js_fuzz_catch, 1);
}

int
errcode(int sqlerrcode)
{
	js_fuzz_error.sqlerrcode = sqlerrcode;
	return 0;
}

/* the message; details and hints are expanded and dropped */
#define JS_EXPAND(into) \
	do { \
		char		buf_[sizeof(js_fuzz_error.message)]; \
		va_list		ap_; \
		va_start(ap_, fmt); \
		vsnprintf((into) != NULL ? (into) : buf_, sizeof(buf_), fmt, ap_); \
		va_end(ap_); \
	} while (0)

int
errmsg(const char *fmt,...)
{
	JS_EXPAND(js_fuzz_error.message);
	return 0;
}

int
errmsg_internal(const char *fmt,...)
{
	JS_EXPAND(js_fuzz_error.message);
	return 0;
}

int
errdetail(const char *fmt,...)
{
	JS_EXPAND((char *) NULL);
	return 0;
}

int
errdetail_internal(const char *fmt,...)
{
	JS_EXPAND((char *) NULL);
	return 0;
}

int
errhint(const char *fmt,...)
{
	JS_EXPAND((char *) NULL);
	return 0;
}

const char *
JsFuzzSqlState(int sqlerrcode)
{
	static char buf[6];
	int			i;

	/* MAKE_SQLSTATE packs 6 bits per character, first character lowest */
	for (i = 0; i < 5; i++)
	{
		buf[i] = PGUNSIXBIT(sqlerrcode);
		sqlerrcode >>= 6;
	}
	buf[5] = '\0';
	return buf;
}

void
JsFuzzFail(const char *fmt,...)
{
	va_list		ap;

	fprintf(stderr, "fuzz: property violated: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	abort();
}

/* --- interrupts ------------------------------------------------------ */

volatile sig_atomic_t InterruptPending = false;

/* --- libpq/pqformat.c ------------------------------------------------ */

void
pq_sendbytes(StringInfo buf, const char *data, int datalen)
{
	appendBinaryStringInfo(buf, data, datalen);
}

void
pq_begintypsend(StringInfo buf)
{
	initStringInfo(buf);
	/* room for the varlena header */
	appendStringInfoSpaces(buf, VARHDRSZ);
}

bytea *
pq_endtypsend(StringInfo buf)
{
	bytea	   *result = (bytea *) buf->data;

	SET_VARSIZE(result, buf->len);
	return result;
}

const char *
pq_getmsgbytes(StringInfo msg, int datalen)
{
	const char *result;

	if (datalen < 0 || datalen > (msg->len - msg->cursor))
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("insufficient data left in message")));
	result = &msg->data[msg->cursor];
	msg->cursor += datalen;
	return result;
}

/* --- utils/adt/datetime.c -------------------------------------------- */

static void
JsJulianTm(int jd, struct tm *tm)
{
	time_t		secs = ((time_t) jd - UNIX_EPOCH_JDATE) * SECS_PER_DAY;

	if (gmtime_r(&secs, tm) == NULL)
		JsFuzzFail("gmtime_r failed for Julian day %d", jd);
}

void
j2date(int jd, int *year, int *month, int *day)
{
	struct tm	tm;

	JsJulianTm(jd, &tm);
	*year = tm.tm_year + 1900;
	*month = tm.tm_mon + 1;
	*day = tm.tm_mday;
}

int
j2day(int jd)
{
	struct tm	tm;

	JsJulianTm(jd, &tm);
	return tm.tm_wday;
}

/* call a SQL-callable function of one non-null argument (fuzz.h) */
Datum
JsFuzzCall1(PGFunction fn, Datum arg)
{
	LOCAL_FCINFO(fcinfo, 1);

	InitFunctionCallInfoData(*fcinfo, NULL, 1, InvalidOid, NULL, NULL);
	fcinfo->args[0].value = arg;
	fcinfo->args[0].isnull = false;
	return fn(fcinfo);
}
