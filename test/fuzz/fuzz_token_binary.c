/*-------------------------------------------------------------------------
 *
 * fuzz_token_binary.c
 *	  libFuzzer target: claim_token binary input (js_claim_token_recv) of
 *	  src/token.c, on any bytes.
 *
 * The first input byte places the message cursor (byte % (n + 1) of the
 * n bytes that follow), as recv is handed a StringInfo whose cursor need
 * not be 0.  Properties:
 *	- recv accepts exactly when 32 bytes are left after the cursor, and
 *	  then reads all of them;
 *	- a refusal is SQLSTATE 22P03 (invalid_binary_representation);
 *	- send(recv(bytes)) is the same 32 bytes;
 *	- in(out(token)) is the same token, and out is 43 characters of the
 *	  base64url alphabet.
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

int
LLVMFuzzerTestOneInput(const uint8 *data, size_t size)
{
	StringInfoData msg;
	int			n;
	int			cursor;
	JsClaimToken *token = NULL;
	JsClaimToken *back = NULL;
	char	   *text = NULL;
	bytea	   *wire = NULL;
	int			code;
	int			i;

	if (size < 1 || size > 4096)
		return 0;
	n = (int) size - 1;
	cursor = data[0] % (n + 1);

	/* as the server builds it: a copy, NUL-terminated */
	initStringInfo(&msg);
	appendBinaryStringInfo(&msg, (const char *) data + 1, n);
	msg.cursor = cursor;

	code = JS_FUZZ_TRY(token = DatumGetClaimToken(JsFuzzCall1(js_claim_token_recv,
															  PointerGetDatum(&msg))));
	if (code != 0)
	{
		if (code != ERRCODE_INVALID_BINARY_REPRESENTATION)
			JsFuzzFail("%d bytes refused with SQLSTATE %s, not 22P03: %s",
					   n - cursor, JsFuzzSqlState(code), js_fuzz_error.message);
		if (n - cursor == 32)
			JsFuzzFail("32 bytes refused: %s", js_fuzz_error.message);
		JsFuzzReset();
		return 0;
	}
	if (n - cursor != 32)
		JsFuzzFail("recv accepted %d bytes", n - cursor);
	if (msg.cursor != msg.len)
		JsFuzzFail("recv left %d bytes unread", msg.len - msg.cursor);

	code = JS_FUZZ_TRY(wire = (bytea *) DatumGetPointer(JsFuzzCall1(js_claim_token_send,
														  PointerGetDatum(token))));
	if (code != 0)
		JsFuzzFail("send failed: %s", js_fuzz_error.message);
	if (VARSIZE(wire) - VARHDRSZ != 32 ||
		memcmp(VARDATA(wire), data + 1 + cursor, 32) != 0)
		JsFuzzFail("send(recv(bytes)) differs from the bytes");

	code = JS_FUZZ_TRY(text = DatumGetCString(JsFuzzCall1(js_claim_token_out,
														  PointerGetDatum(token))));
	if (code != 0)
		JsFuzzFail("out failed: %s", js_fuzz_error.message);
	if (strlen(text) != 43)
		JsFuzzFail("out gave %zu characters: \"%s\"", strlen(text), text);
	for (i = 0; i < 43; i++)
		if (!((text[i] >= 'A' && text[i] <= 'Z') || (text[i] >= 'a' && text[i] <= 'z') ||
			  (text[i] >= '0' && text[i] <= '9') || text[i] == '-' || text[i] == '_'))
			JsFuzzFail("out gave a character outside base64url: \"%s\"", text);

	code = JS_FUZZ_TRY(back = DatumGetClaimToken(JsFuzzCall1(js_claim_token_in,
															 CStringGetDatum(text))));
	if (code != 0)
		JsFuzzFail("in refused what out gave, \"%s\": %s", text, js_fuzz_error.message);
	if (memcmp(back, token, sizeof(JsClaimToken)) != 0)
		JsFuzzFail("in(out(token)) is another token: \"%s\"", text);

	JsFuzzReset();
	return 0;
}
