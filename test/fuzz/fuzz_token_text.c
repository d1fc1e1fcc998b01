/*-------------------------------------------------------------------------
 *
 * fuzz_token_text.c
 *	  libFuzzer target: claim_token text input (js_claim_token_in) of
 *	  src/token.c, on any bytes.
 *
 * Properties checked for every input s (its bytes up to the first NUL,
 * as a cstring reaches a type's input function):
 *	- it is accepted exactly when it is 43 characters of the base64url
 *	  alphabet whose last character's 2 unused bits are zero (the
 *	  format src/token.c documents), decided here by a decoder of our own;
 *	- a refusal is SQLSTATE 22P02 (invalid_text_representation), never
 *	  an internal error;
 *	- accepted, the token holds the bytes the independent decoder reads
 *	  (job id, generation, queue big-endian, then the nonce and MAC);
 *	- out(in(s)) is s itself: one spelling per token;
 *	- recv(send(token)) is the same token, and send is 32 bytes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/errcodes.h"

#include "job_state.h"
#include "token.h"
#include "fuzz.h"

int			LLVMFuzzerTestOneInput(const uint8 *data, size_t size);

/* -1 for a character outside base64url */
static int
JsFuzzB64Value(char c)
{
	const char *alphabet =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	const char *p = c != '\0' ? strchr(alphabet, c) : NULL;

	return p != NULL ? (int) (p - alphabet) : -1;
}

/* the spec's decoder: true and the 32 bytes when s is a valid token */
static bool
JsFuzzDecode(const char *s, uint8 out[32])
{
	uint32		acc = 0;
	int			bits = 0;
	int			n = 0;
	int			i;

	if (strlen(s) != 43)
		return false;
	for (i = 0; i < 43; i++)
	{
		int			v = JsFuzzB64Value(s[i]);

		if (v < 0)
			return false;
		acc = (acc << 6) | (uint32) v;
		bits += 6;
		if (bits >= 8)
		{
			bits -= 8;
			out[n++] = (uint8) (acc >> bits);
			acc &= (1U << bits) - 1;
		}
	}
	/* 43 * 6 = 258 bits: 32 bytes and 2 bits that must be zero */
	return n == 32 && bits == 2 && acc == 0;
}

static uint64
JsFuzzBe(const uint8 *p, int n)
{
	uint64		v = 0;
	int			i;

	for (i = 0; i < n; i++)
		v = (v << 8) | p[i];
	return v;
}

int
LLVMFuzzerTestOneInput(const uint8 *data, size_t size)
{
	char	   *s = pnstrdup((const char *) data, size);
	uint8		expect[32];
	bool		valid = JsFuzzDecode(s, expect);
	JsClaimToken *token = NULL;
	JsClaimToken *back = NULL;
	char	   *out = NULL;
	bytea	   *wire = NULL;
	StringInfoData msg;
	int			code;

	code = JS_FUZZ_TRY(token = DatumGetClaimToken(JsFuzzCall1(js_claim_token_in,
															  CStringGetDatum(s))));
	if (code != 0)
	{
		if (code != ERRCODE_INVALID_TEXT_REPRESENTATION)
			JsFuzzFail("input refused with SQLSTATE %s, not 22P02: %s",
					   JsFuzzSqlState(code), js_fuzz_error.message);
		if (valid)
			JsFuzzFail("valid token \"%s\" refused: %s", s, js_fuzz_error.message);
		JsFuzzReset();
		return 0;
	}
	if (!valid)
		JsFuzzFail("invalid token text \"%s\" accepted", s);

	if ((uint64) token->job_id != JsFuzzBe(expect, 8) ||
		(uint32) token->generation != (uint32) JsFuzzBe(expect + 8, 4) ||
		(uint32) token->queue_id != (uint32) JsFuzzBe(expect + 12, 4) ||
		memcmp(token->tail, expect + 16, JS_TOKEN_TAIL_LEN) != 0)
		JsFuzzFail("\"%s\" decoded to job %lld generation %d queue %d, not its bytes",
				   s, (long long) token->job_id, token->generation, token->queue_id);

	code = JS_FUZZ_TRY(out = DatumGetCString(JsFuzzCall1(js_claim_token_out,
														 PointerGetDatum(token))));
	if (code != 0)
		JsFuzzFail("out failed: %s", js_fuzz_error.message);
	if (strcmp(out, s) != 0)
		JsFuzzFail("in then out changed the text: \"%s\" became \"%s\"", s, out);

	code = JS_FUZZ_TRY(wire = (bytea *) DatumGetPointer(JsFuzzCall1(js_claim_token_send,
														  PointerGetDatum(token))));
	if (code != 0)
		JsFuzzFail("send failed: %s", js_fuzz_error.message);
	if (VARSIZE(wire) - VARHDRSZ != 32 || memcmp(VARDATA(wire), expect, 32) != 0)
		JsFuzzFail("send of \"%s\" is not its 32 bytes", s);

	/* as the server hands a binary parameter to recv: NUL-terminated */
	initStringInfo(&msg);
	appendBinaryStringInfo(&msg, VARDATA(wire), 32);
	code = JS_FUZZ_TRY(back = DatumGetClaimToken(JsFuzzCall1(js_claim_token_recv,
															 PointerGetDatum(&msg))));
	if (code != 0)
		JsFuzzFail("recv of send refused: %s", js_fuzz_error.message);
	if (memcmp(back, token, sizeof(JsClaimToken)) != 0)
		JsFuzzFail("recv(send(\"%s\")) is another token", s);
	if (msg.cursor != msg.len)
		JsFuzzFail("recv left %d bytes unread", msg.len - msg.cursor);

	JsFuzzReset();
	return 0;
}
