/*-------------------------------------------------------------------------
 *
 * fuzz.h
 *	  What the fuzz harnesses share: the stub runtime's error catching and
 *	  per-iteration memory reset (test/fuzz/stubs.c).
 *
 * An ereport(ERROR) in the code under test longjmps back to the innermost
 * JsFuzzCatch; its SQLSTATE and message are kept in js_fuzz_error.
 * FATAL, PANIC, or an ERROR outside a catch, abort(): the fuzzer reports
 * that as a crash.
 *
 *-------------------------------------------------------------------------
 */
#ifndef JS_FUZZ_H
#define JS_FUZZ_H

#include <setjmp.h>

#include "fmgr.h"

typedef struct JsFuzzError
{
	int			sqlerrcode;
	char		message[512];
	const char *filename;
	int			lineno;
} JsFuzzError;

extern sigjmp_buf *js_fuzz_catch;
extern JsFuzzError js_fuzz_error;

/* src/token.c declares these through PG_FUNCTION_INFO_V1 only */
extern Datum js_claim_token_in(PG_FUNCTION_ARGS);
extern Datum js_claim_token_out(PG_FUNCTION_ARGS);
extern Datum js_claim_token_recv(PG_FUNCTION_ARGS);
extern Datum js_claim_token_send(PG_FUNCTION_ARGS);

/* call a SQL-callable function of one non-null argument */
extern Datum JsFuzzCall1(PGFunction fn, Datum arg);

/* free every palloc'd chunk of this iteration */
extern void JsFuzzReset(void);

/* the five characters of a SQLSTATE (static buffer) */
extern const char *JsFuzzSqlState(int sqlerrcode);

/* print a message about the input and abort(): a finding */
extern void JsFuzzFail(const char *fmt,...) pg_attribute_printf(1, 2) pg_attribute_noreturn();

/*
 * Run stmt; evaluates to 0 when it returned, or the SQLSTATE of the
 * ERROR it raised.  Not nestable within one function.
 */
#define JS_FUZZ_TRY(stmt) \
	({ \
		sigjmp_buf	js_jb_; \
		int			js_code_ = 0; \
		if (sigsetjmp(js_jb_, 0) == 0) \
		{ \
			js_fuzz_catch = &js_jb_; \
			stmt; \
		} \
		else \
			js_code_ = js_fuzz_error.sqlerrcode; \
		js_fuzz_catch = NULL; \
		js_code_; \
	})

#endif							/* JS_FUZZ_H */
