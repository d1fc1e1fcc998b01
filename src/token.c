/*-------------------------------------------------------------------------
 *
 * token.c
 *	  The job_state.claim_token type: text and binary I/O, accessors, and
 *	  the MAC that makes a token unforgeable.
 *
 * A token is 32 bytes: job id, generation, queue number and the first 16
 * bytes of HMAC-SHA-256(secret, "job_state/1" || id || generation || queue),
 * all integers big-endian.  Its text form is the unpadded base64url of the
 * big-endian layout (43 characters).  Parsing checks only the form; the MAC
 * is checked when a token is used (JsTokenCheck), before anything else, so
 * a forged token learns nothing about the job.
 *
 * The secret lives in job_state.secret, readable only by the extension
 * owner (our SECURITY DEFINER functions).  It and the queue-number-to-name
 * map are cached per backend; a relcache invalidation of the secret table
 * (DROP EXTENSION) empties the cache.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/base64.h"
#include "common/cryptohash.h"
#include "common/hmac.h"
#include "common/sha2.h"
#include "libpq/pqformat.h"
#include "port/pg_bswap.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"

#include "job_state.h"

#define JS_TOKEN_TEXT_LEN	43	/* base64url of 32 bytes, no padding */
#define JS_SECRET_LEN		32
#define JS_MAC_DOMAIN		"job_state/1"

PG_FUNCTION_INFO_V1(js_claim_token_in);
PG_FUNCTION_INFO_V1(js_claim_token_out);
PG_FUNCTION_INFO_V1(js_claim_token_recv);
PG_FUNCTION_INFO_V1(js_claim_token_send);
PG_FUNCTION_INFO_V1(js_claim_token_eq);
PG_FUNCTION_INFO_V1(js_claim_token_ne);
PG_FUNCTION_INFO_V1(js_token_job);
PG_FUNCTION_INFO_V1(js_token_generation);
PG_FUNCTION_INFO_V1(js_new_secret);

/* Per-backend cache: MAC key and queue names */
typedef struct JsQueueNameEntry
{
	int32		queue_id;		/* hash key */
	char	   *name;
} JsQueueNameEntry;

static MemoryContext JsCacheContext = NULL;
static uint8 *js_secret = NULL;
static int	js_secret_len = 0;
static Oid	js_secret_relid = InvalidOid;
static HTAB *js_queue_names = NULL;
static bool js_callback_registered = false;

static JsPlan secret_plan = {
	"SELECT key, 'job_state.secret'::pg_catalog.regclass::pg_catalog.oid"
	"  FROM job_state.secret ORDER BY created_at LIMIT 1",
	0, {0}
};

static JsPlan queue_name_plan = {
	"SELECT name FROM job_state.queue WHERE id OPERATOR(pg_catalog.=) $1",
	1, {INT4OID}
};

static void
JsCacheReset(void)
{
	if (JsCacheContext != NULL)
		MemoryContextReset(JsCacheContext);
	js_secret = NULL;
	js_secret_len = 0;
	js_secret_relid = InvalidOid;
	js_queue_names = NULL;
}

static void
JsRelcacheCallback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == js_secret_relid)
		JsCacheReset();
}

static void
JsCacheInit(void)
{
	if (JsCacheContext == NULL)
		JsCacheContext = AllocSetContextCreate(CacheMemoryContext,
											   "job_state cache",
											   ALLOCSET_SMALL_SIZES);
	if (!js_callback_registered)
	{
		CacheRegisterRelcacheCallback(JsRelcacheCallback, (Datum) 0);
		js_callback_registered = true;
	}
}

/* copy of the MAC key in the caller's context */
static uint8 *
JsSecret(int *len)
{
	uint8	   *copy;

	if (js_secret == NULL)
	{
		bool		isnull;
		Datum		d;
		bytea	   *key;

		JsCacheInit();
		if (JsExecute(&secret_plan, NULL, NULL, true, 1) != 1)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("job_state has no MAC secret"),
					 errhint("Recreate the extension, or restore job_state.secret from a dump.")));
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		key = DatumGetByteaPP(d);
		js_secret = MemoryContextAlloc(JsCacheContext, VARSIZE_ANY_EXHDR(key));
		memcpy(js_secret, VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key));
		js_secret_len = VARSIZE_ANY_EXHDR(key);
		js_secret_relid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
														 SPI_tuptable->tupdesc,
														 2, &isnull));
	}
	copy = palloc(js_secret_len);
	memcpy(copy, js_secret, js_secret_len);
	*len = js_secret_len;
	return copy;
}

static void
JsComputeMac(int64 job_id, int32 generation, int32 queue_id,
			 uint8 mac[JS_TOKEN_MAC_LEN])
{
	uint8		msg[sizeof(JS_MAC_DOMAIN) - 1 + 16];
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	uint64		id_be = pg_hton64((uint64) job_id);
	uint32		gen_be = pg_hton32((uint32) generation);
	uint32		queue_be = pg_hton32((uint32) queue_id);
	uint8	   *key;
	int			keylen;
	pg_hmac_ctx *ctx;

	memcpy(msg, JS_MAC_DOMAIN, sizeof(JS_MAC_DOMAIN) - 1);
	memcpy(msg + sizeof(JS_MAC_DOMAIN) - 1, &id_be, 8);
	memcpy(msg + sizeof(JS_MAC_DOMAIN) - 1 + 8, &gen_be, 4);
	memcpy(msg + sizeof(JS_MAC_DOMAIN) - 1 + 12, &queue_be, 4);

	key = JsSecret(&keylen);
	ctx = pg_hmac_create(PG_SHA256);
	if (ctx == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	if (pg_hmac_init(ctx, key, keylen) < 0 ||
		pg_hmac_update(ctx, msg, sizeof(msg)) < 0 ||
		pg_hmac_final(ctx, digest, sizeof(digest)) < 0)
	{
		pg_hmac_free(ctx);
		elog(ERROR, "job_state: could not compute the token MAC");
	}
	pg_hmac_free(ctx);
	memcpy(mac, digest, JS_TOKEN_MAC_LEN);
	explicit_bzero(key, keylen);
	pfree(key);
}

JsClaimToken *
JsTokenMint(int64 job_id, int32 generation, int32 queue_id)
{
	JsClaimToken *token = palloc(sizeof(JsClaimToken));

	token->job_id = job_id;
	token->generation = generation;
	token->queue_id = queue_id;
	JsComputeMac(job_id, generation, queue_id, token->mac);
	return token;
}

/*
 * Name of a queue by its number, palloc'd in the caller's context (the
 * cache may be reset by any later catalog access).
 */
const char *
JsQueueName(int32 queue_id)
{
	JsQueueNameEntry *entry;
	bool		found;

	JsCacheInit();
	if (js_queue_names == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(int32);
		ctl.entrysize = sizeof(JsQueueNameEntry);
		ctl.hcxt = JsCacheContext;
		js_queue_names = hash_create("job_state queue names", 16, &ctl,
									 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}

	entry = hash_search(js_queue_names, &queue_id, HASH_FIND, NULL);
	if (entry == NULL)
	{
		Datum		arg = Int32GetDatum(queue_id);
		char	   *name;

		if (JsExecute(&queue_name_plan, &arg, NULL, true, 1) != 1)
			ereport(ERROR,
					(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
					 errmsg("queue number %d does not exist", queue_id),
					 errdetail("The token names a queue that was dropped.")));
		name = JsGetText(0, 1);
		/* the lookup may have reset the cache: look again */
		if (js_queue_names == NULL)
			return pstrdup(name);
		entry = hash_search(js_queue_names, &queue_id, HASH_ENTER, &found);
		if (!found)
			entry->name = MemoryContextStrdup(JsCacheContext, name);
	}
	return pstrdup(entry->name);
}

/*
 * Verify a token's MAC (JS007 if it does not verify) and return its queue
 * name.  Needs SPI.
 */
const char *
JsTokenCheck(const JsClaimToken *token)
{
	uint8		mac[JS_TOKEN_MAC_LEN];
	uint8		diff = 0;
	int			i;

	JsComputeMac(token->job_id, token->generation, token->queue_id, mac);
	for (i = 0; i < JS_TOKEN_MAC_LEN; i++)
		diff |= mac[i] ^ token->mac[i];
	if (diff != 0)
		ereport(ERROR,
				(errcode(ERRCODE_JS_INVALID_TOKEN),
				 errmsg("claim token is not valid"),
				 errdetail("The token's signature does not verify."),
				 errhint("Use the token exactly as claim returned it.")));
	return JsQueueName(token->queue_id);
}

/*
 * Check a token (JsTokenCheck) and fill the first three parameters of a
 * fenced statement: $1 queue, $2 job id, $3 generation.  Needs SPI.
 */
const char *
JsTokenFence(const JsClaimToken *token, Datum *values)
{
	const char *queue = JsTokenCheck(token);

	values[0] = CStringGetTextDatum(queue);
	values[1] = Int64GetDatum(token->job_id);
	values[2] = Int32GetDatum(token->generation);
	return queue;
}

/*
 * I/O
 */
static void
JsTokenPack(const JsClaimToken *token, uint8 buf[32])
{
	uint64		id_be = pg_hton64((uint64) token->job_id);
	uint32		gen_be = pg_hton32((uint32) token->generation);
	uint32		queue_be = pg_hton32((uint32) token->queue_id);

	memcpy(buf, &id_be, 8);
	memcpy(buf + 8, &gen_be, 4);
	memcpy(buf + 12, &queue_be, 4);
	memcpy(buf + 16, token->mac, JS_TOKEN_MAC_LEN);
}

static JsClaimToken *
JsTokenUnpack(const uint8 buf[32])
{
	JsClaimToken *token = palloc(sizeof(JsClaimToken));
	uint64		id_be;
	uint32		gen_be;
	uint32		queue_be;

	memcpy(&id_be, buf, 8);
	memcpy(&gen_be, buf + 8, 4);
	memcpy(&queue_be, buf + 12, 4);
	token->job_id = (int64) pg_ntoh64(id_be);
	token->generation = (int32) pg_ntoh32(gen_be);
	token->queue_id = (int32) pg_ntoh32(queue_be);
	memcpy(token->mac, buf + 16, JS_TOKEN_MAC_LEN);
	return token;
}

#if PG_VERSION_NUM >= 180000
#define JS_B64_BYTES(p) ((uint8 *) (p))
#else
#define JS_B64_BYTES(p) ((char *) (p))
#endif

Datum
js_claim_token_in(PG_FUNCTION_ARGS)
{
	char	   *str = PG_GETARG_CSTRING(0);
	char		b64[JS_TOKEN_TEXT_LEN + 2];
	uint8		buf[32 + 4];
	size_t		len = strlen(str);
	int			i;

	if (len != JS_TOKEN_TEXT_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type claim_token: \"%s\"", str),
				 errdetail("A claim token has %d characters.", JS_TOKEN_TEXT_LEN)));

	/* base64url -> base64 */
	for (i = 0; i < JS_TOKEN_TEXT_LEN; i++)
	{
		char		c = str[i];

		if (c == '-')
			c = '+';
		else if (c == '_')
			c = '/';
		else if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
				   (c >= '0' && c <= '9')))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("invalid input syntax for type claim_token: \"%s\"", str),
					 errdetail("A claim token has only the characters A-Z, a-z, 0-9, \"-\" and \"_\".")));
		b64[i] = c;
	}
	b64[JS_TOKEN_TEXT_LEN] = '=';
	b64[JS_TOKEN_TEXT_LEN + 1] = '\0';

	if (pg_b64_decode(b64, JS_TOKEN_TEXT_LEN + 1, JS_B64_BYTES(buf), sizeof(buf)) != 32)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type claim_token: \"%s\"", str)));

	PG_RETURN_CLAIM_TOKEN(JsTokenUnpack(buf));
}

Datum
js_claim_token_out(PG_FUNCTION_ARGS)
{
	JsClaimToken *token = PG_GETARG_CLAIM_TOKEN(0);
	uint8		buf[32];
	char		b64[48];
	char	   *out;
	int			len;
	int			i;

	JsTokenPack(token, buf);
	len = pg_b64_encode(JS_B64_BYTES(buf), 32, b64, sizeof(b64));
	if (len < JS_TOKEN_TEXT_LEN)
		elog(ERROR, "job_state: could not encode a claim token");

	out = palloc(JS_TOKEN_TEXT_LEN + 1);
	for (i = 0; i < JS_TOKEN_TEXT_LEN; i++)
		out[i] = b64[i] == '+' ? '-' : b64[i] == '/' ? '_' : b64[i];
	out[JS_TOKEN_TEXT_LEN] = '\0';
	PG_RETURN_CSTRING(out);
}

Datum
js_claim_token_recv(PG_FUNCTION_ARGS)
{
	StringInfo	msg = (StringInfo) PG_GETARG_POINTER(0);
	const char *bytes;

	if (msg->len - msg->cursor != 32)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("invalid binary claim_token"),
				 errdetail("A claim token has 32 bytes, not %d.",
						   msg->len - msg->cursor)));
	bytes = pq_getmsgbytes(msg, 32);
	PG_RETURN_CLAIM_TOKEN(JsTokenUnpack((const uint8 *) bytes));
}

Datum
js_claim_token_send(PG_FUNCTION_ARGS)
{
	JsClaimToken *token = PG_GETARG_CLAIM_TOKEN(0);
	uint8		buf[32];
	StringInfoData out;

	JsTokenPack(token, buf);
	pq_begintypsend(&out);
	pq_sendbytes(&out, (const char *) buf, 32);
	PG_RETURN_BYTEA_P(pq_endtypsend(&out));
}

Datum
js_claim_token_eq(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(memcmp(PG_GETARG_POINTER(0), PG_GETARG_POINTER(1),
						  sizeof(JsClaimToken)) == 0);
}

Datum
js_claim_token_ne(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(memcmp(PG_GETARG_POINTER(0), PG_GETARG_POINTER(1),
						  sizeof(JsClaimToken)) != 0);
}

Datum
js_token_job(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(PG_GETARG_CLAIM_TOKEN(0)->job_id);
}

Datum
js_token_generation(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(PG_GETARG_CLAIM_TOKEN(0)->generation);
}

Datum
js_new_secret(PG_FUNCTION_ARGS)
{
	bytea	   *key = palloc(VARHDRSZ + JS_SECRET_LEN);

	SET_VARSIZE(key, VARHDRSZ + JS_SECRET_LEN);
	if (!pg_strong_random(VARDATA(key), JS_SECRET_LEN))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random MAC secret")));
	PG_RETURN_BYTEA_P(key);
}
