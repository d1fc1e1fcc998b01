/*-------------------------------------------------------------------------
 *
 * token.h
 *	  The claim_token type (token.c) and the refusal of a stale one
 *	  (fence.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef JS_TOKEN_H
#define JS_TOKEN_H

#include "fmgr.h"

#include "job_state.h"

/*
 * Claim token: fixed 32 bytes, passed by reference.
 */
#define JS_TOKEN_MAC_LEN 16

typedef struct JsClaimToken
{
	int64		job_id;
	int32		generation;
	int32		queue_id;
	uint8		mac[JS_TOKEN_MAC_LEN];
} JsClaimToken;

StaticAssertDecl(sizeof(JsClaimToken) == 32, "claim token must be 32 bytes");

#define DatumGetClaimToken(X)		((JsClaimToken *) DatumGetPointer(X))
#define ClaimTokenGetDatum(X)		PointerGetDatum(X)
#define PG_GETARG_CLAIM_TOKEN(n)	DatumGetClaimToken(PG_GETARG_DATUM(n))
#define PG_RETURN_CLAIM_TOKEN(x)	return ClaimTokenGetDatum(x)

/* token.c (SPI must be connected for the functions that read tables) */
extern JsClaimToken *JsTokenMint(int64 job_id, int32 generation, int32 queue_id);
extern const char *JsTokenCheck(const JsClaimToken *token);
extern const char *JsTokenFence(const JsClaimToken *token, Datum *values);
extern const char *JsTokenCheckCallback(const JsClaimToken *token);
extern const char *JsTokenFenceCallback(const JsClaimToken *token, Datum *values);

/* fence.c */
pg_noreturn extern void JsRefuseToken(const char *queue, const JsClaimToken *token,
									  const char *action);

#endif							/* JS_TOKEN_H */
