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
 * Claim token: fixed 32 bytes, passed by reference.  The last 16 bytes
 * (tail) are, since 0.2.0, the claim's nonce (4 bytes, big-endian: the
 * job row's claim_nonce when the claim was made) and a 12-byte MAC over
 * the id, generation, queue and nonce; a token minted by the 0.1.0
 * library holds a 16-byte MAC there instead, and stands for nonce 0
 * (token.c).
 */
#define JS_TOKEN_TAIL_LEN	16
#define JS_TOKEN_NONCE_LEN	4
#define JS_TOKEN_MAC_LEN	(JS_TOKEN_TAIL_LEN - JS_TOKEN_NONCE_LEN)

typedef struct JsClaimToken
{
	int64		job_id;
	int32		generation;
	int32		queue_id;
	uint8		tail[JS_TOKEN_TAIL_LEN];	/* nonce and MAC */
} JsClaimToken;

StaticAssertDecl(sizeof(JsClaimToken) == 32, "claim token must be 32 bytes");

#define DatumGetClaimToken(X)		((JsClaimToken *) DatumGetPointer(X))
#define ClaimTokenGetDatum(X)		PointerGetDatum(X)
#define PG_GETARG_CLAIM_TOKEN(n)	DatumGetClaimToken(PG_GETARG_DATUM(n))
#define PG_RETURN_CLAIM_TOKEN(x)	return ClaimTokenGetDatum(x)

/* token.c (SPI must be connected for the functions that read tables) */
extern JsClaimToken *JsTokenMint(int64 job_id, int32 generation, int32 queue_id,
								 int32 nonce);
extern const char *JsTokenCheck(const JsClaimToken *token);
extern const char *JsTokenFence(const JsClaimToken *token, Datum *values);
extern const char *JsTokenCheckCallback(const JsClaimToken *token);
extern const char *JsTokenFenceCallback(const JsClaimToken *token, Datum *values);
extern int32 JsTokenNonce(const JsClaimToken *token);
extern int32 JsNewClaimNonce(void);

/*
 * The fence of a statement acting on a claim: $1 queue, $2 job id, $3
 * generation, $4 the claim's nonce (JsTokenFence fills them).  A schema
 * without claim_nonce (0.1.0, before ALTER EXTENSION UPDATE) has no nonce
 * to compare: its statements are those made with JS_FENCE_NONE, picked by
 * JsFencePlan.
 */
#define JS_FENCE_NONCE(alias) \
	" AND " alias "claim_nonce OPERATOR(pg_catalog.=) $4"
#define JS_FENCE_NONE(alias) ""
extern bool JsSchemaHasNonce(void);	/* tables.c */
#define JS_FENCE_ARGTYPES	TEXTOID, INT8OID, INT4OID, INT4OID
#define JsFencePlan(plans)	(&(plans)[JsSchemaHasNonce() ? 1 : 0])

/* fence.c */
pg_noreturn extern void JsRefuseToken(const char *queue, const JsClaimToken *token,
									  const char *action);

#endif							/* JS_TOKEN_H */
